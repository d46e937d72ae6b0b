//! The lead's planning tools: `todo_write`, `load_skill` and the skill catalog, the task board
//! (store and tools) and its inspection view. Every tool is called through a real `Dispatcher`
//! with the default permission policy and an in-memory audit.

mod skills;
pub mod store;
mod store_process;
mod tasks;
mod todo;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use troupe::clock::ManualClock;
use troupe::permissions::rules::FixedRule;
use troupe::permissions::{
    ApprovalProvider, AuditRecord, AutoApproval, Decision, MemoryAuditSink, PermissionPolicy,
    PermissionRule,
};
use troupe::tools::{Dispatcher, ToolContext, ToolHandler, ToolOutcome, ToolRegistry};
use troupe::wire::AgentName;

/// A dispatcher over `tools` with the default policy, `approval` for `ask`, and its audit.
pub struct Harness {
    pub dispatcher: Dispatcher,
    pub audit: Arc<MemoryAuditSink>,
}

impl Harness {
    pub fn new(tools: Vec<Arc<dyn ToolHandler>>, approval: Arc<dyn ApprovalProvider>) -> Self {
        let mut registry = ToolRegistry::new();
        for tool in tools {
            registry.register(tool).unwrap();
        }
        let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
        let policy = PermissionPolicy::default_policy(approval, audit.clone());
        Self {
            dispatcher: Dispatcher::new(Arc::new(registry), policy, Default::default()),
            audit,
        }
    }

    /// The default policy plus a rule denying `denied` (as a settings deny rule would): the
    /// one way left to refuse a bookkeeping tool, which the defaults allow without asking.
    pub fn denying(tools: Vec<Arc<dyn ToolHandler>>, denied: &[&str]) -> Self {
        let mut h = Self::auto(tools.clone());
        let deny: Arc<dyn PermissionRule> = Arc::new(FixedRule {
            name: "test-deny".to_owned(),
            tools: denied.iter().map(|t| (*t).to_owned()).collect(),
            decision: Decision::Deny,
            reason: "denied by the test".to_owned(),
        });
        let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), h.audit.clone())
            .with_rules([deny]);
        let mut registry = ToolRegistry::new();
        for tool in tools {
            registry.register(tool).unwrap();
        }
        h.dispatcher = Dispatcher::new(Arc::new(registry), policy, Default::default());
        h
    }

    pub fn auto(tools: Vec<Arc<dyn ToolHandler>>) -> Self {
        Self::new(tools, Arc::new(AutoApproval))
    }

    pub async fn call(&self, ctx: &ToolContext, tool: &str, args: Value) -> ToolOutcome {
        self.dispatcher.dispatch(ctx, tool, &args.to_string()).await
    }

    /// The last audit record, which must be about `tool`.
    pub fn last_audit(&self, tool: &str) -> AuditRecord {
        let record = self.audit.records().pop().expect("an audit record");
        assert_eq!(record.tool, tool);
        record
    }
}

pub fn ctx(agent: &str, workspace: &Path) -> ToolContext {
    ToolContext::new(AgentName::parse(agent).unwrap(), workspace)
}

/// The outcome succeeded, was decided by the rules as `said` and was audited as allowed.
pub fn assert_ok(harness: &Harness, tool: &str, outcome: &ToolOutcome, said: Decision) {
    assert!(!outcome.is_error, "{tool}: {}", outcome.content);
    let decision = outcome.decision.as_ref().expect("a permission decision");
    assert_eq!(decision.rules_said, said, "{tool}");
    assert!(decision.allowed);
    assert_eq!(harness.last_audit(tool).decision, "allow");
}

/// The outcome is an error whose text starts with `Error [<code>]`.
pub fn assert_code(outcome: &ToolOutcome, code: &str) {
    assert!(outcome.is_error, "expected {code}, got {}", outcome.content);
    assert!(
        outcome.content.starts_with(&format!("Error [{code}]")),
        "expected {code}, got {}",
        outcome.content
    );
}
