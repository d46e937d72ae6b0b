//! The composition root: the only place where concrete adapters are chosen and wired.
//!
//! [`build_team`] builds, in dependency order: the run lock (`take_run_lock`); the stores —
//! one mailbox store after recovery, the protocol store, the audit sink, the task board
//! (`open_stores`); what a dead run left half done — recorded answers delivered, orphan jobs
//! settled (`finish_earlier_run`); the base permission policy; background jobs and cron; the
//! team runtime, which builds its own postman and protocol runtime on the one mailbox store;
//! the teammate factory, whose policy for each teammate is the base policy `with_rules([its plan
//! gate])` (`teammate_factory`); the lead's tools in [`LEAD_TOOLS`] order (`lead_tools`) and
//! runner; the mailbox watch. [`Team::close`] runs in reverse: teammates (workers cancelled at
//! safe points, in-flight messages released), then cron, then background jobs (whole process
//! groups stopped), then the watch and the run lock.
//!
//! The commands that work on a workspace without running a team get their adapters here too:
//! [`inspector`] for the read-only views, [`PlanReview`] for `troupe review`.
//!
//! Every dispatcher (lead, subagent, teammates) and the job supervisor get the one [`Redactor`]
//! of the settings, so no tool result or job output holds the API key.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_wire::{AgentName, TeamRoster, TeammateRecord};

use crate::agent::compactor::Compactor;
use crate::agent::context::{ContextBudget, Keep, REACTIVE_KEEP_GROUPS};
use crate::agent::memory::{Memory, MemoryQueries};
use crate::agent::observer::{CompactionReport, Trigger};
use crate::agent::transcript::{FileTranscript, FileTranscripts, Transcripts};
use crate::agent::usage::RunUsage;
use crate::agent::{RunObserver, Runner, SubagentTool};
use crate::clock::{Clock, SystemClock};
use crate::cron::store::CronStore;
use crate::cron::{CronError, CronRuntime, CronWakeup, ScheduleCronTool};
use crate::error::ErrorCode;
use crate::hooks::CommandHooks;
use crate::ids::{IdGenerator, RandomIds};
use crate::inspect::{read_roster, InspectError, Inspector};
use crate::jobs::{JobCompletion, JobSupervisor};
use crate::layout::Layout;
use crate::mcp::McpServers;
use crate::model::ModelClient;
use crate::permissions::hooks::Hooks;
use crate::permissions::observed::ObservedApproval;
use crate::permissions::patterns::{RulePattern, Use};
use crate::permissions::{ApprovalProvider, AuditError, JsonlAuditSink, PermissionPolicy};
use crate::sandbox::{Mode as SandboxMode, Policy as SandboxPolicy, Sandbox};
use crate::secrets::Redactor;
use crate::store::artifacts::{ArtifactCopy, ArtifactStore, FilesOnly};
use crate::store::events::observed::{ObservedMailbox, ObservedProtocol, ObservedResponseAck};
use crate::store::events::{kinds, EventListener, EventLog, EventLogError, EventSink, RUN_AGENT};
use crate::store::lock::{try_lock_exclusive, LockGuard};
use crate::store::mailbox::{FileMailboxStore, MailboxError, MailboxStore};
use crate::store::memory::MemoryStore;
use crate::store::postgres::artifacts::PgArtifacts;
use crate::store::postgres::events::PgEventMirror;
use crate::store::postgres::jobs::PgJobs;
use crate::store::postgres::memory::PgMemory;
use crate::store::postgres::usage::PgUsage;
use crate::store::postgres::PgResponseAck;
use crate::store::postgres::PgStore;
use crate::store::protocol::{JsonProtocolStore, ProtocolError, ProtocolStore};
use crate::store::response_ack::ResponseAck;
use crate::store::tasks::{FileTaskBoard, TaskBoard};
use crate::store::usage::UsageLog;
use crate::store::{durable, IoError};
use crate::team::definitions::{self, AgentDefinition};
use crate::team::living_prompt::{FixedParts, LivingPrompt};
use crate::team::recorder::{Both, EventRecorder};
use crate::team::tools::{RequestShutdown, ReviewPlan, SendMessage, SpawnTeammate, SubmitPlan};
use crate::team::watch::{self, MailboxWatch, WatchError};
use crate::team::{Driver, ExternalEvents};
use crate::team::{
    GateStart, LeadOnlyRule, NoTeamObserver, PlanGateRule, Postman, ProtocolRuntime, TeamError,
    TeamHandle, TeamObserver, TeamPorts, TeamRuntime, TeammateFactory,
};
use crate::tools::mcp::{mcp_tools, register_all};
use crate::tools::read_file::ReadFileTool;
use crate::tools::shell::ShellTool;
use crate::tools::skills::{self, LoadSkillTool};
use crate::tools::tasks::task_tools;
use crate::tools::todo::TodoTool;
use crate::tools::write_file::WriteFileTool;
use crate::tools::{base_tools, Dispatcher, RegistryError, ToolHandler, ToolRegistry};
use tokio::sync::mpsc::UnboundedReceiver;

mod shared;
pub use shared::{takeover_bound, takeover_look, PgOptions, StoreChoice, DEFAULT_SHARED_LEASE};
use shared::{PgParts, WakeGuard};

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

    /// The client of `agent` when it is to run on the model named `model` (an agent
    /// definition's `model`, or `[model.agents]`); none: its default. The default ignores the
    /// name (one model, or a script whose per-agent queues know no model names).
    fn model_named(&self, agent: &AgentName, model: Option<&str>) -> Arc<dyn ModelClient> {
        let _ = model;
        self.model_for(agent)
    }
}

/// One OpenAI client per distinct model name, on the same endpoint, key and retry settings.
impl ModelChooser for crate::model::by_name::ClientsByName {
    fn model_for(&self, _agent: &AgentName) -> Arc<dyn ModelClient> {
        self.named(None)
    }

    fn model_named(&self, _agent: &AgentName, model: Option<&str>) -> Arc<dyn ModelClient> {
        self.named(model)
    }
}

/// The model `agent` runs on, when not the run's: `[model.agents]` by the agent's own name,
/// then by its definition's name (the settings are the more specific choice, made per
/// workspace or user), then the definition's `model`.
pub fn agent_model(
    settings: &crate::settings::ModelSettings,
    agent: &AgentName,
    definition: Option<&AgentDefinition>,
) -> Option<String> {
    let by_name = |name: &str| {
        settings
            .agents
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, model)| model.value.clone())
    };
    by_name(agent.as_str())
        .or_else(|| definition.and_then(|d| by_name(d.name.as_str())))
        .or_else(|| definition.and_then(|d| d.model.clone()))
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
    /// Compaction, memory, budgets and sessions (SPEC §9).
    pub long_lived: LongLived,
    /// Who watches the event stream, and what it says the run is about (SPEC §10).
    pub events: EventOptions,
    /// `troupe.toml` and the user's config: permission rules, hooks (SPEC §11). The model part
    /// is applied by the caller when it builds `models`.
    pub settings: crate::settings::Settings,
    /// How the commands agents run are confined (SPEC §11).
    pub sandbox: SandboxOptions,
    /// The run's MCP servers, started by the caller ([`McpServers::start`] on
    /// `settings.mcp_servers`); their tools are offered after the fixed ones, to the lead always
    /// and to a teammate when its definition lists them. Stopped by [`Team::close`].
    pub mcp: Arc<McpServers>,
    /// Where the stores are: files under `.troupe/`, or PostgreSQL shared with workers.
    pub store: StoreChoice,
}

/// How a run confines the commands its agents run.
#[derive(Clone)]
pub struct SandboxOptions {
    /// The run's sandbox, already found to work on this machine ([`Sandbox::new`]).
    pub sandbox: Arc<Sandbox>,
    /// What it was made from: an agent definition's stricter mode is made from this too.
    pub policy: SandboxPolicy,
    /// Confine hook commands as well (`[sandbox] hooks = true`).
    pub confine_hooks: bool,
    /// Offer a command the sandbox refused to the approval provider, to run once more
    /// unconfined. Only when a person answers the provider (`--approval ask`).
    pub unconfined_reruns: bool,
}

impl SandboxOptions {
    /// Commands run unconfined (the library's tests; `--sandbox off`).
    pub fn off(workspace: &std::path::Path) -> Self {
        Self {
            sandbox: Arc::new(Sandbox::off(workspace)),
            policy: SandboxPolicy {
                mode: SandboxMode::Off,
                ..SandboxPolicy::default()
            },
            confine_hooks: false,
            unconfined_reruns: false,
        }
    }

    /// The sandbox of a teammate of `definition`: the definition's mode when it is at least as
    /// strict as the run's, else the run's (with a warning).
    pub fn for_definition(
        &self,
        definition: Option<&AgentDefinition>,
    ) -> Result<Arc<Sandbox>, TeamError> {
        let run = self.sandbox.mode();
        let Some((wanted, definition)) = definition.and_then(|d| d.sandbox.map(|mode| (mode, d)))
        else {
            return Ok(self.sandbox.clone());
        };
        let strictness = |m: SandboxMode| match m {
            SandboxMode::Off => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::ReadOnly => 2,
        };
        if strictness(wanted) < strictness(run) {
            tracing::warn!(
                "agents/{}.md asks for sandbox {wanted}, looser than the run's {run}: a \
                 definition can only tighten it, so {run} stays",
                definition.name
            );
            return Ok(self.sandbox.clone());
        }
        if wanted == run {
            return Ok(self.sandbox.clone());
        }
        self.sandbox
            .with_mode(wanted, &self.policy)
            .map(Arc::new)
            .map_err(|e| TeamError::Invalid(format!("its sandbox ({wanted}) cannot start: {e}")))
    }

    /// A shell tool confined by `sandbox`, offering reruns to `policy` when the run does.
    fn shell(&self, sandbox: Arc<Sandbox>, policy: &PermissionPolicy) -> ShellTool {
        let shell = ShellTool::new().with_sandbox(sandbox);
        if self.unconfined_reruns {
            shell.with_unconfined_reruns(policy.clone())
        } else {
            shell
        }
    }
}

/// The event stream of a run (`.troupe/events.jsonl`, SPEC §10).
#[derive(Clone, Default)]
pub struct EventOptions {
    /// They see every event once it is written (the terminal, `--json`).
    pub listeners: Vec<Arc<dyn EventListener>>,
    /// The person's prompt, for the `run_started` event.
    pub prompt: String,
}

/// What keeps agents working across long runs and many runs (SPEC §9).
#[derive(Debug, Clone, Default)]
pub struct LongLived {
    /// The model name the built-in context-window table is looked up with.
    pub model_name: String,
    /// The model's context window in tokens, overriding the table.
    pub context_window: Option<u32>,
    /// New memories are extracted from the conversation (at the end of the run and before each
    /// summary compaction). Off with `--no-memory`; selecting existing memories stays on.
    pub remember: bool,
    /// The run stops gracefully once all agents together have used this many tokens.
    pub max_run_tokens: Option<u64>,
    /// The lead starts a fresh conversation; its old transcript is kept as `lead.<n>.jsonl`.
    pub new_session: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("another troupe run holds this workspace ({holder}); wait for it to finish")]
    Busy { holder: String },
    #[error("{agent} has no conversation in this workspace (no transcript)")]
    NoConversation { agent: String },
    #[error("{agent} has no conversation in team {team:?} of the shared store")]
    NoSharedConversation { agent: String, team: String },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Events(#[from] EventLogError),
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
    #[error(transparent)]
    Inspect(#[from] InspectError),
    #[error(transparent)]
    Backend(crate::store::BackendError),
}

impl ErrorCode for BootstrapError {
    fn code(&self) -> &'static str {
        match self {
            Self::Busy { .. } => "workspace_busy",
            Self::NoConversation { .. } | Self::NoSharedConversation { .. } => "no_conversation",
            Self::Io(e) => e.code(),
            Self::Events(EventLogError::Io(e)) => e.code(),
            Self::Events(EventLogError::Corrupt { .. }) => "invalid_format",
            Self::Mailbox(e) => e.code(),
            Self::Protocol(e) => e.code(),
            Self::Audit(_) => "audit_failed",
            Self::Registry(e) => e.code(),
            Self::Team(e) => e.code(),
            Self::Watch(_) => "watch_failed",
            Self::Cron(e) => e.code(),
            Self::Inspect(e) => e.code(),
            Self::Backend(e) => e.code(),
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
    /// Where the lead's earlier conversation was kept, when this run started a new session.
    pub earlier_session: Option<PathBuf>,
    /// The tokens this run's agents have used.
    pub usage: Arc<RunUsage>,
    /// This run's event stream; the caller records `run_ended` in it once the team is closed.
    pub events: Arc<EventLog>,
    pub cron: CronRuntime,
    pub jobs: Arc<JobSupervisor>,
    job_completions: Option<UnboundedReceiver<JobCompletion>>,
    cron_wakeups: Option<UnboundedReceiver<CronWakeup>>,
    watch: Option<MailboxWatch>,
    mcp: Arc<McpServers>,
    /// A shared team's database parts and its wakeups from other processes.
    shared: Option<(PgParts, WakeGuard)>,
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
    /// groups terminated, recorded as cancelled), then the MCP servers (sessions closed, stdio
    /// servers' process groups killed); then the watch and the run lock.
    pub async fn close(mut self) {
        self.runtime.close().await;
        self.cron.close().await;
        self.jobs.close().await;
        self.mcp.stop().await;
        self.watch.take();
        if let Some((parts, wakeups)) = self.shared.take() {
            drop(wakeups);
            parts.leave();
        }
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

/// Who the lead is, how events reach it and what the plan gate does to its teammates in this
/// run: the identity part of its living system prompt.
pub fn lead_system_prompt(workspace: &std::path::Path, require_plans: bool) -> String {
    format!(
        "You are lead, the lead agent of a troupe team working in the workspace {}.\n\
         Do work yourself with your tools, or spawn teammates for parallel work. Teammates' \
         results, their plan requests, their shutdown answers, background job completions and \
         cron wakeups reach you as user messages starting with [event], holding JSON. Review a \
         plan_approval_request with review_plan. When a teammate's work is done, ask it to stop \
         with request_shutdown; its name can then be spawned again as a new teammate with a \
         fresh conversation. Keep answers short.\n{}",
        workspace.display(),
        lead_plan_gate_text(require_plans)
    )
}

/// The living system prompt of `agent`: `identity`, then its tools, the workspace, the skills
/// catalog, selected memory, the roster and pending requests.
fn living_prompt(
    agent: &AgentName,
    identity: String,
    registry: &Arc<ToolRegistry>,
    workspace: &std::path::Path,
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
        },
        team,
        clock,
    ))
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

/// A registry of `tools` offered in the order of `names` (which must name each exactly once):
/// the order is written once, in [`LEAD_TOOLS`] / [`TEAMMATE_TOOLS`], not again where the
/// tools are built.
fn registry_in_order(
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

/// What every agent's runner gets for long runs (SPEC §9): the run's usage and token budget,
/// the context budget with artifacts for large results, memory, and the settings' hooks.
struct LongLivedKit {
    layout: Layout,
    ids: Arc<dyn IdGenerator>,
    usage: Arc<RunUsage>,
    max_run_tokens: Option<u64>,
    budget: ContextBudget,
    remember: bool,
    /// The settings' `[[hooks]]`, if any: tool hooks for every dispatcher, prompt and stop
    /// hooks for the lead and teammates.
    hooks: Option<CommandHooks>,
    /// The memory records: the workspace's, or a shared team's.
    memory: MemoryStore,
    /// Where artifacts are copied too and recovered from: a shared team's database, or nowhere.
    artifact_copy: Arc<dyn ArtifactCopy>,
}

/// A hook's `matcher` read like a permission rule (`shell`, `shell(cargo test:*)`,
/// `write_file(docs/**)`): it fires when the rule would restrict the call — for a shell chain,
/// when any part matches. No matcher (or `*`) fires on every call.
fn hook_matchers(workspace: PathBuf) -> crate::hooks::MatcherFactory {
    Arc::new(move |matcher: Option<&str>| -> crate::hooks::ToolMatcher {
        match matcher.map(str::trim) {
            None | Some("") | Some("*") => Arc::new(|_: &str, _: &serde_json::Value| true),
            Some(text) => {
                let pattern = RulePattern::parse(text);
                let workspace = workspace.clone();
                Arc::new(move |tool: &str, arguments: &serde_json::Value| {
                    pattern.matches(tool, arguments, &workspace, Use::Restrict)
                })
            }
        }
    })
}

impl LongLivedKit {
    /// `shared`: a shared team's database, where every usage record and artifact is copied too
    /// and the memory records are.
    fn new(
        layout: &Layout,
        settings: &TeamSettings,
        events_run_id: &str,
        shared: Option<&PgStore>,
    ) -> Self {
        let memory = match shared {
            Some(store) => MemoryStore::shared(layout, Arc::new(PgMemory::new(store.clone()))),
            None => MemoryStore::open(layout),
        };
        let artifact_copy: Arc<dyn ArtifactCopy> = match shared {
            Some(store) => Arc::new(PgArtifacts::new(store.clone())),
            None => Arc::new(FilesOnly),
        };
        let hooks = &settings.settings.hooks;
        let hooks = (!hooks.is_empty()).then(|| {
            let hooks = CommandHooks::with_matchers(
                hooks.clone(),
                settings.workspace.clone(),
                events_run_id,
                hook_matchers(settings.workspace.clone()),
            );
            if settings.sandbox.confine_hooks {
                hooks.confined(settings.sandbox.sandbox.clone())
            } else {
                hooks
            }
        });
        let run_id = settings.ids.next_uuid().to_string();
        Self {
            layout: layout.clone(),
            ids: settings.ids.clone(),
            usage: Arc::new(RunUsage::new(
                run_id,
                UsageLog::open(layout, settings.clock.clone())
                    .with_copy(shared::copies::usage(shared)),
            )),
            max_run_tokens: settings.long_lived.max_run_tokens,
            budget: ContextBudget::for_model(
                &settings.long_lived.model_name,
                settings.long_lived.context_window,
            ),
            remember: settings.long_lived.remember,
            hooks,
            memory,
            artifact_copy,
        }
    }

    /// The dispatcher hooks of the settings (none without `[[hooks]]`).
    fn tool_hooks(&self) -> Hooks {
        self.hooks
            .as_ref()
            .map(CommandHooks::tool_hooks)
            .unwrap_or_default()
    }

    /// `runner` (of `agent`, answered by `model`) with the run's usage, the context budget and
    /// artifacts, and — for the lead and teammates, not subagents — memory and the prompt and
    /// stop hooks.
    fn apply(
        &self,
        runner: Runner,
        agent: &AgentName,
        model: &Arc<dyn ModelClient>,
        with_memory: bool,
    ) -> Runner {
        let runner = runner
            .with_usage(self.usage.clone(), self.max_run_tokens)
            .with_context(
                self.budget,
                Some(
                    ArtifactStore::new(&self.layout, agent, self.ids.clone())
                        .with_copy(self.artifact_copy.clone()),
                ),
            );
        if !with_memory {
            return runner;
        }
        let runner = match &self.hooks {
            Some(hooks) => runner.with_hooks(hooks.clone()),
            None => runner,
        };
        let queries =
            MemoryQueries::new(model.clone()).with_usage(agent.clone(), self.usage.clone());
        let memory = Memory::new(self.memory.clone(), queries);
        runner.with_memory(Arc::new(memory), self.remember)
    }
}

/// The stores of a run, opened once; recovery has put claimed messages back to `ready/`.
struct Stores {
    mailbox: Arc<dyn MailboxStore>,
    protocol: Arc<dyn ProtocolStore>,
    audit: Arc<JsonlAuditSink>,
    board: Arc<dyn TaskBoard>,
    /// How many messages recovery moved back to ready.
    recovered: usize,
    transcripts: Arc<dyn Transcripts>,
    /// A shared team's one-transaction consume + ack (reporting to the event stream).
    response_ack: Option<Arc<dyn ResponseAck>>,
    /// The database parts of a shared team.
    pg: Option<PgParts>,
}

/// Opens this run's event stream, says the run started, and puts the recorder in front of the
/// caller's observers, so that every runner and the team report into the stream.
///
/// In a shared team every event is also copied to the team's stream in the database
/// (`troupe log --store`), from the first one on.
fn open_events(
    layout: &Layout,
    settings: &mut TeamSettings,
    pg: Option<&PgParts>,
) -> Result<Arc<EventLog>, BootstrapError> {
    let log = EventLog::open(
        layout,
        settings.clock.clone(),
        settings.ids.next_uuid().to_string(),
        settings.redactor.clone(),
    )?;
    for listener in &settings.events.listeners {
        log.subscribe(listener.clone());
    }
    if let Some(parts) = pg {
        log.subscribe(PgEventMirror::start(&parts.store));
    }
    let log = Arc::new(log);
    let recorder = Arc::new(EventRecorder::new(log.clone()));
    settings.run_observer = Arc::new(Both(recorder.clone(), settings.run_observer.clone()));
    settings.team_observer = Arc::new(Both(recorder, settings.team_observer.clone()));
    settings.approval = Arc::new(ObservedApproval::new(
        settings.approval.clone(),
        log.clone(),
    ));
    log.emit(
        RUN_AGENT,
        kinds::RUN_STARTED,
        kinds::fields(serde_json::json!({
            "prompt": kinds::preview(&settings.events.prompt),
            "workspace": settings.workspace.display().to_string(),
            "model": settings.long_lived.model_name,
            "sandbox": settings.sandbox.sandbox.describe(),
        })),
    );
    Ok(log)
}

/// Joins the shared team of `settings` as `role` (`lead`, `worker`), if the team is shared.
fn open_shared(settings: &TeamSettings, role: &str) -> Result<Option<PgParts>, BootstrapError> {
    match &settings.store {
        StoreChoice::Files => Ok(None),
        StoreChoice::Postgres(options) => Ok(Some(shared::open(options, role)?)),
    }
}

/// Opens the stores (on `pg` for a shared team); messages a dead run left in `processing/` go
/// back to `ready/`. The mailbox and the protocol store report their transitions to `events`.
fn open_stores(
    layout: &Layout,
    settings: &TeamSettings,
    events: &Arc<EventLog>,
    pg: Option<PgParts>,
) -> Result<Stores, BootstrapError> {
    type Opened = (
        Arc<dyn MailboxStore>,
        Arc<dyn ProtocolStore>,
        Arc<dyn TaskBoard>,
        Arc<dyn Transcripts>,
        Option<PgParts>,
    );
    let (clock, ids) = (settings.clock.clone(), settings.ids.clone());
    let mut response_ack: Option<Arc<dyn ResponseAck>> = None;
    let (mailbox, protocol, board, transcripts, pg): Opened = match pg {
        None => (
            Arc::new(FileMailboxStore::new(layout, clock.clone())),
            Arc::new(JsonProtocolStore::open(layout, clock.clone(), ids.clone())?),
            Arc::new(FileTaskBoard::new(layout, clock, ids)),
            Arc::new(FileTranscripts(layout.clone())),
            None,
        ),
        Some(parts) => {
            let mailbox = Arc::new(parts.mailbox(clock.clone()));
            let protocol = Arc::new(parts.protocol(clock.clone(), ids.clone()));
            response_ack = Some(Arc::new(ObservedResponseAck::new(
                Arc::new(PgResponseAck::new(
                    parts.store.clone(),
                    mailbox.clone(),
                    protocol.clone(),
                )),
                events.clone(),
            )));
            (
                mailbox,
                protocol,
                Arc::new(parts.board(clock, ids)),
                parts.transcripts(),
                Some(parts),
            )
        }
    };
    // With files, the run lock says nobody else works on the mailboxes; in a database only
    // expired leases are released (see `PgMailboxStore::recover`).
    let mut recovered = 0;
    for agent in mailbox.agents()? {
        recovered += mailbox.recover(&agent)?.released.len();
    }
    Ok(Stores {
        mailbox: Arc::new(ObservedMailbox::new(mailbox, events.clone())),
        protocol: Arc::new(ObservedProtocol::new(protocol, events.clone())),
        audit: Arc::new(
            JsonlAuditSink::open(layout, settings.clock.clone())?
                .with_copy(shared::copies::audit(pg.as_ref().map(|parts| &parts.store))),
        ),
        board,
        recovered,
        transcripts,
        response_ack,
        pg,
    })
}

/// Takes the workspace's run lock and writes who holds it; `Busy` when another run has it.
fn take_run_lock(layout: &Layout, clock: &dyn Clock) -> Result<LockGuard, BootstrapError> {
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
    run_lock.write_holder(&format!("pid {} since {}", std::process::id(), clock.now()))?;
    Ok(run_lock)
}

/// What a dead run left half done: answers recorded but not delivered are delivered (before any
/// worker runs: this postman wakes nobody), jobs still marked running are settled.
fn finish_earlier_run(
    layout: &Layout,
    settings: &TeamSettings,
    stores: &Stores,
) -> Result<(), BootstrapError> {
    let postman = Arc::new(Postman::new(
        stores.mailbox.clone(),
        settings.clock.clone(),
        settings.ids.clone(),
        settings.team_observer.clone(),
    ));
    ProtocolRuntime::new(stores.protocol.clone(), postman, settings.request_ttl)
        .deliver_recorded_answers()?;
    let copy = shared::copies::jobs(stores.pg.as_ref().map(|parts| &parts.store));
    let orphans = crate::jobs::orphans::settle_orphans(layout, &copy, settings.clock.now())
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
    Ok(())
}

struct Factory {
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
    kit: Arc<LongLivedKit>,
    /// The agent definitions read at run start (and why the invalid ones were skipped).
    definitions: Definitions,
    /// `[model.agents]` and the rest of the model settings.
    model_settings: crate::settings::ModelSettings,
    sandbox: SandboxOptions,
    mcp: Arc<McpServers>,
    transcripts: Arc<dyn Transcripts>,
    /// A shared team's roster: each teammate's effects run only under its lease.
    leases: Option<Arc<dyn crate::store::roster::LeasedRoster>>,
}

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

    fn build(&self, team: TeamHandle, teammate: &TeammateRecord) -> Result<Runner, TeamError> {
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
        let gate_start = self.gate_start(teammate);
        let gate = PlanGateRule::new(self.protocol.clone(), self.clock.clone())
            .starting(gate_start)
            .ignoring(teammate.earlier_plan);
        let mut rules: Vec<Arc<dyn crate::permissions::PermissionRule>> =
            vec![Arc::new(gate), Arc::new(LeadOnlyRule)];
        if let Some(roster) = &self.leases {
            rules.push(Arc::new(crate::team::lease_gate::LeaseGate::new(
                roster.clone(),
                name.clone(),
            )));
        }
        let policy = self.policy.with_rules(rules);
        let all_tools: Vec<Arc<dyn ToolHandler>> = vec![
            Arc::new(
                self.sandbox
                    .shell(self.sandbox.for_definition(definition.as_ref())?, &policy)
                    .with_timeout(self.shell_timeout)
                    .with_jobs(self.jobs.clone()),
            ),
            Arc::new(ReadFileTool),
            Arc::new(WriteFileTool),
            Arc::new(SendMessage(team.clone())),
            Arc::new(SubmitPlan(team.clone())),
        ];
        let tools = registry_in_order(
            all_tools
                .into_iter()
                .filter(|tool| {
                    let tool_name = tool.definition().name;
                    definition
                        .as_ref()
                        .is_none_or(|d| d.allows_tool(&tool_name))
                })
                .collect(),
            &TEAMMATE_TOOLS
                .into_iter()
                .filter(|tool| definition.as_ref().is_none_or(|d| d.allows_tool(tool)))
                .collect::<Vec<_>>(),
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
            &self.workspace,
            team,
            self.clock.clone(),
        );
        let dispatcher = Dispatcher::new(tools, policy, self.kit.tool_hooks())
            .with_redactor(self.redactor.clone());
        let model_name = agent_model(&self.model_settings, name, definition.as_ref());
        let model = self.models.model_named(name, model_name.as_deref());
        let runner = Runner::new(
            name.clone(),
            String::new(),
            model.clone(),
            Arc::new(dispatcher),
            self.workspace.clone(),
            self.run_observer.clone(),
        )
        .with_max_turns(self.max_turns)
        .with_system_prompt(prompt);
        Ok(self
            .kit
            .apply(runner, name, &model, true)
            .with_transcript(self.transcripts.open(name))?)
    }
}

/// The factory of teammates' runners: the base policy plus each teammate's plan gate, the
/// teammate tools, the same redactor and jobs as the lead.
fn teammate_factory(
    settings: &TeamSettings,
    stores: &Stores,
    policy: &PermissionPolicy,
    jobs: &Arc<JobSupervisor>,
    kit: &Arc<LongLivedKit>,
    definitions: Definitions,
) -> Arc<Factory> {
    Arc::new(Factory {
        workspace: settings.workspace.clone(),
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
        sandbox: settings.sandbox.clone(),
        mcp: settings.mcp.clone(),
        transcripts: stores.transcripts.clone(),
        leases: stores
            .pg
            .as_ref()
            .map(|parts| parts.roster.clone() as Arc<dyn crate::store::roster::LeasedRoster>),
    })
}

/// The lead's tools, in [`LEAD_TOOLS`] order: the base agent's, the subagent (`task`, with the
/// base tools under the lead's policy, no background jobs: a one-shot helper must not leave work
/// running), the task board, cron, and the team and protocol tools.
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
        Arc::new(SpawnTeammate(team.clone())),
        Arc::new(SendMessage(team.clone())),
        Arc::new(RequestShutdown(team.clone())),
        Arc::new(ReviewPlan(team.clone())),
    ]);
    tools.extend(task_tools(stores.board.clone()));
    let mut registry = registry_in_order(tools, &LEAD_TOOLS)?;
    // After the fixed SPEC order: the MCP servers' tools, servers in settings order.
    register_all(&mut registry, mcp_tools(&settings.mcp));
    Ok(registry)
}

/// The workspace's agent definitions (`agents/*.md`); each invalid one is skipped with a
/// warning naming its file and the reason (shown on stderr at run start), and kept so that a
/// `spawn_teammate` naming it is told why.
fn read_definitions(workspace: &std::path::Path) -> Definitions {
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
struct Definitions {
    found: Arc<Vec<AgentDefinition>>,
    problems: Arc<Vec<definitions::Problem>>,
}

/// The background jobs of a process, reporting to its event stream; their completions arrive
/// on the receiver.
fn job_supervisor(
    layout: &Layout,
    settings: &TeamSettings,
    events: &Arc<EventLog>,
    stores: &Stores,
) -> (Arc<JobSupervisor>, UnboundedReceiver<JobCompletion>) {
    let (job_tx, job_completions) = tokio::sync::mpsc::unbounded_channel();
    let jobs = Arc::new(
        JobSupervisor::new(
            layout.clone(),
            settings.clock.clone(),
            settings.ids.clone(),
            job_tx,
        )
        .with_copy(shared::copies::jobs(
            stores.pg.as_ref().map(|parts| &parts.store),
        ))
        .with_redactor(settings.redactor.clone())
        .with_events(events.clone()),
    );
    (jobs, job_completions)
}

/// A worker process of a shared team (`troupe worker`): it runs the teammates whose leases it
/// holds, in its own workspace, until it is closed.
pub struct Worker {
    pub runtime: TeamRuntime,
    pub events: Arc<EventLog>,
    /// This worker's id in the team's registry (what `troupe status` shows).
    pub holder: String,
    jobs: Arc<JobSupervisor>,
    mcp: Arc<McpServers>,
    shared: Option<(PgParts, WakeGuard)>,
    _run_lock: LockGuard,
}

impl Worker {
    /// Stops its teammates at a safe point (their claimed messages released, their leases
    /// freed for other workers), then its background jobs and MCP servers.
    pub async fn close(mut self) {
        self.runtime.close().await;
        self.jobs.close().await;
        self.mcp.stop().await;
        if let Some((parts, wakeups)) = self.shared.take() {
            drop(wakeups);
            parts.leave();
        }
    }
}

/// Builds a worker of the shared team `settings.store` names, on its own workspace (a checkout
/// of the same repository as the lead's): it takes that workspace's run lock, registers in the
/// team's worker registry, and leases teammates as their messages arrive or their earlier
/// worker's leases run out.
pub fn build_worker(mut settings: TeamSettings) -> Result<Worker, BootstrapError> {
    if !matches!(settings.store, StoreChoice::Postgres(_)) {
        return Err(BootstrapError::Backend(crate::store::BackendError::new(
            "invalid_arguments",
            "troupe worker needs a shared store: --store postgres://… (or TROUPE_STORE_URL, or [store] url in troupe.toml)",
        )));
    }
    let layout = Layout::new(&settings.workspace);
    let run_lock = take_run_lock(&layout, settings.clock.as_ref())?;
    let pg = open_shared(&settings, "worker")?;
    let events = open_events(&layout, &mut settings, pg.as_ref())?;
    let mut stores = open_stores(&layout, &settings, &events, pg)?;
    finish_earlier_run(&layout, &settings, &stores)?;
    let base_policy = PermissionPolicy::from_settings(
        &settings.settings.rules,
        &settings.workspace,
        settings.approval.clone(),
        stores.audit.clone(),
    );
    let (jobs, mut job_completions) = job_supervisor(&layout, &settings, &events, &stores);
    // A teammate's background job ends in its worker; the lead is not in this process, so
    // completions are only recorded (in the job's record and the event stream).
    tokio::spawn(async move { while job_completions.recv().await.is_some() {} });
    let kit = Arc::new(LongLivedKit::new(
        &layout,
        &settings,
        events.run_id(),
        stores.pg.as_ref().map(|parts| &parts.store),
    ));
    let definitions = read_definitions(&settings.workspace);
    let runtime = TeamRuntime::new(
        layout.clone(),
        // A worker runs teammates whatever the lead's --no-local-workers says.
        team_ports(&settings, &stores, Some(true)),
        teammate_factory(&settings, &stores, &base_policy, &jobs, &kit, definitions),
    )?;
    let parts = stores.pg.take();
    let holder = parts.as_ref().map(|p| p.holder.clone()).unwrap_or_default();
    let shared = parts.map(|parts| {
        let wakeups = parts.wakeups(&runtime, true);
        (parts, wakeups)
    });
    runtime.wake_all();
    Ok(Worker {
        runtime,
        events,
        holder,
        jobs,
        mcp: settings.mcp.clone(),
        shared,
        _run_lock: run_lock,
    })
}

/// What the team runtime is built on, from the opened stores; `local_workers` overrides the
/// settings' choice (a worker always runs teammates).
fn team_ports(settings: &TeamSettings, stores: &Stores, local_workers: Option<bool>) -> TeamPorts {
    TeamPorts {
        mailbox: stores.mailbox.clone(),
        protocol: stores.protocol.clone(),
        clock: settings.clock.clone(),
        ids: settings.ids.clone(),
        observer: settings.team_observer.clone(),
        request_ttl: settings.request_ttl,
        transcripts: stores.transcripts.clone(),
        placement: placement(settings, stores, local_workers),
    }
}

/// Where teammates run: here, or — in a team across processes — under leases, in this process
/// only if it runs teammates (`local_workers` overrides the settings: a worker always does).
fn placement(
    settings: &TeamSettings,
    stores: &Stores,
    local_workers: Option<bool>,
) -> Arc<dyn crate::team::Placement> {
    let (StoreChoice::Postgres(options), Some(parts), Some(response_ack)) =
        (&settings.store, &stores.pg, &stores.response_ack)
    else {
        return Arc::new(crate::team::Here);
    };
    Arc::new(crate::team::UnderLease {
        roster: parts.roster.clone(),
        local_workers: local_workers.unwrap_or(options.local_workers),
        require_plans: settings.require_plans,
        response_ack: response_ack.clone(),
    })
}

/// Builds the whole team on a workspace. Fails with `Busy` if another run holds it.
pub fn build_team(mut settings: TeamSettings) -> Result<Team, BootstrapError> {
    let layout = Layout::new(&settings.workspace);
    let run_lock = take_run_lock(&layout, settings.clock.as_ref())?;
    let pg = open_shared(&settings, "lead")?;
    let events = open_events(&layout, &mut settings, pg.as_ref())?;
    let mut stores = open_stores(&layout, &settings, &events, pg)?;
    finish_earlier_run(&layout, &settings, &stores)?;
    let base_policy = PermissionPolicy::from_settings(
        &settings.settings.rules,
        &settings.workspace,
        settings.approval.clone(),
        stores.audit.clone(),
    );

    let (jobs, job_completions) = job_supervisor(&layout, &settings, &events, &stores);
    let (cron_tx, cron_wakeups) = tokio::sync::mpsc::unbounded_channel();
    // A shared team's lead keeps its durable jobs in the database: a lead started on another
    // host goes on with them.
    let cron_store = match &stores.pg {
        Some(parts) => CronStore::shared(&layout, parts.cron_document()),
        None => CronStore::new(&layout),
    };
    let cron = CronRuntime::open_store(
        cron_store,
        settings.clock.clone(),
        settings.ids.clone(),
        cron_tx,
    )?;
    cron.report_to(events.clone());
    cron.start()?;

    let kit = Arc::new(LongLivedKit::new(
        &layout,
        &settings,
        events.run_id(),
        stores.pg.as_ref().map(|parts| &parts.store),
    ));
    let definitions = read_definitions(&settings.workspace);
    let runtime = TeamRuntime::new(
        layout.clone(),
        team_ports(&settings, &stores, None),
        teammate_factory(
            &settings,
            &stores,
            &base_policy,
            &jobs,
            &kit,
            definitions.clone(),
        ),
    )?;
    let tools = lead_tools(
        &settings,
        &stores,
        &base_policy,
        &jobs,
        &cron,
        &runtime.handle(),
        &kit,
    )?;
    let lead_name = AgentName::lead();
    let earlier_session = if settings.long_lived.new_session {
        stores.transcripts.set_aside(&lead_name)?
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
            Dispatcher::new(tools, base_policy, kit.tool_hooks())
                .with_redactor(settings.redactor.clone()),
        ),
        settings.workspace.clone(),
        settings.run_observer.clone(),
    )
    .with_max_turns(settings.max_turns)
    .with_system_prompt(prompt);
    let lead = kit
        .apply(lead, &lead_name, &lead_model, true)
        .with_transcript(stores.transcripts.open(&lead_name))?;

    let watch = if settings.watch {
        Some(watch::start(&layout, runtime.postman().clone())?)
    } else {
        None
    };
    let shared = stores.pg.take().map(|parts| {
        let wakeups = parts.wakeups(&runtime, false);
        (parts, wakeups)
    });
    runtime.wake_all();
    Ok(Team {
        runtime,
        lead,
        mailbox: stores.mailbox,
        protocol: stores.protocol,
        recovered: stores.recovered,
        earlier_session,
        usage: kit.usage.clone(),
        events,
        cron,
        jobs,
        job_completions: Some(job_completions),
        cron_wakeups: Some(cron_wakeups),
        watch,
        mcp: settings.mcp.clone(),
        shared,
        _run_lock: run_lock,
    })
}

/// `troupe send --store`: sends `text` from `user` to `to` in the team `team` of the
/// PostgreSQL database at `url` (which must hold troupe's schema: nothing is created), on the
/// system clock and random ids.
pub fn send_to_shared_team(
    url: &str,
    team: &str,
    to: &AgentName,
    text: &str,
) -> Result<troupe_wire::MessageId, crate::send::SendError> {
    let store = crate::store::postgres::PgStore::connect_existing(url, team)?;
    let holder = format!("send:{}", std::process::id());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let roster = crate::store::postgres::PgRoster::new(
        store.clone(),
        &holder,
        crate::store::postgres::TEAMMATE_LEASE,
    );
    let mailbox =
        crate::store::postgres::PgMailboxStore::new(store, clock.clone(), &holder, Duration::ZERO);
    crate::send::send_to_team(&roster, &mailbox, clock.as_ref(), to, text)
}

/// The read-only views of a team: [`inspector`]'s on files, or — for a team shared through
/// PostgreSQL — its mailboxes, requests, roster and workers from the database (which must
/// already hold troupe's schema: inspection changes nothing).
pub fn inspector_with(
    workspace: &std::path::Path,
    store: &StoreChoice,
) -> Result<Inspector, BootstrapError> {
    let StoreChoice::Postgres(options) = store else {
        return Ok(inspector(workspace));
    };
    let pg = crate::store::postgres::PgStore::connect_existing(&options.url, &options.team)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let holder = format!("inspect:{}", std::process::id());
    Ok(Inspector::shared(
        Layout::new(workspace),
        clock.clone(),
        crate::inspect::SharedStores {
            mailbox: Arc::new(crate::store::postgres::PgMailboxStore::new(
                pg.clone(),
                clock.clone(),
                &holder,
                Duration::ZERO,
            )),
            protocol: Arc::new(crate::store::postgres::PgProtocolStore::new(
                pg.clone(),
                clock.clone(),
                Arc::new(RandomIds),
            )),
            board: Arc::new(crate::store::postgres::PgTaskBoard::new(
                pg.clone(),
                clock,
                Arc::new(RandomIds),
            )),
            usage: Arc::new(PgUsage::new(pg.clone())),
            cron: CronStore::shared(
                &Layout::new(workspace),
                Arc::new(crate::store::postgres::document::PgDocument::new(
                    pg.clone(),
                    crate::cron::store::CRON_DOCUMENT,
                )),
            ),
            jobs: Arc::new(PgJobs::new(pg.clone())),
            roster: Arc::new(crate::store::postgres::PgRoster::new(
                pg,
                &holder,
                crate::store::postgres::TEAMMATE_LEASE,
            )),
        },
    ))
}

/// The read-only views of a workspace (`troupe status`, `requests`, `mailbox`, `jobs`, `tasks`,
/// `cron`), on the system clock.
pub fn inspector(workspace: &std::path::Path) -> Inspector {
    Inspector::new(Layout::new(workspace), Arc::new(SystemClock))
}

/// `troupe review`: answering a plan request as the lead from outside a run — the protocol
/// store, a postman on the file mailboxes (it wakes nobody: the running team's watch sees the
/// answer arrive), and the roster from `team.json` for the "is its sender still there" rule.
pub struct PlanReview {
    pub store: Arc<dyn ProtocolStore>,
    pub protocol: ProtocolRuntime,
    layout: Layout,
    /// A shared team's roster, read from its database.
    shared_roster: Option<Arc<dyn crate::store::roster::LeasedRoster>>,
}

impl PlanReview {
    /// Opens the workspace's protocol store; `None` when it has no protocol requests.
    pub fn open(workspace: &std::path::Path) -> Result<Option<Self>, BootstrapError> {
        let layout = Layout::new(workspace);
        if !layout.protocol_dir().is_dir() {
            return Ok(None);
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ids: Arc<dyn IdGenerator> = Arc::new(RandomIds);
        let store: Arc<dyn ProtocolStore> = Arc::new(JsonProtocolStore::open(
            &layout,
            clock.clone(),
            ids.clone(),
        )?);
        let postman = Arc::new(Postman::new(
            Arc::new(FileMailboxStore::new(&layout, clock.clone())),
            clock,
            ids,
            Arc::new(NoTeamObserver),
        ));
        // The TTL is unused: a review only answers existing requests.
        let protocol = ProtocolRuntime::new(store.clone(), postman, Duration::from_secs(300));
        Ok(Some(Self {
            store,
            protocol,
            layout,
            shared_roster: None,
        }))
    }

    /// [`Self::open`] for the team `store` names: a shared team's protocol store, mailboxes
    /// (the answer's insert wakes the running team through its NOTIFY) and roster are its
    /// database's, which must already hold troupe's schema.
    pub fn open_with(
        workspace: &std::path::Path,
        store: &StoreChoice,
    ) -> Result<Option<Self>, BootstrapError> {
        let StoreChoice::Postgres(options) = store else {
            return Self::open(workspace);
        };
        let pg = crate::store::postgres::PgStore::connect_existing(&options.url, &options.team)?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ids: Arc<dyn IdGenerator> = Arc::new(RandomIds);
        let holder = format!("review:{}", std::process::id());
        let protocol_store: Arc<dyn ProtocolStore> = Arc::new(
            crate::store::postgres::PgProtocolStore::new(pg.clone(), clock.clone(), ids.clone()),
        );
        let postman = Arc::new(Postman::new(
            Arc::new(crate::store::postgres::PgMailboxStore::new(
                pg.clone(),
                clock.clone(),
                &holder,
                options.lease,
            )),
            clock,
            ids,
            Arc::new(NoTeamObserver),
        ));
        let protocol =
            ProtocolRuntime::new(protocol_store.clone(), postman, Duration::from_secs(300));
        Ok(Some(Self {
            store: protocol_store,
            protocol,
            layout: Layout::new(workspace),
            shared_roster: Some(Arc::new(crate::store::postgres::PgRoster::new(
                pg,
                &holder,
                options.lease,
            ))),
        }))
    }

    /// The roster as `team.json` (or a shared team's database) has it now (read when asked:
    /// the run may change it).
    pub fn roster(&self) -> Result<TeamRoster, InspectError> {
        if let Some(roster) = &self.shared_roster {
            return Ok(TeamRoster {
                version: TeamRoster::VERSION,
                teammates: roster.all().map_err(|e| InspectError::Io {
                    path: "the team's PostgreSQL database".into(),
                    source: std::io::Error::other(format!("{e} [{}]", e.code)),
                })?,
            });
        }
        read_roster(&self.layout.team_file())
    }
}

/// What `troupe compact` did.
#[derive(Debug)]
pub enum Compacted {
    /// The conversation was compacted.
    Done(CompactionReport),
    /// Its older part was too small to compact: its length and size, unchanged.
    Nothing { messages: usize, bytes: usize },
}

/// `troupe compact`: compacts `agent`'s conversation now — under the run lock, so never while a
/// run is continuing it — keeping the last few exchanges, with the run's summary rules (a
/// summary retried once, else the older part dropped with a note) and, with `remember`,
/// memories extracted from what is summarised first. The tokens it spends go to `usage.jsonl`.
///
/// On a shared team (`store`: PostgreSQL) the conversation is the one in the team's database,
/// compacted under the team's lead lock as well (a running lead of the team refuses it,
/// `workspace_busy`, as a run holding the run lock does) and — for a teammate — only while no
/// worker holds its lease; the event goes to the team's stream too, the usage to its totals,
/// memories to its records.
pub async fn compact_conversation(
    workspace: &std::path::Path,
    agent: &AgentName,
    model: Arc<dyn ModelClient>,
    long_lived: &LongLived,
    store: &StoreChoice,
) -> Result<Compacted, BootstrapError> {
    let layout = Layout::new(workspace);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let shared = match store {
        StoreChoice::Files => None,
        StoreChoice::Postgres(options) => Some(shared::open_to_compact(options, agent)?),
    };
    let transcript: Arc<dyn crate::agent::transcript::Transcript> = match &shared {
        None => {
            let path = layout.transcript(agent);
            if !path.exists() {
                return Err(BootstrapError::NoConversation {
                    agent: agent.to_string(),
                });
            }
            Arc::new(FileTranscript::new(path))
        }
        Some(compaction) => compaction.transcript.clone(),
    };
    let _run_lock = take_run_lock(&layout, clock.as_ref())?;
    let loaded = transcript.load()?;
    if let Some(compaction) = &shared {
        if loaded.messages.is_empty() && loaded.boundaries == 0 {
            return Err(BootstrapError::NoSharedConversation {
                agent: agent.to_string(),
                team: compaction.store.team().to_owned(),
            });
        }
    }
    let mut history = crate::agent::History::restore(String::new(), loaded, transcript);
    let run_id = RandomIds.next_uuid().to_string();
    // The compaction is recorded in the event stream like a run's (trigger `manual`).
    let events = EventLog::open(
        &layout,
        clock.clone(),
        run_id.clone(),
        crate::secrets::process_redactor(),
    )?;
    let mirror = shared
        .as_ref()
        .map(|compaction| PgEventMirror::start(&compaction.store));
    if let Some(mirror) = &mirror {
        events.subscribe(mirror.clone());
    }
    let events = Arc::new(events);
    let usage_copy = shared::copies::usage(shared.as_ref().map(|compaction| &compaction.store));
    let usage = Arc::new(RunUsage::new(
        run_id,
        UsageLog::open(&layout, clock).with_copy(usage_copy),
    ));
    let mut compactor = Compactor::new(
        agent.clone(),
        ContextBudget::for_model(&long_lived.model_name, long_lived.context_window),
        model.clone(),
        usage.clone(),
        Arc::new(EventRecorder::new(events.clone())),
    );
    if long_lived.remember {
        let memory = match &shared {
            Some(compaction) => {
                MemoryStore::shared(&layout, Arc::new(PgMemory::new(compaction.store.clone())))
            }
            None => MemoryStore::open(&layout),
        };
        compactor.set_memory(Some(Arc::new(Memory::new(
            memory,
            MemoryQueries::new(model).with_usage(agent.clone(), usage),
        ))));
    }
    let messages = history.len();
    let bytes = crate::agent::context::micro::sent_bytes(history.messages(), &[]);
    let keep = Keep::Exchanges(REACTIVE_KEEP_GROUPS);
    let cancel = tokio_util::sync::CancellationToken::new();
    let outcome = compactor
        .compact(&mut history, &[], keep, Trigger::Manual, &cancel)
        .await;
    if let Some(mirror) = mirror {
        // The team's stream gets the event before the command ends (a bounded wait).
        crate::sync::blocking(|| mirror.close());
    }
    Ok(match outcome {
        Some(report) => Compacted::Done(report),
        None => Compacted::Nothing { messages, bytes },
    })
}
