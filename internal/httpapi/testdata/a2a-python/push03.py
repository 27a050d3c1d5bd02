"""Pushes A2A tasks to a URL with the official A2A Python SDK's 0.3 push
sender (a2a.server.tasks.BasePushNotificationSender), exactly as an agent
built on that SDK does, and prints what the server answered.

Usage: python push03.py URL TOKEN TASK_JSON...
Prints one JSON line per task: {"status": N, "body": "...", "headers": {...}}.
"""

import asyncio
import json
import sys

import httpx

from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
)
from a2a.types import PushNotificationConfig, Task


async def main() -> None:
    url, token, tasks = sys.argv[1], sys.argv[2], sys.argv[3:]
    answers = []

    async def record(response: httpx.Response) -> None:
        await response.aread()
        answers.append({
            "status": response.status_code,
            "body": response.text,
            "headers": dict(response.headers),
            "sent": dict(response.request.headers),
        })

    async with httpx.AsyncClient(event_hooks={"response": [record]}) as client:
        store = InMemoryPushNotificationConfigStore()
        sender = BasePushNotificationSender(client, store)
        for raw in tasks:
            task = Task.model_validate(json.loads(raw))
            await store.set_info(task.id, PushNotificationConfig(url=url, token=token))
            await sender.send_notification(task)
    for a in answers:
        print(json.dumps(a))


asyncio.run(main())
