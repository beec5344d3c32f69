"""A real MCP client for kubectl gitops mcp's tests: the official Python SDK (`mcp` on PyPI,
installed by scripts/setup-machine in a venv) drives the server over stdio, or over streamable
HTTP when the plan names a "url" (a server started with --http).

Usage: client.py < PLAN.json, where PLAN is
  {"command": PATH, "args": [...], "env": {...},   # stdio: the client starts the server
   "url": "http://127.0.0.1:PORT/mcp",            # or streamable HTTP to a running server
   "steps": [{"list": true},
             {"call": NAME, "arguments": {...}},
             {"call": NAME, "arguments": {...}, "progress": true,
              "cancel_after_progress": N}]}     # cancel the call once N progress lines came
Prints one JSON object per step on stdout, in order:
  {"tools": [names]} | {"isError": bool, "structured": {...}, "text": [...],
                        "progress": [messages], "cancelled": bool, "error": str}
"""
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def call(session, step):
    out = {"progress": [], "cancelled": False}
    got = anyio.Event()
    n = step.get("cancel_after_progress")

    async def on_progress(progress, total, message):
        out["progress"].append(message)
        if n is not None and len(out["progress"]) >= n:
            got.set()

    async def run():
        try:
            r = await session.call_tool(
                step["call"],
                step.get("arguments") or {},
                progress_callback=on_progress if step.get("progress") else None,
            )
            out["isError"] = bool(r.is_error)
            out["structured"] = r.structured_content
            out["text"] = [c.text for c in r.content if getattr(c, "type", "") == "text"]
        except Exception as e:  # a protocol error (unknown tool, refused call)
            out["error"] = f"{type(e).__name__}: {e}"

    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def guarded():
            with scope:
                await run()

        tg.start_soon(guarded)
        if n is not None:
            await got.wait()
            out["cancelled"] = True
            scope.cancel()
    return out


async def run_steps(read, write, steps):
    async with ClientSession(read, write) as session:
        await session.initialize()
        for step in steps:
            if step.get("list"):
                tools = await session.list_tools()
                res = {"tools": sorted(t.name for t in tools.tools)}
            elif step.get("sleep"):
                await anyio.sleep(step["sleep"])
                res = {}
            else:
                res = await call(session, step)
            print(json.dumps(res), flush=True)


async def main():
    plan = json.load(sys.stdin)
    if plan.get("url"):
        async with streamable_http_client(plan["url"]) as streams:
            await run_steps(streams[0], streams[1], plan["steps"])
        return
    params = StdioServerParameters(
        command=plan["command"], args=plan.get("args", []), env=plan.get("env")
    )
    async with stdio_client(params) as (read, write):
        await run_steps(read, write, plan["steps"])


anyio.run(main)
