//! The plan gate over a teammate's working toolset (SPEC §6, §12), judged by each tool's own
//! declared effect and scope: before a plan is approved, reads pass and every other tool is
//! denied — troupe's own state included, so no task is claimed or completed ("the plan gate
//! applies before any claim").

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::clock::{Clock, ManualClock};
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::permissions::{AutoApproval, MemoryAuditSink, PermissionPolicy, PermissionRequest};
use troupe::store::protocol::JsonProtocolStore;
use troupe::store::tasks::{HeldClaims, MemoryTaskBoard};
use troupe::team::{GateStart, PlanGateRule};
use troupe::tools::edit_file::EditFileTool;
use troupe::tools::glob::GlobTool;
use troupe::tools::grep::GrepTool;
use troupe::tools::read_file::ReadFileTool;
use troupe::tools::shell::ShellTool;
use troupe::tools::tasks::task_tools;
use troupe::tools::write_file::WriteFileTool;
use troupe::tools::ToolHandler;
use troupe::wire::AgentName;

#[tokio::test]
async fn a_gated_teammate_keeps_its_reads_and_is_denied_edits_commands_and_claims() {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::at_spec_epoch());
    let ids = Arc::new(SequentialIds::new());
    let store = Arc::new(
        JsonProtocolStore::open(&Layout::new(dir.path()), clock.clone(), ids.clone()).unwrap(),
    );
    let gate = PlanGateRule::new(store, clock.clone()).starting(GateStart::PlanRequired);
    let audit = Arc::new(MemoryAuditSink::new(clock.clone()));
    let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), audit)
        .with_rules([Arc::new(gate) as Arc<dyn troupe::permissions::PermissionRule>]);
    let mut tools: Vec<Arc<dyn ToolHandler>> = vec![
        Arc::new(ShellTool::new()),
        Arc::new(ReadFileTool),
        Arc::new(WriteFileTool),
        Arc::new(EditFileTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
    ];
    let board = Arc::new(MemoryTaskBoard::new(clock, ids));
    tools.extend(task_tools(Arc::new(HeldClaims::new(board))));
    let dev = AgentName::parse("dev").unwrap();
    let args = json!({});
    let mut decisions = Vec::new();
    for tool in &tools {
        let definition = tool.definition();
        let request = PermissionRequest {
            agent: &dev,
            tool: &definition.name,
            effect: definition.effect,
            scope: tool.scope(),
            arguments: &args,
            sandbox: None,
            preview: None,
            protected: None,
        };
        let decision = policy.decide(&request).await.unwrap();
        decisions.push((definition.name.clone(), decision.allowed, decision.rule));
    }
    let denied = |tool: &str| (tool.to_owned(), false, "plan_gate".to_owned());
    let allowed = |tool: &str| (tool.to_owned(), true, "default".to_owned());
    assert_eq!(
        decisions,
        [
            denied("shell"),
            allowed("read_file"),
            denied("write_file"),
            denied("edit_file"),
            allowed("glob"),
            allowed("grep"),
            // create_task is the lead's, but the gate would deny it too.
            denied("create_task"),
            allowed("get_task"),
            allowed("list_tasks"),
            denied("claim_task"),
            denied("complete_task"),
        ]
    );
}
