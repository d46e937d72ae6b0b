//! `troupe memory [list|show NAME|forget NAME]` on records written by the library: JSON shapes,
//! text, errors, nothing created, and `forget` while a run holds the run lock.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::layout::Layout;
use troupe::store::memory::{MemoryRecord, MemoryStore, MemoryType};

use super::special_files::{mkfifo, troupe_within};
use super::support::{assert_fails, assert_fails_json, json, troupe_in};

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

async fn seeded() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, ws) = workspace();
    let store = MemoryStore::open(&Layout::new(&ws));
    store
        .put(
            &MemoryRecord::new(
                "use-tabs",
                MemoryType::Feedback,
                "Indent with tabs",
                "Tabs.\n",
            )
            .unwrap(),
        )
        .await
        .unwrap();
    store
        .put(
            &MemoryRecord::new(
                "deploy-freeze",
                MemoryType::Project,
                "No deploys on Friday",
                "Since the outage.",
            )
            .unwrap(),
        )
        .await
        .unwrap();
    (dir, ws)
}

#[test]
fn a_workspace_without_memory_lists_nothing_and_creates_nothing() {
    let (_dir, ws) = workspace();
    assert_eq!(
        json(&troupe_in(&ws, &["memory", "--json"])),
        json!({"records": [], "problems": []})
    );
    let text = troupe_in(&ws, &["memory", "list"]);
    assert_eq!(
        (text.code, text.stdout.as_str()),
        (0, "no memory records\n")
    );
    assert_eq!(
        json(&troupe_in(&ws, &["memory", "forget", "x", "--json"])),
        json!({"forgotten": false})
    );
    assert!(!ws.join(".troupe").exists());
}

#[tokio::test]
async fn list_shows_records_by_name_and_problems() {
    let (_dir, ws) = seeded().await;
    mkfifo(&ws.join(".troupe/memory/stuck.md"));
    let listing = json(&troupe_in(&ws, &["memory", "list", "--json"]));
    assert_eq!(
        listing["records"],
        json!([
            {"name": "deploy-freeze", "type": "project", "description": "No deploys on Friday"},
            {"name": "use-tabs", "type": "feedback", "description": "Indent with tabs"}
        ])
    );
    let problems = listing["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{listing}");
    assert_eq!(
        problems[0]["file"],
        json!(ws.join(".troupe/memory/stuck.md").display().to_string())
    );
    assert!(
        problems[0]["reason"].as_str().unwrap().contains("FIFO"),
        "{listing}"
    );
    // The default action is `list`; the text names every record and problem, one per line.
    let text = troupe_within(&ws, &["memory"]);
    assert_eq!(text.code, 0, "{text:#?}");
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{text:#?}");
    assert_eq!(
        lines[0], "name           type       description",
        "{text:#?}"
    );
    assert!(
        lines[1].starts_with("deploy-freeze  project    No deploys on Friday"),
        "{text:#?}"
    );
    assert!(
        lines[2].starts_with("use-tabs       feedback   Indent with tabs"),
        "{text:#?}"
    );
    assert!(
        lines[3].starts_with("problem: ") && lines[3].contains("stuck.md"),
        "{text:#?}"
    );
}

#[tokio::test]
async fn show_prints_one_record() {
    let (_dir, ws) = seeded().await;
    assert_eq!(
        json(&troupe_in(&ws, &["memory", "show", "use-tabs", "--json"])),
        json!({"name": "use-tabs", "type": "feedback", "description": "Indent with tabs", "body": "Tabs.\n"})
    );
    let text = troupe_in(&ws, &["memory", "show", "deploy-freeze"]);
    assert_eq!(
        text.stdout,
        "name:        deploy-freeze\ntype:        project\ndescription: No deploys on Friday\n\nSince the outage.\n"
    );
}

#[tokio::test]
async fn show_of_an_unknown_or_invalid_name_fails_in_one_line() {
    let (_dir, ws) = seeded().await;
    let ran = troupe_in(&ws, &["memory", "show", "ghost"]);
    assert_fails(
        &ran,
        1,
        "no memory record named \"ghost\" [memory_not_found]",
    );
    assert_fails_json(
        &troupe_in(&ws, &["memory", "show", "ghost", "--json"]),
        1,
        "memory_not_found",
    );
    assert_fails(
        &troupe_in(&ws, &["memory", "show", "../secrets"]),
        2,
        "[memory_invalid]",
    );
    assert_fails(
        &troupe_in(&ws, &["memory", "forget", "A_B"]),
        2,
        "[memory_invalid]",
    );
    let malformed = ws.join(".troupe/memory/broken.md");
    std::fs::write(&malformed, "not a record").unwrap();
    assert_fails(
        &troupe_in(&ws, &["memory", "show", "broken"]),
        1,
        "[memory_malformed]",
    );
}

#[tokio::test]
async fn forget_removes_a_record_while_a_run_holds_the_run_lock() {
    let (_dir, ws) = seeded().await;
    // The run lock held by this process, as a running `troupe run` would hold it.
    let _run = troupe::store::lock::lock_exclusive(&Layout::new(&ws).run_lock()).unwrap();
    let ran = troupe_within(&ws, &["memory", "forget", "use-tabs", "--json"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&ran.stdout).unwrap(),
        json!({"forgotten": true})
    );
    assert!(!ws.join(".troupe/memory/use-tabs.md").exists());
    let again = troupe_within(&ws, &["memory", "forget", "use-tabs"]);
    assert_eq!(
        again.stdout,
        "no memory record named use-tabs; nothing to forget\n"
    );
    let text = troupe_within(&ws, &["memory", "forget", "deploy-freeze"]);
    assert_eq!(text.stdout, "forgot deploy-freeze\n");
    assert_eq!(
        json(&troupe_in(&ws, &["memory", "--json"]))["records"],
        json!([])
    );
}
