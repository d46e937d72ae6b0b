//! The composition root: the only place where concrete adapters are chosen and wired.
//!
//! It builds, in dependency order: the run lock and recovery; one mailbox store (shared by the
//! teammate runtime and the protocol runtime — [`TeamRuntime::new`] refuses anything else); the
//! protocol store; the audit sink and the base permission policy; the lead's tools and runner;
//! the teammate factory, whose policy for each teammate is the base policy `with_rules([its plan
//! gate])` (gated from its first call when its record says `plan_required` or the run requires
//! plans); the mailbox watch. Closing runs in reverse: teammates first (workers cancelled at
//! safe points, in-flight messages released), then the watch, then the run lock.
//!
//! Every dispatcher (lead, subagent, teammates) and the job supervisor get the one [`Redactor`]
//! of the settings, so no tool result or job output holds the API key.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_wire::{AgentName, TeammateRecord};

use crate::agent::transcript::FileTranscript;
use crate::agent::{RunObserver, Runner, SubagentTool};
use crate::clock::Clock;
use crate::cron::{CronError, CronRuntime, CronWakeup, ScheduleCronTool};
use crate::error::ErrorCode;
use crate::ids::IdGenerator;
use crate::jobs::{JobCompletion, JobSupervisor};
use crate::layout::Layout;
use crate::model::ModelClient;
use crate::permissions::hooks::Hooks;
use crate::permissions::{ApprovalProvider, AuditError, JsonlAuditSink, PermissionPolicy};
use crate::secrets::Redactor;
use crate::store::lock::{try_lock_exclusive, LockGuard};
use crate::store::mailbox::{FileMailboxStore, MailboxError, MailboxStore};
use crate::store::protocol::{JsonProtocolStore, ProtocolError, ProtocolStore};
use crate::store::tasks::{FileTaskBoard, TaskBoard};
use crate::store::{durable, IoError};
use crate::team::tools::{RequestShutdown, ReviewPlan, SendMessage, SpawnTeammate, SubmitPlan};
use crate::team::watch::{self, MailboxWatch, WatchError};
use crate::team::{Driver, ExternalEvents};
use crate::team::{
    GateStart, PlanGateRule, Postman, ProtocolRuntime, TeamError, TeamHandle, TeamObserver,
    TeamRuntime, TeammateFactory,
};
use crate::tools::edit_file::EditFileTool;
use crate::tools::glob::GlobTool;
use crate::tools::read_file::ReadFileTool;
use crate::tools::shell::ShellTool;
use crate::tools::skills::{self, LoadSkillTool};
use crate::tools::tasks::task_tools;
use crate::tools::todo::TodoTool;
use crate::tools::write_file::WriteFileTool;
use crate::tools::{base_tools, Dispatcher, RegistryError, ToolHandler, ToolRegistry};
use tokio::sync::mpsc::UnboundedReceiver;

/// The lead's tools, in the order SPEC §4.1 offers them (the base agent's, then the team's).
pub const LEAD_TOOLS: [&str; 18] = [
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
];

/// A teammate's tools, exactly (SPEC §4.1).
pub const TEAMMATE_TOOLS: [&str; 5] = [
    "shell",
    "read_file",
    "write_file",
    "send_message",
    "submit_plan",
];

/// Which model answers which agent (the CLI uses one client for all; tests and the demo script
/// each agent).
pub trait ModelChooser: Send + Sync {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient>;
}

/// One model for everyone.
pub struct SameModel(pub Arc<dyn ModelClient>);

impl ModelChooser for SameModel {
    fn model_for(&self, _agent: &AgentName) -> Arc<dyn ModelClient> {
        self.0.clone()
    }
}

/// Each agent answers from its own view of one scripted model (`--model-script`): its own queue
/// when the script gives it one, else the shared `responses`.
pub struct ScriptedPerAgent(pub Arc<crate::model::ScriptedModel>);

impl ModelChooser for ScriptedPerAgent {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        crate::model::ScriptedModel::for_agent(&self.0, agent)
    }
}

/// Everything a team needs from outside.
pub struct TeamSettings {
    pub workspace: PathBuf,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGenerator>,
    pub models: Arc<dyn ModelChooser>,
    pub approval: Arc<dyn ApprovalProvider>,
    pub run_observer: Arc<dyn RunObserver>,
    pub team_observer: Arc<dyn TeamObserver>,
    /// The most model calls in one turn of any agent.
    pub max_turns: usize,
    /// The response window of new protocol requests.
    pub request_ttl: Duration,
    /// The shell tool's timeout.
    pub shell_timeout: Duration,
    /// Watch the mailboxes for messages written by other processes.
    pub watch: bool,
    /// Gate every teammate of this run from its first call until a plan of its is approved
    /// (`--require-plans`), as if each had been spawned with `plan_required`.
    pub require_plans: bool,
    /// The secrets (the model's API key) that no tool result, job output or file under
    /// `.troupe/` may hold; built from the model configuration (`ModelConfig::redactor`).
    pub redactor: Redactor,
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("another troupe run holds this workspace ({holder}); wait for it to finish")]
    Busy { holder: String },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Mailbox(#[from] MailboxError),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Team(#[from] TeamError),
    #[error(transparent)]
    Watch(#[from] WatchError),
    #[error(transparent)]
    Cron(#[from] CronError),
}

impl ErrorCode for BootstrapError {
    fn code(&self) -> &'static str {
        match self {
            Self::Busy { .. } => "workspace_busy",
            Self::Io(e) => e.code(),
            Self::Mailbox(e) => e.code(),
            Self::Protocol(e) => e.code(),
            Self::Audit(_) => "audit_failed",
            Self::Registry(e) => e.code(),
            Self::Team(e) => e.code(),
            Self::Watch(_) => "watch_failed",
            Self::Cron(e) => e.code(),
        }
    }
}

/// A built team, ready to drive.
pub struct Team {
    pub runtime: TeamRuntime,
    pub lead: Runner,
    pub mailbox: Arc<dyn MailboxStore>,
    pub protocol: Arc<dyn ProtocolStore>,
    /// How many messages recovery moved back to ready at start.
    pub recovered: usize,
    pub cron: CronRuntime,
    pub jobs: Arc<JobSupervisor>,
    job_completions: Option<UnboundedReceiver<JobCompletion>>,
    cron_wakeups: Option<UnboundedReceiver<CronWakeup>>,
    watch: Option<MailboxWatch>,
    _run_lock: LockGuard,
}

impl Team {
    /// The driver of this team's run; it takes the job and cron event channels (once).
    pub fn driver(&mut self) -> Driver {
        Driver::with_external(
            self.runtime.clone(),
            ExternalEvents {
                jobs: Some(self.jobs.clone()),
                job_completions: self.job_completions.take(),
                cron_wakeups: self.cron_wakeups.take(),
            },
        )
    }

    /// Closes in reverse dependency order (SPEC §4.4): teammates (workers cancelled at a safe
    /// point, in-flight messages released), then cron, then background jobs (whole process
    /// groups terminated, recorded as cancelled); then the watch and the run lock.
    pub async fn close(mut self) {
        self.runtime.close().await;
        self.cron.close().await;
        self.jobs.close().await;
        self.watch.take();
    }
}

/// What the lead is told about teammates' plan gates in a run (SPEC §6).
fn lead_plan_gate_text(require_plans: bool) -> &'static str {
    if require_plans {
        "This run requires plans: every teammate is gated from its first tool call — it can \
         only read files, message and submit_plan until you approve a plan of its with \
         review_plan; a rejected or expired plan, or a newer plan still pending, keeps it gated."
    } else {
        "A teammate spawned with plan_required: true is gated from its first tool call — it can \
         only read files, message and submit_plan until you approve a plan of its with \
         review_plan. Any other teammate is gated only once it submits a plan, until you approve \
         it. A rejected or expired plan, or a newer plan still pending, keeps a teammate gated."
    }
}

/// The lead's system prompt: who it is, how events reach it, what the plan gate does to its
/// teammates in this run, and the skills it can load.
pub fn lead_system_prompt(workspace: &std::path::Path, require_plans: bool) -> String {
    let mut prompt = format!(
        "You are lead, the lead agent of a troupe team working in the workspace {}.\n\
         Do work yourself with your tools, or spawn teammates for parallel work. Teammates' \
         results, their plan requests, their shutdown answers, background job completions and \
         cron wakeups reach you as user messages starting with [event], holding JSON. Review a \
         plan_approval_request with review_plan. When a teammate's work is done, ask it to stop \
         with request_shutdown; its name can then be spawned again as a new teammate with a \
         fresh conversation. Keep answers short.\n{}",
        workspace.display(),
        lead_plan_gate_text(require_plans)
    );
    let skills = skills::render_catalog(&skills::catalog(workspace));
    if !skills.is_empty() {
        prompt.push_str("\n\nSkills you can load with load_skill:\n");
        prompt.push_str(&skills);
    }
    prompt
}

/// What a teammate is told about its own plan gate (SPEC §6): exactly the rule that applies.
fn teammate_plan_gate_text(gate: GateStart) -> String {
    let after_approval = "A rejected or expired plan keeps them denied until a revised plan is \
         approved, and a newer plan denies them again until it is approved.";
    match gate {
        GateStart::AtFirstPlan => format!(
            "You may work without a plan. Once you submit a plan with submit_plan, write_file \
             and shell are denied until the lead approves it. {after_approval}"
        ),
        GateStart::PlanRequired | GateStart::RunRequiresPlans => format!(
            "You are gated from your first tool call ({}): write_file and shell are denied until \
             the lead approves a plan of yours, so start by submitting your plan with \
             submit_plan; until then you can only read files, message and submit plans. \
             {after_approval}",
            gate.cause()
        ),
    }
}

pub fn teammate_system_prompt(
    name: &AgentName,
    role: &str,
    workspace: &std::path::Path,
    gate: GateStart,
) -> String {
    format!(
        "You are {name}, a teammate on a troupe team led by `lead`, working in the workspace {}.\n\
         Your role: {role}\n\
         {} The decision on a plan arrives as a message starting with `Plan approved` or `Plan \
         rejected`. Your final answer to each message is sent to the lead automatically.",
        workspace.display(),
        teammate_plan_gate_text(gate)
    )
}

fn registry(tools: Vec<Arc<dyn ToolHandler>>) -> Result<ToolRegistry, RegistryError> {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool)?;
    }
    Ok(registry)
}

struct Factory {
    layout: Layout,
    workspace: PathBuf,
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
}

impl TeammateFactory for Factory {
    fn gate_start(&self, teammate: &TeammateRecord) -> GateStart {
        GateStart::of(teammate.plan_required, self.require_plans)
    }

    fn build(&self, team: TeamHandle, teammate: &TeammateRecord) -> Result<Runner, TeamError> {
        let name = &teammate.name;
        let gate_start = self.gate_start(teammate);
        let gate = PlanGateRule::new(self.protocol.clone(), self.clock.clone())
            .starting(gate_start)
            .ignoring(teammate.earlier_plan);
        let policy = self
            .policy
            .with_rules([Arc::new(gate) as Arc<dyn crate::permissions::PermissionRule>]);
        let tools = registry(vec![
            Arc::new(
                ShellTool::new()
                    .with_timeout(self.shell_timeout)
                    .with_jobs(self.jobs.clone()),
            ),
            Arc::new(ReadFileTool),
            Arc::new(WriteFileTool),
            Arc::new(SendMessage(team.clone())),
            Arc::new(SubmitPlan(team)),
        ])
        .map_err(|e| TeamError::Invalid(e.to_string()))?;
        let dispatcher = Dispatcher::new(Arc::new(tools), policy, Hooks::new())
            .with_redactor(self.redactor.clone());
        Ok(Runner::new(
            name.clone(),
            teammate_system_prompt(name, &teammate.role, &self.workspace, gate_start),
            self.models.model_for(name),
            Arc::new(dispatcher),
            self.workspace.clone(),
            self.run_observer.clone(),
        )
        .with_max_turns(self.max_turns)
        .with_transcript(Arc::new(FileTranscript::new(self.layout.transcript(name))))?)
    }
}

/// Builds the whole team on a workspace. Fails with `Busy` if another run holds it.
pub fn build_team(settings: TeamSettings) -> Result<Team, BootstrapError> {
    let layout = Layout::new(&settings.workspace);
    durable::ensure_real_dir(&layout.state_dir())?;
    let mut run_lock = match try_lock_exclusive(&layout.run_lock())? {
        Ok(guard) => guard,
        Err(holder) => {
            let holder = if holder.is_empty() {
                "unknown holder".to_owned()
            } else {
                holder
            };
            return Err(BootstrapError::Busy { holder });
        }
    };
    run_lock.write_holder(&format!(
        "pid {} since {}",
        std::process::id(),
        settings.clock.now()
    ))?;

    let file_mailbox = FileMailboxStore::new(&layout, settings.clock.clone());
    let mut recovered = 0;
    for agent in file_mailbox.agents()? {
        recovered += file_mailbox.recover(&agent)?.released.len();
    }
    let mailbox: Arc<dyn MailboxStore> = Arc::new(file_mailbox);
    let protocol: Arc<dyn ProtocolStore> = Arc::new(JsonProtocolStore::open(
        &layout,
        settings.clock.clone(),
        settings.ids.clone(),
    )?);
    let audit = Arc::new(JsonlAuditSink::open(&layout, settings.clock.clone())?);
    let base_policy = PermissionPolicy::default_policy(settings.approval.clone(), audit);

    let postman = Arc::new(Postman::new(
        mailbox.clone(),
        settings.clock.clone(),
        settings.ids.clone(),
        settings.team_observer.clone(),
    ));
    let protocol_runtime = Arc::new(ProtocolRuntime::new(
        protocol.clone(),
        postman.clone(),
        settings.request_ttl,
    ));
    // An answer a dead process recorded but did not deliver is delivered now (before any worker).
    protocol_runtime.deliver_recorded_answers()?;
    // Jobs a dead run left `running` are over as far as troupe can tell: record them so.
    let orphans = crate::jobs::orphans::settle_orphans(&layout, settings.clock.clone().now())
        .map_err(|e| {
            IoError::new(
                "settle",
                &layout.jobs_dir(),
                std::io::Error::other(e.to_string()),
            )
        })?;
    if !orphans.is_empty() {
        tracing::warn!(
            "{} background job(s) of an earlier run were still marked running",
            orphans.len()
        );
    }
    let (job_tx, job_completions) = tokio::sync::mpsc::unbounded_channel();
    let jobs = Arc::new(
        JobSupervisor::new(
            layout.clone(),
            settings.clock.clone(),
            settings.ids.clone(),
            job_tx,
        )
        .with_redactor(settings.redactor.clone()),
    );
    let (cron_tx, cron_wakeups) = tokio::sync::mpsc::unbounded_channel();
    let cron = CronRuntime::open(
        &layout,
        settings.clock.clone(),
        settings.ids.clone(),
        cron_tx,
    )?;
    cron.start()?;

    let factory = Arc::new(Factory {
        layout: layout.clone(),
        workspace: settings.workspace.clone(),
        jobs: jobs.clone(),
        models: settings.models.clone(),
        policy: base_policy.clone(),
        protocol: protocol.clone(),
        clock: settings.clock.clone(),
        require_plans: settings.require_plans,
        run_observer: settings.run_observer.clone(),
        max_turns: settings.max_turns,
        shell_timeout: settings.shell_timeout,
        redactor: settings.redactor.clone(),
    });
    let runtime = TeamRuntime::new(layout.clone(), postman.clone(), protocol_runtime, factory)?;

    let handle = runtime.handle();
    let lead_name = AgentName::lead();
    let lead_model = settings.models.model_for(&lead_name);
    // The subagent: the base tools (no team, protocol or task tool; no background jobs: a
    // one-shot helper must not leave work running) under the lead's own policy.
    let subagent_tools = registry(base_tools(
        ShellTool::new().with_timeout(settings.shell_timeout),
    ))?;
    let subagent = SubagentTool::new(
        lead_model.clone(),
        Arc::new(
            Dispatcher::new(Arc::new(subagent_tools), base_policy.clone(), Hooks::new())
                .with_redactor(settings.redactor.clone()),
        ),
        settings.run_observer.clone(),
        settings.max_turns,
    );
    let board: Arc<dyn TaskBoard> = Arc::new(FileTaskBoard::new(
        &layout,
        settings.clock.clone(),
        settings.ids.clone(),
    ));
    // SPEC §4.1 order: the base agent's sixteen tools, then the two protocol tools.
    let mut lead_tools: Vec<Arc<dyn ToolHandler>> = vec![
        Arc::new(
            ShellTool::new()
                .with_timeout(settings.shell_timeout)
                .with_jobs(jobs.clone()),
        ),
        Arc::new(ReadFileTool),
        Arc::new(WriteFileTool),
        Arc::new(EditFileTool),
        Arc::new(GlobTool),
        Arc::new(TodoTool::new()),
        Arc::new(subagent),
        Arc::new(LoadSkillTool),
    ];
    lead_tools.extend(task_tools(board));
    lead_tools.extend([
        Arc::new(ScheduleCronTool::new(cron.clone())) as Arc<dyn ToolHandler>,
        Arc::new(SpawnTeammate(handle.clone())),
        Arc::new(SendMessage(handle.clone())),
        Arc::new(RequestShutdown(handle.clone())),
        Arc::new(ReviewPlan(handle)),
    ]);
    let lead_tools = registry(lead_tools)?;
    let lead = Runner::new(
        lead_name.clone(),
        lead_system_prompt(&settings.workspace, settings.require_plans),
        lead_model,
        Arc::new(
            Dispatcher::new(Arc::new(lead_tools), base_policy, Hooks::new())
                .with_redactor(settings.redactor.clone()),
        ),
        settings.workspace.clone(),
        settings.run_observer.clone(),
    )
    .with_max_turns(settings.max_turns)
    .with_transcript(Arc::new(FileTranscript::new(layout.transcript(&lead_name))))?;

    let watch = if settings.watch {
        Some(watch::start(&layout, postman)?)
    } else {
        None
    };
    runtime.wake_all();
    Ok(Team {
        runtime,
        lead,
        mailbox,
        protocol,
        recovered,
        cron,
        jobs,
        job_completions: Some(job_completions),
        cron_wakeups: Some(cron_wakeups),
        watch,
        _run_lock: run_lock,
    })
}
