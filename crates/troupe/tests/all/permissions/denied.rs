//! A deny at any step means the handler runs zero times; `with_rules` keeps the provider and
//! the audit sink, and a deny added later wins over the defaults and over any approval.

use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::clock::ManualClock;
use troupe::permissions::approval::NO_TERMINAL_GUIDANCE;
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, AutoApproval, Decision, DenyApproval,
    HookDecision, Hooks, MemoryAuditSink, PermissionPolicy, PermissionRequest, PermissionRule,
    PreToolUse, RuleVerdict, TerminalApproval,
};
use troupe::tools::testing::CountingTool;
use troupe::tools::{Dispatcher, Effect, ToolContext, ToolRegistry};
use troupe::wire::AgentName;

use super::{fixed, SharedOutput};

/// Counts how often it is asked, then answers as told.
struct CountingApproval {
    asked: AtomicUsize,
    approve: bool,
}

impl CountingApproval {
    fn new(approve: bool) -> Arc<Self> {
        Arc::new(Self {
            asked: AtomicUsize::new(0),
            approve,
        })
    }
    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl ApprovalProvider for CountingApproval {
    fn name(&self) -> &'static str {
        "counting"
    }
    async fn approve(&self, _request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if self.approve {
            ApprovalAnswer::approve("yes")
        } else {
            ApprovalAnswer::deny("no")
        }
    }
}

struct DenyHook;

#[async_trait::async_trait]
impl PreToolUse for DenyHook {
    fn name(&self) -> &str {
        "guard"
    }
    async fn before(&self, call: &PermissionRequest<'_>) -> HookDecision {
        HookDecision::Deny {
            reason: format!("{} is blocked by the guard", call.tool),
        }
    }
}

/// Like the plan gate: denies every tool except read tools.
struct GateRule;

#[async_trait::async_trait]
impl PermissionRule for GateRule {
    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        (request.effect != Effect::Read)
            .then(|| RuleVerdict::new(Decision::Deny, "plan_gate", "plan 0000 is pending"))
    }
}

struct Setup {
    dispatcher: Dispatcher,
    writer: CountingTool,
    reader: CountingTool,
    audit: Arc<MemoryAuditSink>,
}

fn setup(policy_of: impl FnOnce(Arc<MemoryAuditSink>) -> PermissionPolicy, hooks: Hooks) -> Setup {
    let writer = CountingTool::new("writer", Effect::Write);
    let reader = CountingTool::new("reader", Effect::Read);
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(writer.clone())).unwrap();
    registry.register(Arc::new(reader.clone())).unwrap();
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let policy = policy_of(audit.clone());
    Setup {
        dispatcher: Dispatcher::new(Arc::new(registry), policy, hooks),
        writer,
        reader,
        audit,
    }
}

fn ctx() -> ToolContext {
    ToolContext::new(AgentName::parse("alice").unwrap(), std::env::temp_dir())
}

async fn assert_denied(s: &Setup, expected_prefix: &str, expected_rule: &str) {
    let outcome = s.dispatcher.dispatch(&ctx(), "writer", "{}").await;
    assert!(outcome.is_error);
    assert!(
        outcome.content.starts_with(expected_prefix),
        "{}",
        outcome.content
    );
    let decision = outcome.decision.unwrap();
    assert!(!decision.allowed);
    assert_eq!(decision.rule, expected_rule);
    assert_eq!(s.writer.calls(), 0, "a denied handler ran");
    let records = s.audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].decision, "deny");
    assert_eq!(records[0].rule, expected_rule);
    assert_eq!(records[0].agent.as_str(), "alice");
}

#[tokio::test]
async fn a_pre_tool_use_hook_deny_never_reaches_the_handler() {
    let approval = CountingApproval::new(true);
    let a = approval.clone();
    let s = setup(
        move |audit| PermissionPolicy::default_policy(a, audit),
        Hooks::new().with_pre(Arc::new(DenyHook)),
    );
    assert_denied(
        &s,
        "Error [permission_denied]: writer was denied by hook guard: writer is blocked by the guard",
        "hook:guard",
    )
    .await;
    assert_eq!(approval.asked(), 0);
}

#[tokio::test]
async fn a_deny_rule_never_reaches_the_handler_nor_the_provider() {
    let approval = CountingApproval::new(true);
    let a = approval.clone();
    let s = setup(
        move |audit| {
            PermissionPolicy::default_policy(a, audit).with_rules([fixed("block", Decision::Deny)])
        },
        Hooks::new(),
    );
    assert_denied(
        &s,
        "Error [permission_denied]: writer was denied (block): block says deny",
        "block",
    )
    .await;
    assert_eq!(
        approval.asked(),
        0,
        "an approval must never be asked to loosen a deny"
    );
}

#[tokio::test]
async fn an_ask_answered_no_never_reaches_the_handler() {
    let out = SharedOutput::default();
    let terminal = Arc::new(TerminalApproval::with_io(
        Box::new(Cursor::new(b"n\n".to_vec())),
        Box::new(out.clone()),
        true,
    ));
    let s = setup(
        move |audit| PermissionPolicy::default_policy(terminal, audit),
        Hooks::new(),
    );
    assert_denied(
        &s,
        "Error [permission_denied]: writer was denied (default+approval:terminal): refused at the terminal",
        "default+approval:terminal",
    )
    .await;
    assert!(out.text().contains("agent alice wants to run writer"));
}

#[tokio::test]
async fn the_deny_provider_never_reaches_the_handler() {
    let s = setup(
        |audit| PermissionPolicy::default_policy(Arc::new(DenyApproval), audit),
        Hooks::new(),
    );
    assert_denied(
        &s,
        "Error [permission_denied]: writer was denied (default+approval:deny)",
        "default+approval:deny",
    )
    .await;
}

#[tokio::test]
async fn the_terminal_provider_without_a_terminal_never_reaches_the_handler() {
    let terminal = Arc::new(TerminalApproval::with_io(
        Box::new(Cursor::new(b"y\n".to_vec())),
        Box::new(SharedOutput::default()),
        false,
    ));
    let s = setup(
        move |audit| PermissionPolicy::default_policy(terminal, audit),
        Hooks::new(),
    );
    assert_denied(
        &s,
        &format!("Error [permission_denied]: writer was denied (default+approval:terminal): {NO_TERMINAL_GUIDANCE}"),
        "default+approval:terminal",
    )
    .await;
}

#[tokio::test]
async fn allowed_calls_run_once_and_are_audited() {
    let approval = CountingApproval::new(true);
    let a = approval.clone();
    let s = setup(
        move |audit| PermissionPolicy::default_policy(a, audit),
        Hooks::new(),
    );
    let write = s.dispatcher.dispatch(&ctx(), "writer", "{}").await;
    let read = s.dispatcher.dispatch(&ctx(), "reader", "{}").await;
    assert_eq!((write.content.as_str(), write.is_error), ("call 1", false));
    assert_eq!((read.content.as_str(), read.is_error), ("call 1", false));
    assert_eq!(approval.asked(), 1, "only the write tool asks");
    let rules: Vec<(String, &str)> = s
        .audit
        .records()
        .into_iter()
        .map(|r| (r.rule, r.decision))
        .collect();
    assert_eq!(
        rules,
        vec![
            ("default+approval:counting".to_owned(), "allow"),
            ("default".to_owned(), "allow"),
        ]
    );
}

#[tokio::test]
async fn with_rules_keeps_provider_and_sink_and_a_later_deny_wins() {
    let approval = CountingApproval::new(true);
    let a = approval.clone();
    let s = setup(
        move |audit| {
            PermissionPolicy::default_policy(a, audit)
                .with_rules([Arc::new(GateRule) as Arc<dyn PermissionRule>])
        },
        Hooks::new(),
    );
    let base_approval: Arc<dyn ApprovalProvider> = approval.clone();
    assert!(Arc::ptr_eq(
        s.dispatcher.policy().approval(),
        &base_approval
    ));

    // The gate denies the write tool although the provider would approve it...
    let write = s.dispatcher.dispatch(&ctx(), "writer", "{}").await;
    assert_eq!(
        write.content,
        "Error [permission_denied]: writer was denied (plan_gate): plan 0000 is pending"
    );
    // ...and lets the read tool through under the defaults.
    let read = s.dispatcher.dispatch(&ctx(), "reader", "{}").await;
    assert_eq!(read.content, "call 1");
    assert_eq!(s.reader.calls(), 1);
    assert_eq!(s.writer.calls(), 0);
    assert_eq!(approval.asked(), 0);
    // Both decisions went to the original audit sink.
    let decisions: Vec<(String, &str)> = s
        .audit
        .records()
        .into_iter()
        .map(|r| (r.tool, r.decision))
        .collect();
    assert_eq!(
        decisions,
        vec![
            ("writer".to_owned(), "deny"),
            ("reader".to_owned(), "allow")
        ]
    );
}

#[tokio::test]
async fn an_added_allow_never_loosens_the_default_ask() {
    let approval = CountingApproval::new(false);
    let a = approval.clone();
    let s = setup(
        move |audit| {
            PermissionPolicy::default_policy(a, audit)
                .with_rules([fixed("trusting", Decision::Allow)])
        },
        Hooks::new(),
    );
    let outcome = s.dispatcher.dispatch(&ctx(), "writer", "{}").await;
    assert!(outcome.is_error, "{}", outcome.content);
    assert_eq!(approval.asked(), 1);
    assert_eq!(s.writer.calls(), 0);
}

#[tokio::test]
async fn auto_approval_allows_what_rules_do_not_deny() {
    let s = setup(
        |audit| PermissionPolicy::default_policy(Arc::new(AutoApproval), audit),
        Hooks::new(),
    );
    let outcome = s.dispatcher.dispatch(&ctx(), "writer", "{}").await;
    assert_eq!(outcome.content, "call 1");
    let gated = s
        .dispatcher
        .policy()
        .with_rules([Arc::new(GateRule) as Arc<dyn PermissionRule>]);
    let dispatcher = Dispatcher::new(
        Arc::new(s.dispatcher.registry().clone()),
        gated,
        Hooks::new(),
    );
    let outcome = dispatcher.dispatch(&ctx(), "writer", "{}").await;
    assert!(outcome.content.starts_with("Error [permission_denied]"));
    assert_eq!(s.writer.calls(), 1);
    assert_eq!(s.audit.records().len(), 2);
}

#[tokio::test]
async fn a_teammate_calling_a_lead_only_tool_is_denied_by_the_policy_and_audited() {
    use troupe::team::LeadOnlyRule;
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let spawn = CountingTool::new("spawn_teammate", Effect::External);
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(spawn.clone())).unwrap();
    let policy = PermissionPolicy::default_policy(CountingApproval::new(true), audit.clone())
        .with_rules([Arc::new(LeadOnlyRule) as Arc<dyn PermissionRule>]);
    let dispatcher = Dispatcher::new(Arc::new(registry), policy, Hooks::new());

    let outcome = dispatcher.dispatch(&ctx(), "spawn_teammate", "{}").await;
    assert_eq!(
        outcome.content,
        "Error [permission_denied]: spawn_teammate was denied (lead_only): only the lead may \
         call spawn_teammate"
    );
    assert_eq!(spawn.calls(), 0, "a denied handler ran");
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].decision, records[0].rule.as_str()),
        ("deny", "lead_only")
    );

    let lead = ToolContext::new(AgentName::lead(), std::env::temp_dir());
    let outcome = dispatcher.dispatch(&lead, "spawn_teammate", "{}").await;
    assert!(!outcome.is_error, "{}", outcome.content);
    assert_eq!(spawn.calls(), 1);
}
