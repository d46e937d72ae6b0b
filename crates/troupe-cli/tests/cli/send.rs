//! `troupe send AGENT TEXT` (SPEC §10): a person's message reaches the lead of a running team as
//! a `user_message` event; unknown, failed and shut-down agents are refused; the sender `user` is
//! reserved.

use std::io::Write;
use std::process::Stdio;

use serde_json::{json, Value};
use troupe::store::events::read;

use super::support::{assert_fails, command, json as stdout_json, troupe_in, wait_for_event};

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

#[test]
fn a_message_sent_during_a_run_reaches_the_lead_as_a_user_message_event() {
    let (_dir, ws) = workspace();
    let fifo = ws.join("gate");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path in our temp folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let script = ws.join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"tool_calls": [{"name": "shell", "arguments": {"command": format!("read line < {}", fifo.display())}}]},
            {"text": "done with the first part"},
            {"text": "hello user"}
        ]})
        .to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    let run = command(&ws)
        .args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args([
            "--approval",
            "auto",
            "--model-script",
            script.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The lead is inside its shell call: the run is going.
    wait_for_event(&ws, "the lead's shell call", |e| {
        e.kind == "tool_started" && e.agent == "lead"
    });

    let sent = stdout_json(&troupe_in(
        &ws,
        &["send", "lead", "please also greet me", "--json"],
    ));
    assert_eq!(sent["to"], "lead");
    let id = sent["message_id"].as_str().unwrap().to_owned();

    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("hello user"));

    let events = read::read_all(&ws.join(".troupe/events.jsonl")).unwrap();
    let user: Vec<_> = events.iter().filter(|e| e.kind == "user_message").collect();
    assert_eq!(user.len(), 1, "{events:#?}");
    assert_eq!(user[0].agent, "lead");
    assert_eq!(user[0].str("message_id"), Some(id.as_str()));
    assert_eq!(user[0].str("text"), Some("please also greet me"));
    // The lead's conversation got it as an event, and the message is done.
    let transcript = std::fs::read_to_string(ws.join(".troupe/transcripts/lead.jsonl")).unwrap();
    assert!(
        transcript.contains(r#"\"kind\":\"user_message\""#),
        "{transcript}"
    );
    assert!(transcript.contains("please also greet me"));
    let done = ws.join(format!(".troupe/mailboxes/lead/done/{id}.json"));
    let message: Value = serde_json::from_slice(&std::fs::read(done).unwrap()).unwrap();
    assert_eq!(message["sender"], "user");
}

#[test]
fn unknown_failed_and_shut_down_agents_are_refused() {
    let (_dir, ws) = workspace();
    assert_fails(
        &troupe_in(&ws, &["send", "ghost", "hi"]),
        1,
        "unknown_agent",
    );
    assert!(!ws.join(".troupe/mailboxes/ghost").exists());
    assert_fails(&troupe_in(&ws, &["send", "user", "hi"]), 1, "unknown_agent");
    assert_fails(
        &troupe_in(&ws, &["send", "Bad Name", "hi"]),
        2,
        "invalid agent name",
    );
    assert_fails(
        &troupe_in(&ws, &["send", "lead", "   "]),
        2,
        "invalid_arguments",
    );

    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    let record = |name: &str, status: &str| {
        json!({"name": name, "role": "r", "status": status, "detail": null,
               "updated_at_utc": "2026-07-30T08:00:00.000Z", "plan_required": false,
               "earlier_plan": null})
    };
    std::fs::write(
        ws.join(".troupe/team.json"),
        json!({"version": 1, "teammates": [
            record("gone", "shutdown"), record("broken", "failed"), record("idle-one", "idle")
        ]})
        .to_string(),
    )
    .unwrap();
    assert_fails(
        &troupe_in(&ws, &["send", "gone", "hi"]),
        1,
        "agent_unavailable",
    );
    assert_fails(
        &troupe_in(&ws, &["send", "broken", "hi"]),
        1,
        "agent_unavailable",
    );
    let sent = stdout_json(&troupe_in(
        &ws,
        &["send", "idle-one", "more work", "--json"],
    ));
    let id = sent["message_id"].as_str().unwrap();
    let ready = ws.join(format!(".troupe/mailboxes/idle-one/ready/{id}.json"));
    let message: Value = serde_json::from_slice(&std::fs::read(ready).unwrap()).unwrap();
    assert_eq!(message["sender"], "user");
    assert_eq!(message["kind"], "message");
    assert_eq!(message["content"], "more work");
}
