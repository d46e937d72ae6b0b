"""Drives `troupe mcp serve` with the official MCP Python SDK's client (PyPI `mcp`), as an MCP
client (Claude Code, codex, Cursor) would: the test `tests/cli/mcp_serve.rs` runs it with the
venv's python and reads the one JSON object it prints on stdout.

    mcp_client.py SCENARIO TROUPE WORKSPACE [TROUPE ARGS...]

SCENARIO:
- basics: lists the tools; `troupe_run` with a progress token; `troupe_status`; `troupe_send`;
  an unknown tool.
- cancel: a `troupe_run` whose teammate blocks in a shell call; a second `troupe_run` refused
  meanwhile; the first cancelled once the teammate's call is seen in the progress; a third
  `troupe_run` that continues the work.
- elicit: a `troupe_run` whose permission asks are elicitations: the first approved, the
  second denied with a reason.
- elsewhere: a `troupe_run` whose ask, while its elicitation waits, is answered with
  `troupe_answer`: the elicitation is withdrawn (the client's callback cancelled).
- plain: a `troupe_run` from a client without elicitation (its asks are denied).
- wait: as plain, with `[approvals] no_terminal = "wait"`: the ask waits, and is denied with
  `troupe_answer`, its request id read from the progress lines.
- plan: a `troupe_run` whose teammate's plan is approved with `troupe_answer` while the run
  waits, its request id read from the progress lines.

Every wait is for a message (a progress line, a result), bounded by the timeouts below, never
a sleep.
"""

import json
import os
import re
import sys

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# A hang is a failure, not a wait.
TIMEOUT = 60


def result_of(result):
    """A tool result as plain JSON."""
    return {
        "is_error": bool(result.is_error),
        "text": "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None),
        "structured": result.structured_content,
    }


class Progress:
    """The progress lines of one request, with a wait for a line that matches."""

    def __init__(self):
        self.lines = []
        self.changed = anyio.Event()

    async def __call__(self, progress, total, message):
        self.lines.append({"progress": progress, "message": message})
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(self, pattern):
        with anyio.fail_after(TIMEOUT):
            while True:
                for line in self.lines:
                    if line["message"] and re.search(pattern, line["message"]):
                        return line["message"]
                await self.changed.wait()


async def basics(session):
    out = {}
    tools = await session.list_tools()
    out["tools"] = sorted(t.name for t in tools.tools)
    progress = Progress()
    with anyio.fail_after(TIMEOUT):
        run = await session.call_tool("troupe_run", {"prompt": "Write out.txt."}, progress_callback=progress)
    out["run"] = result_of(run)
    out["progress"] = progress.lines
    with anyio.fail_after(TIMEOUT):
        out["status"] = result_of(await session.call_tool("troupe_status", {}))
        out["send"] = result_of(await session.call_tool("troupe_send", {"to": "lead", "text": "hello from the client"}))
        out["send_bad"] = result_of(await session.call_tool("troupe_send", {"to": "Not An Agent!", "text": "x"}))
    try:
        with anyio.fail_after(TIMEOUT):
            await session.call_tool("troupe_nothing", {})
        out["unknown_tool"] = "answered without an error"
    except Exception as e:  # the server's JSON-RPC error
        out["unknown_tool"] = f"error: {e}"
    # The server is still there.
    with anyio.fail_after(TIMEOUT):
        tools = await session.list_tools()
    out["tools_after"] = len(tools.tools)
    return out


async def cancel(session):
    out = {}
    progress = Progress()
    first = {}

    async def first_run(scope):
        with scope:
            first["result"] = result_of(
                await session.call_tool("troupe_run", {"prompt": "Have alpha do the job."}, progress_callback=progress)
            )

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as group:
        group.start_soon(first_run, scope)
        out["blocked_on"] = await progress.wait_for(r" alpha tool shell ")
        with anyio.fail_after(TIMEOUT):
            out["second"] = result_of(await session.call_tool("troupe_run", {"prompt": "Another thing."}))
        # Abandoning the request sends `notifications/cancelled`.
        scope.cancel()
    out["first"] = first.get("result", "cancelled")
    out["first_progress"] = [line["message"] for line in progress.lines]
    # The next run waits until the cancelled one's team is closed, then goes on: alpha's message
    # came back to ready/ and alpha finishes it now.
    with anyio.fail_after(TIMEOUT):
        out["third"] = result_of(await session.call_tool("troupe_run", {"prompt": "Go on."}))
    return out


async def elicit(session, asked):
    with anyio.fail_after(TIMEOUT):
        run = await session.call_tool("troupe_run", {"prompt": "Write two files."})
    return {"run": result_of(run), "asked": asked}


async def elsewhere(session, asked, withdrawn):
    with anyio.fail_after(TIMEOUT):
        run = await session.call_tool("troupe_run", {"prompt": "Write out.txt."})
    return {"run": result_of(run), "asked": asked, "withdrawn": withdrawn}


async def plain(session):
    with anyio.fail_after(TIMEOUT):
        run = await session.call_tool("troupe_run", {"prompt": "Write out.txt."})
    return {"run": result_of(run)}


async def wait(session):
    out = {}
    progress = Progress()
    run = {}

    async def the_run():
        run["result"] = result_of(
            await session.call_tool("troupe_run", {"prompt": "Write out.txt."}, progress_callback=progress)
        )

    async with anyio.create_task_group() as group:
        group.start_soon(the_run)
        line = await progress.wait_for(r"waits for approval of .*permission request [0-9a-f]{8}")
        out["ask_line"] = line
        request_id = re.search(r"permission request ([0-9a-f]{8})", line).group(1)
        with anyio.fail_after(TIMEOUT):
            out["answer"] = result_of(
                await session.call_tool(
                    "troupe_answer", {"request_id": request_id, "approve": False, "reason": "write docs/ instead"}
                )
            )
    out["run"] = run["result"]
    return out


async def plan(session):
    out = {}
    progress = Progress()
    run = {}

    async def the_run():
        run["result"] = result_of(
            await session.call_tool("troupe_run", {"prompt": "Have alice write out.txt."}, progress_callback=progress)
        )

    async with anyio.create_task_group() as group:
        group.start_soon(the_run)
        line = await progress.wait_for(r"plan_approval request .*\(([0-9a-f]{8})\)")
        out["plan_line"] = line
        request_id = re.search(r"\(([0-9a-f]{8})\)", line).group(1)
        with anyio.fail_after(TIMEOUT):
            out["answer"] = result_of(
                await session.call_tool("troupe_answer", {"request_id": request_id, "approve": True})
            )
            out["answer_again"] = result_of(
                await session.call_tool("troupe_answer", {"request_id": request_id, "approve": False, "reason": "late"})
            )
    out["run"] = run["result"]
    return out


async def main():
    scenario, troupe, workspace, *args = sys.argv[1:]
    # The test's environment as it is (the SDK would pass only a few variables): its user
    # config folder, and no model variables.
    server = StdioServerParameters(
        command=troupe, args=["--workspace", workspace, "mcp", "serve", *args], env=dict(os.environ)
    )
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        if len(asked) == 1:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="accept", content={"approve": False, "reason": "not this one"})

    opened = {}
    withdrawn = []

    async def on_elicit_elsewhere(context, params):
        # Answered from "elsewhere" (troupe_answer) while the form would be up; the server
        # withdraws the elicitation, which cancels this callback.
        asked.append(params.message)
        try:
            session = opened["session"]
            status = await session.call_tool("troupe_status", {})
            pending = [r for r in status.structured_content["pending_requests"] if r["kind"] == "permission"]
            await session.call_tool("troupe_answer", {"request_id": pending[0]["id"], "approve": True})
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            withdrawn.append(True)
            raise

    callback = {"elicit": on_elicit, "elsewhere": on_elicit_elsewhere}.get(scenario)
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            opened["session"] = session
            with anyio.fail_after(TIMEOUT):
                await session.initialize()
            if scenario == "basics":
                out = await basics(session)
            elif scenario == "cancel":
                out = await cancel(session)
            elif scenario == "elicit":
                out = await elicit(session, asked)
            elif scenario == "elsewhere":
                out = await elsewhere(session, asked, withdrawn)
            elif scenario == "plain":
                out = await plain(session)
            elif scenario == "wait":
                out = await wait(session)
            elif scenario == "plan":
                out = await plan(session)
            else:
                raise SystemExit(f"unknown scenario {scenario}")
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main)
