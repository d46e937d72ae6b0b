//! `troupe acp`, driven as an editor drives it: by the official ACP client SDK (Python) for the
//! team's flow, and by raw lines for hostile input. A scripted model; loopback only.
//! - a prompt whose lead spawns a teammate that writes a file: streamed text, tool calls of
//!   both agents with the write's diff, a plan, a permission ask answered `allow_once`,
//!   `end_turn`; a second prompt continues; `session/load` in a new process replays it;
//! - `session/cancel` mid-turn ends with `cancelled`, and the next prompt picks the work up;
//! - a permission answered with `troupe approve` first makes the editor's later answer
//!   harmless;
//! - malformed, oversized and non-UTF-8 lines, unknown methods, bad params, requests before
//!   `initialize` and prompts for unknown sessions are each an error; the process goes on.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

use super::clients;
use super::special_files::mkfifo;

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn write_script(ws: &Path, name: &str, script: &Value) -> String {
    let path = ws.join(name);
    std::fs::write(&path, script.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn text(t: &str) -> Value {
    json!({"text": t})
}

/// Runs a scenario of `acp_client.py`; its JSON line on success.
fn scenario(python: &Path, ws: &Path, args: &[&str]) -> Value {
    let output = clients::script(python, "acp_client.py", ws)
        .arg(ws)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "scenario {args:?} failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("scenario {args:?}: {e}: {stdout}"))
}

#[test]
fn an_editor_drives_a_team_through_acp_and_loads_the_session_again() {
    let Some(python) = clients::require_or_skip("acp", "acp team") else {
        return;
    };
    let (_dir, ws) = workspace();
    let script = write_script(
        &ws,
        "script.json",
        &json!({"agents": {
            "lead": [
                {"tool_calls": [
                    {"name": "todo_write", "arguments": {"todos": [{"content": "Have alice write b.txt", "status": "in_progress"}]}},
                    {"name": "create_task", "arguments": {"subject": "Check b.txt", "assignee": "dave"}},
                    {"name": "spawn_teammate", "arguments": {"name": "alice", "role": "writer", "prompt": "Write b.txt."}},
                ]},
                text("Alice is on it."),
                text("Alice wrote b.txt."),
                text("Second answer."),
            ],
            "alice": [
                {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "from alice\n"}}]},
                text("wrote b.txt"),
            ],
        }}),
    );
    let seen = scenario(&python, &ws, &["team", &script]);
    assert_eq!(
        std::fs::read_to_string(ws.join("b.txt")).unwrap(),
        "from alice\n"
    );
    // The editor's answer is the durable request's, and the audit names it.
    let audit = std::fs::read_to_string(ws.join(".troupe/audit.jsonl")).unwrap();
    let write = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["tool"] == "write_file")
        .expect("the write's audit record");
    assert!(
        write.to_string().contains("acp"),
        "the audit names the editor: {write}"
    );
    let session_id = seen["session_id"].as_str().unwrap().to_owned();

    let load_script = write_script(
        &ws,
        "script-load.json",
        &json!({"agents": {"lead": [text("Third answer.")]}}),
    );
    scenario(&python, &ws, &["load", &load_script, &session_id]);
}

#[test]
fn a_cancelled_prompt_ends_cancelled_and_the_next_prompt_picks_the_work_up() {
    let Some(python) = clients::require_or_skip("acp", "acp cancel") else {
        return;
    };
    let (_dir, ws) = workspace();
    let gate = ws.join("gate");
    mkfifo(&gate);
    let script = write_script(
        &ws,
        "script.json",
        &json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "bob", "role": "worker", "prompt": "Wait at the gate."}}]},
                text("Waiting for bob."),
                text("Carrying on."),
                text("Bob is done."),
            ],
            "bob": [
                {"tool_calls": [{"name": "shell", "arguments": {"command": format!("read line < {}", gate.display())}}]},
                {"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
                text("bob finished"),
            ],
        }}),
    );
    scenario(&python, &ws, &["cancel", &script, gate.to_str().unwrap()]);
}

#[test]
fn an_mcp_server_the_editor_names_joins_the_teams_tools() {
    let Some(python) = clients::require_or_skip("acp", "acp editor_mcp") else {
        return;
    };
    let (_dir, ws) = workspace();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../troupe/tests/fixtures/mcp_fixture.py");
    let script = write_script(
        &ws,
        "script.json",
        &json!({"agents": {"lead": [
            {"tool_calls": [{"name": "mcp__editor_fixture__echo", "arguments": {"text": "from the editor"}}]},
            text("Echoed."),
        ]}}),
    );
    scenario(
        &python,
        &ws,
        &["editor_mcp", &script, fixture.to_str().unwrap()],
    );
    assert!(
        !ws.join("troupe.toml").exists(),
        "the editor's server needs no settings file"
    );
}

#[test]
fn a_plan_waiting_for_the_lead_is_answered_in_the_editor() {
    let Some(python) = clients::require_or_skip("acp", "acp plan") else {
        return;
    };
    let (_dir, ws) = workspace();
    let script = write_script(
        &ws,
        "script.json",
        &json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "carol", "role": "writer", "prompt": "Plan, then write d.txt."}}]},
                text("Carol will plan first."),
                text("The person decides on carol's plan."),
                text("Carol is done."),
                text("Noted."),
            ],
            "carol": [
                {"tool_calls": [{"name": "submit_plan", "arguments": {"plan": "Write d.txt with one line."}}]},
                text("Waiting for the plan's answer."),
                {"tool_calls": [{"name": "write_file", "arguments": {"path": "d.txt", "content": "planned\n"}}]},
                text("wrote d.txt"),
            ],
        }}),
    );
    scenario(&python, &ws, &["plan", &script]);
    assert_eq!(
        std::fs::read_to_string(ws.join("d.txt")).unwrap(),
        "planned\n",
        "the plan approved in the editor let carol write"
    );
}

#[test]
fn a_permission_answered_from_a_terminal_first_makes_the_editors_answer_harmless() {
    let Some(python) = clients::require_or_skip("acp", "acp terminal_first") else {
        return;
    };
    let (_dir, ws) = workspace();
    let script = write_script(
        &ws,
        "script.json",
        &json!({"agents": {"lead": [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "c.txt", "content": "approved\n"}}]},
            text("Wrote c.txt."),
            text("Still here."),
        ]}}),
    );
    scenario(&python, &ws, &["terminal_first", &script]);
    assert_eq!(
        std::fs::read_to_string(ws.join("c.txt")).unwrap(),
        "approved\n",
        "the terminal's approval stands, the editor's later reject changed nothing"
    );
}

/// `troupe acp` on raw pipes: each line written, the one response read back.
struct Raw {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(ws: &Path, script: &str) -> Self {
        Self::start_with(ws, script, &[])
    }

    fn start_with(ws: &Path, script: &str, options: &[&str]) -> Self {
        Self::start_env(ws, script, options, &[])
    }

    fn start_env(ws: &Path, script: &str, options: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = super::support::command(ws)
            .envs(env.iter().copied())
            .args([
                "--workspace",
                ws.to_str().unwrap(),
                "acp",
                "--model-script",
                script,
            ])
            .args(options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Self { child, out }
    }

    fn send(&mut self, bytes: &[u8]) -> Value {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(line.to_string().as_bytes())
    }

    /// A request's response, past the notifications that come before it.
    fn response(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.exchange(id, method, params).1
    }

    /// The notifications a request's response comes after, and the response.
    fn exchange(&mut self, id: u64, method: &str, params: Value) -> (Vec<Value>, Value) {
        let mut notifications = Vec::new();
        let mut response = self.request(id, method, params);
        while response.get("id") != Some(&json!(id)) {
            assert_eq!(response["method"], "session/update", "{response}");
            notifications.push(response);
            let mut line = String::new();
            self.out.read_line(&mut line).unwrap();
            response = serde_json::from_str(&line).unwrap();
        }
        (notifications, response)
    }
}

#[test]
fn the_key_never_reaches_the_editor() {
    let (_dir, ws) = workspace();
    let key = "sk-acp-test-0123456789abcdef";
    let script = write_script(
        &ws,
        "script.json",
        &json!({"agents": {"lead": [
            {"text": format!("echoing {key}"), "tool_calls": [
                {"name": "write_file", "arguments": {"path": "k.txt", "content": format!("key={key}\n")}},
            ]},
            text("done"),
        ]}}),
    );
    let mut acp = Raw::start_env(
        &ws,
        &script,
        &["--approval", "auto"],
        &[("OPENAI_API_KEY", key)],
    );
    acp.request(1, "initialize", json!({"protocolVersion": 1}));
    let session = acp.request(2, "session/new", json!({"cwd": ws, "mcpServers": []}));
    let id = session["result"]["sessionId"].as_str().unwrap().to_owned();
    let (seen, response) = acp.exchange(
        3,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "write the key"}]}),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let seen: Vec<String> = seen.iter().map(Value::to_string).collect();
    let seen = seen.join("\n");
    assert!(seen.contains("k.txt"), "the write was shown: {seen}");
    assert!(!seen.contains(key), "the key reached the editor: {seen}");
    // The file itself holds the key: only what is sent out is cleared.
    assert!(std::fs::read_to_string(ws.join("k.txt"))
        .unwrap()
        .contains(key));
}

#[test]
fn a_turn_limit_and_a_token_budget_are_their_stop_reasons() {
    let (_dir, ws) = workspace();
    let glob = json!({"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}],
                      "usage": {"prompt_tokens": 500, "completion_tokens": 10, "total_tokens": 510}});
    let script = write_script(
        &ws,
        "script.json",
        &json!({"responses": [glob, glob, glob]}),
    );
    let cwd = ws.to_str().unwrap();
    for (options, reason) in [
        (&["--max-turns", "1"][..], "max_turn_requests"),
        (&["--max-tokens", "100"][..], "max_tokens"),
    ] {
        let mut acp = Raw::start_with(&ws, &script, options);
        acp.request(1, "initialize", json!({"protocolVersion": 1}));
        let session = acp.request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}));
        let id = session["result"]["sessionId"].as_str().unwrap().to_owned();
        let prompt = acp.response(
            3,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "look around"}]}),
        );
        assert_eq!(
            prompt["result"]["stopReason"], reason,
            "{options:?}: {prompt}"
        );
    }
}

fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {response}"))
}

#[test]
fn hostile_lines_are_each_an_error_and_the_agent_goes_on() {
    let (_dir, ws) = workspace();
    let script = write_script(&ws, "script.json", &json!({"responses": [text("hello")]}));
    let mut acp = Raw::start(&ws, &script);
    let cwd = ws.to_str().unwrap();

    // Before `initialize`: refused, nothing created.
    let early = acp.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(error_code(&early), -32600, "{early}");
    assert!(early.to_string().contains("initializ"), "{early}");
    assert!(!ws.join(".troupe").exists(), "no state before initialize");

    // Lines that are not JSON-RPC.
    let parse = acp.send(b"{not json");
    assert_eq!(error_code(&parse), -32700, "{parse}");
    let not_utf8 = acp.send(b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"\xff\xfe\"}");
    assert_eq!(error_code(&not_utf8), -32700, "{not_utf8}");
    let big = vec![b'x'; 1024 * 1024];
    let big_response = acp.send(&big);
    assert_eq!(error_code(&big_response), -32700);
    assert!(
        big_response.to_string().len() < 4096,
        "a big line is not echoed back whole"
    );
    let huge = vec![b'{'; 9 * 1024 * 1024];
    let huge_response = acp.send(&huge);
    assert_eq!(error_code(&huge_response), -32700);
    assert!(
        huge_response.to_string().contains("over the limit"),
        "{huge_response}"
    );

    let init = acp.request(3, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);

    let unknown = acp.request(4, "session/teleport", json!({}));
    assert_eq!(error_code(&unknown), -32601, "{unknown}");
    let bad = acp.request(5, "session/new", json!({"cwd": 5}));
    assert_eq!(error_code(&bad), -32602, "{bad}");
    let relative = acp.request(
        6,
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    assert_eq!(error_code(&relative), -32602, "{relative}");
    let stranger = acp.request(
        7,
        "session/prompt",
        json!({"sessionId": "not-a-session", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(error_code(&stranger), -32002, "{stranger}");
    assert!(!ws.join(".troupe/acp_session.json").exists());

    // Alive, and a real session still works: a prompt's updates, then its response.
    let session = acp.request(8, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let id = session["result"]["sessionId"].as_str().unwrap().to_owned();
    let other = acp.request(
        9,
        "session/prompt",
        json!({"sessionId": format!("{id}-other"), "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(
        error_code(&other),
        -32002,
        "a prompt for another session id: {other}"
    );
    let response = acp.response(
        10,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    drop(acp.child.stdin.take());
    let status = acp.child.wait().unwrap();
    assert!(
        status.success(),
        "troupe acp ends cleanly when the editor closes: {status}"
    );
}

#[test]
fn initialize_without_a_model_says_what_is_missing() {
    let (_dir, ws) = workspace();
    let mut child = super::support::command(&ws)
        .args(["--workspace", ws.to_str().unwrap(), "acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let response: Value = serde_json::from_str(&line).unwrap();
    assert!(response["error"].is_object(), "{response}");
    assert!(
        response.to_string().contains("OPENAI_API_KEY"),
        "names what is missing: {response}"
    );
}
