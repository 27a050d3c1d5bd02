"""Loads and calls clockwork's MCP tools with the official MCP Python SDK's
client (PyPI "mcp", pinned in requirements.txt), as a host built on it does:
Streamable HTTP with the bearer token in a header.

Reads a plan from stdin: {"url", "token", "calls": [{"tool", "arguments"}]}
and prints one JSON report on stdout: {"protocolVersion", "tools": [name...],
"results": [{"tool", "isError", "structured", "text", "error"}]}. An SDK
exception on connect or on listing the tools (a tool list the SDK refuses)
fails the script with the exception on stderr; one on a call is reported
in that call's "error" (the SDK validates structured content against the
tool's output schema, and raises when it does not conform).
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    plan = json.load(sys.stdin)
    headers = {"Authorization": "Bearer " + plan["token"]}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(plan["url"], http_client=http, terminate_on_close=False)
        # mode "auto", the default: the client probes the newest protocol
        # and negotiates down as the specification describes.
        async with Client(transport, raise_exceptions=True) as client:
            listed = await client.list_tools()
            report = {
                "protocolVersion": client.protocol_version,
                "tools": [t.name for t in listed.tools],
                "results": [],
            }
            for call in plan["calls"]:
                out = {"tool": call["tool"]}
                try:
                    res = await client.call_tool(call["tool"], call["arguments"])
                    out["isError"] = bool(res.is_error)
                    out["structured"] = res.structured_content
                    out["text"] = "".join(getattr(c, "text", "") for c in res.content)
                except Exception as e:  # reported, the Go test decides
                    out["error"] = f"{type(e).__name__}: {e}"
                report["results"].append(out)
    json.dump(report, sys.stdout)


asyncio.run(main())
