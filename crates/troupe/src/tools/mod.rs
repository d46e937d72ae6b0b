//! Tools: what an agent can do, described to the model and run through one dispatch path.
//!
//! # Layout
//!
//! - this file: the shared vocabulary — [`ToolDefinition`], [`ToolHandler`], [`ToolContext`],
//!   [`ToolError`]; a tool's [`Effect`] and [`Scope`] are the permission layer's, re-exported.
//! - [`registry`]: the tools an agent is offered, in the order it is offered them.
//! - [`schema`]: the small JSON Schema validator for the subset our tool schemas use.
//! - [`dispatch`]: **the** call path of every tool (SPEC §4.2). No other code runs a handler.
//! - [`confine`]: workspace confinement shared by every file tool.
//! - `sh -c` in its own process group is [`crate::process`], shared by [`shell`] and the
//!   background jobs ([`shell_output`]: what `shell` keeps of a command's output); the `task` tool lives beside the runner it runs
//!   ([`crate::agent::subagent_tool`]).
//! - one file per base tool: [`shell`], [`read_file`], [`write_file`], [`edit_file`], [`glob`];
//!   and [`grep`] (offered to the lead and teammates after their fixed tools). [`ignore_rules`]:
//!   the workspace's `.gitignore`/`.ignore` files as `glob` and `grep` read them.
//! - the lead's planning tools: [`todo`] (`todo_write`), [`skills`] (`load_skill` and the
//!   skill catalog), [`tasks`] (the task board tools over `store::tasks`).
//! - [`mcp`]: the tools of MCP servers (`mcp__<server>__<tool>`), offered after the fixed ones.
//! - [`testing`]: cheap tools for tests and benchmarks.
//!
//! **Architecture Invariant:** tools never check permissions themselves; [`dispatch`] does,
//! always in the same order. A tool only enforces what is true of its own domain (a file tool
//! stays inside the workspace whatever the permission policy says).
//!
//! **API Boundary:** nothing here knows the model's types. The runner maps
//! [`ToolDefinition`]s to the model's function specs and feeds the raw argument string of a
//! tool call to [`dispatch::Dispatcher::dispatch`].

pub mod confine;
pub mod dispatch;
pub mod edit_file;
pub mod glob;
pub mod grep;
pub mod ignore_rules;
pub mod mcp;
pub mod preview;
pub mod read_file;
pub mod registry;
pub mod schema;
pub mod shell;
pub mod shell_output;
pub mod skills;
pub mod tasks;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod todo;
pub mod write_file;

use std::path::PathBuf;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use crate::error::{tool_error_text, ErrorCode};
use crate::secrets::Redactor;
use crate::store::artifacts::ArtifactStore;

/// A tool declares its effect and scope; the permission rules judge them, so they live there.
pub use crate::permissions::{Effect, Scope};
pub use dispatch::{Dispatcher, ToolOutcome};
pub use registry::{RegistryError, ToolRegistry};

/// The base agent's file and shell tools, in the order SPEC §4.1 offers them: `shell`,
/// `read_file`, `write_file`, `edit_file`, `glob`.
pub fn base_tools(shell: shell::ShellTool) -> Vec<std::sync::Arc<dyn ToolHandler>> {
    vec![
        std::sync::Arc::new(shell),
        std::sync::Arc::new(read_file::ReadFileTool),
        std::sync::Arc::new(write_file::WriteFileTool),
        std::sync::Arc::new(edit_file::EditFileTool),
        std::sync::Arc::new(glob::GlobTool),
    ]
}

/// How a tool is described to the model, and the effect the permission policy judges it by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: String,
    /// Written for a model: what the tool does, when to use it, what it returns.
    pub description: String,
    /// A JSON Schema of the arguments object, in the subset [`schema`] checks, with
    /// `additionalProperties: false` on every object (checked at registration).
    pub parameters: Value,
    pub effect: Effect,
}

/// What a handler knows about the call it serves.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The calling agent: the only source of identity (a sender is never a tool argument).
    pub agent: AgentName,
    /// The workspace root every file tool is confined to and `shell` runs in: where the
    /// agent's files are — the lead's checkout, or a worktree teammate's own worktree. The
    /// team's state (mailboxes, transcripts, artifacts, jobs, audit) is never found through it:
    /// it stays in the lead's `.troupe/`, reached through the stores and `artifacts`.
    pub workspace: PathBuf,
    /// Cancelled when the runtime closes or the turn is abandoned; long tools stop on it.
    pub cancel: CancellationToken,
    /// The secrets the result must not hold. The dispatcher sets its own and redacts every
    /// result itself; a tool that cuts text (an output cap, a partial read) uses it to cut where
    /// no secret straddles the cut, which redacting afterwards could not repair.
    pub redactor: Redactor,
    /// The calling agent's artifacts, where a tool keeps output too large for its result
    /// (`shell`); `None` when the runner keeps none (the result then says the rest is lost).
    pub artifacts: Option<ArtifactStore>,
}

impl ToolContext {
    pub fn new(agent: AgentName, workspace: impl Into<PathBuf>) -> Self {
        Self {
            agent,
            workspace: workspace.into(),
            cancel: CancellationToken::new(),
            redactor: Redactor::default(),
            artifacts: None,
        }
    }

    pub fn with_artifacts(mut self, artifacts: Option<ArtifactStore>) -> Self {
        self.artifacts = artifacts;
        self
    }

    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }
}

/// A tool's implementation. Handlers receive arguments that already passed their schema and
/// every permission check; they never check permissions themselves.
#[async_trait]
pub trait ToolHandler: Send + Sync {
    fn definition(&self) -> ToolDefinition;

    /// Where the tool's changes land. Only a tool that touches nothing but troupe's own state
    /// overrides this; dispatch hands it to the permission policy with the effect.
    fn scope(&self) -> Scope {
        Scope::World
    }

    /// For a tool that runs commands: the sandbox mode they run under (recorded in the audit).
    fn sandbox(&self) -> Option<crate::sandbox::Mode> {
        None
    }

    /// Whether [`schema`] checks this tool's arguments. A tool whose schema comes from elsewhere
    /// (an MCP server) and lies outside the supported subset says no: its arguments are then
    /// only checked to be a JSON object holding the schema's top-level `required` keys, and the
    /// tool's own side validates the rest.
    fn checked_schema(&self) -> bool {
        true
    }

    /// Why the tool cannot be used now (an MCP server that is down), or `None`. An unavailable
    /// tool is left out of the tools offered to the model at its next call, and a call that
    /// still names it gets this error without reaching permissions or the handler.
    fn unavailable(&self) -> Option<ToolError> {
        None
    }

    /// What the call would change, for whoever is asked to approve it (a write's diff);
    /// `None` when the tool cannot tell. Called only when someone is asked; it may read the
    /// workspace (a short read of one bounded regular file), never change it.
    fn preview(&self, _ctx: &ToolContext, _args: &Value) -> Option<String> {
        None
    }

    /// The workspace paths (as the model gave them) the call would write: dispatch checks each
    /// against the protected paths (`crate::protected`) before the permission policy, so a
    /// write there is asked of a person. Every tool that writes files says so here.
    fn written_paths<'a>(&self, _args: &'a Value) -> Vec<&'a str> {
        Vec::new()
    }

    /// Runs the tool. `Ok` text and `Err` alike go back to the model as the tool result.
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError>;
}

/// Why a tool call did not produce its normal result. Rendered to the model as
/// `Error [<code>]: <message>`; never fatal to the agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    InvalidArguments(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    UnknownTool(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Cancelled(String),
    /// The decision could not be recorded, so the call was not run (fail closed).
    #[error("{0}")]
    AuditFailed(String),
    #[error("{0}")]
    Failed(String),
    /// An error of another module (team, protocol) passed through with its own stable code.
    #[error("{message}")]
    Coded { code: &'static str, message: String },
}

impl ToolError {
    /// Wraps another module's error, keeping its stable code.
    pub fn coded(error: &(impl ErrorCode + std::fmt::Display)) -> Self {
        ToolError::Coded {
            code: error.code(),
            message: error.to_string(),
        }
    }

    /// An I/O failure, with `NotFound` kept apart so the model can tell a missing file.
    pub fn io(action: &str, shown_path: &str, error: &std::io::Error) -> Self {
        let message = format!("{action} {shown_path}: {error}");
        if error.kind() == std::io::ErrorKind::NotFound {
            ToolError::NotFound(message)
        } else {
            ToolError::Io(message)
        }
    }

    /// The text the model sees.
    pub fn to_tool_text(&self) -> String {
        tool_error_text(self.code(), &self.to_string())
    }
}

impl ErrorCode for ToolError {
    fn code(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::PermissionDenied(_) => "permission_denied",
            ToolError::NotFound(_) => "not_found",
            ToolError::UnknownTool(_) => "unknown_tool",
            ToolError::Io(_) => "io_error",
            ToolError::Timeout(_) => "timeout",
            ToolError::Cancelled(_) => "cancelled",
            ToolError::AuditFailed(_) => "audit_failed",
            ToolError::Failed(_) => "tool_failed",
            ToolError::Coded { code, .. } => code,
        }
    }
}

/// Reads an argument the schema already guarantees; a miss is a schema/handler mismatch, which
/// is reported rather than panicking.
pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidArguments(format!("missing string argument `{key}`")))
}
