//! The dispatch path: parsing, lookup, schema validation, post hooks, cancellation.

use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::clock::ManualClock;
use troupe::permissions::hooks::ToolResultView;
use troupe::permissions::{
    AutoApproval, Hooks, MemoryAuditSink, PermissionPolicy, PermissionRequest, PostToolUse,
};
use troupe::tools::testing::CountingTool;
use troupe::tools::{Dispatcher, Effect, ToolRegistry};

use super::lead_ctx;

fn counting_dispatcher(hooks: Hooks) -> (Dispatcher, CountingTool, Arc<MemoryAuditSink>) {
    let tool = CountingTool::new("count", Effect::Write);
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(tool.clone())).unwrap();
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), audit.clone());
    (
        Dispatcher::new(Arc::new(registry), policy, hooks),
        tool,
        audit,
    )
}

#[tokio::test]
async fn invalid_json_arguments_are_invalid_arguments_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, tool, audit) = counting_dispatcher(Hooks::new());
    let outcome = dispatcher
        .dispatch(&lead_ctx(dir.path()), "count", "{\"text\": ")
        .await;
    assert!(outcome.is_error);
    assert!(
        outcome
            .content
            .starts_with("Error [invalid_arguments]: the arguments of count are not valid JSON"),
        "{}",
        outcome.content
    );
    assert_eq!(outcome.decision, None);
    assert_eq!(tool.calls(), 0);
    assert!(audit.records().is_empty());
}

#[tokio::test]
async fn arguments_with_a_duplicate_key_are_refused_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, tool, audit) = counting_dispatcher(Hooks::new());
    let outcome = dispatcher
        .dispatch(
            &lead_ctx(dir.path()),
            "count",
            r#"{"text": "shown to the approver", "text": "run by the handler"}"#,
        )
        .await;
    assert!(outcome.is_error);
    assert!(
        outcome
            .content
            .starts_with("Error [invalid_arguments]: the arguments of count are not valid JSON")
            && outcome.content.contains("duplicate key \"text\""),
        "{}",
        outcome.content
    );
    assert_eq!(tool.calls(), 0);
    assert!(audit.records().is_empty());
}

#[tokio::test]
async fn schema_violations_name_the_path_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, tool, _) = counting_dispatcher(Hooks::new());
    let ctx = lead_ctx(dir.path());
    let cases = [
        (
            json!({"text": 5}).to_string(),
            "Error [invalid_arguments]: count: $.text: expected a string, got an integer",
        ),
        (
            json!({"other": "x"}).to_string(),
            "Error [invalid_arguments]: count: $: unknown property \"other\" (allowed: text)",
        ),
        (
            "[1]".to_owned(),
            "Error [invalid_arguments]: count: $: expected an object, got an array",
        ),
    ];
    for (raw, expected) in cases {
        let outcome = dispatcher.dispatch(&ctx, "count", &raw).await;
        assert_eq!(outcome.content, expected);
        assert!(outcome.is_error);
    }
    assert_eq!(tool.calls(), 0);
}

#[tokio::test]
async fn base_tool_schemas_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "read_file",
            json!({"path": "a", "limit": 0}),
            "$.limit: must be > 0",
        ),
        (
            "read_file",
            json!({"path": "a", "limit": "3"}),
            "$.limit: expected integer",
        ),
        (
            "edit_file",
            json!({"path": "a", "old_text": "", "new_text": "b"}),
            "$.old_text: must be at least 1 characters long",
        ),
        (
            "write_file",
            json!({"path": "a"}),
            "$: missing required property \"content\"",
        ),
        (
            "shell",
            json!({"command": "true", "run_in_background": "yes"}),
            "$.run_in_background: expected a boolean",
        ),
        (
            "glob",
            json!({"pattern": "*", "path": "x"}),
            "$: unknown property \"path\"",
        ),
    ];
    for (tool, args, expected) in cases {
        let (content, is_error) = super::call(dir.path(), tool, args).await;
        assert!(is_error, "{tool}: {content}");
        assert!(
            content.starts_with(&format!("Error [invalid_arguments]: {tool}: {expected}")),
            "{tool}: {content}"
        );
    }
}

#[tokio::test]
async fn unknown_tools_are_reported_with_the_available_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, _, audit) = counting_dispatcher(Hooks::new());
    let outcome = dispatcher
        .dispatch(&lead_ctx(dir.path()), "nope", "{}")
        .await;
    assert_eq!(
        outcome.content,
        "Error [unknown_tool]: there is no tool named \"nope\"; available tools: count"
    );
    assert!(audit.records().is_empty());
}

#[tokio::test]
async fn blank_arguments_mean_an_empty_object() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, tool, _) = counting_dispatcher(Hooks::new());
    let outcome = dispatcher
        .dispatch(&lead_ctx(dir.path()), "count", "  ")
        .await;
    assert_eq!(outcome.content, "call 1");
    assert!(!outcome.is_error);
    assert_eq!(tool.calls(), 1);
}

#[derive(Default)]
struct RecordingPost {
    seen: Mutex<Vec<(String, String, bool)>>,
}

#[async_trait::async_trait]
impl PostToolUse for RecordingPost {
    async fn after(
        &self,
        call: &PermissionRequest<'_>,
        result: ToolResultView<'_>,
    ) -> Option<String> {
        self.seen.lock().unwrap().push((
            call.tool.to_owned(),
            result.content.to_owned(),
            result.is_error,
        ));
        None
    }
}

#[tokio::test]
async fn post_hooks_observe_handler_results_only() {
    let dir = tempfile::tempdir().unwrap();
    let post = Arc::new(RecordingPost::default());
    let (dispatcher, _, _) = counting_dispatcher(Hooks::new().with_post(post.clone()));
    let ctx = lead_ctx(dir.path());
    let ok = dispatcher.dispatch(&ctx, "count", "{}").await;
    dispatcher.dispatch(&ctx, "count", "not json").await;
    assert_eq!(ok.content, "call 1");
    assert_eq!(
        *post.seen.lock().unwrap(),
        vec![("count".to_owned(), "call 1".to_owned(), false)]
    );
}

#[tokio::test]
async fn a_cancelled_context_never_reaches_the_handler() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, tool, _) = counting_dispatcher(Hooks::new());
    let ctx = lead_ctx(dir.path());
    ctx.cancel.cancel();
    let outcome = dispatcher.dispatch(&ctx, "count", "{}").await;
    assert!(
        outcome.content.starts_with("Error [cancelled]:"),
        "{}",
        outcome.content
    );
    assert_eq!(tool.calls(), 0);
}
