"""An A2A agent on the official A2A Python SDK (0.3 line), served by
uvicorn on 127.0.0.1: the agent whose tasks clockwork watches in the
WatchedTasksPythonSDK scenario.

A message "hold" starts a task that waits for input; a follow-up message
"complete", "fail" or "reject" to that task ends it so. Any other message
completes its task at once (lapse tasks sent to it). It pushes task
updates to the push notification configs set on its tasks, with the SDK's
BasePushNotificationSender.

Usage: python agent03.py
Prints "listening http://127.0.0.1:PORT/" once it serves, then runs until
killed.
"""

import asyncio
import socket

import httpx
import uvicorn

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import AgentCapabilities, AgentCard, AgentSkill
from a2a.utils import new_task


class HoldingExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        task = context.current_task
        if task is None:
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if text == "hold":
            await updater.requires_input(final=True)
        elif text == "fail":
            await updater.failed()
        elif text == "reject":
            await updater.reject()
        else:
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="python-holder", description="holds tasks until told", url=url, version="1",
        capabilities=AgentCapabilities(push_notifications=True), default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="hold", name="hold", description="holds a task", tags=["hold"])],
    )
    push_configs = InMemoryPushNotificationConfigStore()
    handler = DefaultRequestHandler(
        agent_executor=HoldingExecutor(), task_store=InMemoryTaskStore(),
        push_config_store=push_configs, push_sender=BasePushNotificationSender(httpx.AsyncClient(), push_configs),
    )
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    print("listening " + url, flush=True)
    await serving


asyncio.run(main())
