//! `todo_write`: replace-and-render, per-agent lists, the limits, and a deny never writing.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::permissions::{Decision, DenyApproval};
use troupe::tools::todo::{parse_todos, TodoItem, TodoStatus, TodoTool, MAX_TODOS};
use troupe::wire::AgentName;

use super::{assert_code, assert_ok, ctx, Harness};

fn harness(todo: &TodoTool) -> Harness {
    Harness::auto(vec![Arc::new(todo.clone())])
}

fn items(n: usize) -> Value {
    let todos: Vec<Value> = (0..n)
        .map(|i| json!({"content": format!("step {i}"), "status": "pending"}))
        .collect();
    json!({ "todos": todos })
}

#[tokio::test]
async fn writes_replace_the_list_and_return_it_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let todo = TodoTool::new();
    let h = harness(&todo);
    let lead = ctx("lead", dir.path());
    let outcome = h
        .call(
            &lead,
            "todo_write",
            json!({"todos": [
                {"content": "read the spec", "status": "completed"},
                {"content": "write the tests", "status": "in_progress"},
                {"content": "write the code", "status": "pending"}
            ]}),
        )
        .await;
    assert_ok(&h, "todo_write", &outcome, Decision::Allow);
    assert_eq!(
        outcome.content,
        "Todo list (1/3 completed):\n[x] read the spec\n[>] write the tests\n[ ] write the code"
    );
    let outcome = h
        .call(
            &lead,
            "todo_write",
            json!({"todos": [{"content": "ship", "status": "pending"}]}),
        )
        .await;
    assert_eq!(outcome.content, "Todo list (0/1 completed):\n[ ] ship");
    assert_eq!(
        todo.list(&AgentName::lead()),
        vec![TodoItem {
            content: "ship".into(),
            status: TodoStatus::Pending
        }]
    );
    let outcome = h.call(&lead, "todo_write", json!({"todos": []})).await;
    assert_eq!(outcome.content, "Todo list is empty.");
    assert_eq!(todo.list(&AgentName::lead()), vec![]);
}

#[tokio::test]
async fn lists_are_kept_per_agent() {
    let dir = tempfile::tempdir().unwrap();
    let todo = TodoTool::new();
    let h = harness(&todo);
    let write = |agent: &'static str, content: &'static str| {
        let h = &h;
        let ctx = ctx(agent, dir.path());
        async move {
            h.call(
                &ctx,
                "todo_write",
                json!({"todos": [{"content": content, "status": "pending"}]}),
            )
            .await
        }
    };
    assert!(!write("lead", "lead's step").await.is_error);
    assert!(!write("alice", "alice's step").await.is_error);
    assert_eq!(todo.list(&AgentName::lead())[0].content, "lead's step");
    let alice = AgentName::parse("alice").unwrap();
    assert_eq!(todo.list(&alice)[0].content, "alice's step");
    assert_eq!(todo.list(&AgentName::parse("bob").unwrap()), vec![]);
}

#[tokio::test]
async fn fifty_items_pass_and_fifty_one_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let todo = TodoTool::new();
    let h = harness(&todo);
    let lead = ctx("lead", dir.path());
    let outcome = h.call(&lead, "todo_write", items(MAX_TODOS)).await;
    assert!(!outcome.is_error, "{}", outcome.content);
    assert_eq!(todo.list(&AgentName::lead()).len(), 50);

    let outcome = h.call(&lead, "todo_write", items(MAX_TODOS + 1)).await;
    assert_code(&outcome, "invalid_arguments");
    assert_eq!(
        todo.list(&AgentName::lead()).len(),
        50,
        "the old list stays"
    );
    // The handler checks the limit too, whatever the schema in front of it says.
    let err = parse_todos(&items(MAX_TODOS + 1)).unwrap_err();
    assert_eq!(
        err.to_tool_text(),
        "Error [invalid_arguments]: a todo list holds at most 50 items, got 51"
    );
}

#[tokio::test]
async fn two_items_in_progress_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let todo = TodoTool::new();
    let h = harness(&todo);
    let outcome = h
        .call(
            &ctx("lead", dir.path()),
            "todo_write",
            json!({"todos": [
                {"content": "a", "status": "in_progress"},
                {"content": "b", "status": "in_progress"}
            ]}),
        )
        .await;
    assert_eq!(
        outcome.content,
        "Error [invalid_arguments]: 2 items are in_progress; at most one item may be in_progress at a time"
    );
    assert_eq!(todo.list(&AgentName::lead()), vec![]);
}

#[tokio::test]
async fn bad_items_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let todo = TodoTool::new();
    let h = harness(&todo);
    let lead = ctx("lead", dir.path());
    for todos in [
        json!([{"content": "   ", "status": "pending"}]),
        json!([{"content": "", "status": "pending"}]),
        json!([{"content": "x", "status": "done"}]),
        json!([{"content": "x"}]),
        json!([{"content": "x", "status": "pending", "extra": 1}]),
    ] {
        let outcome = h.call(&lead, "todo_write", json!({ "todos": todos })).await;
        assert_code(&outcome, "invalid_arguments");
    }
    assert_eq!(todo.list(&AgentName::lead()), vec![]);
}

#[tokio::test]
async fn todo_write_does_not_ask_even_a_denying_provider() {
    let dir = tempfile::tempdir().unwrap();
    let todo = TodoTool::new();
    let h = Harness::new(vec![Arc::new(todo.clone())], Arc::new(DenyApproval));
    let outcome = h
        .call(&ctx("lead", dir.path()), "todo_write", items(1))
        .await;
    assert_ok(&h, "todo_write", &outcome, Decision::Allow);
    assert_eq!(h.last_audit("todo_write").rule, "default");
    assert_eq!(todo.list(&AgentName::lead()).len(), 1);
}

#[tokio::test]
async fn a_denied_write_never_changes_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let todo = TodoTool::new();
    let h = Harness::denying(vec![Arc::new(todo.clone())], &["todo_write"]);
    let outcome = h
        .call(&ctx("lead", dir.path()), "todo_write", items(1))
        .await;
    assert_code(&outcome, "permission_denied");
    assert_eq!(h.last_audit("todo_write").decision, "deny");
    assert_eq!(todo.list(&AgentName::lead()), vec![]);
}
