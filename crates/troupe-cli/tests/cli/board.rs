//! The leased task board through the binary (SPEC §12): a run killed with SIGKILL while its
//! teammate works on a task leaves the task claimed; the next run waits for the lease to run
//! out, and the task is completed exactly once — by a new claim, never the dead one.

use std::process::Stdio;

use serde_json::json;
use troupe::store::events::read;
use troupe::wire::Event;

use super::special_files::mkfifo;
use super::support::{command, kill_run_blocked_on, wait_for_event};

fn events_of(ws: &std::path::Path, kind: &str) -> Vec<Event> {
    read::read_all(&ws.join(".troupe/events.jsonl"))
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == kind)
        .collect()
}

fn run(ws: &std::path::Path, script: &serde_json::Value) -> std::process::Command {
    let path = ws.join(format!("script-{}.json", rand_suffix()));
    std::fs::write(&path, script.to_string()).unwrap();
    let mut run = command(ws);
    run.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
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

fn rand_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn text(t: &str) -> serde_json::Value {
    json!({"text": t})
}

#[test]
fn a_task_held_by_a_killed_run_is_completed_once_by_a_new_claim_after_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("troupe.toml"), "[tasks]\nlease = \"2s\"\n").unwrap();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    let fifo = ws.join("gate");
    mkfifo(&fifo);

    // Run 1: the lead puts a task on the board and spawns alpha; alpha answers its first
    // message, takes the task from the board and blocks in a shell call on it.
    let first = run(
        &ws,
        &json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "create_task", "arguments": {"subject": "slow job"}}]},
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "alpha", "role": "worker", "prompt": "Say ready."}}]},
                text("waiting"), text("noted"), text("noted"), text("noted")
            ],
            "alpha": [
                text("ready"),
                {"tool_calls": [{"name": "shell", "arguments": {"command": format!("read line < {}", fifo.display())}}]},
                text("never reached")
            ]
        }}),
    )
    .spawn()
    .unwrap();
    let mut first = first;
    let claimed = wait_for_event(&ws, "alpha's claim", |e| {
        e.kind == "task_claimed" && e.agent == "alpha"
    });
    wait_for_event(&ws, "alpha's shell call", |e| {
        e.kind == "tool_started" && e.agent == "alpha"
    });
    // Renewed while the run lives: still alpha's after more than a lease.
    let tasks_dir = ws.join(".troupe/tasks");
    let task_file = std::fs::read_dir(&tasks_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let held: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&task_file).unwrap()).unwrap();
    let dead_token = held["lease"]["token"].as_str().unwrap().to_owned();
    kill_run_blocked_on(&mut first, &ws, &fifo);
    assert_eq!(claimed.str("task_id"), held["id"].as_str());

    // Run 2: a new teammate joins; the task comes back when the dead claim's lease runs out and
    // is taken by a new claim (alpha's new runner or beta), completed once.
    let second = run(
        &ws,
        &json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "beta", "role": "worker", "prompt": "Say ready."}}]},
                text("waiting"), text("noted"), text("noted"), text("noted"), text("noted"), text("noted")
            ],
            "alpha": [text("finished the slow job")],
            "beta": [text("ready"), text("finished the slow job")]
        }}),
    )
    .output()
    .unwrap();
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let done: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&task_file).unwrap()).unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["returned"]["owner"], "alpha", "{done}");
    assert!(
        done["returned"]["reason"]
            .as_str()
            .unwrap()
            .contains("lease ran out"),
        "{done}"
    );
    assert_eq!(events_of(&ws, "task_completed").len(), 1);
    let expired = events_of(&ws, "task_lease_expired");
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].str("previous_owner"), Some("alpha"));
    // The completing claim is a new one: two claims in all, the dead one first.
    let claims = events_of(&ws, "task_claimed");
    assert_eq!(claims.len(), 2, "{claims:?}");
    assert_ne!(
        claims[1].str("lease_expires_at"),
        claims[0].str("lease_expires_at")
    );
    assert_ne!(done["lease"].as_str(), Some(dead_token.as_str()));
}
