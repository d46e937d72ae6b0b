//! What a run is built from: the settings a team gets from outside ([`TeamSettings`]: the
//! sandbox, the event stream, the long-run options, where the stores are), which model answers
//! which agent ([`ModelChooser`]), and the error every step of bootstrap reports
//! ([`BootstrapError`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_wire::AgentName;

use crate::agent::RunObserver;
use crate::clock::Clock;
use crate::cron::CronError;
use crate::error::ErrorCode;
use crate::ids::IdGenerator;
use crate::inspect::InspectError;
use crate::mcp::McpServers;
use crate::model::ModelClient;
use crate::permissions::{ApprovalProvider, AuditError, PermissionPolicy};
use crate::sandbox::{Mode as SandboxMode, Policy as SandboxPolicy, Sandbox};
use crate::secrets::Redactor;
use crate::store::events::{EventListener, EventLogError};
use crate::store::mailbox::MailboxError;
use crate::store::protocol::ProtocolError;
use crate::store::{BackendError, IoError};
use crate::team::definitions::AgentDefinition;
use crate::team::watch::WatchError;
use crate::team::{TeamError, TeamObserver};
use crate::tools::shell::ShellTool;
use crate::tools::RegistryError;

/// Which model answers which agent: defined with the team (a replay's models pace the lead's
/// events), chosen here.
pub use crate::team::ModelChooser;

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
    /// and to a teammate when its definition lists them. Stopped by [`Team::close`](super::Team::close).
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
    pub(super) fn shell(&self, sandbox: Arc<Sandbox>, policy: &PermissionPolicy) -> ShellTool {
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
    /// The person's prompt, for the `run_started` event; empty for a run that continues what
    /// an earlier one left (`troupe run --continue`: the event says `"continued": true`).
    pub prompt: String,
    /// OpenTelemetry traces of the run, when the `OTEL_*` variables or `[telemetry]` ask.
    pub telemetry: Option<crate::telemetry::TelemetryOptions>,
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
    /// The run stops gracefully once the estimated cost of all agents' calls reaches this, by
    /// the settings' prices (`[prices]` over the built-in table).
    pub max_run_cost: Option<crate::prices::Cost>,
    /// The lead starts a fresh conversation; its old transcript is kept as `lead.<n>.jsonl`.
    pub new_session: bool,
}

/// Where a team's stores are.
#[derive(Debug, Clone, Default)]
pub enum StoreChoice {
    /// Files under the workspace's `.troupe/` (the default).
    #[default]
    Files,
    /// PostgreSQL, shared with other processes.
    Postgres(PgOptions),
}

impl StoreChoice {
    /// The shared team's options, when the stores are in PostgreSQL.
    pub fn shared(&self) -> Option<&PgOptions> {
        match self {
            Self::Files => None,
            Self::Postgres(options) => Some(options),
        }
    }
}

#[derive(Debug, Clone)]
pub struct PgOptions {
    pub url: String,
    /// The team key: teams sharing one database are told apart by it.
    pub team: String,
    /// Whether this process runs teammates too (`troupe run --no-local-workers`: no).
    pub local_workers: bool,
    /// How long a worker holds a teammate or a claimed message without a heartbeat
    /// (`TROUPE_LEASE`; default [`DEFAULT_SHARED_LEASE`](super::DEFAULT_SHARED_LEASE)): what a takeover waits for.
    pub lease: Duration,
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

impl From<BackendError> for BootstrapError {
    fn from(e: BackendError) -> Self {
        BootstrapError::Backend(e)
    }
}
