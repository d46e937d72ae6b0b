"""Drives `troupe acp` with the official ACP Python SDK (PyPI `agent-client-protocol`), as an
editor does. Run by the Rust test `acp::` with: TROUPE WORKSPACE SCENARIO [ARGS...]; asserts
what the editor must see, prints one JSON line of what it saw, exits 1 on a failed check.

Scenarios:
- team SCRIPT: initialize, a new session, a prompt whose lead spawns a teammate that writes a
  file (its permission ask answered allow_once), a second prompt; the turn ends `end_turn`.
- load SCRIPT SESSION_ID: a new process loads the session; its conversation is replayed.
- cancel SCRIPT GATE: a prompt whose teammate blocks; session/cancel ends it `cancelled`; the
  next prompt picks the work up.
- editor_mcp SCRIPT FIXTURE: an MCP server the editor names in session/new joins the team's
  tools (no trust question); the lead calls it.
- plan SCRIPT: a teammate's plan, waiting for the lead, is asked in the editor and approved
  there; the teammate's write then happens.
- terminal_first SCRIPT: a permission ask answered with `troupe approve` from a terminal while
  the editor waits; the editor's later "reject" changes nothing.
"""

import asyncio
import json
import os
import subprocess
import sys

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    McpServerStdio,
    Implementation,
    RequestPermissionResponse,
)

TROUPE, WORKSPACE, SCENARIO = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS = sys.argv[4:]
TIMEOUT = int(os.environ.get("ACP_TIMEOUT", "60"))


class Editor:
    """The client side: keeps every update and answers permission asks as told."""

    def __init__(self, answer="allow_once", before_answer=None):
        self.updates = []
        self.asks = []
        self.answer = answer
        self.before_answer = before_answer
        self.changed = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asks.append(
            {
                "title": tool_call.title,
                "tool_call_id": tool_call.tool_call_id,
                "options": [o.option_id for o in options],
            }
        )
        self.changed.set()
        if self.before_answer is not None:
            await self.before_answer()
        offered = [o.option_id for o in options]
        answer = "approve" if "approve" in offered else self.answer
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.changed.set()

    async def wait_for(self, what, check):
        async def waiting():
            while not check():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(waiting(), TIMEOUT)
        except asyncio.TimeoutError:
            fail(f"timed out waiting for {what}; updates: {json.dumps(self.updates)[-4000:]}")

    def kinds(self):
        return [u["sessionUpdate"] for u in self.updates]

    def texts(self, kind):
        return [
            u["content"]["text"]
            for u in self.updates
            if u["sessionUpdate"] == kind and u["content"].get("type") == "text"
        ]


def fail(message):
    print(json.dumps({"failed": message}))
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


async def start(editor, *options):
    return acp.spawn_agent_process(
        editor,
        TROUPE,
        "--workspace",
        WORKSPACE,
        "acp",
        *options,
        env=dict(os.environ),
        transport_kwargs={"limit": 16 * 1024 * 1024, "stderr": None},
    )


async def initialize(conn):
    response = await asyncio.wait_for(
        conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="troupe-test", version="1"),
        ),
        TIMEOUT,
    )
    check(response.protocol_version == 1, f"protocol version {response.protocol_version}")
    caps = response.agent_capabilities
    check(caps.load_session, "loadSession is offered")
    check(caps.prompt_capabilities.embedded_context, "embedded context is offered")
    check(not response.auth_methods, "no authentication step")
    return response


def text(t):
    return acp.text_block(t)


async def prompt(conn, session_id, words):
    return await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text(words)]), TIMEOUT)


async def team(script):
    editor = Editor()
    async with await start(editor, "--model-script", script) as (conn, process):
        await initialize(conn)
        session = await conn.new_session(cwd=WORKSPACE, mcp_servers=[])
        sid = session.session_id
        first = await prompt(conn, sid, "Build it with a teammate.")
        check(first.stop_reason == "end_turn", f"first stop reason {first.stop_reason}")
        messages = editor.texts("agent_message_chunk")
        check("Alice is on it." in "".join(messages), f"the lead's text: {messages}")
        check("Alice " in messages and "on " in messages, f"streamed in pieces: {messages}")
        calls = [u for u in editor.updates if u["sessionUpdate"] == "tool_call"]
        agents = {c["_meta"]["troupe"]["agent"] for c in calls}
        check({"lead", "alice"} <= agents, f"tool calls of both agents: {agents}")
        writes = [c for c in calls if c["_meta"]["troupe"]["tool"] == "write_file"]
        check(len(writes) == 1, f"one write: {writes}")
        write = writes[0]
        check(write["kind"] == "edit", f"a write is an edit: {write}")
        check(write["title"].startswith("alice: write_file"), f"title names the agent: {write}")
        diff = write["content"][0]
        check(diff["type"] == "diff" and diff["newText"] == "from alice\n", f"the diff: {diff}")
        check(diff["path"].endswith("/b.txt") and diff["path"].startswith("/"), f"path: {diff}")
        done = [
            u
            for u in editor.updates
            if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == write["toolCallId"]
        ]
        check(done and done[-1]["status"] == "completed", f"the write completed: {done}")
        plans = [u for u in editor.updates if u["sessionUpdate"] == "plan"]
        check(plans, "a plan update")
        check(
            any(e["content"] == "Have alice write b.txt" for e in plans[-1]["entries"]),
            f"the lead's todo in the plan: {plans[-1]}",
        )
        check(
            any("Check b.txt (dave)" in e["content"] and e["status"] == "pending" for e in plans[-1]["entries"]),
            f"the board's task in the plan: {plans[-1]}",
        )
        check(len(editor.asks) == 1, f"one permission ask: {editor.asks}")
        ask = editor.asks[0]
        check("alice" in ask["title"] and "write_file" in ask["title"], f"the ask: {ask}")
        check(ask["tool_call_id"] == write["toolCallId"], f"the ask names the call: {ask}")
        check({"allow_once", "reject_once"} <= set(ask["options"]), f"options: {ask}")
        before = len(editor.updates)
        second = await prompt(conn, sid, "And now the second thing.")
        check(second.stop_reason == "end_turn", f"second stop reason {second.stop_reason}")
        check("Second answer." in "".join(editor.texts("agent_message_chunk")), "the second answer")
        check(len(editor.updates) > before, "the second prompt's updates")
        listed = await conn.list_sessions(cwd=WORKSPACE)
        check([s.session_id for s in listed.sessions] == [sid], f"listed: {listed}")
    print(json.dumps({"session_id": sid, "kinds": editor.kinds()}))


async def load(script, sid):
    editor = Editor()
    async with await start(editor, "--model-script", script) as (conn, process):
        await initialize(conn)
        await asyncio.wait_for(conn.load_session(cwd=WORKSPACE, session_id=sid, mcp_servers=[]), TIMEOUT)
        users = editor.texts("user_message_chunk")
        check(
            any("Build it with a teammate." in u for u in users)
            and any("And now the second thing." in u for u in users),
            f"both prompts replayed: {users}",
        )
        check("Second answer." in editor.texts("agent_message_chunk"), "the lead's answers replayed")
        third = await prompt(conn, sid, "A third prompt after the load.")
        check(third.stop_reason == "end_turn", f"third stop reason {third.stop_reason}")
        check("Third answer." in "".join(editor.texts("agent_message_chunk")), "the third answer")
    print(json.dumps({"replayed": len(editor.updates)}))


async def cancel(script, gate):
    editor = Editor()
    async with await start(editor, "--model-script", script, "--approval", "auto") as (conn, process):
        await initialize(conn)
        sid = (await conn.new_session(cwd=WORKSPACE, mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text("Start bob.")]))
        await editor.wait_for(
            "bob's blocked shell call",
            lambda: any(
                u["sessionUpdate"] == "tool_call" and u["_meta"]["troupe"]["agent"] == "bob"
                for u in editor.updates
            ),
        )
        await conn.cancel(session_id=sid)
        cancelled = await asyncio.wait_for(turn, TIMEOUT)
        check(cancelled.stop_reason == "cancelled", f"stop reason {cancelled.stop_reason}")
        # Bob's blocked call was stopped with the team (nothing waits at the gate any more);
        # his message went back to his mailbox, and the next prompt runs it again.
        again = await prompt(conn, sid, "Carry on.")
        check(again.stop_reason == "end_turn", f"stop reason after the cancel {again.stop_reason}")
        thoughts = editor.texts("agent_thought_chunk")
        check(any("bob finished" in t for t in thoughts), f"bob's work picked up: {thoughts}")
    print(json.dumps({"kinds": editor.kinds()}))


async def terminal_first(script):
    def approve_from_a_terminal():
        listed = subprocess.run(
            [TROUPE, "--workspace", WORKSPACE, "requests", "--json", "--status", "pending"],
            capture_output=True, text=True, check=True,
        )
        pending = [r for r in json.loads(listed.stdout)["requests"] if r.get("kind", r.get("protocol")) == "permission"]
        check(len(pending) == 1, f"one pending permission request: {listed.stdout}")
        approved = subprocess.run(
            [TROUPE, "--workspace", WORKSPACE, "approve", pending[0]["id"]],
            capture_output=True, text=True,
        )
        check(approved.returncode == 0, f"troupe approve: {approved.stdout} {approved.stderr}")

    async def before_answer():
        await asyncio.get_running_loop().run_in_executor(None, approve_from_a_terminal)

    editor = Editor(answer="reject_once", before_answer=before_answer)
    async with await start(editor, "--model-script", script) as (conn, process):
        await initialize(conn)
        sid = (await conn.new_session(cwd=WORKSPACE, mcp_servers=[])).session_id
        done = await prompt(conn, sid, "Write c.txt.")
        check(done.stop_reason == "end_turn", f"stop reason {done.stop_reason}")
        check(len(editor.asks) == 1, f"the editor was asked: {editor.asks}")
        again = await prompt(conn, sid, "Still there?")
        check(again.stop_reason == "end_turn", "the agent is alive after the late answer")
    print(json.dumps({"asks": editor.asks}))


async def plan(script):
    editor = Editor()
    async with await start(editor, "--model-script", script, "--require-plans") as (conn, process):
        await initialize(conn)
        sid = (await conn.new_session(cwd=WORKSPACE, mcp_servers=[])).session_id
        done = await prompt(conn, sid, "Have carol plan, then write.")
        check(done.stop_reason == "end_turn", f"stop reason {done.stop_reason}")
        plans = [a for a in editor.asks if "approve" in a["options"]]
        check(len(plans) == 1, f"the plan was asked in the editor: {editor.asks}")
        check("carol" in plans[0]["title"], f"the plan ask names the teammate: {plans[0]}")
        check(set(plans[0]["options"]) == {"approve", "reject"}, f"plan options: {plans[0]}")
    print(json.dumps({"asks": editor.asks}))


async def editor_mcp(script, fixture):
    editor = Editor()
    async with await start(editor, "--model-script", script, "--approval", "auto") as (conn, process):
        await initialize(conn)
        server = McpServerStdio(name="Fixture", command="/usr/bin/env", args=["python3", fixture, "ok"], env=[])
        sid = (await conn.new_session(cwd=WORKSPACE, mcp_servers=[server])).session_id
        done = await prompt(conn, sid, "Use the editor's echo.")
        check(done.stop_reason == "end_turn", f"stop reason {done.stop_reason}")
        calls = [u for u in editor.updates if u["sessionUpdate"] == "tool_call"]
        echo = [c for c in calls if c["_meta"]["troupe"]["tool"] == "mcp__editor_fixture__echo"]
        check(len(echo) == 1, f"the editor's server's tool was called: {calls}")
        ends = [
            u for u in editor.updates
            if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == echo[0]["toolCallId"]
        ]
        check(ends and ends[-1]["status"] == "completed", f"and answered: {ends}")
        check("from the editor" in json.dumps(ends[-1]), f"with its echo: {ends[-1]}")
    print(json.dumps({"calls": len(calls)}))


async def main():
    if SCENARIO == "team":
        await team(*ARGS)
    elif SCENARIO == "load":
        await load(*ARGS)
    elif SCENARIO == "cancel":
        await cancel(*ARGS)
    elif SCENARIO == "editor_mcp":
        await editor_mcp(*ARGS)
    elif SCENARIO == "plan":
        await plan(*ARGS)
    elif SCENARIO == "terminal_first":
        await terminal_first(*ARGS)
    else:
        fail(f"unknown scenario {SCENARIO}")


asyncio.run(main())
