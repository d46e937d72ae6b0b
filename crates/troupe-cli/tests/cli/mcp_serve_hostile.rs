//! `troupe mcp serve` on raw pipes, for what no client sends: a malformed line, a 1 MiB line,
//! invalid UTF-8, a well-formed non-request, a 1 MiB call of an unknown tool, arguments of the
//! wrong type — each answered with an error, the server alive; its
//! stdout JSON-RPC only; stdin closed ends it with exit 0.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;

use serde_json::{json, Value};

use super::{script, workspace, WATCHDOG};

/// `troupe mcp serve` on raw pipes: lines in, the JSON-RPC messages it writes out.
struct Raw {
    child: Option<std::process::Child>,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn start(ws: &Path, script: &str) -> Self {
        Self::start_env(ws, script, &[])
    }

    fn start_env(ws: &Path, script: &str, env: &[(&str, &str)]) -> Self {
        let mut command = crate::support::command(ws);
        command
            .envs(env.iter().copied())
            .args(["--workspace", ws.to_str().unwrap(), "mcp", "serve"])
            .args(["--approval", "auto", "--model-script", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (lines_tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child: Some(child),
            stdin,
            lines,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send_json(&mut self, value: &Value) {
        self.send(value.to_string().as_bytes());
    }

    /// Every message written until the answers to the requests `ids` (in any order: the
    /// server answers requests concurrently); each line must be JSON.
    fn until_answers(&self, ids: &[i64]) -> Vec<Value> {
        let mut seen: Vec<Value> = Vec::new();
        while !ids.iter().all(|id| seen.iter().any(|m| m["id"] == *id)) {
            let line = self.lines.recv_timeout(WATCHDOG).unwrap_or_else(|e| {
                panic!("no answers to requests {ids:?} ({e}); so far: {seen:#?}")
            });
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout is the protocol's alone ({e}): {line:?}"));
            seen.push(message);
        }
        seen
    }

    /// Closes stdin, as a client going away does: the server's exit status.
    fn close(&mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let mut child = self.child.take().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || done.send(child.wait()));
        finished
            .recv_timeout(WATCHDOG)
            .unwrap_or_else(|_| {
                // SAFETY: kill on the pid of our own child, which has not been reaped yet.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("troupe mcp serve was still running {WATCHDOG:?} after stdin closed")
            })
            .unwrap()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn hostile_input_is_answered_with_an_error_and_the_server_stays() {
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = script(scripts.path(), &json!({"agents": {}}));
    let mut raw = Raw::start(&ws, &script);
    // A request before `initialize`: an error, and nothing changed.
    raw.send_json(&json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
        "params": {"name": "troupe_run", "arguments": {"prompt": "too early"}}}));
    let early = raw.until_answers(&[100]);
    assert!(early[0]["error"]["code"].is_i64(), "{early:#?}");
    assert!(!ws.join(".troupe").exists(), "no state before initialize");
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}
        }
    }));
    let answer = raw.until_answers(&[1]);
    assert_eq!(answer.len(), 1, "{answer:#?}");
    assert_eq!(
        answer[0]["result"]["serverInfo"]["name"], "troupe",
        "{answer:#?}"
    );
    raw.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    // Not JSON: a parse error each, with no id (there is none to answer).
    raw.send(b"this is not json {");
    raw.send(&vec![b'x'; 1024 * 1024]);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"x\":\"\xff\xfe\"}");
    // JSON, but no request: an Invalid Request error.
    raw.send_json(&json!({"jsonrpc": "2.0", "id": 4, "bogus": true}));
    // A 1 MiB call of an unknown tool: an error for that call.
    let pad = "y".repeat(1024 * 1024);
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "troupe_nothing", "arguments": {"pad": pad}}
    }));
    // A call with arguments of the wrong type: an error for that call.
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "troupe_send", "arguments": {"to": 7, "text": ["no"]}}
    }));
    raw.send_json(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    let seen = raw.until_answers(&[5, 6, 7]);
    let by_id = |id: i64| seen.iter().find(|m| m["id"] == id);
    assert!(
        by_id(3).is_none(),
        "invalid UTF-8 is not a message: {seen:#?}"
    );
    let parse_errors: Vec<&Value> = seen
        .iter()
        .filter(|m| m["error"]["code"] == -32700 && m["id"].is_null())
        .collect();
    assert_eq!(
        parse_errors.len(),
        3,
        "one parse error per line that is not JSON: {seen:#?}"
    );
    assert!(
        parse_errors.iter().all(|m| m.to_string().len() < 300),
        "a refused line is not quoted back: {parse_errors:#?}"
    );
    assert!(
        seen.iter()
            .any(|m| m["error"]["code"] == -32600 && m.get("id").is_none_or(Value::is_null)),
        "the well-formed non-request is an Invalid Request error: {seen:#?}"
    );
    let unknown = by_id(5).unwrap_or_else(|| panic!("{seen:#?}"));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown:#}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{unknown:#}"
    );
    let wrong = by_id(6).unwrap_or_else(|| panic!("{seen:#?}"));
    assert_eq!(wrong["error"]["code"], -32602, "{wrong:#}");
    assert_eq!(by_id(7).unwrap()["result"], json!({}), "{seen:#?}");

    // The client closes stdin: the server ends, exit 0.
    let status = raw.close();
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_key_never_reaches_the_client() {
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let key = "sk-mcp-test-0123456789abcdef";
    let script = script(
        scripts.path(),
        &json!({"agents": {"lead": [{"text": format!("the key is {key}")}]}}),
    );
    let mut raw = Raw::start_env(&ws, &script, &[("OPENAI_API_KEY", key)]);
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}
    }));
    raw.until_answers(&[1]);
    raw.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "troupe_run", "arguments": {"prompt": "say the key"},
                   "_meta": {"progressToken": "p"}}
    }));
    let seen = raw.until_answers(&[2]);
    let text = serde_json::to_string(&seen).unwrap();
    assert!(text.contains("the key is"), "the answer came back: {text}");
    assert!(!text.contains(key), "the key reached the client: {text}");
    assert!(raw.close().success());
}
