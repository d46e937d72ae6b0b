//! `troupe demo`, and the documented `--json` shapes of `status`, `requests` and `mailbox` on the
//! workspace it leaves.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::ManualClock;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore};
use troupe::wire::{AgentName, Content, RequestKind};

use super::support::{demo_workspace, json as stdout_json, keys, troupe_in};

/// The index of the first line containing every needle.
fn line_of(text: &str, needles: &[&str]) -> usize {
    text.lines()
        .position(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in\n{text}"))
}

#[test]
fn demo_prints_the_timeline_and_leaves_notes() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(dir.path()).unwrap().join("fresh");
    let ran = super::support::troupe(
        dir.path(),
        &["demo", "--workspace", workspace.to_str().unwrap()],
    );
    assert_eq!(ran.code, 0, "{ran:#?}");
    let out = &ran.stdout;
    // In order: the plan, the write denied by the gate, the approval taking effect, the write,
    // the shutdown (the writer is shut down before its answer exists). (The lead may send its approval before the writer tries to write; the gate
    // still denies, because the approval takes effect only when the writer consumes it.)
    let plan = line_of(out, &["writer → lead [plan_approval_request]"]);
    let denied = line_of(
        out,
        &[
            "writer",
            "tool write_file",
            "DENIED (plan_gate)",
            "is pending",
        ],
    );
    let approval = line_of(out, &["lead → writer [plan_approval_response approved]"]);
    let resolved = line_of(out, &["plan_approval request", "is now approved"]);
    let wrote = line_of(out, &["writer", "tool write_file", "ok in", "Wrote"]);
    let shutdown = line_of(out, &["writer → lead [shutdown_response approved]"]);
    let stopped = line_of(out, &["writer ", " is shutdown"]);
    assert!(
        plan < denied && denied < resolved && approval < resolved,
        "{out}"
    );
    // SPEC §6: the teammate marks itself shut down, then answers.
    assert!(
        resolved < wrote && wrote < stopped && stopped < shutdown,
        "{out}"
    );
    assert!(
        out.contains("lead's answer: writer wrote NOTES.md"),
        "{out}"
    );
    let notes = std::fs::read_to_string(workspace.join("NOTES.md")).unwrap();
    assert!(notes.starts_with("# Notes"), "{notes}");
    assert!(
        !notes.contains("before approval"),
        "the denied write never happened"
    );
}

#[test]
fn the_demo_records_tokens_at_its_models_price() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    let ran = super::support::troupe(
        dir.path(),
        &["demo", "--workspace", workspace.to_str().unwrap()],
    );
    assert_eq!(ran.code, 0, "{ran:#?}");
    assert!(!ran.stdout.contains("no price"), "{ran:#?}");
    assert!(!ran.stderr.contains("no price"), "{ran:#?}");
    // Every call's tokens, estimated from sizes (a scripted model counts none) and priced.
    let by_model = stdout_json(&troupe_in(
        &workspace,
        &["usage", "--by", "model", "--json"],
    ));
    let groups = by_model["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{by_model:#}");
    assert_eq!(groups[0]["key"], "troupe-demo");
    let total = &by_model["total"];
    let tokens = total["total_tokens"].as_u64().unwrap();
    assert!(total["prompt_tokens"].as_u64().unwrap() > 0, "{total:#}");
    assert!(
        total["completion_tokens"].as_u64().unwrap() > 0,
        "{total:#}"
    );
    assert_eq!(
        total["estimated_tokens"].as_u64(),
        Some(tokens),
        "{total:#}"
    );
    assert!(total["cost_usd"].as_f64().unwrap() > 0.0, "{total:#}");
    assert_eq!(total["unpriced_models"], json!([]), "{total:#}");
    // Per agent: both agents called the model.
    let by_agent = stdout_json(&troupe_in(&workspace, &["usage", "--json"]));
    let agents: Vec<&str> = by_agent["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["key"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["lead", "writer"]);
    let table = troupe_in(&workspace, &["usage"]);
    assert_eq!(table.code, 0, "{table:#?}");
    assert!(!table.stdout.contains("no price"), "{table:#?}");
    assert!(table.stdout.contains('$'), "{table:#?}");
}

#[test]
fn status_json_after_the_demo() {
    let (_dir, ws) = demo_workspace();
    let status = stdout_json(&troupe_in(&ws, &["status", "--json"]));
    assert_eq!(
        keys(&status),
        [
            "jobs",
            "mailboxes",
            "pending_requests",
            "run",
            "state_bytes",
            "tasks",
            "teammates",
            "usage",
            "workspace"
        ]
    );
    // The lead's background check of the note, finished before the run ended.
    let jobs = status["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(jobs[0]["command"], "wc -l NOTES.md");
    assert_eq!(jobs[0]["status"], "completed");
    assert_eq!(jobs[0]["exit_code"], 0);
    assert_eq!(status["workspace"], ws.to_str().unwrap());
    assert_eq!(status["run"], json!({"active": false, "holder": null}));
    let teammates = status["teammates"].as_array().unwrap();
    assert_eq!(teammates.len(), 1);
    assert_eq!(
        keys(&teammates[0]),
        [
            "detail",
            "earlier_plan",
            "name",
            "plan_required",
            "role",
            "status",
            "updated_at_utc"
        ]
    );
    assert_eq!(teammates[0]["name"], "writer");
    assert_eq!(teammates[0]["status"], "shutdown");
    assert_eq!(teammates[0]["detail"], Value::Null);
    assert_eq!(
        status["mailboxes"],
        json!([
            {"agent": "lead", "ready": 0, "processing": 0, "done": 4, "quarantine": 0},
            {"agent": "writer", "ready": 0, "processing": 0, "done": 3, "quarantine": 0},
        ])
    );
    assert_eq!(status["pending_requests"], json!([]));
}

#[test]
fn requests_json_after_the_demo() {
    let (_dir, ws) = demo_workspace();
    let all = stdout_json(&troupe_in(&ws, &["requests", "--json"]));
    assert_eq!(keys(&all), ["requests"]);
    let requests = all["requests"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str, &str)> = requests
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap(),
                r["sender"].as_str().unwrap(),
                r["target"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("plan_approval", "writer", "lead", "approved"),
            ("shutdown", "lead", "writer", "approved")
        ]
    );
    for r in requests {
        assert_eq!(
            keys(r),
            [
                "content",
                "created_at_utc",
                "expires_at_utc",
                "id",
                "kind",
                "resolution",
                "sender",
                "status",
                "target"
            ]
        );
        assert_eq!(
            keys(&r["resolution"]),
            ["approved", "content", "message_id", "resolved_at_utc"]
        );
        assert_eq!(r["resolution"]["approved"], true);
    }
    for status in ["approved", "pending", "rejected", "expired"] {
        let filtered = stdout_json(&troupe_in(&ws, &["requests", "--json", "--status", status]));
        let expected = if status == "approved" { 2 } else { 0 };
        assert_eq!(
            filtered["requests"].as_array().unwrap().len(),
            expected,
            "{status}"
        );
    }
}

#[tokio::test]
async fn an_expired_pending_request_shows_as_expired() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    // Created long ago (a clock in 2020): its window closed long before the CLI's now.
    let store = JsonProtocolStore::open(
        &Layout::new(&ws),
        Arc::new(ManualClock::new(
            troupe::wire::UtcTime::parse("2020-01-01T00:00:00.000Z").unwrap(),
        )),
        Arc::new(SequentialIds::new()),
    )
    .unwrap();
    let request = store
        .create(NewRequest {
            kind: RequestKind::PlanApproval,
            sender: AgentName::parse("writer").unwrap(),
            target: AgentName::lead(),
            content: Content::parse("an old plan").unwrap(),
            ttl: Duration::from_secs(300),
        })
        .await
        .unwrap();
    let expired = stdout_json(&troupe_in(
        &ws,
        &["requests", "--json", "--status", "expired"],
    ));
    let listed = expired["requests"].as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], request.id().to_string());
    assert_eq!(listed[0]["status"], "expired");
    assert_eq!(listed[0]["resolution"], Value::Null);
    let pending = stdout_json(&troupe_in(
        &ws,
        &["requests", "--json", "--status", "pending"],
    ));
    assert_eq!(pending["requests"], json!([]));
    let text = troupe_in(&ws, &["requests"]);
    assert!(text.stdout.contains("expired"), "{text:#?}");
    // It was not rewritten: expiry is a view.
    let state: Value =
        serde_json::from_slice(&std::fs::read(Layout::new(&ws).protocol_state()).unwrap()).unwrap();
    assert_eq!(state["requests"][0]["status"], "pending");
}

#[test]
fn mailbox_json_after_the_demo() {
    let (_dir, ws) = demo_workspace();
    let lead = stdout_json(&troupe_in(&ws, &["mailbox", "lead", "--json"]));
    assert_eq!(keys(&lead), ["agent", "messages"]);
    assert_eq!(lead["agent"], "lead");
    let messages = lead["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    let mut kinds: Vec<&str> = Vec::new();
    for entry in messages {
        assert_eq!(keys(entry), ["file_name", "message", "reason", "state"]);
        assert_eq!(entry["state"], "done");
        assert_eq!(entry["reason"], Value::Null);
        let message = &entry["message"];
        assert_eq!(
            entry["file_name"],
            format!("{}.json", message["id"].as_str().unwrap())
        );
        assert_eq!(message["recipient"], "lead");
        assert_eq!(message["sender"], "writer");
        let expected_keys: &[&str] = if message.get("request_id").is_some() {
            &[
                "approved",
                "content",
                "created_at_utc",
                "id",
                "kind",
                "recipient",
                "request_id",
                "sender",
            ]
        } else {
            &[
                "content",
                "created_at_utc",
                "id",
                "kind",
                "recipient",
                "sender",
            ]
        };
        assert_eq!(keys(message), expected_keys);
        kinds.push(message["kind"].as_str().unwrap());
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "plan_approval_request",
            "result",
            "result",
            "shutdown_response"
        ]
    );
    let ready = stdout_json(&troupe_in(
        &ws,
        &["mailbox", "writer", "--state", "ready", "--json"],
    ));
    assert_eq!(ready, json!({"agent": "writer", "messages": []}));
}

#[test]
fn the_demo_refuses_a_workspace_that_already_holds_troupe_state() {
    let (_dir, ws) = demo_workspace();
    let again = super::support::troupe(&ws, &["demo", "--workspace", ws.to_str().unwrap()]);
    super::support::assert_fails(&again, 2, "already holds troupe state");
}
