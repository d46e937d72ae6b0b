//! The lead's runner: its tools in [`LEAD_TOOLS`] order (with the subagent under the lead's
//! policy), its living system prompt naming the agent definitions it can spawn, its model, its
//! conversation (set aside first when the run starts a new session).

use std::path::PathBuf;
use std::sync::Arc;

use troupe_wire::AgentName;

use crate::agent::{Runner, SubagentTool};
use crate::cron::{CronRuntime, ScheduleCronTool};
use crate::jobs::JobSupervisor;
use crate::permissions::PermissionPolicy;
use crate::team::definitions;
use crate::team::merge_tool::MergeTeammate;
use crate::team::tools::{RequestShutdown, ReviewPlan, SendMessage, SpawnTeammate};
use crate::team::TeamHandle;
use crate::tools::grep::GrepTool;
use crate::tools::mcp::{mcp_tools, register_all};
use crate::tools::skills::LoadSkillTool;
use crate::tools::tasks::task_tools;
use crate::tools::todo::TodoTool;
use crate::tools::{base_tools, Dispatcher, RegistryError, ToolHandler, ToolRegistry};

use super::factory::Crew;
use super::kit::LongLivedKit;
use super::options::{agent_model, BootstrapError, TeamSettings};
use super::prompts::{lead_system_prompt, living_prompt, registry_in_order, LEAD_TOOLS};
use super::start::Stores;

/// The lead of the team `crew` runs, on `policy` (the base policy) — and where its earlier
/// conversation was kept, when this run starts a new session.
pub(super) async fn lead(
    settings: &TeamSettings,
    stores: &Stores,
    policy: PermissionPolicy,
    jobs: &Arc<JobSupervisor>,
    cron: &CronRuntime,
    crew: &Crew,
) -> Result<(Runner, Option<PathBuf>), BootstrapError> {
    let Crew {
        kit,
        definitions,
        runtime,
        ..
    } = crew;
    let tools = lead_tools(
        settings,
        stores,
        &policy,
        jobs,
        cron,
        &runtime.handle(),
        kit,
    )?;
    let lead_name = AgentName::lead();
    let earlier_session = if settings.long_lived.new_session {
        stores.transcripts.set_aside(&lead_name).await?
    } else {
        None
    };
    let mut identity = lead_system_prompt(&settings.workspace, settings.require_plans);
    let listed = definitions::render_for_lead(&definitions.found);
    if !listed.is_empty() {
        identity.push('\n');
        identity.push_str(listed.trim_end());
    }
    let tools = Arc::new(tools);
    let prompt = living_prompt(
        &lead_name,
        identity,
        &tools,
        &settings.workspace,
        super::prompts::instructions(
            &settings.workspace,
            &settings.settings.context,
            &settings.redactor,
        ),
        runtime.handle(),
        settings.clock.clone(),
    );
    let lead_model = settings.models.model_named(
        &lead_name,
        agent_model(&settings.settings.model, &lead_name, None).as_deref(),
    );
    let lead = Runner::new(
        lead_name.clone(),
        String::new(),
        lead_model.clone(),
        Arc::new(
            Dispatcher::new(tools, policy, kit.tool_hooks())
                .with_redactor(settings.redactor.clone())
                .with_protected_additions(&settings.sandbox.policy.deny_write),
        ),
        settings.workspace.clone(),
        settings.run_observer.clone(),
    )
    .with_max_turns(settings.max_turns)
    .with_system_prompt(prompt);
    let lead = kit
        .apply(lead, &lead_name, &lead_model, true)
        .with_transcript(stores.transcripts.open(&lead_name))
        .await?;
    Ok((lead, earlier_session))
}

/// The lead's tools, in [`LEAD_TOOLS`] order: the base agent's, the subagent (`task`, with the
/// base tools under the lead's policy, no background jobs: a one-shot helper must not leave work
/// running), the task board, cron, the team and protocol tools, and `grep`.
fn lead_tools(
    settings: &TeamSettings,
    stores: &Stores,
    policy: &PermissionPolicy,
    jobs: &Arc<JobSupervisor>,
    cron: &CronRuntime,
    team: &TeamHandle,
    kit: &Arc<LongLivedKit>,
) -> Result<ToolRegistry, RegistryError> {
    // The base agent's five tools, which open LEAD_TOOLS.
    let subagent_tools = registry_in_order(
        base_tools(
            settings
                .sandbox
                .shell(settings.sandbox.sandbox.clone(), policy)
                .with_timeout(settings.shell_timeout),
        ),
        &LEAD_TOOLS[..5],
    )?;
    let lead_model = settings.models.model_for(&AgentName::lead());
    let subagent_kit = kit.clone();
    let subagent_model = lead_model.clone();
    let subagent = SubagentTool::new(
        lead_model,
        Arc::new(
            Dispatcher::new(Arc::new(subagent_tools), policy.clone(), kit.tool_hooks())
                .with_protected_additions(&settings.sandbox.policy.deny_write)
                .with_redactor(settings.redactor.clone()),
        ),
        settings.run_observer.clone(),
        settings.max_turns,
    )
    .configured(Arc::new(move |runner: Runner| {
        let agent = runner.agent().clone();
        subagent_kit.apply(runner, &agent, &subagent_model, false)
    }));
    let mut tools: Vec<Arc<dyn ToolHandler>> = base_tools(
        settings
            .sandbox
            .shell(settings.sandbox.sandbox.clone(), policy)
            .with_timeout(settings.shell_timeout)
            .with_jobs(jobs.clone()),
    );
    tools.extend([
        Arc::new(TodoTool::new()) as Arc<dyn ToolHandler>,
        Arc::new(subagent),
        Arc::new(LoadSkillTool),
        Arc::new(ScheduleCronTool::new(cron.clone())),
        Arc::new(SpawnTeammate(
            team.clone(),
            settings
                .settings
                .team
                .isolation
                .as_ref()
                .map(|i| i.value)
                .unwrap_or_default(),
        )),
        Arc::new(SendMessage(team.clone())),
        Arc::new(RequestShutdown(team.clone())),
        Arc::new(ReviewPlan(team.clone())),
        Arc::new(GrepTool),
        Arc::new(MergeTeammate(team.clone())),
        Arc::new(crate::approvals::review_tool::ReviewPermission(
            team.clone(),
        )),
    ]);
    tools.extend(task_tools(stores.claims.clone()));
    let mut registry = registry_in_order(tools, &LEAD_TOOLS)?;
    // After the fixed SPEC order: the MCP servers' tools, servers in settings order.
    register_all(&mut registry, mcp_tools(&settings.mcp));
    Ok(registry)
}
