//! Settings people commit (SPEC §11, issue 12): `troupe.toml` at the workspace root (project) and
//! `$XDG_CONFIG_HOME/troupe/config.toml` (user), validated into these types before anything
//! runs. Precedence: flags > environment > project > user > defaults; every value remembers where
//! it came from ([`Source`]) so `troupe config` can say, and every permission decision's audit
//! line can name the rule that decided (file and entry).
//!
//! This module holds the typed settings only. Reading and merging the files is `load`
//! (`Settings::load`), which orchestrates: `files` finds and reads them, `parse` turns each one
//! into its sections, and each section has its own module — its table as written, its checks,
//! its merge and what of it needs trust: `model`, `rules` (`[permissions]`, and the rule
//! grammar), `hooks`, `sandbox`, `store` (with `store_url`), `team`, `mcp`, `prices`, `run`, `telemetry`,
//! `context`.
//! `secrets` refuses secret-looking keys before any section reads a file, `duration` is troupe's
//! one reading of a duration, `section` what the sections share. The rules are matched by
//! `permissions::patterns`, hooks run by `crate::hooks`, agent definitions read by
//! `team::definitions`.

mod approvals;
mod context;
mod duration;
pub mod error;
mod files;
mod hooks;
pub mod load;
mod mcp;
mod model;
mod parse;
mod prices;
mod retention;
mod rules;
mod run;
mod sandbox;
mod secrets;
mod section;
mod store;
mod store_url;
mod tasks;
mod team;
mod telemetry;
pub mod trust;

use std::path::PathBuf;
use std::time::Duration;

pub use approvals::{ApprovalRoute, ApprovalSettings, NoTerminal, DEFAULT_APPROVAL_TTL};
pub use context::{ContextFile, ContextSettings};
pub use duration::parse_duration;
pub use error::{SettingsError, SettingsErrorKind};
pub use files::{user_config_path, MAX_SETTINGS_FILE_BYTES, PROJECT_FILE_NAME};
pub use hooks::MAX_HOOK_TIMEOUT;
pub use load::Reviewed;
pub use mcp::{env_reference, valid_mcp_server_name};
pub use model::{MIN_CONTEXT_WINDOW, PROVIDERS};
pub use prices::PriceSettings;
pub use retention::parse_size;
pub use rules::check_rule;
pub use run::RunSettings;
pub use secrets::looks_secret;
pub use store::{parse_lease, LEASE_FORM, MAX_STORE_LEASE, MAX_TEAM_CHARS, MIN_STORE_LEASE};
pub use store_url::store_url_shown;
pub use tasks::TaskSettings;
pub use telemetry::{check_endpoint, TelemetrySettings};

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    /// The user's `config.toml`.
    User(PathBuf),
    /// The workspace's `troupe.toml`.
    Project(PathBuf),
    /// An environment variable (its name).
    Env(String),
    /// A variable of the workspace's `.env` file (its name).
    DotEnv(String),
    /// A command-line flag (its name, e.g. `--model`).
    Flag(String),
    /// Not set anywhere, worked out from other settings (why, e.g. `ANTHROPIC_API_KEY set, no
    /// OPENAI_* settings`).
    Inferred(String),
}

impl Source {
    /// `troupe.toml`, `~/.config/troupe/config.toml`, `env OPENAI_MODEL`, `flag --model`, `default`.
    pub fn describe(&self) -> String {
        match self {
            Self::Default => "default".into(),
            Self::User(p) | Self::Project(p) => p.display().to_string(),
            Self::Env(name) => format!("env {name}"),
            Self::DotEnv(name) => format!(".env {name}"),
            Self::Flag(name) => format!("flag {name}"),
            Self::Inferred(why) => format!("inferred: {why}"),
        }
    }

    /// Like [`Source::describe`], but a settings file by its name only (`troupe.toml`,
    /// `config.toml`): what audit lines and messages that may be shared or committed say, so
    /// they never carry the person's folder layout.
    pub fn short(&self) -> String {
        match self {
            Self::User(p) | Self::Project(p) => p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            other => other.describe(),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

/// `[model]`: which models answer. Secrets never live here (a key in a settings file is refused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSettings {
    /// `provider`: `openai`, `azure` or `anthropic` (checked here; `model::config` parses it).
    pub provider: Option<Sourced<String>>,
    /// `api_version`: Azure OpenAI's `api-version` query value.
    pub api_version: Option<Sourced<String>>,
    pub model: Option<Sourced<String>>,
    pub base_url: Option<Sourced<String>>,
    pub fallback_model: Option<Sourced<String>>,
    pub context_window: Option<Sourced<u32>>,
    /// `script`: a scripted model's file (as `--model-script`), resolved against the folder of
    /// the settings file that names it.
    pub script: Option<Sourced<PathBuf>>,
    /// `[model.agents]`: a model per agent name (`writer = "gpt-4.1-mini"`).
    pub agents: Vec<(String, Sourced<String>)>,
}

/// Which list a permission rule is in. Stronger first: deny > ask > allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleList {
    Deny,
    Ask,
    Allow,
}

impl RuleList {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Ask => "ask",
            Self::Allow => "allow",
        }
    }
}

/// One entry of `[permissions] allow/ask/deny`, as written: `shell(cargo test:*)`,
/// `write_file(docs/**)`, `read_file(.env)`, `mcp__server__tool`, `edit_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleEntry {
    pub list: RuleList,
    /// The entry's text, exactly as in the file.
    pub text: String,
    /// Its file and its position in its list (0-based), for the audit line.
    pub source: Source,
    pub index: usize,
    /// Its 1-based line in its file, for an error about it found after the files are read (a
    /// rule naming no known tool, `bootstrap::check_rule_tools`).
    pub line: usize,
}

impl RuleEntry {
    /// How the audit names it: `troupe.toml allow[2] "shell(cargo test:*)"` (the file by its
    /// name, never its folder).
    pub fn describe(&self) -> String {
        format!(
            "{} {}[{}] {:?}",
            self.source.short(),
            self.list.as_str(),
            self.index,
            self.text
        )
    }
}

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    UserPromptSubmit,
    Stop,
    /// A permission request was registered (SPEC §13): told, never asked.
    PermissionRequest,
}

impl HookEvent {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::Stop => "Stop",
            Self::PermissionRequest => "PermissionRequest",
        }
    }
}

/// The default time a hook may take.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    pub event: HookEvent,
    /// A tool name or a rule-style pattern (`shell(cargo test:*)`); none matches every call.
    pub matcher: Option<String>,
    /// Run with `sh -c` in the workspace, in its own process group.
    pub command: String,
    pub timeout: Duration,
    pub source: Source,
    pub index: usize,
}

/// `[sandbox]`: how commands are confined (the `--sandbox` flag decides over `mode`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: Option<Sourced<crate::sandbox::Mode>>,
    pub network: Option<Sourced<crate::sandbox::Network>>,
    /// Every file's entries, project first.
    pub deny_read: Vec<String>,
    /// More protected paths (`crate::protected`): every file's entries, project first.
    pub deny_write: Vec<String>,
    /// Whether hook commands are confined too (default: not).
    pub hooks: Option<Sourced<bool>>,
}

/// `[store]`: where a team's stores are when neither `--store`/`--team` nor `TROUPE_STORE_URL`,
/// `TROUPE_TEAM` or `TROUPE_LEASE` say (the CLI lays those on top). Checked at load, so a value
/// here is usable as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreSettings {
    /// `url`: a PostgreSQL URL without a password (a settings file may be committed; the password
    /// stays in `TROUPE_STORE_URL`). None: the file store under `.troupe/`.
    pub url: Option<Sourced<String>>,
    /// `team`: the team key in the database, 1 to [`MAX_TEAM_CHARS`] characters, trimmed.
    pub team: Option<Sourced<String>>,
    /// `lease`: how long a worker holds a teammate without a heartbeat, [`MIN_STORE_LEASE`] to
    /// [`MAX_STORE_LEASE`].
    pub lease: Option<Sourced<Duration>>,
}

/// `[team]`: how the team works (the CLI's `--isolation` decides over `isolation`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TeamSection {
    /// The isolation of a teammate whose `spawn_teammate` call names none (default `none`).
    pub isolation: Option<Sourced<troupe_wire::Isolation>>,
    /// The git remote worktree teammates' branches travel through between a shared
    /// team's clones (none: branches stay in the clone that made them).
    pub remote: Option<Sourced<String>>,
}

/// The default time an MCP server has to start and list its tools.
pub const DEFAULT_MCP_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time one MCP tool call may take.
pub const DEFAULT_MCP_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// One `[[mcp_servers]]` entry: a Model Context Protocol server whose tools agents may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// `[a-z0-9_-]+`, unique: the `<server>` of its tools' names `mcp__<server>__<tool>`.
    pub name: String,
    pub transport: McpTransport,
    /// `sandbox`: the mode a stdio server runs under; none: the run's (commands').
    pub sandbox: Option<crate::sandbox::Mode>,
    /// `network`: what a confined stdio server may reach; none: no network.
    pub network: Option<crate::sandbox::Network>,
    pub startup_timeout: Duration,
    pub call_timeout: Duration,
    pub source: Source,
}

/// How troupe reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on its stdin and stdout, started in the workspace.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the child's environment. A value written `${NAME}` is taken from troupe's
        /// environment when the server starts (a missing variable fails that server).
        env: Vec<(String, String)>,
    },
    /// Streamable HTTP at this `http://` or `https://` URL.
    Http { url: String },
}

impl McpTransport {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }
}

/// The effective settings of a workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub model: ModelSettings,
    /// Every rule of every file, project rules before user rules within a list.
    pub rules: Vec<RuleEntry>,
    pub hooks: Vec<HookSpec>,
    pub sandbox: SandboxSettings,
    /// `[store]`: project over user, per key.
    pub store: StoreSettings,
    /// `[tasks]`: the task board's lease.
    pub tasks: TaskSettings,
    /// `[team]`: project over user.
    pub team: TeamSection,
    /// `[prices]`: per model, project over user, over the built-in table.
    pub prices: PriceSettings,
    /// `[run]`: the run's bounds (a cost budget).
    pub run: RunSettings,
    /// `[approvals]`: how permission asks are answered.
    pub approvals: ApprovalSettings,
    /// `[telemetry]`: where traces go when the `OTEL_*` variables do not say.
    pub telemetry: TelemetrySettings,
    /// `[context]`: the files every agent's prompt carries as the project's instructions.
    pub context: ContextSettings,
    /// `[retention]`: what `troupe gc` keeps, and whether it runs at each run's close.
    pub retention: crate::store::retention::Policy,
    /// `[[mcp_servers]]`: project entries first, then the user's; a name in both is the
    /// project's.
    pub mcp_servers: Vec<McpServerSpec>,
    /// The files that were read (for `troupe config`), in precedence order (project first).
    pub files: Vec<PathBuf>,
}
