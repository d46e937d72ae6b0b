//! The five task board tools through the dispatcher: results, permissions, dependencies and
//! every refusal with its stable code.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::ManualClock;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::permissions::{Decision, DenyApproval};
use troupe::store::tasks::{FileTaskBoard, HeldClaims, TaskBoard, TaskStatus};
use troupe::tools::tasks::task_tools;
use troupe::tools::ToolContext;

use super::{assert_code, assert_ok, ctx, Harness};

const T1: &str = "00000000-0000-4000-8000-000000000001";
const T2: &str = "00000000-0000-4000-8000-000000000002";
const T3: &str = "00000000-0000-4000-8000-000000000003";

struct Fixture {
    dir: tempfile::TempDir,
    board: Arc<FileTaskBoard>,
    clock: ManualClock,
    h: Harness,
}

impl Fixture {
    fn new() -> Self {
        Self::with_approval(Arc::new(troupe::permissions::AutoApproval))
    }

    fn with_approval(approval: Arc<dyn troupe::permissions::ApprovalProvider>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::at_spec_epoch();
        let board = Arc::new(FileTaskBoard::new(
            &Layout::new(dir.path()),
            Arc::new(clock.clone()),
            Arc::new(SequentialIds::new()),
        ));
        let h = Harness::new(
            task_tools(Arc::new(HeldClaims::new(board.clone()))),
            approval,
        );
        Self {
            dir,
            board,
            clock,
            h,
        }
    }

    /// A board whose tools named in `denied` are refused by a deny rule.
    fn denying(denied: &[&str]) -> Self {
        let mut f = Self::new();
        f.h = Harness::denying(
            task_tools(Arc::new(HeldClaims::new(f.board.clone()))),
            denied,
        );
        f
    }

    fn ctx(&self, agent: &str) -> ToolContext {
        ctx(agent, self.dir.path())
    }

    /// Calls a tool as `agent` and parses its JSON result; panics on a tool error.
    async fn ok(&self, agent: &str, tool: &str, args: Value) -> Value {
        let outcome = self.h.call(&self.ctx(agent), tool, args).await;
        assert!(!outcome.is_error, "{tool}: {}", outcome.content);
        serde_json::from_str(&outcome.content).unwrap()
    }

    async fn err(&self, agent: &str, tool: &str, args: Value) -> String {
        let outcome = self.h.call(&self.ctx(agent), tool, args).await;
        assert!(outcome.is_error, "{tool} succeeded: {}", outcome.content);
        outcome.content
    }

    async fn create(&self, subject: &str, blocked_by: &[&str]) -> String {
        let v = self
            .ok(
                "lead",
                "create_task",
                json!({"subject": subject, "blocked_by": blocked_by}),
            )
            .await;
        v["task"]["id"].as_str().unwrap().to_owned()
    }
}

#[tokio::test]
async fn each_tool_runs_through_the_policy_and_the_audit() {
    let f = Fixture::new();
    let lead = f.ctx("lead");

    let outcome =
        f.h.call(
            &lead,
            "create_task",
            json!({"subject": "  Write the parser ", "description": "strict, with tests"}),
        )
        .await;
    assert_ok(&f.h, "create_task", &outcome, Decision::Allow);
    let created: Value = serde_json::from_str(&outcome.content).unwrap();
    assert_eq!(
        created,
        json!({"task": {
            "id": T1, "subject": "Write the parser", "description": "strict, with tests",
            "blocked_by": [], "status": "pending", "owner": null,
            "created_at_utc": "2026-07-30T08:00:00.000Z",
            "updated_at_utc": "2026-07-30T08:00:00.000Z",
            "open_blockers": []
        }})
    );

    let outcome = f.h.call(&lead, "list_tasks", json!({})).await;
    assert_ok(&f.h, "list_tasks", &outcome, Decision::Allow);
    let listed: Value = serde_json::from_str(&outcome.content).unwrap();
    assert_eq!(listed, json!({"tasks": [created["task"].clone()]}));

    let outcome = f.h.call(&lead, "get_task", json!({"task_id": T1})).await;
    assert_ok(&f.h, "get_task", &outcome, Decision::Allow);
    assert_eq!(
        serde_json::from_str::<Value>(&outcome.content).unwrap(),
        created
    );

    f.clock.advance_millis(1_000);
    let outcome = f.h.call(&lead, "claim_task", json!({"task_id": T1})).await;
    assert_ok(&f.h, "claim_task", &outcome, Decision::Allow);
    let claimed: Value = serde_json::from_str(&outcome.content).unwrap();
    assert_eq!(claimed["task"]["status"], "in_progress");
    assert_eq!(claimed["task"]["owner"], "lead");
    assert_eq!(
        claimed["task"]["updated_at_utc"],
        "2026-07-30T08:00:01.000Z"
    );

    f.clock.advance_millis(1_000);
    let outcome =
        f.h.call(&lead, "complete_task", json!({"task_id": T1}))
            .await;
    assert_ok(&f.h, "complete_task", &outcome, Decision::Allow);
    let done: Value = serde_json::from_str(&outcome.content).unwrap();
    assert_eq!(done["task"]["status"], "completed");
    assert_eq!(done["task"]["owner"], "lead");
    assert_eq!(done["task"]["created_at_utc"], "2026-07-30T08:00:00.000Z");
    assert_eq!(done["task"]["updated_at_utc"], "2026-07-30T08:00:02.000Z");

    assert_eq!(f.h.audit.records().len(), 5);
}

#[tokio::test]
async fn board_writes_do_not_ask_even_a_denying_provider() {
    // Bookkeeping (SPEC §7): the board is troupe's own state, so the rules allow its writes
    // and the approval provider is never consulted.
    let f = Fixture::with_approval(Arc::new(DenyApproval));
    let id = f.create("allowed", &[]).await;
    f.ok("lead", "claim_task", json!({"task_id": id})).await;
    f.ok("lead", "complete_task", json!({"task_id": id})).await;
    for record in f.h.audit.records() {
        assert_eq!(
            (record.decision, record.rule.as_str()),
            ("allow", "default"),
            "{record:?}"
        );
    }
}

#[tokio::test]
async fn a_denied_write_never_reaches_the_board() {
    let f = Fixture::denying(&["create_task", "claim_task"]);
    let content = f
        .err("lead", "create_task", json!({"subject": "never"}))
        .await;
    assert!(
        content.starts_with("Error [permission_denied]"),
        "{content}"
    );
    assert_eq!(f.h.last_audit("create_task").decision, "deny");
    assert_eq!(f.board.list().await.unwrap(), vec![]);
    assert!(
        !f.dir.path().join(".troupe").exists(),
        "nothing was written"
    );

    // A task made behind the tools' back cannot be claimed through a denied call either.
    let task = f
        .board
        .create(troupe::store::tasks::NewTask {
            subject: "made directly".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let content = f
        .err(
            "lead",
            "claim_task",
            json!({"task_id": task.id.to_string()}),
        )
        .await;
    assert!(
        content.starts_with("Error [permission_denied]"),
        "{content}"
    );
    assert_eq!(
        f.board.get(&task.id).await.unwrap().status,
        TaskStatus::Pending
    );
    // Reads are still allowed.
    let listed = f.ok("lead", "list_tasks", json!({})).await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_blocked_task_is_claimable_once_its_blockers_are_completed() {
    let f = Fixture::new();
    let a = f.create("a", &[]).await;
    let b = f.create("b", &[]).await;
    let c = f.create("c", &[&a, &b]).await;
    assert_eq!(c, T3);

    let content = f.err("alice", "claim_task", json!({"task_id": c})).await;
    assert_eq!(
        content,
        format!(
            "Error [task_blocked]: task {c} is blocked by tasks that are not completed yet: {a}, {b}"
        )
    );
    let listed = f.ok("lead", "list_tasks", json!({})).await;
    assert_eq!(listed["tasks"][2]["open_blockers"], json!([a, b]));

    f.ok("lead", "claim_task", json!({"task_id": a})).await;
    f.ok("lead", "complete_task", json!({"task_id": a})).await;
    let content = f.err("alice", "claim_task", json!({"task_id": c})).await;
    assert_eq!(
        content,
        format!(
            "Error [task_blocked]: task {c} is blocked by tasks that are not completed yet: {b}"
        )
    );
    let got = f.ok("lead", "get_task", json!({"task_id": c})).await;
    assert_eq!(got["task"]["open_blockers"], json!([b]));

    f.ok("bob", "claim_task", json!({"task_id": b})).await;
    f.ok("bob", "complete_task", json!({"task_id": b})).await;
    let claimed = f.ok("alice", "claim_task", json!({"task_id": c})).await;
    assert_eq!(claimed["task"]["owner"], "alice");
    assert_eq!(claimed["task"]["open_blockers"], json!([]));
}

#[tokio::test]
async fn unknown_blockers_and_self_reference_are_refused() {
    let f = Fixture::new();
    let a = f.create("a", &[]).await;
    assert_eq!(a, T1);
    let unknown = "00000000-0000-4000-8000-00000000ffff";
    let content = f
        .err(
            "lead",
            "create_task",
            json!({"subject": "x", "blocked_by": [a, unknown]}),
        )
        .await;
    assert_eq!(
        content,
        format!("Error [task_not_found]: blocked_by names task {unknown}, which does not exist")
    );
    // The next id is T3 (T2 went to the refused task); naming it is naming the task itself.
    let content = f
        .err(
            "lead",
            "create_task",
            json!({"subject": "x", "blocked_by": [T3]}),
        )
        .await;
    assert_eq!(
        content,
        format!("Error [invalid_arguments]: task {T3} cannot be blocked by itself")
    );
    for bad in [
        "not-a-uuid-but-36-characters-long!!!",
        "00000000-0000-4000-8000-00000000000A",
        "00000000-0000-1000-8000-000000000001",
    ] {
        let content = f
            .err(
                "lead",
                "create_task",
                json!({"subject": "x", "blocked_by": [bad]}),
            )
            .await;
        assert!(
            content.starts_with("Error [invalid_arguments]"),
            "{content}"
        );
    }
    let content = f
        .err("lead", "create_task", json!({"subject": "   "}))
        .await;
    assert_eq!(content, "Error [invalid_arguments]: the subject is blank");
    assert_eq!(
        f.board.list().await.unwrap().len(),
        1,
        "only the first task exists"
    );
}

#[tokio::test]
async fn ownership_and_state_refusals() {
    let f = Fixture::new();
    let a = f.create("a", &[]).await;
    let content = f.err("lead", "complete_task", json!({"task_id": a})).await;
    assert_eq!(
        content,
        format!("Error [task_state]: task {a} is pending: it is not claimed; claim it before completing it")
    );
    f.ok("alice", "claim_task", json!({"task_id": a})).await;
    let content = f.err("bob", "claim_task", json!({"task_id": a})).await;
    assert_eq!(
        content,
        format!("Error [task_claimed]: task {a} is already claimed by alice")
    );
    let content = f.err("alice", "claim_task", json!({"task_id": a})).await;
    assert_eq!(
        content,
        format!(
            "Error [task_claimed]: task {a} is already claimed by alice (you): it is yours already"
        )
    );
    let content = f.err("bob", "complete_task", json!({"task_id": a})).await;
    assert_eq!(
        content,
        format!("Error [task_claimed]: task {a} is already claimed by alice; only its owner can complete it")
    );
    f.ok("alice", "complete_task", json!({"task_id": a})).await;
    let content = f.err("alice", "complete_task", json!({"task_id": a})).await;
    assert_eq!(
        content,
        format!("Error [task_state]: task {a} is completed: it is completed already")
    );
    let content = f.err("bob", "claim_task", json!({"task_id": a})).await;
    assert_eq!(
        content,
        format!("Error [task_state]: task {a} is completed: it was completed by alice and cannot be claimed")
    );
    for tool in ["get_task", "claim_task", "complete_task"] {
        let content = f.err("lead", tool, json!({"task_id": T2})).await;
        assert_eq!(
            content,
            format!("Error [task_not_found]: there is no task {T2}")
        );
    }
}

#[tokio::test]
async fn schemas_refuse_bad_arguments_before_the_board() {
    let f = Fixture::new();
    for (tool, args) in [
        ("create_task", json!({})),
        ("create_task", json!({"subject": ""})),
        ("create_task", json!({"subject": "x", "owner": "lead"})),
        ("create_task", json!({"subject": "x", "blocked_by": "x"})),
        ("get_task", json!({})),
        ("claim_task", json!({"task_id": "short"})),
        ("list_tasks", json!({"all": true})),
    ] {
        let outcome = f.h.call(&f.ctx("lead"), tool, args).await;
        assert_code(&outcome, "invalid_arguments");
    }
    assert!(f.h.audit.records().is_empty(), "nothing got to the policy");
    assert!(
        !f.dir.path().join(".troupe").exists(),
        "nothing was written"
    );
}
