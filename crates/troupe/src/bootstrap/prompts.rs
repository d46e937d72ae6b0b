//! What agents are told and offered: the tool lists in the order SPEC §4.1 gives them, the
//! identity part of the lead's and a teammate's system prompt (with the plan gate that applies
//! to them), and the living prompt built around it.

use std::sync::Arc;

use troupe_wire::AgentName;

use crate::clock::Clock;
use crate::settings::ContextSettings;
use crate::team::instructions::{Choice, Instructions};
use crate::team::living_prompt::{FixedParts, LivingPrompt};
use crate::team::{GateStart, TeamHandle};
use crate::tools::skills;
use crate::tools::{RegistryError, ToolHandler, ToolRegistry};

/// The lead's tools, in the order SPEC §4.1 offers them (the base agent's, then the team's, then
/// wave 3's `grep` and `merge_teammate`).
pub const LEAD_TOOLS: [&str; 21] = [
    "shell",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "todo_write",
    "task",
    "load_skill",
    "create_task",
    "get_task",
    "list_tasks",
    "claim_task",
    "complete_task",
    "schedule_cron",
    "spawn_teammate",
    "send_message",
    "request_shutdown",
    "review_plan",
    "grep",
    "merge_teammate",
    "review_permission",
];

/// A teammate's tools, exactly (SPEC §4.1): the first five, then wave 3's working toolset — the
/// file tools and the board tools of the lead's board (creating tasks stays with the lead).
pub const TEAMMATE_TOOLS: [&str; 12] = [
    "shell",
    "read_file",
    "write_file",
    "send_message",
    "submit_plan",
    "edit_file",
    "glob",
    "grep",
    "list_tasks",
    "get_task",
    "claim_task",
    "complete_task",
];

/// What the lead is told about teammates' plan gates in a run (SPEC §6).
fn lead_plan_gate_text(require_plans: bool) -> &'static str {
    if require_plans {
        "This run requires plans: every teammate is gated from its first tool call — it can \
         only read and search files, look at the task board, message and submit_plan (no \
         writes, commands or claims) until you approve a plan of its with review_plan; a \
         rejected or expired plan, or a newer plan still pending, keeps it gated."
    } else {
        "A teammate spawned with plan_required: true is gated from its first tool call — it can \
         only read and search files, look at the task board, message and submit_plan (no \
         writes, commands or claims) until you approve a plan of its with review_plan. Any \
         other teammate is gated only once it submits a plan, until you approve \
         it. A rejected or expired plan, or a newer plan still pending, keeps a teammate gated."
    }
}

/// Who the lead is, how events reach it and what the plan gate does to its teammates in this
/// run: the identity part of its living system prompt.
pub fn lead_system_prompt(workspace: &std::path::Path, require_plans: bool) -> String {
    format!(
        "You are lead, the lead agent of a troupe team working in the workspace {}.\n\
         Do work yourself with your tools, or spawn teammates for parallel work. Teammates' \
         results, their plan requests, their shutdown answers, background job completions and \
         cron wakeups reach you as user messages starting with [event], holding JSON. Review a \
         plan_approval_request with review_plan, and a teammate's permission_request (its call \
         waits for the answer) with review_permission. When a teammate's work is done, ask it to stop \
         with request_shutdown; its name can then be spawned again as a new teammate with a \
         fresh conversation. Keep answers short.\n{}",
        workspace.display(),
        lead_plan_gate_text(require_plans)
    )
}

/// The instruction files `context` chooses, read in `workspace` (the agent's own), with the
/// run's secrets redacted from what they show.
pub(super) fn instructions(
    workspace: &std::path::Path,
    context: &ContextSettings,
    redactor: &crate::secrets::Redactor,
) -> Instructions {
    Instructions::new(workspace, Choice::of(context)).with_redactor(redactor.clone())
}

/// The living system prompt of `agent`: `identity`, then its tools, the workspace, its
/// `instructions` (see [`instructions`]), the skills
/// catalog, selected memory, the roster and pending requests.
pub(super) fn living_prompt(
    agent: &AgentName,
    identity: String,
    registry: &Arc<ToolRegistry>,
    workspace: &std::path::Path,
    instructions: Instructions,
    team: TeamHandle,
    clock: Arc<dyn Clock>,
) -> Arc<LivingPrompt> {
    Arc::new(LivingPrompt::new(
        agent.clone(),
        FixedParts {
            identity,
            tools: registry.clone(),
            workspace: workspace.display().to_string(),
            skills: skills::render_catalog(&skills::catalog(workspace)),
            instructions: Arc::new(instructions),
        },
        team,
        clock,
    ))
}

/// The tools a gated teammate is denied, as its prompt names them (the plan gate denies every
/// tool but reads, `send_message` and `submit_plan`; these are the teammate's such tools).
const GATED_TOOLS_TEXT: &str = "write_file, edit_file, shell, claim_task and complete_task";

/// What a teammate is told about its own plan gate (SPEC §6, §12): exactly the rule that applies.
fn teammate_plan_gate_text(gate: GateStart) -> String {
    let after_approval = "A rejected or expired plan keeps them denied until a revised plan is \
         approved, and a newer plan denies them again until it is approved.";
    match gate {
        GateStart::AtFirstPlan => format!(
            "You may work without a plan. Once you submit a plan with submit_plan, \
             {GATED_TOOLS_TEXT} are denied until the lead approves it. {after_approval}"
        ),
        GateStart::PlanRequired | GateStart::RunRequiresPlans => format!(
            "You are gated from your first tool call ({}): {GATED_TOOLS_TEXT} are denied until \
             the lead approves a plan of yours, so start by submitting your plan with \
             submit_plan; until then you can only read and search files, look at the task \
             board, message and submit plans. {after_approval}",
            gate.cause()
        ),
    }
}

/// Who a teammate is, its role and its plan gate: the identity part of its living prompt.
pub fn teammate_system_prompt(name: &AgentName, role: &str, gate: GateStart) -> String {
    format!(
        "You are {name}, a teammate on a troupe team led by `lead`.\n\
         Your role: {role}\n\
         {} The decision on a plan arrives as a message starting with `Plan approved` or `Plan \
         rejected`. Your final answer to each message is sent to the lead automatically.",
        teammate_plan_gate_text(gate)
    )
}

/// What a teammate offered the board tools is told about them (after its identity).
pub(super) const TEAMMATE_BOARD_TEXT: &str = "The team's task board is the lead's: list_tasks \
     and get_task show it; a task you take with claim_task is yours to do and to complete with \
     complete_task; a task that reaches you as a `[task]` message is already claimed for you and \
     is completed when you answer. Only the lead creates tasks.";

/// A registry of `tools` offered in the order of `names` (which must name each exactly once):
/// the order is written once, in [`LEAD_TOOLS`] / [`TEAMMATE_TOOLS`], not again where the
/// tools are built.
pub(super) fn registry_in_order(
    tools: Vec<Arc<dyn ToolHandler>>,
    names: &[&str],
) -> Result<ToolRegistry, RegistryError> {
    let mut all = ToolRegistry::new();
    for tool in tools {
        all.register(tool)?;
    }
    if let Some(extra) = all.names().into_iter().find(|name| !names.contains(name)) {
        return Err(RegistryError::Unknown(extra.to_owned()));
    }
    all.select(names)
}
