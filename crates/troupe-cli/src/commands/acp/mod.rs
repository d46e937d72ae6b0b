//! `troupe acp [RUN OPTIONS]`: troupe as an agent of the Agent Client Protocol (version 1), the
//! JSON-RPC over stdio that editors (Zed, JetBrains IDEs, Neovim and Emacs plugins) use to run
//! coding agents. Nothing but protocol lines goes to stdout; logs go to stderr.
//!
//! A session is a workspace (the `cwd` of `session/new`) and its lead's conversation, driven by
//! the session core (`commands::session::core`), the same one the terminal's session uses: a
//! prompt is a lead turn and then the team until quiescent, as `troupe run` drives it;
//! `session/cancel` stops it as Ctrl-C does (nothing lost; the next prompt picks the work up).
//!
//! Layout:
//! - this file: the connection (the official SDK, `agent-client-protocol`) and its methods;
//! - `crate::json_lines`: stdin and stdout as lines, hostile input answered there;
//! - [`sessions`]: the workspace's current session on disk, the editor's MCP servers and
//!   prompt blocks in troupe's terms;
//! - [`updates`]: what the team does as `session/update`s; [`replay`]: `session/load`;
//! - [`asks`]: permission asks and plans answered in the editor.
//!
//! Errors never end the connection: a malformed line is `-32700`, an unknown method `-32601`,
//! bad params `-32602`, a request before `initialize` or for an unknown session an error that
//! says so; the sessions go on.

mod asks;
mod replay;
mod sessions;
mod updates;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    CancelNotification, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, StopReason,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Client};
use serde_json::json;
use troupe::team::DriveOutcome;

use crate::args::{ApprovalMode, SessionArgs};
use crate::commands::session::core::{Asker, Core, Hooks};
use crate::error::CliError;
use updates::Updates;

/// JSON-RPC's code for a request the server will not take in its state (before `initialize`).
const NOT_INITIALIZED: i32 = -32600;
/// JSON-RPC's code for a failure of the agent's own (a team that could not be built).
const INTERNAL: i32 = -32603;
/// ACP's code for something named that does not exist (a session).
const NOT_FOUND: i32 = -32002;

/// `troupe acp`: serves the editor on stdin and stdout until it closes them; work still going
/// is stopped (as Ctrl-C stops it) and waited for before returning.
pub async fn acp(workspace: &Path, args: SessionArgs) -> Result<(), CliError> {
    if args.team.max_turns == 0 {
        return Err(CliError::usage("--max-turns must be at least 1".into()));
    }
    let server = Arc::new(Server {
        workspace: workspace.to_owned(),
        args,
        initialized: AtomicBool::new(false),
        sessions: Mutex::default(),
    });
    let (s1, s2, s3, s4, s5, s6) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
    );
    let (transport, written) = crate::json_lines::for_acp();
    let served = Agent
        .v1()
        .name("troupe")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                responder.respond_with_result(s1.initialize(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                responder.respond_with_result(s2.new_session(request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let loaded = s3.load_session(request, cx).await;
                responder.respond_with_result(loaded)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, _cx| {
                responder.respond_with_result(s4.list_sessions(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| match s5.start_prompt(request, &cx) {
                Ok(turn) => cx.spawn(async move {
                    let outcome = turn.await;
                    responder.respond_with_result(outcome)
                }),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                s6.cancel(&notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await;
    server.close().await;
    written.drained().await;
    served.map_err(|e| {
        CliError::failed(format_args!("the editor's connection failed: {e}"))
            .with_code("acp_connection")
    })
}

/// The agent's state: the sessions of this process.
struct Server {
    /// `--workspace` (the current folder by default): where `session/list` looks when no `cwd`
    /// is given, with the sessions' own workspaces.
    workspace: PathBuf,
    args: SessionArgs,
    initialized: AtomicBool,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

/// One live session.
struct Session {
    id: String,
    workspace: PathBuf,
    core: Arc<Core>,
}

type Answer<T> = Result<T, agent_client_protocol::Error>;

fn error(code: i32, message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(code, message.into())
}

fn invalid_params(message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(json!({ "message": message.into() }))
}

/// A typed response from its wire form (the schema's types are built field by field).
fn wire<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Answer<T> {
    serde_json::from_value(value).map_err(|e| {
        agent_client_protocol::Error::internal_error().data(json!({ "message": e.to_string() }))
    })
}

impl Server {
    fn initialized(&self) -> Answer<()> {
        if self.initialized.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(error(
                NOT_INITIALIZED,
                "`initialize` must come first: troupe acp takes no other request before it",
            ))
        }
    }

    /// Protocol version 1 whatever the client asks (the only one troupe speaks); no
    /// authentication: the model is configured as for `troupe run`, and when it is not, the
    /// error says what is missing.
    fn initialize(&self, _request: &InitializeRequest) -> Answer<InitializeResponse> {
        if let Err(e) = crate::agent_setup::model_configured(&self.workspace, &self.args.team.model)
        {
            return Err(agent_client_protocol::Error::auth_required()
                .data(json!({ "message": e.to_string() })));
        }
        self.initialized.store(true, Ordering::SeqCst);
        wire(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
                "sessionCapabilities": {"list": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "troupe", "title": "troupe", "version": env!("CARGO_PKG_VERSION")},
        }))
    }

    /// Opens the session core on `cwd` (the same checks as `troupe run`: settings, trust,
    /// store, sandbox, model), with the editor's MCP servers.
    fn open_core(
        &self,
        cwd: &Path,
        servers: &[agent_client_protocol::v1::schema::McpServer],
    ) -> Answer<(PathBuf, Arc<Core>)> {
        if !cwd.is_absolute() {
            return Err(invalid_params(format!(
                "cwd must be an absolute path, not {}",
                cwd.display()
            )));
        }
        let workspace = std::fs::canonicalize(cwd)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| invalid_params(format!("cwd {} is not a folder", cwd.display())))?;
        let specs = sessions::mcp_servers(servers).map_err(invalid_params)?;
        let args = SessionArgs {
            team: self.args.team.clone(),
        };
        let said = Box::new(|lines: Vec<String>| {
            for line in lines {
                eprintln!("{line}");
            }
        });
        let core = Core::open_with(&workspace, args, said, specs)
            .map_err(|e| error(INTERNAL, e.to_string()))?;
        Ok((workspace, core))
    }

    fn keep(&self, id: &str, workspace: PathBuf, core: Arc<Core>) -> Arc<Session> {
        let session = Arc::new(Session {
            id: id.to_owned(),
            workspace,
            core,
        });
        let mut sessions = troupe::sync::lock(&self.sessions);
        // One current session per workspace: a newer one on the same workspace replaces it.
        sessions.retain(|_, s| s.workspace != session.workspace);
        sessions.insert(id.to_owned(), session.clone());
        session
    }

    fn session(&self, id: &str) -> Answer<Arc<Session>> {
        troupe::sync::lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| {
                error(
                    NOT_FOUND,
                    format!(
                        "no session {id} in this troupe acp (session/new or session/load first)"
                    ),
                )
            })
    }

    /// A new session: the workspace's lead starts on a fresh conversation at its first prompt
    /// (the earlier one kept, as `--new-session` keeps it).
    fn new_session(&self, request: NewSessionRequest) -> Answer<NewSessionResponse> {
        self.initialized()?;
        let (workspace, core) = self.open_core(&request.cwd, &request.mcp_servers)?;
        let busy = troupe::sync::lock(&self.sessions)
            .values()
            .any(|s| s.workspace == workspace && s.core.is_working());
        if busy {
            return Err(error(
                NOT_INITIALIZED,
                format!(
                    "a prompt is running in this workspace's session ({}); cancel it first",
                    workspace.display()
                ),
            ));
        }
        core.start_fresh();
        let id = uuid::Uuid::new_v4().to_string();
        sessions::save(&workspace, &sessions::Record::new(id.clone(), &workspace))
            .map_err(|e| error(INTERNAL, e))?;
        self.keep(&id, workspace, core);
        Ok(NewSessionResponse::new(id))
    }

    /// The workspace's current session again, its conversation replayed as updates.
    async fn load_session(
        &self,
        request: LoadSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Answer<LoadSessionResponse> {
        self.initialized()?;
        let (workspace, core) = self.open_core(&request.cwd, &request.mcp_servers)?;
        let id = request.session_id.0.to_string();
        match sessions::load(&workspace) {
            Some(record) if record.session_id == id => {}
            Some(record) => {
                return Err(error(
                    NOT_FOUND,
                    format!(
                        "session {id} is not {}'s current session ({}): troupe keeps one lead \
                         conversation per workspace, and a later session/new replaced it",
                        workspace.display(),
                        record.session_id
                    ),
                ))
            }
            None => {
                return Err(error(
                    NOT_FOUND,
                    format!("{} has no ACP session", workspace.display()),
                ))
            }
        }
        let session = self.keep(&id, workspace, core);
        let updates = Updates::new(
            cx,
            id,
            session.workspace.clone(),
            session.core.redactor().clone(),
        );
        replay::replay(&session.core, &updates)
            .await
            .map_err(|e| error(INTERNAL, e.to_string()))?;
        Ok(LoadSessionResponse::new())
    }

    /// The current session of `cwd`, or of every workspace this process knows.
    fn list_sessions(&self, request: &ListSessionsRequest) -> Answer<ListSessionsResponse> {
        self.initialized()?;
        let workspaces: Vec<PathBuf> = match &request.cwd {
            Some(cwd) => vec![std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.clone())],
            None => {
                let mut known: Vec<PathBuf> = troupe::sync::lock(&self.sessions)
                    .values()
                    .map(|s| s.workspace.clone())
                    .collect();
                known.push(
                    std::fs::canonicalize(&self.workspace)
                        .unwrap_or_else(|_| self.workspace.clone()),
                );
                known.sort();
                known.dedup();
                known
            }
        };
        let sessions = workspaces
            .iter()
            .filter_map(|w| sessions::load(w))
            .map(|record| record.info())
            .collect();
        Ok(ListSessionsResponse::new(sessions))
    }

    /// Checks a prompt and starts its turn; the returned future drives it and gives the
    /// response (run outside the dispatch loop, so that `session/cancel` and the editor's
    /// answers to permission asks get through while the team works).
    fn start_prompt(
        &self,
        request: PromptRequest,
        cx: &ConnectionTo<Client>,
    ) -> Answer<impl std::future::Future<Output = Answer<PromptResponse>> + Send + 'static> {
        self.initialized()?;
        let session = self.session(&request.session_id.0)?;
        let text = sessions::prompt_text(&request.prompt).map_err(invalid_params)?;
        if session.core.is_working() {
            return Err(error(
                NOT_INITIALIZED,
                format!(
                    "session {} is working on a prompt; wait for its response or session/cancel it",
                    session.id
                ),
            ));
        }
        let mut record = sessions::load(&session.workspace)
            .filter(|r| r.session_id == session.id)
            .unwrap_or_else(|| sessions::Record::new(session.id.clone(), &session.workspace));
        record.prompted(&text);
        if let Err(e) = sessions::save(&session.workspace, &record) {
            tracing::warn!(error = %e, "the session's record was not saved");
        }
        let plans = (self.args.team.approval == ApprovalMode::Ask).then(|| {
            let (cx, id) = (cx.clone(), session.id.clone());
            let (workspace, store) = (session.workspace.clone(), session.core.store().clone());
            let ask: updates::PlanAsker = Box::new(move |request_id, teammate| {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(asks::ask_plan(
                        cx.clone(),
                        id.clone(),
                        workspace.clone(),
                        store.clone(),
                        request_id,
                        teammate,
                    ));
                }
            });
            ask
        });
        let updates = Arc::new(
            Updates::new(
                cx.clone(),
                session.id.clone(),
                session.workspace.clone(),
                session.core.redactor().clone(),
            )
            .asking_plans(plans),
        );
        let asker_updates = updates.clone();
        let asker: Asker =
            Arc::new(move |cancel| Arc::new(asks::EditorAsks::new(asker_updates.clone(), cancel)));
        let hooks = Hooks {
            listeners: vec![updates.clone()],
            observer: Some(updates),
            asker: Some(asker),
        };
        Ok(async move { stop_reason(session.core.prompt(&text, hooks).await) })
    }

    fn cancel(&self, notification: &CancelNotification) {
        if let Ok(session) = self.session(&notification.session_id.0) {
            session.core.cancel();
        }
    }

    /// The editor went away: work still going is stopped and waited for (the teams closed).
    async fn close(&self) {
        let sessions: Vec<Arc<Session>> = troupe::sync::lock(&self.sessions)
            .values()
            .cloned()
            .collect();
        for session in &sessions {
            if session.core.cancel() {
                eprintln!(
                    "troupe: the editor closed the connection; closing the team at a safe point"
                );
            }
        }
        for session in &sessions {
            session.core.finished().await;
        }
    }
}

/// How a prompt's work ended, as ACP's stop reason; a failure is the request's error.
fn stop_reason(outcome: Result<DriveOutcome, CliError>) -> Answer<PromptResponse> {
    let reason = match outcome {
        Ok(_) => StopReason::EndTurn,
        Err(e) => match e.code() {
            "turn_limit" => StopReason::MaxTurnRequests,
            "token_budget" | "cost_budget" => StopReason::MaxTokens,
            "interrupted" => StopReason::Cancelled,
            code => return Err(error(INTERNAL, format!("{} [{code}]", e.cause()))),
        },
    };
    Ok(PromptResponse::new(reason))
}
