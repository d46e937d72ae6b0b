//! The factory of teammates' runners: each teammate's policy is the base policy with its plan
//! gate (and, in a shared team, its lease gate), its tools are the teammate tools its agent
//! definition allows (the board tools over the lead's own board) plus the MCP tools it lists,
//! its model is the one `[model.agents]` or its definition names; a worktree teammate works in
//! its own checkout.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_wire::{AgentName, Isolation, TeammateRecord};

use crate::agent::transcript::Transcripts;
use crate::agent::{RunObserver, Runner};
use crate::clock::Clock;
use crate::jobs::JobSupervisor;
use crate::mcp::McpServers;
use crate::permissions::PermissionPolicy;
use crate::secrets::Redactor;
use crate::store::protocol::ProtocolStore;
use crate::store::tasks::HeldClaims;
use crate::team::definitions::{self, AgentDefinition};
use crate::team::tools::{SendMessage, SubmitPlan};
use crate::team::{GateStart, LeadOnlyRule, PlanGateRule, TeamError, TeamHandle, TeammateFactory};
use crate::tools::edit_file::EditFileTool;
use crate::tools::glob::GlobTool;
use crate::tools::grep::GrepTool;
use crate::tools::mcp::{mcp_tools, register_all};
use crate::tools::read_file::ReadFileTool;
use crate::tools::tasks::task_tools;
use crate::tools::write_file::WriteFileTool;
use crate::tools::{Dispatcher, ToolHandler};
use crate::worktree::Worktrees;

use super::kit::LongLivedKit;
use super::options::{agent_model, ModelChooser, SandboxOptions, TeamSettings};
use super::prompts::{
    living_prompt, registry_in_order, teammate_system_prompt, TEAMMATE_BOARD_TEXT, TEAMMATE_TOOLS,
};
use super::start::Stores;

/// Builds a teammate's runner when it is spawned or woken (see the module's documentation).
pub(super) struct Factory {
    /// The lead's checkout: where a teammate's files are unless it has a worktree. The team's
    /// state (mailboxes, transcripts, artifacts, jobs, audit) is the kit's and the stores',
    /// always in the lead's `.troupe/`, whatever the teammate's workspace.
    workspace: PathBuf,
    /// The teammates' git worktrees: a teammate spawned with `isolation: "worktree"` gets (or
    /// gets back) its own, which becomes its runner's workspace.
    worktrees: Arc<Worktrees>,
    jobs: Arc<JobSupervisor>,
    models: Arc<dyn ModelChooser>,
    /// The base policy; each teammate's adds its own plan gate.
    policy: PermissionPolicy,
    protocol: Arc<dyn ProtocolStore>,
    clock: Arc<dyn Clock>,
    require_plans: bool,
    run_observer: Arc<dyn RunObserver>,
    max_turns: usize,
    shell_timeout: Duration,
    redactor: Redactor,
    kit: Arc<LongLivedKit>,
    /// The agent definitions read at run start (and why the invalid ones were skipped).
    definitions: Definitions,
    /// `[model.agents]` and the rest of the model settings.
    model_settings: crate::settings::ModelSettings,
    /// `[context]`: the instruction files each teammate's prompt carries, from its workspace.
    context: crate::settings::ContextSettings,
    sandbox: SandboxOptions,
    mcp: Arc<McpServers>,
    transcripts: Arc<dyn Transcripts>,
    /// Where teammates run: in a shared team, each teammate's effects run only under its
    /// lease.
    placement: Arc<dyn crate::team::Placement>,
    /// The claims this process holds on the lead's task board (the run's one board, or the
    /// shared team's): teammates list, claim and complete the tasks the lead creates there, and
    /// their claims are kept and renewed with the lead's.
    claims: Arc<HeldClaims>,
}

impl Factory {
    /// Whether this process runs `name` now: always on a local team; under its lease on a
    /// shared one (a lease that cannot be read counts as not held).
    async fn runs_here(&self, name: &AgentName) -> bool {
        self.placement.still_here(name).await
    }
}

#[async_trait::async_trait]
impl TeammateFactory for Factory {
    fn gate_start(&self, teammate: &TeammateRecord) -> GateStart {
        GateStart::of(teammate.plan_required, self.require_plans)
    }

    fn definition(&self, name: &AgentName) -> Option<AgentDefinition> {
        self.definitions
            .found
            .iter()
            .find(|d| &d.name == name)
            .cloned()
    }

    fn definition_names(&self) -> Vec<AgentName> {
        self.definitions
            .found
            .iter()
            .map(|d| d.name.clone())
            .collect()
    }

    fn definition_problem(&self, name: &str) -> Option<String> {
        self.definitions
            .problems
            .iter()
            .find(|p| p.file.file_stem().is_some_and(|stem| stem == name))
            .map(|p| p.message.clone())
    }

    async fn build(
        &self,
        team: TeamHandle,
        teammate: &TeammateRecord,
    ) -> Result<Runner, TeamError> {
        let runs_here = match teammate.isolation {
            Isolation::None => true,
            Isolation::Worktree => self.runs_here(&teammate.name).await,
        };
        let runner = crate::sync::blocking(|| self.build_runner(team, teammate, runs_here))?;
        Ok(runner
            .with_transcript(self.transcripts.open(&teammate.name))
            .await?)
    }
}

impl Factory {
    /// [`TeammateFactory::build`] once whether the teammate runs here is known (files and git:
    /// a blocking step), before its transcript is loaded.
    fn build_runner(
        &self,
        team: TeamHandle,
        teammate: &TeammateRecord,
        runs_here: bool,
    ) -> Result<Runner, TeamError> {
        let name = &teammate.name;
        // A definition that is gone since the teammate was spawned (an earlier run's teammate
        // whose file was removed or broke) is refused: it would otherwise get every tool.
        let definition = match &teammate.definition {
            Some(d) => Some(self.definition(d).ok_or_else(|| {
                TeamError::Invalid(format!(
                    "its agent definition {d} (agents/{d}.md) is missing or invalid"
                ))
            })?),
            None => None,
        };
        // Where its files are: the lead's checkout, or its worktree (made or reattached now).
        let workspace = match teammate.isolation {
            Isolation::None => self.workspace.clone(),
            // On a shared team a runner is built where the teammate is spawned and again
            // where it is leased: only a process that holds its lease makes (or reattaches) the
            // worktree, so no clone gets a worktree of a teammate that never runs there.
            Isolation::Worktree if !runs_here => self.worktrees.path_of(name),
            Isolation::Worktree => self.worktrees.attach(name)?.path,
        };
        let sandbox = self.sandbox.for_definition(definition.as_ref())?;
        let sandbox = match teammate.isolation {
            Isolation::None => sandbox,
            Isolation::Worktree => Arc::new(sandbox.rooted_at(&workspace)),
        };
        let gate_start = self.gate_start(teammate);
        let gate = PlanGateRule::new(self.protocol.clone(), self.clock.clone())
            .starting(gate_start)
            .ignoring(teammate.earlier_plan);
        let mut rules: Vec<Arc<dyn crate::permissions::PermissionRule>> =
            vec![Arc::new(gate), Arc::new(LeadOnlyRule)];
        if let Some(gate) = self.placement.lease_gate(name) {
            rules.push(gate);
        }
        let policy = self.policy.with_rules(rules);
        let mut all_tools: Vec<Arc<dyn ToolHandler>> = vec![
            Arc::new(
                self.sandbox
                    .shell(sandbox, &policy)
                    .with_timeout(self.shell_timeout)
                    .with_jobs(self.jobs.clone()),
            ),
            Arc::new(ReadFileTool),
            Arc::new(WriteFileTool),
            Arc::new(SendMessage(team.clone())),
            Arc::new(SubmitPlan(team.clone())),
            Arc::new(EditFileTool),
            Arc::new(GlobTool),
            Arc::new(GrepTool),
        ];
        all_tools.extend(task_tools(self.claims.clone()));
        // What this teammate is offered: the teammate tools its definition allows. The board's
        // `create_task` is not a teammate tool, so it is left out here.
        let offered: Vec<&str> = TEAMMATE_TOOLS
            .into_iter()
            .filter(|tool| definition.as_ref().is_none_or(|d| d.allows_tool(tool)))
            .collect();
        let tools = registry_in_order(
            all_tools
                .into_iter()
                .filter(|tool| offered.contains(&tool.definition().name.as_str()))
                .collect(),
            &offered,
        )
        .map_err(|e| TeamError::Invalid(e.to_string()))?;
        let mut tools = tools;
        register_all(
            &mut tools,
            mcp_tools(&self.mcp).into_iter().filter(|tool| {
                definition
                    .as_ref()
                    .is_some_and(|d| d.allows_mcp_tool(&tool.definition().name))
            }),
        );
        let mut identity = teammate_system_prompt(name, &teammate.role, gate_start);
        if offered.contains(&"claim_task") {
            identity.push('\n');
            identity.push_str(TEAMMATE_BOARD_TEXT);
        }
        if teammate.isolation == Isolation::Worktree {
            identity.push_str(&worktree_prompt(name, &workspace));
        }
        if let Some(d) = definition.as_ref().filter(|d| !d.instructions.is_empty()) {
            identity.push_str(&format!(
                "\nYour instructions (agent definition {}):\n{}",
                d.name, d.instructions
            ));
        }
        let tools = Arc::new(tools);
        let prompt = living_prompt(
            name,
            identity,
            &tools,
            &workspace,
            super::prompts::instructions(&workspace, &self.context, &self.redactor),
            team,
            self.clock.clone(),
        );
        let dispatcher = Dispatcher::new(tools, policy, self.kit.tool_hooks())
            .with_redactor(self.redactor.clone())
            .with_protected_additions(&self.sandbox.policy.deny_write);
        let model_name = agent_model(&self.model_settings, name, definition.as_ref());
        let model = self.models.model_named(name, model_name.as_deref());
        let runner = Runner::new(
            name.clone(),
            String::new(),
            model.clone(),
            Arc::new(dispatcher),
            workspace,
            self.run_observer.clone(),
        )
        .with_max_turns(self.max_turns)
        .with_system_prompt(prompt);
        Ok(self.kit.apply(runner, name, &model, true))
    }
}

/// The factory of teammates' runners: the base policy plus each teammate's plan gate, the
/// teammate tools, the same redactor, jobs and task board as the lead.
pub(super) fn teammate_factory(
    settings: &TeamSettings,
    stores: &Stores,
    policy: &PermissionPolicy,
    jobs: &Arc<JobSupervisor>,
    kit: &Arc<LongLivedKit>,
    definitions: Definitions,
    worktrees: Arc<Worktrees>,
) -> Arc<Factory> {
    Arc::new(Factory {
        workspace: settings.workspace.clone(),
        worktrees,
        jobs: jobs.clone(),
        models: settings.models.clone(),
        policy: policy.clone(),
        protocol: stores.protocol.clone(),
        clock: settings.clock.clone(),
        require_plans: settings.require_plans,
        run_observer: settings.run_observer.clone(),
        max_turns: settings.max_turns,
        shell_timeout: settings.shell_timeout,
        redactor: settings.redactor.clone(),
        kit: kit.clone(),
        definitions,
        model_settings: settings.settings.model.clone(),
        context: settings.settings.context.clone(),
        sandbox: settings.sandbox.clone(),
        mcp: settings.mcp.clone(),
        transcripts: stores.transcripts.clone(),
        // Where it runs is asked of the placement only, whichever process runs teammates.
        placement: stores.placement(settings, None),
        claims: stores.claims.clone(),
    })
}

/// What a worktree teammate is told about where it works.
fn worktree_prompt(name: &AgentName, worktree: &std::path::Path) -> String {
    format!(
        "\nYou work in your own git worktree, {}, on branch {}: your file tools and commands \
         see only it, not the lead's checkout. When you finish a message, troupe commits your \
         changes on your branch for you (do not run git commit, merge or rebase yourself); the \
         lead merges your branch.",
        worktree.display(),
        crate::worktree::branch_of(name)
    )
}

/// The workspace's agent definitions (`agents/*.md`); each invalid one is skipped with a
/// warning naming its file and the reason (shown on stderr at run start), and kept so that a
/// `spawn_teammate` naming it is told why.
pub(super) fn read_definitions(workspace: &std::path::Path) -> Definitions {
    let (found, problems) = definitions::load_definitions(workspace, &TEAMMATE_TOOLS);
    for problem in &problems {
        tracing::warn!("{problem}");
    }
    Definitions {
        found: Arc::new(found),
        problems: Arc::new(problems),
    }
}

/// The valid agent definitions and the problems of the invalid ones.
#[derive(Clone)]
pub(super) struct Definitions {
    pub(super) found: Arc<Vec<AgentDefinition>>,
    pub(super) problems: Arc<Vec<definitions::Problem>>,
}
