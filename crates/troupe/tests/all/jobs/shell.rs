//! `shell` with `run_in_background: true` through the real dispatch path: permission, audit,
//! then submission; a denied call (approval provider or plan gate) submits nothing.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::clock::Clock;
use troupe::ids::SequentialIds;
use troupe::permissions::{
    ApprovalProvider, AutoApproval, DenyApproval, MemoryAuditSink, PermissionPolicy, PermissionRule,
};
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore, DEFAULT_TTL};
use troupe::team::PlanGateRule;
use troupe::tools::shell::ShellTool;
use troupe::tools::{base_tools, Dispatcher, ToolContext, ToolHandler, ToolRegistry};
use troupe::wire::{AgentName, Content, RequestKind};

use super::{seq_id, Fixture};

/// The base tools, the shell with the fixture's supervisor, the default policy plus `extra`.
fn dispatcher(
    fx: &Fixture,
    approval: Arc<dyn ApprovalProvider>,
    extra: Vec<Arc<dyn PermissionRule>>,
) -> (Dispatcher, Arc<MemoryAuditSink>) {
    let mut registry = ToolRegistry::new();
    for tool in base_tools(ShellTool::new().with_jobs(fx.supervisor.clone())) {
        registry.register(tool).unwrap();
    }
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(fx.clock.clone())));
    let policy = PermissionPolicy::default_policy(approval, audit.clone()).with_rules(extra);
    (
        Dispatcher::new(Arc::new(registry), policy, Default::default()),
        audit,
    )
}

fn background(command: &str) -> String {
    json!({"command": command, "run_in_background": true}).to_string()
}

#[tokio::test]
async fn a_background_shell_is_permitted_audited_submitted_and_completes() {
    let mut fx = Fixture::new();
    let (dispatcher, audit) = dispatcher(&fx, Arc::new(AutoApproval), Vec::new());
    let ctx = ToolContext::new(AgentName::lead(), fx.workspace());
    let outcome = dispatcher
        .dispatch(&ctx, "shell", &background("echo hi; exit 3"))
        .await;
    assert!(!outcome.is_error, "{}", outcome.content);
    let id = seq_id(1);
    assert!(
        outcome
            .content
            .starts_with(&format!("Started background job {id}.")),
        "{}",
        outcome.content
    );
    assert!(outcome.content.contains("event"), "{}", outcome.content);
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (
            records[0].tool.as_str(),
            records[0].decision,
            records[0].agent.as_str()
        ),
        ("shell", "allow", "lead")
    );

    let completion = fx.next_completion().await;
    assert_eq!(completion.job_id, id);
    assert_eq!(completion.agent, AgentName::lead());
    assert_eq!(completion.command, "echo hi; exit 3");
    assert_eq!(completion.exit_code, Some(3));
    assert_eq!(completion.output_tail, "hi\n");
    assert_eq!(fx.record_json(id)["status"], "failed");
}

#[tokio::test]
async fn a_background_shell_denied_by_the_approval_provider_submits_nothing() {
    let mut fx = Fixture::new();
    let (dispatcher, audit) = dispatcher(&fx, Arc::new(DenyApproval), Vec::new());
    let ctx = ToolContext::new(AgentName::lead(), fx.workspace());
    let outcome = dispatcher
        .dispatch(&ctx, "shell", &background("touch ran"))
        .await;
    assert!(outcome.is_error);
    assert!(
        outcome.content.starts_with("Error [permission_denied]:"),
        "{}",
        outcome.content
    );
    assert_eq!(audit.records()[0].decision, "deny");
    assert_nothing_submitted(&mut fx).await;
}

#[tokio::test]
async fn a_teammate_whose_plan_is_pending_cannot_start_a_background_job() {
    let mut fx = Fixture::new();
    let alice = AgentName::parse("alice").unwrap();
    let clock: Arc<dyn Clock> = Arc::new(fx.clock.clone());
    let protocol = Arc::new(
        JsonProtocolStore::open(
            &fx.layout,
            clock.clone(),
            Arc::new(SequentialIds::with_prefix(7)),
        )
        .unwrap(),
    );
    let plan = protocol
        .create(NewRequest {
            kind: RequestKind::PlanApproval,
            sender: alice.clone(),
            target: AgentName::lead(),
            content: Content::parse("refactor the parser").unwrap(),
            ttl: DEFAULT_TTL,
        })
        .await
        .unwrap();
    let gate: Arc<dyn PermissionRule> = Arc::new(PlanGateRule::new(protocol, clock));
    // Automatic approval: only the gate stands between the call and the supervisor.
    let (dispatcher, audit) = dispatcher(&fx, Arc::new(AutoApproval), vec![gate]);
    let ctx = ToolContext::new(alice, fx.workspace());
    let outcome = dispatcher
        .dispatch(&ctx, "shell", &background("touch ran"))
        .await;
    assert!(outcome.is_error);
    assert!(
        outcome
            .content
            .starts_with("Error [permission_denied]: shell was denied (plan_gate):"),
        "{}",
        outcome.content
    );
    assert!(
        outcome.content.contains(&plan.id().to_string()),
        "{}",
        outcome.content
    );
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (
            records[0].decision,
            records[0].rule.as_str(),
            records[0].agent.as_str()
        ),
        ("deny", "plan_gate", "alice")
    );
    assert_nothing_submitted(&mut fx).await;
}

#[tokio::test]
async fn without_a_supervisor_the_option_is_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(AgentName::lead(), dir.path());
    let err = ShellTool::new()
        .call(
            &ctx,
            json!({"command": "touch ran", "run_in_background": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_tool_text(),
        "Error [invalid_arguments]: background jobs are not available yet"
    );
    assert!(!dir.path().join("ran").exists());
}

#[tokio::test]
async fn the_definition_offers_the_option_only_with_a_supervisor() {
    let fx = Fixture::new();
    let with = ShellTool::new()
        .with_jobs(fx.supervisor.clone())
        .definition();
    let without = ShellTool::new().definition();
    assert!(with.description.contains("run_in_background: true"));
    assert!(without.description.contains("not available yet"));
    // The same schema either way: SPEC §4.1 fixes the parameters.
    assert_eq!(with.parameters["required"], without.parameters["required"]);
    assert_eq!(
        with.parameters["properties"]["run_in_background"]["type"],
        "boolean"
    );
}

/// Zero submissions: no record was written (submit writes one before anything else), nothing
/// runs, no completion comes, even once the supervisor has closed.
async fn assert_nothing_submitted(fx: &mut Fixture) {
    assert!(!fx.layout.jobs_dir().exists());
    assert_eq!(fx.supervisor.running_count(), 0);
    fx.supervisor.close().await;
    assert!(fx.completions.try_recv().is_err());
    assert!(!fx.path("ran").exists());
}
