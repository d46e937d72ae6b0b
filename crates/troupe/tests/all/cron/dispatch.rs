//! `schedule_cron` through a real `Dispatcher`: schema, permission policy, audit, handler.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::ManualClock;
use troupe::cron::{CronRuntime, ScheduleCronTool};
use troupe::permissions::rules::FixedRule;
use troupe::permissions::{
    ApprovalProvider, AutoApproval, Decision, DenyApproval, MemoryAuditSink, PermissionPolicy,
    PermissionRule,
};
use troupe::tools::{Dispatcher, Effect, ToolContext, ToolHandler, ToolRegistry};
use troupe::wire::AgentName;

use super::{at, manual_runtime};

fn dispatcher(
    runtime: &CronRuntime,
    approval: Arc<dyn ApprovalProvider>,
) -> (Dispatcher, Arc<MemoryAuditSink>) {
    dispatcher_with_rules(runtime, approval, Vec::new())
}

/// The default policy plus `extra` rules.
fn dispatcher_with_rules(
    runtime: &CronRuntime,
    approval: Arc<dyn ApprovalProvider>,
    extra: Vec<Arc<dyn PermissionRule>>,
) -> (Dispatcher, Arc<MemoryAuditSink>) {
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(ScheduleCronTool::new(runtime.clone())))
        .unwrap();
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let policy = PermissionPolicy::default_policy(approval, audit.clone()).with_rules(extra);
    (
        Dispatcher::new(Arc::new(registry), policy, Default::default()),
        audit,
    )
}

fn args(cron: &str, timezone: &str) -> Value {
    json!({"cron": cron, "prompt": "check the build", "timezone": timezone,
           "recurring": true, "durable": true})
}

#[tokio::test]
async fn the_tool_is_a_write_tool_named_schedule_cron() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let definition = ScheduleCronTool::new(runtime).definition();
    assert_eq!(definition.name, "schedule_cron");
    assert_eq!(definition.effect, Effect::Write);
    assert_eq!(
        definition.parameters["required"],
        json!(["cron", "prompt", "timezone", "recurring", "durable"])
    );
}

#[tokio::test]
async fn an_approved_call_schedules_the_job_and_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let (dispatcher, audit) = dispatcher(&runtime, Arc::new(AutoApproval));
    let ctx = ToolContext::new(AgentName::lead(), dir.path());
    let outcome = dispatcher
        .dispatch(
            &ctx,
            "schedule_cron",
            &args("30 2 * * *", "Europe/Berlin").to_string(),
        )
        .await;
    assert!(!outcome.is_error, "{}", outcome.content);
    let result: Value = serde_json::from_str(&outcome.content).unwrap();
    assert_eq!(
        result,
        json!({"job_id": "00000000-0000-4000-8000-000000000001",
               "next_fire_utc": "2026-07-31T00:30:00.000Z",
               "next_fire_local": "2026-07-31T02:30:00.000+02:00",
               "timezone": "Europe/Berlin", "recurring": true, "durable": true})
    );
    let jobs = runtime.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].next_fire_utc, at("2026-07-31T00:30:00.000Z"));
    assert!(dir.path().join(".troupe/cron.json").is_file());
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].tool, "schedule_cron");
    assert_eq!(records[0].decision, "allow");
    assert_eq!(records[0].agent, AgentName::lead());
}

#[tokio::test]
async fn scheduling_does_not_ask_even_a_denying_provider() {
    // Bookkeeping (SPEC §7): cron jobs are troupe's own state; the provider is never asked.
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let (dispatcher, audit) = dispatcher(&runtime, Arc::new(DenyApproval));
    let ctx = ToolContext::new(AgentName::lead(), dir.path());
    let outcome = dispatcher
        .dispatch(&ctx, "schedule_cron", &args("0 9 * * *", "UTC").to_string())
        .await;
    assert!(!outcome.is_error, "{}", outcome.content);
    assert_eq!(runtime.jobs().len(), 1);
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].decision, records[0].rule.as_str()),
        ("allow", "default")
    );
}

#[tokio::test]
async fn a_denied_call_never_schedules() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let deny: Arc<dyn PermissionRule> = Arc::new(FixedRule {
        name: "test-deny".to_owned(),
        tools: vec!["schedule_cron".to_owned()],
        decision: Decision::Deny,
        reason: "denied by the test".to_owned(),
    });
    let (dispatcher, audit) = dispatcher_with_rules(&runtime, Arc::new(AutoApproval), vec![deny]);
    let ctx = ToolContext::new(AgentName::lead(), dir.path());
    let outcome = dispatcher
        .dispatch(&ctx, "schedule_cron", &args("0 9 * * *", "UTC").to_string())
        .await;
    assert!(outcome.is_error);
    assert!(
        outcome.content.starts_with("Error [permission_denied]: "),
        "{}",
        outcome.content
    );
    assert_eq!(runtime.jobs(), vec![]);
    assert!(!dir.path().join(".troupe").exists());
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].decision, "deny");
}

#[tokio::test]
async fn bad_arguments_are_invalid_arguments_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let (dispatcher, _audit) = dispatcher(&runtime, Arc::new(AutoApproval));
    let ctx = ToolContext::new(AgentName::lead(), dir.path());
    let mut blank_prompt = args("0 9 * * *", "UTC");
    blank_prompt["prompt"] = json!("   ");
    let mut missing_durable = args("0 9 * * *", "UTC");
    missing_durable.as_object_mut().unwrap().remove("durable");
    let mut string_bool = args("0 9 * * *", "UTC");
    string_bool["recurring"] = json!("yes");
    let cases = [
        (
            args("0 9 * *", "UTC"),
            "Error [invalid_arguments]: invalid cron expression \"0 9 * *\": it has 4 fields",
        ),
        (
            args("0 0 9 * * *", "UTC"),
            "Error [invalid_arguments]: invalid cron expression \"0 0 9 * * *\": it has 6 fields",
        ),
        (
            args("61 9 * * *", "UTC"),
            "Error [invalid_arguments]: invalid cron expression \"61 9 * * *\": ",
        ),
        (
            args("0 9 * * *", "Europe/Atlantis"),
            "Error [invalid_arguments]: unknown time zone \"Europe/Atlantis\"",
        ),
        (
            blank_prompt,
            "Error [invalid_arguments]: the prompt of a cron job must not be blank",
        ),
        (
            missing_durable,
            "Error [invalid_arguments]: schedule_cron: $: missing required property",
        ),
        (
            string_bool,
            "Error [invalid_arguments]: schedule_cron: $.recurring: expected a boolean",
        ),
    ];
    for (arguments, expected) in cases {
        let outcome = dispatcher
            .dispatch(&ctx, "schedule_cron", &arguments.to_string())
            .await;
        assert!(outcome.is_error);
        assert!(
            outcome.content.starts_with(expected),
            "want {expected:?}, got {:?}",
            outcome.content
        );
    }
    assert_eq!(runtime.jobs(), vec![]);
}
