//! MCP servers: the tools people already run, reached over the Model Context Protocol with the
//! official Rust SDK (`rmcp`).
//!
//! # Layout
//!
//! - this file: [`McpServers`], every configured server of a run, started together; the
//!   errors ([`McpError`]).
//! - [`server`]: one server — start (stdio child or streamable HTTP), list tools, call a tool,
//!   notice it died, stop it.
//! - [`content`]: a tool result rendered as the text a model reads.
//! - [`stderr`]: the bounded log a stdio server's stderr goes to (never the terminal).
//!
//! The tool adapter that offers a server's tools to agents is `tools::mcp`; this module knows
//! nothing of tools, permissions or agents.
//!
//! **Architecture Invariant:** an MCP server never crashes a run. A server that fails to start
//! (a bad command, a missing `${VAR}`, no answer within its startup timeout) or dies later is
//! **reported once** (a `tracing` warning, and its [`ServerStatus`]) and from then on
//! [`McpServer::is_up`] is false: its tools are withdrawn from what agents are offered, and a
//! call that still reaches it fails with `mcp_server_down`.
//!
//! **Invariant:** a stdio server runs in its own process group; [`McpServers::stop`] (called by
//! `Team::close`) closes each session and kills each group, so no server outlives its run.
//! Servers also get none of troupe's credential variables (`OPENAI_API_KEY`…) in their
//! environment: only what `env` names.

pub mod content;
pub mod server;
pub mod stderr;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::ErrorCode;
use crate::sandbox::Sandbox;
use crate::settings::McpServerSpec;

pub use server::{McpServer, McpToolInfo, ServerState, ServerStatus};

/// Why an MCP server or one of its calls failed. Each variant has a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("MCP server {server} could not start: {reason}")]
    StartFailed { server: String, reason: String },
    #[error("MCP server {server} did not answer within its startup timeout of {after:?}")]
    StartTimeout { server: String, after: Duration },
    #[error("MCP server {server} is down ({reason}); its tools are withdrawn")]
    ServerDown { server: String, reason: String },
    #[error("{tool} of MCP server {server} did not answer within {after:?}")]
    CallTimeout {
        server: String,
        tool: String,
        after: Duration,
    },
    #[error(
        "MCP server {server} answered {tool} with something that is not a valid result: {reason}"
    )]
    Protocol {
        server: String,
        tool: String,
        reason: String,
    },
    #[error("MCP server {server} refused {tool}: {reason}")]
    Refused {
        server: String,
        tool: String,
        reason: String,
    },
}

impl ErrorCode for McpError {
    fn code(&self) -> &'static str {
        match self {
            McpError::StartFailed { .. } => "mcp_start_failed",
            McpError::StartTimeout { .. } => "mcp_start_timeout",
            McpError::ServerDown { .. } => "mcp_server_down",
            McpError::CallTimeout { .. } => "mcp_timeout",
            McpError::Protocol { .. } => "mcp_protocol_error",
            McpError::Refused { .. } => "mcp_call_refused",
        }
    }
}

/// Every configured MCP server of a run, in settings order.
#[derive(Default)]
pub struct McpServers {
    servers: Vec<Arc<McpServer>>,
}

impl McpServers {
    /// No servers (a run without `[[mcp_servers]]`).
    pub fn none() -> Self {
        Self::default()
    }

    /// Starts every server at once, each within its own startup timeout, and lists its tools.
    /// Never fails: a server that cannot start is reported and kept as failed.
    pub async fn start(specs: &[McpServerSpec], workspace: &Path, sandbox: &Sandbox) -> Self {
        let mut starting = Vec::new();
        for spec in specs {
            let spec = spec.clone();
            let workspace = workspace.to_path_buf();
            let sandbox = sandbox.clone();
            starting.push((
                spec.name.clone(),
                tokio::spawn(async move { McpServer::start(spec, &workspace, &sandbox).await }),
            ));
        }
        let mut servers = Vec::new();
        for (name, task) in starting {
            match task.await {
                Ok(server) => servers.push(Arc::new(server)),
                Err(e) => tracing::warn!("MCP server {name} could not start: {e}"),
            }
        }
        Self { servers }
    }

    pub fn servers(&self) -> &[Arc<McpServer>] {
        &self.servers
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Each server's state and tools, in settings order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.status()).collect()
    }

    /// Every server's [`McpServer::secrets`]: add them to the run's redactor.
    pub fn secrets(&self) -> Vec<String> {
        self.servers
            .iter()
            .flat_map(|s| s.secrets().iter().cloned())
            .collect()
    }

    /// Stops every server (sessions closed, stdio process groups killed). Idempotent.
    pub async fn stop(&self) {
        for server in &self.servers {
            server.stop().await;
        }
    }
}
