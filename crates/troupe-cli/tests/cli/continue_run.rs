//! `troupe run --continue`: a run killed with SIGKILL while a teammate works is finished by a
//! run with no new prompt — the teammate's message comes back, its turn runs, its result
//! reaches the lead, the lead answers — and a workspace with nothing left says so (exit 0).

use std::process::Stdio;

use serde_json::json;
use troupe::store::events::read;

use super::special_files::mkfifo;
use super::support::{command, kill_run_blocked_on, wait_for_event};

fn run_with(
    ws: &std::path::Path,
    args: &[&str],
    script: &serde_json::Value,
) -> std::process::Command {
    let path = ws.join(format!("script-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, script.to_string()).unwrap();
    let mut run = command(ws);
    run.args(["run", "--workspace", ws.to_str().unwrap()])
        .args(args)
        .args([
            "--approval",
            "auto",
            "--model-script",
            path.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run
}

fn text(t: &str) -> serde_json::Value {
    json!({"text": t})
}

#[test]
fn a_run_killed_mid_team_is_finished_by_continue_without_a_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    let fifo = ws.join("gate");
    mkfifo(&fifo);

    // Run 1: the lead spawns alpha, whose first turn blocks in a shell call; the run is killed
    // there, alpha's message still in processing.
    let mut first = run_with(
        &ws,
        &["--prompt", "go"],
        &json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "alpha", "role": "worker", "prompt": "Do the job."}}]},
                text("waiting for alpha"), text("noted")
            ],
            "alpha": [
                {"tool_calls": [{"name": "shell", "arguments": {"command": format!("read line < {}", fifo.display())}}]},
                text("never reached")
            ]
        }}),
    )
    .spawn()
    .unwrap();
    wait_for_event(&ws, "alpha's shell call", |e| {
        e.kind == "tool_started" && e.agent == "alpha"
    });
    // The lead's turn has answered by now, or is about to: its answer is written to its
    // conversation just after this event. (Killed before that, `--continue` first finishes
    // the lead's turn: the second run's script answers the same either way.)
    wait_for_event(&ws, "the lead's answer", |e| {
        e.kind == "assistant_text" && e.agent == "lead"
    });
    kill_run_blocked_on(&mut first, &ws, &fifo);
    let before = read::read_all(&ws.join(".troupe/events.jsonl"))
        .unwrap()
        .len();

    // Run 2: no prompt. Alpha's turn runs again and its result reaches the lead, who answers.
    let second = run_with(
        &ws,
        &["--continue"],
        &json!({"agents": {
            "lead": [
                text("alpha finished the job: all done"),
                text("alpha finished the job: all done")
            ],
            "alpha": [text("finished the job")]
        }}),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&second.stdout).trim(),
        "alpha finished the job: all done",
        "{stderr}"
    );
    let events = read::read_all(&ws.join(".troupe/events.jsonl")).unwrap();
    let new = &events[before..];
    let started = new.iter().find(|e| e.kind == "run_started").unwrap();
    assert_eq!(started.fields.get("continued"), Some(&json!(true)));
    assert!(
        new.iter()
            .any(|e| e.kind == "message_sent" && e.agent == "alpha" && e.str("to") == Some("lead")),
        "alpha's result went to the lead"
    );
    let ended = new.iter().rfind(|e| e.kind == "run_ended").unwrap();
    assert_eq!(ended.str("outcome"), Some("done"));

    // Run 3: everything is done; nothing to continue, and no model call is made (the script
    // is empty).
    let third = run_with(&ws, &["--continue"], &json!({"agents": {}}))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert!(third.status.success(), "{stderr}");
    assert!(stderr.contains("nothing to continue"), "{stderr}");
    assert!(third.stdout.is_empty(), "{third:?}");
}

#[test]
fn continue_and_a_prompt_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = command(dir.path())
        .args(["run", "--continue", "--prompt", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = command(dir.path()).args(["run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--prompt"),
        "{out:?}"
    );
}
