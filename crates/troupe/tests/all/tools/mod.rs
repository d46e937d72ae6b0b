//! Tools: the registry, the dispatch path, the base tools and workspace confinement.

mod bench;
mod dispatch;
mod files;
mod glob;
mod grep;
mod protected;
mod registry;
mod secrets;
/// Public for the pid helpers that the jobs tests share.
pub mod shell;
mod shell_output;

use std::path::Path;
use std::sync::Arc;

use troupe::clock::ManualClock;
use troupe::permissions::{AutoApproval, MemoryAuditSink, PermissionPolicy};
use troupe::tools::shell::ShellTool;
use troupe::tools::{base_tools, Dispatcher, ToolContext, ToolRegistry};
use troupe::wire::AgentName;

/// A dispatcher over the base tools with automatic approval and an in-memory audit.
pub fn base_dispatcher(shell: ShellTool) -> (Dispatcher, Arc<MemoryAuditSink>) {
    let mut registry = ToolRegistry::new();
    for tool in base_tools(shell) {
        registry.register(tool).unwrap();
    }
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), audit.clone());
    (
        Dispatcher::new(Arc::new(registry), policy, Default::default()),
        audit,
    )
}

pub fn lead_ctx(workspace: &Path) -> ToolContext {
    ToolContext::new(AgentName::lead(), workspace)
}

/// Runs one call through the base dispatcher and returns (content, is_error).
pub async fn call(workspace: &Path, tool: &str, args: serde_json::Value) -> (String, bool) {
    let (dispatcher, _) = base_dispatcher(ShellTool::new());
    let outcome = dispatcher
        .dispatch(&lead_ctx(workspace), tool, &args.to_string())
        .await;
    (outcome.content, outcome.is_error)
}
