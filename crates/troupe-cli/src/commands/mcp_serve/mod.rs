//! `troupe mcp serve`: troupe as an MCP server on stdin/stdout, so that an MCP client (Claude
//! Code, codex, Cursor) can hand work to the workspace's team. rmcp speaks the protocol
//! (JSON-RPC framing, the handshake, cancellation, errors for bad requests); this module is the
//! four tools:
//!
//! - `troupe_run {prompt}`: one prompt of the session core ([`Core::prompt`]), driven until the
//!   team is quiescent, as `troupe session` drives each prompt ([`run`]);
//! - `troupe_status`: what `troupe status --json` prints;
//! - `troupe_send {to, text}`: a message from the person to an agent, as `troupe send`;
//! - `troupe_answer {request_id, approve, reason}`: a pending plan or permission request
//!   answered, as `troupe review` or `troupe approve`/`deny` ([`answer`]).
//!
//! One [`Core`] serves the whole connection, opened before the server speaks (bad options,
//! settings or a workspace that needs trust are refused with exit 2, as `troupe run` refuses
//! them): successive runs continue one lead conversation. Stdout is the protocol's alone: what
//! a run says goes to stderr (and into the run's result); logs go to stderr. When the client
//! goes away (stdin closed) the work going on is stopped as Ctrl-C stops it.
//!
//! Layout: [`run`] the `troupe_run` tool; [`progress`] the team's events as progress
//! notifications; [`asks`] permission asks as elicitations (or denied, with how to allow);
//! [`changes`] the files a run wrote and the calls it was denied; [`answer`] `troupe_answer`;
//! [`reply`] the shapes of a tool's result.

mod answer;
mod asks;
mod changes;
mod progress;
mod reply;
mod run;

use std::path::Path;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use troupe::wire::AgentName;

use self::reply::{failed, structured};
use self::run::Runs;
use super::session::core::Core;
use crate::args::{McpServeArgs, SessionArgs};
use crate::error::CliError;

/// The tools' names.
const RUN: &str = "troupe_run";
const STATUS: &str = "troupe_status";
const SEND: &str = "troupe_send";
const ANSWER: &str = "troupe_answer";

/// `troupe mcp serve [RUN OPTIONS]`: serves until the client closes stdin.
pub async fn serve(workspace: &Path, args: McpServeArgs) -> Result<(), CliError> {
    let runs = Arc::new(Runs::default());
    let said = runs.clone();
    let core = Core::open_with(
        workspace,
        SessionArgs { team: args.team },
        Box::new(move |lines: Vec<String>| said.said(lines)),
        Vec::new(),
    )?;
    tracing::info!(workspace = %workspace.display(), "troupe mcp serve: ready on stdin/stdout");
    let server = Server {
        core: core.clone(),
        runs,
    };
    let (transport, written) = crate::json_lines::for_rmcp();
    let running = server.serve(transport).await.map_err(|e| {
        CliError::failed(format_args!("the MCP client's handshake failed: {e}"))
            .with_code("mcp_handshake_failed")
    })?;
    let quit = running.waiting().await;
    tracing::debug!(?quit, "the MCP connection ended");
    // The client is gone: the work going on stops as Ctrl-C stops it, nothing lost.
    if core.cancel() {
        core.finished().await;
    }
    written.drained().await;
    Ok(())
}

/// The server of one connection.
struct Server {
    core: Arc<Core>,
    /// The state of `troupe_run` across calls.
    runs: Arc<Runs>,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(
                "A troupe team (a lead and its teammates) working in one workspace. \
                 troupe_run gives the lead a prompt and returns its answer once the team is \
                 quiescent; troupe_status shows the team; troupe_send sends an agent a \
                 message; troupe_answer answers a pending plan or permission request.",
            );
        config.server_info = Implementation::new("troupe", env!("CARGO_PKG_VERSION"));
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            RUN => {
                let prompt = required_str(&arguments, "prompt")?;
                if prompt.trim().is_empty() {
                    return Err(McpError::invalid_params("prompt must not be blank", None));
                }
                run::troupe_run(&self.core, &self.runs, prompt, context).await
            }
            STATUS => status(&self.core).await,
            SEND => {
                let to = required_str(&arguments, "to")?;
                let text = required_str(&arguments, "text")?;
                send(&self.core, to, text).await
            }
            ANSWER => {
                let id = required_str(&arguments, "request_id")?;
                let approve = arguments
                    .get("approve")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| {
                        McpError::invalid_params("approve (true or false) is required", None)
                    })?;
                let reason = optional_str(&arguments, "reason")?;
                answer::troupe_answer(&self.core, id, approve, reason).await
            }
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "unknown tool {other:?}: the tools are {RUN}, {STATUS}, {SEND} and \
                         {ANSWER}"
                    ),
                    None,
                ))
            }
        };
        Ok(redacted(self.core.redactor(), result).into())
    }
}

/// `result` with every string cleared of the run's secrets: what a lead echoes (an answer, a
/// file's text) goes to another model.
fn redacted(redactor: &troupe::secrets::Redactor, result: CallToolResult) -> CallToolResult {
    let Ok(mut value) = serde_json::to_value(&result) else {
        return result;
    };
    redactor.redact_json(&mut value);
    serde_json::from_value(value).unwrap_or(result)
}

/// The four tools, with their arguments' schemas.
fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            RUN,
            "Give the troupe team's lead a prompt and wait until the team is quiescent. \
             Returns the lead's answer, the files written or edited, calls that were denied \
             (and how to allow them), tokens and estimated cost. Progress notifications carry \
             the team's event lines when the request has a progress token; cancelling the \
             request stops the team as Ctrl-C does (nothing is lost). One run at a time.",
            schema(
                json!({"prompt": {"type": "string", "description": "What the lead should do."}}),
                &["prompt"],
            ),
        ),
        Tool::new(
            STATUS,
            "The team's state, as `troupe status --json` shows it: the run, the agents and \
             their mailboxes, pending requests, tasks, token usage.",
            schema(json!({}), &[]),
        ),
        Tool::new(
            SEND,
            "Send an agent of the team (e.g. lead) a message from the person, as `troupe send` \
             does; it is read at the agent's next turn.",
            schema(
                json!({
                    "to": {"type": "string", "description": "The agent, e.g. lead."},
                    "text": {"type": "string", "description": "The message."}
                }),
                &["to", "text"],
            ),
        ),
        Tool::new(
            ANSWER,
            "Answer a pending plan or permission request (its id, short id or a unique prefix, \
             as troupe_status or the run's events show it): approve it, or not with a reason.",
            schema(
                json!({
                    "request_id": {"type": "string", "description": "The request's id."},
                    "approve": {"type": "boolean", "description": "true approves (a permission: this call once), false denies or rejects."},
                    "reason": {"type": "string", "description": "Why not (a denial's reason, a plan's feedback)."}
                }),
                &["request_id", "approve"],
            ),
        ),
    ]
}

/// An object schema with `properties`, `required` ones among them.
fn schema(properties: Value, required: &[&str]) -> JsonObject {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    schema
}

fn required_str<'a>(arguments: &'a JsonObject, name: &str) -> Result<&'a str, McpError> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::invalid_params(format!("{name} (a string) is required"), None))
}

fn optional_str<'a>(arguments: &'a JsonObject, name: &str) -> Result<Option<&'a str>, McpError> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(McpError::invalid_params(
            format!("{name} must be a string"),
            None,
        )),
    }
}

/// `troupe_status`: `troupe status --json`'s report.
async fn status(core: &Core) -> CallToolResult {
    match crate::commands::inspect::status_report(core.workspace(), core.store()).await {
        Ok(report) => match serde_json::to_value(&report) {
            Ok(value) => structured(value),
            Err(e) => failed(&CliError::failed(format_args!(
                "the status could not be written as JSON: {e}"
            ))),
        },
        Err(e) => failed(&e),
    }
}

/// `troupe_send`: `text` from the person to `to`, through `troupe send`'s path.
async fn send(core: &Core, to: &str, text: &str) -> CallToolResult {
    let sent = match AgentName::parse(to) {
        Ok(agent) => {
            crate::user_message::send_as_user(core.workspace(), core.store(), &agent, text)
                .await
                .map(|id| (agent, id))
        }
        Err(e) => Err(CliError::usage(e.to_string())),
    };
    match sent {
        Ok((agent, id)) => structured(json!({
            "sent": true,
            "to": agent,
            "message_id": id,
        })),
        Err(e) => failed(&e),
    }
}
