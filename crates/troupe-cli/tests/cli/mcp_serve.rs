//! `troupe mcp serve` driven by the official MCP Python SDK's client
//! (`tests/clients/mcp_client.py`, run with the venv's python; see [`super::clients`]), and by
//! raw bytes for what no client sends. A scripted model answers; no network. Every wait is for
//! a message (a progress line, a result, a process's exit), bounded by a watchdog, never a sleep.
//!
//! - The tools listed; `troupe_run` with a progress token: the events as progress, the lead's
//!   answer with the file it wrote and the run's tokens; `troupe_status`; `troupe_send` (the
//!   message in the lead's mailbox); a bad agent name and an unknown tool answered with errors.
//! - A `troupe_run` cancelled while a teammate blocks in a shell call: a second run refused
//!   meanwhile; the team closed (the teammate's message released back to `ready/`); the next
//!   run finishes the teammate's work.
//! - `--approval ask` with a client that elicits: one write approved, one denied with the
//!   reason given in the form; an ask answered with `troupe_answer` while its elicitation
//!   waits (the elicitation withdrawn); without elicitation: the write denied, the result
//!   saying how to allow it, or (`[approvals] no_terminal = "wait"`) waiting for
//!   `troupe_answer`, which denies it with a reason.
//! - `--require-plans`: a teammate's plan approved with `troupe_answer` while the run waits;
//!   a second answer refused.
//! - Hostile input on raw pipes ([`hostile`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::support::{no_user_config, troupe_in, without_settings_variables};

#[path = "mcp_serve_hostile.rs"]
mod hostile;

/// Long enough for a slow machine; a hang is a failure, not a wait.
const WATCHDOG: Duration = Duration::from_secs(180);

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// Each model call reports the same usage: 1,200 tokens in, 34 out.
fn usage() -> Value {
    json!({"prompt_tokens": 1200, "completion_tokens": 34, "total_tokens": 1234})
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}], "usage": usage()})
}

fn text(t: &str) -> Value {
    json!({"text": t, "usage": usage()})
}

/// Writes `script` beside the workspace; its path.
fn script(dir: &Path, script: &Value) -> String {
    let path = dir.join(format!("script-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, script.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Runs the Python client's `scenario` against `troupe --workspace WS mcp serve ARGS`: the JSON
/// it printed. `None` when the client is not installed (skipped).
fn client(scenario: &str, ws: &Path, args: &[&str]) -> Option<Value> {
    let python = super::clients::require_or_skip("mcp", "the tests of troupe mcp serve")?;
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/mcp_client.py");
    let mut command = Command::new(python);
    command
        .arg(driver)
        .arg(scenario)
        .arg(env!("CARGO_BIN_EXE_troupe"))
        .arg(ws)
        .args(args)
        .current_dir(ws)
        .env("XDG_CONFIG_HOME", no_user_config())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    without_settings_variables(&mut command);
    let child = command.spawn().unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let output = match finished.recv_timeout(WATCHDOG) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            // SAFETY: kill on the pid of our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let output = finished.recv().unwrap().unwrap();
            panic!(
                "the MCP client ({scenario}) was still running after {WATCHDOG:?}; stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the MCP client ({scenario}) failed: {:?}\nstderr:\n{stderr}",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    Some(
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {stdout}\nstderr:\n{stderr}")),
    )
}

/// The workspace's events.
fn events(ws: &Path) -> Vec<troupe::wire::Event> {
    troupe::store::events::read::read_all(&ws.join(".troupe/events.jsonl")).unwrap()
}

#[test]
fn lists_the_tools_runs_with_progress_and_answers_status_and_send() {
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = script(
        scripts.path(),
        &json!({"agents": {"lead": [
            tool("write_file", json!({"path": "out.txt", "content": "hello\n"})),
            text("wrote out.txt"),
        ]}}),
    );
    let Some(out) = client(
        "basics",
        &ws,
        &["--approval", "auto", "--model-script", &script],
    ) else {
        return;
    };
    assert_eq!(
        out["tools"],
        json!([
            "troupe_answer",
            "troupe_run",
            "troupe_send",
            "troupe_status"
        ]),
        "{out:#}"
    );

    // The run: the lead's answer, the file it wrote, the run's tokens.
    let run = &out["run"];
    assert_eq!(run["is_error"], false, "{out:#}");
    let run_text = run["text"].as_str().unwrap();
    assert!(run_text.starts_with("wrote out.txt"), "{run_text}");
    assert!(run_text.contains("files changed: out.txt"), "{run_text}");
    assert!(
        run_text.contains("tokens: lead 2,400 in / 68 out"),
        "{run_text}"
    );
    assert_eq!(run["structured"]["answer"], "wrote out.txt", "{out:#}");
    assert_eq!(run["structured"]["files_changed"], json!(["out.txt"]));
    assert_eq!(
        run["structured"]["usage"]["total"]["total_tokens"], 2468,
        "{out:#}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );

    // Progress: each event's `troupe log` line, counted up.
    let progress = out["progress"].as_array().unwrap();
    let messages: Vec<&str> = progress
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains(" run started: Write out.txt.")),
        "{messages:#?}"
    );
    assert!(
        messages.iter().any(|m| m.contains(" lead tool write_file")),
        "{messages:#?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("run ended (done, exit 0)")),
        "every event was sent before the result: {messages:#?}"
    );
    let counts: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
    assert_eq!(
        messages.len(),
        events(&ws).len(),
        "one progress line per event"
    );

    // Status: `troupe status --json`'s report.
    let status = &out["status"]["structured"];
    assert_eq!(out["status"]["is_error"], false, "{out:#}");
    assert_eq!(status["run"]["active"], false, "{status:#}");
    let cli_status: Value =
        serde_json::from_str(&troupe_in(&ws, &["status", "--json"]).stdout).unwrap();
    assert_eq!(
        super::support::keys(status),
        super::support::keys(&cli_status),
        "the same report as troupe status --json"
    );

    // Send: in the lead's mailbox, from the person.
    assert_eq!(out["send"]["is_error"], false, "{out:#}");
    assert_eq!(out["send"]["structured"]["to"], "lead");
    let mailbox: Value =
        serde_json::from_str(&troupe_in(&ws, &["mailbox", "lead", "--json"]).stdout).unwrap();
    let from_user: Vec<&Value> = mailbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["sender"] == "user")
        .collect();
    assert_eq!(from_user.len(), 1, "{mailbox:#}");
    assert_eq!(from_user[0]["message"]["content"], "hello from the client");
    assert_eq!(out["send_bad"]["is_error"], true, "{out:#}");

    // An unknown tool is a JSON-RPC error; the server goes on.
    let unknown = out["unknown_tool"].as_str().unwrap();
    assert!(
        unknown.starts_with("error:") && unknown.contains("unknown tool"),
        "{unknown}"
    );
    assert_eq!(out["tools_after"], 4);
}

#[test]
fn a_cancelled_run_closes_the_team_and_the_next_run_goes_on_with_nothing_lost() {
    let (_dir, ws) = workspace();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    let gate = ws.join("gate");
    super::special_files::mkfifo(&gate);
    let scripts = tempfile::tempdir().unwrap();
    let done = text("alpha finished the job: all done");
    let script = script(
        scripts.path(),
        &json!({"agents": {
            "lead": [
                tool("spawn_teammate", json!({"name": "alpha", "role": "worker", "prompt": "Do the job."})),
                text("waiting for alpha"),
                done, done, done, done, done, done
            ],
            "alpha": [
                tool("shell", json!({"command": format!("read line < {}", gate.display())})),
                text("finished the job")
            ]
        }}),
    );
    let Some(out) = client(
        "cancel",
        &ws,
        &["--approval", "auto", "--model-script", &script],
    ) else {
        return;
    };
    assert!(
        out["blocked_on"]
            .as_str()
            .unwrap()
            .contains("alpha tool shell"),
        "{out:#}"
    );
    // One run at a time.
    assert_eq!(out["second"]["is_error"], true, "{out:#}");
    assert!(
        out["second"]["text"]
            .as_str()
            .unwrap()
            .contains("already going on"),
        "{out:#}"
    );
    // The first run was cancelled: the client has no result for it.
    assert_eq!(out["first"], "cancelled", "{out:#}");

    // The team was closed as Ctrl-C closes it: alpha's message went back to ready/.
    let all = events(&ws);
    let first_end = all
        .iter()
        .position(|e| e.kind == "run_ended")
        .expect("the first run ended");
    assert_eq!(
        all[first_end].str("outcome"),
        Some("interrupted"),
        "{:?}",
        all[first_end]
    );
    assert!(
        all[..first_end]
            .iter()
            .any(|e| e.kind == "message_released" && e.agent == "alpha"),
        "alpha's message was released back to ready/"
    );

    // The next run goes on: alpha's message is taken up again, and its result reaches the lead.
    let third = &out["third"];
    assert_eq!(third["is_error"], false, "{out:#}");
    assert!(
        third["text"]
            .as_str()
            .unwrap()
            .starts_with("alpha finished the job: all done"),
        "{out:#}"
    );
    let later = &all[first_end + 1..];
    assert!(
        later
            .iter()
            .any(|e| e.kind == "message_sent" && e.agent == "alpha" && e.str("to") == Some("lead")),
        "alpha's result went to the lead"
    );
    assert_eq!(
        later
            .iter()
            .rfind(|e| e.kind == "run_ended")
            .unwrap()
            .str("outcome"),
        Some("done")
    );
    let processing = ws.join(".troupe/mailboxes/alpha/processing");
    assert_eq!(std::fs::read_dir(processing).unwrap().count(), 0);
}

/// The lead writes out.txt, then two.txt, then answers.
fn two_writes(dir: &Path) -> String {
    script(
        dir,
        &json!({"agents": {"lead": [
            tool("write_file", json!({"path": "out.txt", "content": "hello\n"})),
            tool("write_file", json!({"path": "two.txt", "content": "again\n"})),
            text("done writing"),
        ]}}),
    )
}

#[test]
fn permission_asks_are_elicited_from_a_client_that_can_be_asked() {
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = two_writes(scripts.path());
    let Some(out) = client("elicit", &ws, &["--model-script", &script]) else {
        return;
    };
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{out:#}");
    let first = asked[0].as_str().unwrap();
    assert!(
        first.contains("agent lead wants to run write_file: out.txt"),
        "{first}"
    );
    assert!(first.contains("+hello"), "the diff: {first}");
    assert!(asked[1].as_str().unwrap().contains("write_file: two.txt"));

    let run = &out["run"];
    assert_eq!(run["is_error"], false, "{out:#}");
    let run_text = run["text"].as_str().unwrap();
    assert!(run_text.starts_with("done writing"), "{run_text}");
    assert!(run_text.contains("files changed: out.txt"), "{run_text}");
    assert!(run_text.contains("denied (1):"), "{run_text}");
    assert!(run_text.contains("not this one"), "{run_text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );
    assert!(!ws.join("two.txt").exists());

    // Both answers are the person's, through the client: recorded as `mcp`.
    let audit = std::fs::read_to_string(ws.join(".troupe/audit.jsonl")).unwrap();
    let writes: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["tool"] == "write_file")
        .collect();
    assert_eq!(writes.len(), 2, "{audit}");
    assert_eq!(writes[0]["decision"], "allow", "{audit}");
    assert_eq!(writes[1]["decision"], "deny", "{audit}");
    for write in &writes {
        assert!(write["rule"].as_str().unwrap().contains("mcp"), "{audit}");
    }
}

#[test]
fn an_elicited_ask_gives_way_to_an_answer_given_elsewhere() {
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = script(
        scripts.path(),
        &json!({"agents": {"lead": [
            tool("write_file", json!({"path": "out.txt", "content": "hello\n"})),
            text("wrote out.txt"),
        ]}}),
    );
    let Some(out) = client("elsewhere", &ws, &["--model-script", &script]) else {
        return;
    };
    assert_eq!(out["asked"].as_array().unwrap().len(), 1, "{out:#}");
    // The elicitation was withdrawn once troupe_answer had answered the request.
    assert_eq!(out["withdrawn"], json!([true]), "{out:#}");
    let run = &out["run"];
    assert_eq!(run["is_error"], false, "{out:#}");
    assert!(
        run["text"]
            .as_str()
            .unwrap()
            .contains("files changed: out.txt"),
        "{out:#}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );
}

#[test]
fn without_elicitation_an_ask_is_denied_and_the_result_says_how_to_allow_it() {
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = script(
        scripts.path(),
        &json!({"agents": {"lead": [
            tool("write_file", json!({"path": "out.txt", "content": "hello\n"})),
            text("could not write out.txt"),
        ]}}),
    );
    let Some(out) = client("plain", &ws, &["--model-script", &script]) else {
        return;
    };
    let run = &out["run"];
    assert_eq!(run["is_error"], false, "{out:#}");
    let run_text = run["text"].as_str().unwrap();
    assert!(
        run_text.starts_with("could not write out.txt"),
        "{run_text}"
    );
    assert!(run_text.contains("files changed: none"), "{run_text}");
    assert!(
        run_text.contains("denied (1):\n  lead write_file: out.txt"),
        "{run_text}"
    );
    assert!(run_text.contains("--approval auto"), "{run_text}");
    assert!(run_text.contains("troupe_answer"), "{run_text}");
    assert_eq!(run["structured"]["denied"][0]["tool"], "write_file");
    assert!(!ws.join("out.txt").exists());
}

#[test]
fn without_elicitation_an_ask_may_wait_for_troupe_answer() {
    let (_dir, ws) = workspace();
    std::fs::write(
        ws.join("troupe.toml"),
        "[approvals]\nno_terminal = \"wait\"\n",
    )
    .unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let script = script(
        scripts.path(),
        &json!({"agents": {"lead": [
            tool("write_file", json!({"path": "out.txt", "content": "hello\n"})),
            text("told to write docs/ instead"),
        ]}}),
    );
    let Some(out) = client("wait", &ws, &["--model-script", &script]) else {
        return;
    };
    let answer = &out["answer"];
    assert_eq!(answer["is_error"], false, "{out:#}");
    assert_eq!(answer["structured"]["kind"], "permission", "{out:#}");
    assert_eq!(answer["structured"]["approved"], false, "{out:#}");
    assert_eq!(
        answer["structured"]["call"], "write_file: out.txt",
        "{out:#}"
    );
    let run = &out["run"];
    assert_eq!(run["is_error"], false, "{out:#}");
    let run_text = run["text"].as_str().unwrap();
    assert!(
        run_text.starts_with("told to write docs/ instead"),
        "{run_text}"
    );
    assert!(run_text.contains("write docs/ instead"), "{run_text}");
    assert_eq!(
        run["structured"]["denied"][0]["tool"], "write_file",
        "{out:#}"
    );
    assert!(!ws.join("out.txt").exists());
}

#[test]
fn a_plan_is_approved_with_troupe_answer_while_the_run_waits() {
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let waiting = text("Waiting for the writer.");
    let script = script(
        scripts.path(),
        &json!({"agents": {
            "lead": [
                tool("spawn_teammate", json!({"name": "writer", "role": "writer", "prompt": "Plan, then write out.txt."})),
                waiting, waiting, waiting, waiting, waiting, waiting, waiting, waiting
            ],
            "writer": [
                tool("submit_plan", json!({"plan": "Write out.txt."})),
                text("Plan submitted."),
                tool("write_file", json!({"path": "out.txt", "content": "approved through MCP\n"})),
                text("Wrote out.txt.")
            ]
        }}),
    );
    let Some(out) = client(
        "plan",
        &ws,
        &[
            "--approval",
            "auto",
            "--require-plans",
            "--model-script",
            &script,
        ],
    ) else {
        return;
    };
    assert_eq!(out["answer"]["is_error"], false, "{out:#}");
    assert_eq!(
        out["answer"]["structured"]["kind"], "plan_approval",
        "{out:#}"
    );
    assert_eq!(out["answer"]["structured"]["approved"], true, "{out:#}");
    assert_eq!(out["answer_again"]["is_error"], true, "{out:#}");
    assert_eq!(out["run"]["is_error"], false, "{out:#}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "approved through MCP\n"
    );
    let run_text = out["run"]["text"].as_str().unwrap();
    assert!(run_text.contains("files changed: out.txt"), "{run_text}");
}
