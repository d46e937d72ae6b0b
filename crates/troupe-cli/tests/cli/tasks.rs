//! `troupe tasks` and the task summary of `troupe status`, on a board written by the library.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::ManualClock;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::store::tasks::{FileTaskBoard, NewTask, TaskBoard};
use troupe::wire::AgentName;

fn troupe(workspace: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(args)
        .arg("--workspace")
        .arg(workspace)
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{:?}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn board(workspace: &Path) -> FileTaskBoard {
    FileTaskBoard::new(
        &Layout::new(workspace),
        Arc::new(ManualClock::at_spec_epoch()),
        Arc::new(SequentialIds::new()),
    )
}

#[test]
fn tasks_json_on_an_empty_workspace_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = stdout(&troupe(dir.path(), &["tasks", "--json"]));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"tasks": []})
    );
    assert_eq!(stdout(&troupe(dir.path(), &["tasks"])), "no tasks\n");
    assert!(!dir.path().join(".troupe").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_json_shows_the_board() {
    let dir = tempfile::tempdir().unwrap();
    let b = board(dir.path());
    let a = b
        .create(NewTask {
            subject: "design".into(),
            description: Some("the schema".into()),
            blocked_by: vec![],
            ..Default::default()
        })
        .await
        .unwrap();
    let c = b
        .create(NewTask {
            subject: "build".into(),
            description: None,
            blocked_by: vec![a.id],
            tags: vec!["rust".into(), "docs".into()],
            assignee: Some(AgentName::parse("bob").unwrap()),
        })
        .await
        .unwrap();
    let lease = b
        .claim(&a.id, &AgentName::parse("alice").unwrap())
        .await
        .unwrap()
        .lease
        .unwrap();
    let until = "2026-07-30T08:05:00.000Z";
    assert_eq!(lease.expires_at_utc.to_string(), until);

    let out = stdout(&troupe(dir.path(), &["tasks", "--json"]));
    let at = "2026-07-30T08:00:00.000Z";
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"tasks": [
            {"id": a.id.to_string(), "subject": "design", "description": "the schema",
             "blocked_by": [], "status": "in_progress", "owner": "alice",
             "lease": {"token": lease.token.to_string(), "expires_at_utc": until},
             "created_at_utc": at, "updated_at_utc": at, "open_blockers": []},
            {"id": c.id.to_string(), "subject": "build", "description": "",
             "blocked_by": [a.id.to_string()], "status": "pending", "owner": null,
             "tags": ["rust", "docs"], "assignee": "bob",
             "created_at_utc": at, "updated_at_utc": at, "open_blockers": [a.id.to_string()]}
        ]})
    );

    let text = stdout(&troupe(dir.path(), &["tasks"]));
    assert_eq!(
        text,
        format!(
            "id                                    status      owner                lease until               subject\n\
             {}  in_progress alice                {until}  design\n\
             {}  pending     -                    -                         build  [rust, docs]  (for bob)  (blocked by {})\n",
            a.id, c.id, a.id
        )
    );

    let status: Value =
        serde_json::from_str(&stdout(&troupe(dir.path(), &["status", "--json"]))).unwrap();
    assert_eq!(
        status["tasks"],
        json!({"total": 2, "pending": 1, "in_progress": 1, "completed": 0})
    );
    let text = stdout(&troupe(dir.path(), &["status"]));
    assert!(
        text.contains("\ntasks      2 (1 pending, 1 in progress, 0 completed)\n"),
        "{text}"
    );
}

#[test]
fn a_corrupt_task_file_is_a_one_line_failure() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join(".troupe/tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::write(
        tasks.join("00000000-0000-4000-8000-000000000001.json"),
        "{\"id\":",
    )
    .unwrap();
    let output = troupe(dir.path(), &["tasks"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("the task board is corrupt"), "{stderr}");
    assert!(stderr.contains("[task_store_corrupt]"), "{stderr}");
    // With --json, the same failure is one JSON object on stdout.
    let output = troupe(dir.path(), &["tasks", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stderr.is_empty());
    let error: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(error["error"]["code"], "task_store_corrupt");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the task board is corrupt"),
        "{error}"
    );
}
