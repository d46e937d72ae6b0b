//! One MCP server: started once, its tools listed once, called many times, stopped at close.
//!
//! - **stdio**: `command` with `args` in the workspace, its own process group (so a server's
//!   children die with it), stdin/stdout the JSON-RPC channel, stderr into a [`StderrLog`].
//!   `env` values written `${NAME}` are read from troupe's environment at start; troupe's
//!   credential variables are removed from the child's environment.
//! - **http**: streamable HTTP at `url` (TLS by rustls with the ring provider).
//!
//! States: `up` after the handshake and `tools/list` succeeded within the startup timeout;
//! `failed` when that did not happen; `down` once an up server's session ends (the process
//! exited, the connection broke) — noticed when a call fails or when [`McpServer::is_up`] is
//! asked — or when it was stopped. `failed` and `down` are reported once, with the end of the
//! server's stderr.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};
use serde::Serialize;
use serde_json::Value;

use super::stderr::StderrLog;
use super::{content, McpError};
use crate::sandbox::{Network, Sandbox};
use crate::settings::load::{env_reference, looks_secret};
use crate::settings::{McpServerSpec, McpTransport};

/// One tool a server offers, as it described it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpToolInfo {
    /// The server's own name for it (what `tools/call` is sent).
    pub name: String,
    pub description: String,
    /// Its `inputSchema`, as sent.
    pub input_schema: Value,
}

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum ServerState {
    Up,
    /// It never came up.
    Failed(String),
    /// It was up, then its session ended.
    Down(String),
}

/// A server's state and tools (`troupe mcp list`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerStatus {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    #[serde(flatten)]
    pub state: ServerState,
    pub tools: Vec<McpToolInfo>,
}

/// How often an in-flight call looks whether its server's process exited.
const EXIT_POLL: Duration = Duration::from_millis(100);

/// The SDK's session with an up server.
type Session = RunningService<RoleClient, ()>;

/// One configured server.
pub struct McpServer {
    spec: McpServerSpec,
    tools: Vec<McpToolInfo>,
    /// Requests go through the peer (cheap to clone, usable from many calls at once).
    peer: Option<Peer<RoleClient>>,
    /// Held to stop the session.
    session: tokio::sync::Mutex<Option<Session>>,
    /// Why it is not up, once it is not.
    not_up: Mutex<Option<ServerState>>,
    reported: AtomicBool,
    /// The process group of a stdio server.
    pgid: Option<i32>,
    stderr: Arc<StderrLog>,
    /// The values of secret-looking `env` variables taken from troupe's environment.
    secrets: Vec<String>,
}

impl McpServer {
    /// Starts the server and lists its tools within its startup timeout. Never fails: a server
    /// that does not come up is returned failed (and reported).
    /// A stdio server runs under `sandbox` as its settings adjust it (`sandbox`, `network`);
    /// a failure of a confined one says so and names those settings.
    pub async fn start(spec: McpServerSpec, workspace: &Path, sandbox: &Sandbox) -> McpServer {
        let stderr = Arc::new(StderrLog::default());
        let mut server = McpServer {
            tools: Vec::new(),
            peer: None,
            session: tokio::sync::Mutex::new(None),
            not_up: Mutex::new(None),
            reported: AtomicBool::new(false),
            pgid: None,
            stderr: stderr.clone(),
            secrets: Vec::new(),
            spec,
        };
        let confined = match &server.spec.transport {
            McpTransport::Stdio { .. } => Some(sandbox.for_server(
                server.spec.sandbox,
                server.spec.network.unwrap_or(Network::Off),
            )),
            McpTransport::Http { .. } => None,
        };
        let hint = match &confined {
            Some(Ok(s)) if s.mechanism().is_some() => format!(
                " (it ran confined: {}; if it needs more, set `sandbox` or `network` of \
                 [[mcp_servers]] {})",
                s.describe(),
                server.spec.name
            ),
            _ => String::new(),
        };
        // A program that is not there is said as such: no confinement would have helped.
        let not_found = match &server.spec.transport {
            McpTransport::Stdio { command, env, .. } => program_not_found(command, env, workspace),
            McpTransport::Http { .. } => None,
        };
        let hint = if not_found.is_some() {
            String::new()
        } else {
            hint
        };
        let started = match (not_found, confined.transpose()) {
            (Some(reason), _) => Ok(Err(McpError::StartFailed {
                server: server.spec.name.clone(),
                reason,
            })),
            (None, Err(e)) => Ok(Err(McpError::StartFailed {
                server: server.spec.name.clone(),
                reason: format!(
                    "{e}; set `sandbox = \"off\"` of [[mcp_servers]] {} to run it unconfined",
                    server.spec.name
                ),
            })),
            (None, Ok(confined)) => {
                tokio::time::timeout(
                    server.spec.startup_timeout,
                    connect(
                        &server.spec,
                        workspace,
                        confined.as_ref(),
                        &stderr,
                        &mut server.pgid,
                        &mut server.secrets,
                    ),
                )
                .await
            }
        };
        let error = match started {
            Ok(Ok((session, tools))) => {
                server.peer = Some(session.peer().clone());
                server.tools = tools;
                *server.session.get_mut() = Some(session);
                tracing::debug!(
                    "MCP server {} is up with {} tools",
                    server.spec.name,
                    server.tools.len()
                );
                return server;
            }
            Ok(Err(error)) => error,
            Err(_) => McpError::StartTimeout {
                server: server.spec.name.clone(),
                after: server.spec.startup_timeout,
            },
        };
        server.kill_group();
        server.mark(ServerState::Failed(format!("{error}{hint}")));
        server
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn spec(&self) -> &McpServerSpec {
        &self.spec
    }

    /// The tools it listed at start (none when it never came up).
    pub fn tools(&self) -> &[McpToolInfo] {
        &self.tools
    }

    /// Whether it is up. A session that ended since the last look is noticed (and reported)
    /// here, so withdrawn tools leave the next model call's tool list.
    pub fn is_up(&self) -> bool {
        if self.state_not_up().is_some() {
            return false;
        }
        if self.process_exited() {
            self.mark(ServerState::Down("its process exited".into()));
            self.kill_group();
            return false;
        }
        match &self.peer {
            Some(peer) if !peer.is_transport_closed() => true,
            _ => {
                self.mark(ServerState::Down("its session ended".into()));
                false
            }
        }
    }

    pub fn status(&self) -> ServerStatus {
        let state = if self.is_up() {
            ServerState::Up
        } else {
            self.state_not_up()
                .unwrap_or(ServerState::Down("stopped".into()))
        };
        ServerStatus {
            name: self.spec.name.clone(),
            transport: self.spec.transport.kind(),
            state,
            tools: self.tools.clone(),
        }
    }

    /// The values its secret-looking `env` variables (`GITHUB_TOKEN = "${GITHUB_TOKEN}"`) were
    /// given from troupe's environment: no tool result may show them.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// The end of its stderr (stdio servers), for failure reports.
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }

    /// Waits until a stdio server's stderr has ended (it exited) and is all in
    /// [`Self::stderr_tail`].
    pub async fn stderr_ended(&self) {
        self.stderr.ended().await;
    }

    /// Calls `tool` with `arguments` within the call timeout. `Ok` holds the rendered result
    /// and whether the server flagged it an error (`isError`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<(String, bool), McpError> {
        let down = |reason: String| McpError::ServerDown {
            server: self.spec.name.clone(),
            reason,
        };
        if !self.is_up() {
            return Err(down(self.reason()));
        }
        let Some(peer) = &self.peer else {
            return Err(down(self.reason()));
        };
        let request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // A server whose process exits mid-call may leave its pipes open (a child of its holds
        // them), so the call is also raced against the process's exit.
        let answer = tokio::select! {
            answer = tokio::time::timeout(self.spec.call_timeout, peer.call_tool(request)) => answer,
            () = self.exit() => {
                self.mark(ServerState::Down("its process exited during a call".into()));
                self.kill_group();
                return Err(down(self.reason()));
            }
        };
        let result = match answer {
            Err(_) => {
                return Err(McpError::CallTimeout {
                    server: self.spec.name.clone(),
                    tool: tool.to_owned(),
                    after: self.spec.call_timeout,
                })
            }
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                if peer.is_transport_closed() {
                    self.mark(ServerState::Down(format!(
                        "it ended during a call: {error}"
                    )));
                    return Err(down(self.reason()));
                }
                return Err(match error {
                    ServiceError::McpError(data) => McpError::Refused {
                        server: self.spec.name.clone(),
                        tool: tool.to_owned(),
                        reason: data.message.to_string(),
                    },
                    other => McpError::Protocol {
                        server: self.spec.name.clone(),
                        tool: tool.to_owned(),
                        reason: other.to_string(),
                    },
                });
            }
        };
        let is_error = result.is_error == Some(true);
        let json = serde_json::to_value(&result).map_err(|e| McpError::Protocol {
            server: self.spec.name.clone(),
            tool: tool.to_owned(),
            reason: e.to_string(),
        })?;
        Ok((content::render(&json), is_error))
    }

    /// Closes the session and kills a stdio server's process group. Idempotent.
    pub async fn stop(&self) {
        if let Some(mut session) = self.session.lock().await.take() {
            let _ = session.close_with_timeout(Duration::from_secs(2)).await;
        }
        self.kill_group();
        let mut not_up = self.not_up.lock().unwrap_or_else(|e| e.into_inner());
        if not_up.is_none() {
            *not_up = Some(ServerState::Down("stopped".into()));
        }
    }

    fn state_not_up(&self) -> Option<ServerState> {
        self.not_up
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Why it is not up (a placeholder while it is).
    pub fn reason(&self) -> String {
        match self.state_not_up() {
            Some(ServerState::Failed(r)) | Some(ServerState::Down(r)) => r,
            _ => "its session ended".into(),
        }
    }

    /// Records that it is not up (the first cause wins) and reports it once.
    fn mark(&self, state: ServerState) {
        {
            let mut not_up = self.not_up.lock().unwrap_or_else(|e| e.into_inner());
            if not_up.is_none() {
                *not_up = Some(state);
            }
        }
        if self.reported.swap(true, Ordering::SeqCst) {
            return;
        }
        let stderr = self.stderr.text();
        let tail: String = {
            let chars: Vec<char> = stderr.chars().collect();
            chars[chars.len().saturating_sub(500)..].iter().collect()
        };
        tracing::warn!(
            "MCP server {} is unavailable, its tools are withdrawn: {}{}",
            self.spec.name,
            self.reason(),
            if tail.is_empty() {
                String::new()
            } else {
                format!(" (stderr: {tail})")
            }
        );
    }

    /// Whether a stdio server's own process has exited. Asked without reaping it
    /// (`WNOWAIT`): the SDK's transport owns the child and reaps it.
    fn process_exited(&self) -> bool {
        let Some(pid) = self.pgid.filter(|&p| p > 1) else {
            return false;
        };
        // SAFETY: waitid writes only into `info`, which we own; WNOWAIT leaves the child as is.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let found = libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            // An error (ECHILD): it is no longer our child to wait for, so it is gone.
            found != 0 || info.si_pid() != 0
        }
    }

    /// Resolves once a stdio server's process has exited (never for an HTTP server). Checked
    /// every [`EXIT_POLL`] while a call is in flight.
    async fn exit(&self) {
        if self.pgid.is_none() {
            return std::future::pending().await;
        }
        while !self.process_exited() {
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    fn kill_group(&self) {
        if let Some(pgid) = self.pgid.filter(|&p| p > 1) {
            // SAFETY: kill(2) with a negative pid signals the group; no memory is involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

/// Why a stdio server's `program` cannot be run because it is not there: a path (with a `/`,
/// relative to the workspace) that names no file, or a bare name in no folder of `PATH`. None
/// when it is found, and when the server's `env` sets its own `PATH`.
fn program_not_found(program: &str, env: &[(String, String)], workspace: &Path) -> Option<String> {
    if program.contains('/') {
        let found = workspace.join(program).is_file();
        return (!found).then(|| format!("program {program:?} not found"));
    }
    if env.iter().any(|(name, _)| name == "PATH") {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|folder| folder.join(program).is_file());
    (!found).then(|| format!("program {program:?} not found on PATH"))
}

/// Connects and lists the tools; `pgid` is set as soon as a stdio child exists.
async fn connect(
    spec: &McpServerSpec,
    workspace: &Path,
    sandbox: Option<&Sandbox>,
    stderr: &Arc<StderrLog>,
    pgid: &mut Option<i32>,
    secrets: &mut Vec<String>,
) -> Result<(Session, Vec<McpToolInfo>), McpError> {
    let failed = |reason: String| McpError::StartFailed {
        server: spec.name.clone(),
        reason,
    };
    let session = match &spec.transport {
        McpTransport::Stdio { command, args, env } => {
            let confined = match sandbox {
                Some(sandbox) => sandbox.command(command, args),
                None => Ok(std::process::Command::new(command)),
            }
            .map_err(|e| failed(format!("cannot confine {command:?}: {e}")))?;
            let mut cmd = tokio::process::Command::from(confined);
            if sandbox.is_none() {
                cmd.args(args);
            }
            cmd.current_dir(workspace)
                .process_group(0)
                .kill_on_drop(true);
            for name in crate::secrets::environment::CREDENTIAL_VARS {
                cmd.env_remove(name);
            }
            for (key, value) in env {
                let value = match env_reference(value) {
                    Some(var) => std::env::var(var).map_err(|_| {
                        failed(format!(
                            "env {key} = \"${{{var}}}\" but {var} is not set in troupe's environment"
                        ))
                    })?,
                    None => value.clone(),
                };
                if looks_secret(key) {
                    secrets.push(value.clone());
                }
                cmd.env(key, value);
            }
            let (transport, child_stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| failed(format!("cannot run {command:?}: {e}")))?;
            *pgid = transport.id().and_then(|id| i32::try_from(id).ok());
            if let Some(child_stderr) = child_stderr {
                let log = stderr.clone();
                tokio::spawn(async move { log.drain(child_stderr).await });
            }
            ().serve(transport)
                .await
                .map_err(|e| failed(format!("{e}")))?
        }
        McpTransport::Http { url } => {
            install_tls_provider();
            let transport = StreamableHttpClientTransport::from_uri(url.as_str());
            ().serve(transport)
                .await
                .map_err(|e| failed(format!("{e}")))?
        }
    };
    let listed = session
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| failed(format!("tools/list failed: {e}")))?;
    let tools = listed
        .into_iter()
        .map(|tool| McpToolInfo {
            name: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            input_schema: Value::Object((*tool.input_schema).clone()),
        })
        .collect();
    Ok((session, tools))
}

/// The HTTP transport's client (reqwest with rustls, no built-in provider) needs a process
/// default crypto provider: ring, which troupe's other HTTPS client already builds.
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error means another provider is installed already, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
