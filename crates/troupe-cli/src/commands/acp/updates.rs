//! A prompt's team as the editor sees it: `session/update` notifications made from what the
//! team does, while it does it.
//! - The lead's text is `agent_message_chunk`, sent as the model streams it (a model that
//!   answers whole sends it whole); a teammate's is `agent_thought_chunk` with its name, once
//!   its answer is in (the editor's thread is the lead's).
//! - Every tool call of every agent is a `tool_call` when it starts (`in_progress`, its kind,
//!   its arguments, the agent in the title and in `_meta.troupe.agent`; a write's or edit's
//!   change as `diff` content with the absolute path) and a `tool_call_update` when it ends
//!   (`completed` or `failed`, with the result's first lines).
//! - The lead's todo list and the task board are one `plan`, sent whole when either changes.
//!
//! Made as the team's run observer (tool calls, with their arguments) and an event listener
//! (text, board); both only queue a notification on the connection, never wait.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agent_client_protocol::v1::schema::SessionNotification;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use serde_json::{json, Value};
use troupe::agent::RunObserver;
use troupe::model::progress::CallProgress;
use troupe::model::ToolCall;
use troupe::secrets::Redactor;
use troupe::store::events::{kinds, EventListener};
use troupe::tools::dispatch::ToolOutcome;
use troupe::wire::{AgentName, Event};

/// The lead's text of one model call as it streams, sent cleared of the run's secrets: the
/// last bytes (as many as the longest secret, less one) wait for the next piece, so that a
/// secret split across pieces is never sent in part.
#[derive(Default)]
struct Streamed {
    /// All the call's text so far, as the model sent it.
    text: String,
    /// How much of its redacted form has been sent.
    sent: usize,
}

impl Streamed {
    /// What to send now of the text so far (all of it when `last`).
    fn next(&mut self, redactor: &Redactor, last: bool) -> Option<String> {
        let redacted = redactor.redact(&self.text);
        let mut end = if last {
            redacted.len()
        } else {
            redacted.len().saturating_sub(redactor.margin())
        };
        while !redacted.is_char_boundary(end) {
            end -= 1;
        }
        if end <= self.sent {
            return None;
        }
        let piece = redacted[self.sent..end].to_owned();
        self.sent = end;
        Some(piece)
    }
}

/// Asks the editor about a plan request (its id, the teammate that sent it).
pub type PlanAsker = Box<dyn Fn(String, String) + Send + Sync>;

/// A file shown in a diff is read up to this size; a larger one is shown as new text only.
const MAX_DIFF_FILE: u64 = 1024 * 1024;
/// A tool's result shown in the editor: at most this many characters.
const RESULT_CHARS: usize = 2_000;

/// The notifications of one session.
pub struct Updates {
    connection: ConnectionTo<Client>,
    session_id: String,
    workspace: PathBuf,
    /// Every string sent is cleared of the run's secrets (a model may echo a key; a file
    /// shown in a diff may hold one).
    redactor: Redactor,
    /// Asks the editor about a plan waiting for the lead (its request id, the teammate), when
    /// the person answers plans in the editor (`--approval ask`).
    plans: Option<PlanAsker>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The text the lead's current model call streamed, when it streamed any (its whole-text
    /// event then only ends it).
    streamed: Option<Streamed>,
    /// Each agent's tool call under way (for a permission ask to name it).
    calls: HashMap<String, String>,
    /// The lead's todo list: (content, status).
    todos: Vec<(String, String)>,
    /// The board: task id → (subject, status, owner).
    tasks: BTreeMap<String, (String, String, Option<String>)>,
}

impl Updates {
    pub fn new(
        connection: ConnectionTo<Client>,
        session_id: String,
        workspace: PathBuf,
        redactor: Redactor,
    ) -> Self {
        Self {
            connection,
            session_id,
            workspace,
            redactor,
            plans: None,
            state: Mutex::default(),
        }
    }

    /// Asks the editor about each plan that waits for the lead, with `ask`.
    pub fn asking_plans(self, ask: Option<PlanAsker>) -> Self {
        Self { plans: ask, ..self }
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn connection(&self) -> &ConnectionTo<Client> {
        &self.connection
    }

    /// The id of `agent`'s tool call under way, if any.
    pub fn current_call(&self, agent: &str) -> Option<String> {
        troupe::sync::lock(&self.state).calls.get(agent).cloned()
    }

    fn message_chunk(&self, text: &str) {
        self.send(json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
        }));
    }

    /// Sends what a stream held back.
    fn end_stream(&self, streamed: Option<Streamed>) {
        if let Some(piece) = streamed.and_then(|mut s| s.next(&self.redactor, true)) {
            self.message_chunk(&piece);
        }
    }

    /// `value` with every string cleared of the run's secrets.
    pub fn redacted(&self, mut value: Value) -> Value {
        self.redactor.redact_json(&mut value);
        value
    }

    /// Sends one update (its wire form: `{"sessionUpdate": …}`).
    pub fn send(&self, update: Value) {
        let value = self.redacted(json!({"sessionId": self.session_id, "update": update}));
        match serde_json::from_value::<SessionNotification>(value) {
            Ok(notification) => {
                if let Err(e) = self.connection.send_notification(notification) {
                    tracing::debug!(error = %e, "session/update not sent: the connection closed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "session/update not built"),
        }
    }

    fn plan(&self, state: &State) {
        let mut entries: Vec<Value> = state
            .todos
            .iter()
            .map(|(content, status)| {
                json!({"content": content, "priority": "medium", "status": plan_status(status)})
            })
            .collect();
        entries.extend(state.tasks.iter().map(|(id, (subject, status, owner))| {
            let content = match owner {
                Some(owner) => format!("task {id}: {subject} ({owner})"),
                None => format!("task {id}: {subject}"),
            };
            json!({"content": content, "priority": "medium", "status": plan_status(status)})
        }));
        self.send(json!({"sessionUpdate": "plan", "entries": entries}));
    }

    /// The `diff` content of a write or an edit, if the call is one.
    fn diff(&self, tool: &str, args: &Value) -> Option<Value> {
        let path = args.get("path")?.as_str()?;
        let absolute = absolute(&self.workspace, path);
        match tool {
            "write_file" => {
                let new_text = args.get("content")?.as_str()?;
                let old_text = troupe::store::read::read_regular(
                    &absolute,
                    troupe::store::read::Links::Refuse,
                    MAX_DIFF_FILE,
                )
                .ok()
                .flatten()
                .and_then(|bytes| String::from_utf8(bytes).ok());
                Some(
                    json!({"type": "diff", "path": absolute, "oldText": old_text, "newText": new_text}),
                )
            }
            "edit_file" => Some(json!({
                "type": "diff",
                "path": absolute,
                "oldText": args.get("old_text")?.as_str()?,
                "newText": args.get("new_text")?.as_str()?,
            })),
            _ => None,
        }
    }
}

/// A path a tool was given, made absolute in the workspace (ACP's paths are absolute).
fn absolute(workspace: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_owned()
    } else {
        workspace.join(path)
    }
}

fn plan_status(status: &str) -> &'static str {
    match status {
        "in_progress" | "claimed" => "in_progress",
        "completed" => "completed",
        _ => "pending",
    }
}

/// ACP's kind of a troupe tool.
pub fn tool_kind(tool: &str) -> &'static str {
    match tool {
        "read_file" | "load_skill" | "get_task" | "list_tasks" => "read",
        "write_file" | "edit_file" | "todo_write" => "edit",
        "glob" | "grep" => "search",
        "shell" => "execute",
        _ if tool.starts_with("mcp__") && tool.contains("fetch") => "fetch",
        _ => "other",
    }
}

/// A call's title: the agent, the tool, and the argument that says most about it.
pub fn title(agent: &str, tool: &str, args: &Value) -> String {
    let detail = [
        "path", "command", "pattern", "to", "name", "subject", "task_id",
    ]
    .iter()
    .find_map(|key| args.get(*key).and_then(Value::as_str));
    let title = match detail {
        Some(detail) => format!("{agent}: {tool} {detail}"),
        None => format!("{agent}: {tool}"),
    };
    title.chars().take(200).collect()
}

/// The id of a call in the editor: unique across the team's agents.
fn call_id(agent: &AgentName, call: &ToolCall) -> String {
    format!("{agent}:{}", call.id)
}

/// The `tool_call` update of `agent`'s `call` as it starts (live, or replayed).
pub fn call_started(agent: &str, call: &ToolCall) -> Value {
    let args = arguments(call);
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": format!("{agent}:{}", call.id),
        "title": title(agent, &call.name, &args),
        "kind": tool_kind(&call.name),
        "status": "in_progress",
        "rawInput": args,
        "_meta": {"troupe": {"agent": agent, "tool": call.name}},
    })
}

/// The `tool_call_update` of the call `id` as it ends with `result` (its first characters).
pub fn call_ended(id: &str, result: &str, failed: bool) -> Value {
    let shown: String = result.chars().take(RESULT_CHARS).collect();
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "status": if failed { "failed" } else { "completed" },
        "content": [{"type": "content", "content": {"type": "text", "text": shown}}],
    })
}

fn arguments(call: &ToolCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or_else(|_| Value::String(call.arguments.clone()))
}

impl RunObserver for Updates {
    fn model_call_started(&self, agent: &AgentName, _call_number: usize) {
        if agent.is_lead() {
            let streamed = troupe::sync::lock(&self.state).streamed.take();
            self.end_stream(streamed);
        }
    }

    /// The lead's text as the model streams it.
    fn model_progress(&self, agent: &AgentName, progress: &CallProgress) {
        if let (true, CallProgress::Text(piece)) = (agent.is_lead(), progress) {
            let mut state = troupe::sync::lock(&self.state);
            let streamed = state.streamed.get_or_insert_with(Streamed::default);
            streamed.text.push_str(piece);
            if let Some(piece) = streamed.next(&self.redactor, false) {
                self.message_chunk(&piece);
            }
        }
    }

    fn tool_started(&self, agent: &AgentName, call: &ToolCall) {
        let args = arguments(call);
        let id = call_id(agent, call);
        let mut update = call_started(agent.as_str(), call);
        if let Some(diff) = self.diff(&call.name, &args) {
            update["content"] = json!([diff]);
        }
        if let Some(path) = args.get("path").and_then(Value::as_str) {
            update["locations"] = json!([{"path": absolute(&self.workspace, path)}]);
        }
        let mut state = troupe::sync::lock(&self.state);
        state.calls.insert(agent.to_string(), id);
        self.send(update);
        if call.name == "todo_write" && agent.is_lead() {
            if let Some(todos) = args.get("todos").and_then(Value::as_array) {
                state.todos = todos
                    .iter()
                    .filter_map(|t| {
                        Some((
                            t.get("content")?.as_str()?.to_owned(),
                            t.get("status")?.as_str()?.to_owned(),
                        ))
                    })
                    .collect();
                self.plan(&state);
            }
        }
    }

    fn tool_finished(&self, agent: &AgentName, call: &ToolCall, outcome: &ToolOutcome) {
        let id = call_id(agent, call);
        let mut state = troupe::sync::lock(&self.state);
        if state.calls.get(agent.as_str()) == Some(&id) {
            state.calls.remove(agent.as_str());
        }
        let mut update = call_ended(&id, &outcome.content, outcome.is_error);
        update["_meta"] = json!({"troupe": {"agent": agent.as_str(), "tool": call.name}});
        self.send(update);
    }
}

impl EventListener for Updates {
    fn event(&self, event: &Event) {
        let field = |name: &str| event.fields.get(name).and_then(Value::as_str);
        match event.kind.as_str() {
            kinds::ASSISTANT_TEXT => {
                let Some(text) = field("text").filter(|t| !t.is_empty()) else {
                    return;
                };
                if event.agent == "lead" {
                    let streamed = troupe::sync::lock(&self.state).streamed.take();
                    if streamed.is_some() {
                        self.end_stream(streamed);
                    } else {
                        self.message_chunk(text);
                    }
                } else {
                    self.send(json!({
                        "sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": format!("[{}] {text}", event.agent)},
                        "_meta": {"troupe": {"agent": event.agent}},
                    }));
                }
            }
            kinds::REQUEST_CREATED => {
                if let (Some(ask), Some("plan_approval"), Some("lead"), Some(id), Some(from)) = (
                    &self.plans,
                    field("protocol"),
                    field("to"),
                    field("request_id"),
                    field("from"),
                ) {
                    ask(id.to_owned(), from.to_owned());
                }
            }
            kinds::TASK_CREATED
            | kinds::TASK_CLAIMED
            | kinds::TASK_COMPLETED
            | kinds::TASK_LEASE_EXPIRED
            | kinds::TASK_RELEASED => {
                let (Some(id), Some(subject), Some(status)) =
                    (field("task_id"), field("subject"), field("status"))
                else {
                    return;
                };
                let owner = field("owner").or(field("assignee")).map(str::to_owned);
                let mut state = troupe::sync::lock(&self.state);
                state.tasks.insert(
                    id.to_owned(),
                    (subject.to_owned(), status.to_owned(), owner),
                );
                self.plan(&state);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_secret_split_across_streamed_pieces_is_never_sent_in_part() {
        let secret = "sk-secret-0123456789";
        let redactor = Redactor::new([secret]);
        let mut streamed = Streamed::default();
        let mut sent = String::new();
        for piece in ["the key is sk-se", "cret-01234", "56789, é done"] {
            streamed.text.push_str(piece);
            if let Some(piece) = streamed.next(&redactor, false) {
                sent.push_str(&piece);
            }
            assert!(
                !sent.contains("sk-"),
                "a part of the secret was sent: {sent}"
            );
        }
        sent.push_str(&streamed.next(&redactor, true).unwrap_or_default());
        assert_eq!(
            sent,
            redactor.redact("the key is sk-secret-0123456789, é done")
        );
        assert!(!sent.contains("sk-se"), "{sent}");
    }

    #[test]
    fn every_string_of_an_update_is_cleared_of_the_secrets() {
        let redactor = Redactor::new(["sk-secret-0123456789"]);
        let mut value =
            json!({"a": ["x sk-secret-0123456789 y", {"b": "sk-secret-0123456789"}], "n": 1});
        redactor.redact_json(&mut value);
        assert!(
            !value.to_string().contains("sk-secret-0123456789"),
            "{value}"
        );
        assert_eq!(value["n"], 1);
    }

    #[test]
    fn tools_have_acp_kinds_and_titles_name_the_agent() {
        assert_eq!(tool_kind("read_file"), "read");
        assert_eq!(tool_kind("write_file"), "edit");
        assert_eq!(tool_kind("edit_file"), "edit");
        assert_eq!(tool_kind("grep"), "search");
        assert_eq!(tool_kind("shell"), "execute");
        assert_eq!(tool_kind("mcp__web__fetch"), "fetch");
        assert_eq!(tool_kind("spawn_teammate"), "other");
        assert_eq!(
            title(
                "alice",
                "write_file",
                &json!({"path": "a.txt", "content": "x"})
            ),
            "alice: write_file a.txt"
        );
        assert_eq!(title("lead", "list_tasks", &json!({})), "lead: list_tasks");
    }
}
