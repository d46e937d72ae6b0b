//! A scripted [`ModelClient`] for tests and the offline demo.
//!
//! Responses come from a queue built in code or loaded from JSON, then (when the queue is empty)
//! from an optional function of the request; with neither left, the call fails with
//! `model_script_exhausted`. Every request is recorded, so a test can assert what the runner sent.
//!
//! # JSON script format
//!
//! ```json
//! {"responses": [
//!   {"text": "Hello."},
//!   {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
//!   {"text": "Two at once.", "tool_calls": [
//!      {"id": "call_a", "name": "read_file", "arguments": {"path": "a.txt"}},
//!      {"name": "shell", "arguments": "{not json"}],
//!    "finish_reason": "tool_calls",
//!    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
//!   {"error": {"status": 500, "message": "overloaded"}}
//! ]}
//! ```
//!
//! Each entry is a response (`text` and/or `tool_calls`) or an `error` (an HTTP status, mapped to
//! the same error the OpenAI client would give, and an optional message). Tool-call `arguments`
//! that are a JSON string are passed through as raw text (so invalid JSON can be scripted);
//! anything else is serialised; missing means `{}`. `id` defaults to `call_<n>`, numbered from 1
//! across the script. `finish_reason` defaults to `tool_calls` when there are tool calls, else
//! `stop`. Unknown keys are refused.
//!
//! # Per-agent queues
//!
//! With several agents, one shared queue is served in call order, which is a race. A script may
//! also (or instead) give agents queues of their own:
//!
//! ```json
//! {"responses": [{"text": "for anyone without a queue"}],
//!  "agents": {"lead": [{"text": "lead's first answer"}], "writer": [{"text": "writer's"}]}}
//! ```
//!
//! The model only knows who calls through the view it is called on: [`ScriptedModel::for_agent`]
//! gives each agent its own [`ModelClient`] (chosen at the composition root), so nothing about
//! agents is added to the request. An agent with a queue of its own is answered from it only;
//! when it runs out the call fails with `model_script_exhausted` naming the agent. Any other
//! agent, and calls on the model itself, use the shared queue. Agent names must be valid.
//!
//! # A context window
//!
//! `"max_request_bytes": N` (or [`ScriptedModel::with_max_request_bytes`]) makes the model refuse
//! any request — a turn or a runtime call — whose messages and tools serialise to more than N
//! bytes, the way a server refuses a prompt longer than its context window: HTTP 400 with
//! `context_length_exceeded`. The refusal is recorded like any request and takes no response
//! from the queues.
//!
//! # The runtime's own calls
//!
//! Summaries and memory queries are tool-less calls with a [`Purpose`] other than `turn`. They
//! never take from the queues above (a script written for an agent's turns stays valid when the
//! runtime compacts or remembers): each purpose has a queue of its own, `side`, and when that is
//! empty the call gets a built-in answer — a valid summary object for `summary`, `[]` (nothing
//! new, nothing relevant, nothing to merge) for the memory queries. They are recorded apart, in
//! [`ScriptedModel::side_requests`].
//!
//! ```json
//! {"responses": [{"text": "done"}],
//!  "side": {"summary": [{"text": "not json"}], "memory_extract": [{"text": "[]"}]}}
//! ```

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::Value;
use troupe_wire::AgentName;

use super::types::{
    AssistantMessage, FinishReason, ModelRequest, ModelResponse, Purpose, ToolCall, Usage,
};
use super::{ModelClient, ModelError};
use crate::error::ErrorCode;

/// The model name scripted responses carry.
pub const SCRIPTED_MODEL_NAME: &str = "scripted";

type Responder = Box<dyn FnMut(&ModelRequest) -> Result<ModelResponse, ModelError> + Send>;

/// A model that answers from a script. Build it, then share it (e.g. in an `Arc`).
pub struct ScriptedModel {
    queue: Mutex<Queue>,
    /// Queues of their own for some agents, so that concurrent agents do not race for one queue.
    agent_queues: Mutex<HashMap<AgentName, Queue>>,
    /// Called when the queue is empty. Its own lock, so a responder may inspect the model.
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<ModelRequest>>,
    /// Answers to the runtime's own calls, by purpose (see the module docs).
    side_queues: Mutex<HashMap<Purpose, Queue>>,
    side_requests: Mutex<Vec<ModelRequest>>,
    /// Numbers the tool-call ids the builders make up.
    next_call_number: usize,
    /// Requests larger than this are refused as too long for the context window.
    max_request_bytes: Option<usize>,
}

#[derive(Default)]
struct Queue {
    responses: VecDeque<Result<ModelResponse, ModelError>>,
    served: usize,
}

/// A JSON script that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read the model script {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("the model script is not valid: {reason}")]
    Parse { reason: String },
    #[error("the model script's response #{index} is not valid: {reason}")]
    Entry { index: usize, reason: String },
    #[error("the model script's response #{index} of agent {agent} is not valid: {reason}")]
    AgentEntry {
        agent: String,
        index: usize,
        reason: String,
    },
    #[error("the model script's `agents` has an invalid agent name: {reason}")]
    AgentName { reason: String },
}

/// The scripted model was asked for more responses than its script holds: a test or demo
/// concern, so it is the scripted model's own error, carried by
/// [`ModelError::Implementation`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptExhausted {
    /// The shared queue ran out (and there is no responder function).
    #[error("the scripted model has no response left (it served {served})")]
    Shared { served: usize },
    /// An agent's own queue ran out (it never falls back to the shared one).
    #[error("the scripted model has no response left for agent {agent} (it served {served})")]
    Agent { agent: String, served: usize },
}

impl ErrorCode for ScriptExhausted {
    fn code(&self) -> &'static str {
        "model_script_exhausted"
    }
}

impl super::ImplementationError for ScriptExhausted {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl From<ScriptExhausted> for ModelError {
    fn from(e: ScriptExhausted) -> Self {
        ModelError::Implementation(Box::new(e))
    }
}

impl ErrorCode for ScriptError {
    fn code(&self) -> &'static str {
        "model_script_invalid"
    }
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self {
            queue: Mutex::new(Queue::default()),
            agent_queues: Mutex::new(HashMap::new()),
            responder: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            side_queues: Mutex::new(HashMap::new()),
            side_requests: Mutex::new(Vec::new()),
            next_call_number: 1,
            max_request_bytes: None,
        }
    }

    /// A model that answers every request with `respond(request)`. Queued responses (added with
    /// the builders) still come first.
    pub fn from_fn<F>(respond: F) -> Self
    where
        F: FnMut(&ModelRequest) -> Result<ModelResponse, ModelError> + Send + 'static,
    {
        let model = Self::new();
        *lock(&model.responder) = Some(Box::new(respond));
        model
    }

    /// Queues a text answer.
    pub fn text(self, content: impl Into<String>) -> Self {
        self.response(ModelResponse::text(content, SCRIPTED_MODEL_NAME))
    }

    /// Queues an answer calling one tool with `arguments` (serialised as JSON).
    pub fn tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls([(name, arguments)])
    }

    /// Queues an answer calling one tool with `arguments` passed as raw text, valid JSON or not.
    pub fn tool_call_raw(mut self, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        let call = ToolCall::new(self.call_id(), name, arguments);
        self.response(ModelResponse::tool_calls(vec![call], SCRIPTED_MODEL_NAME))
    }

    /// Queues one answer calling several tools.
    pub fn tool_calls<N: Into<String>>(
        mut self,
        calls: impl IntoIterator<Item = (N, Value)>,
    ) -> Self {
        let calls = calls
            .into_iter()
            .map(|(name, arguments)| ToolCall::new(self.call_id(), name, arguments.to_string()))
            .collect();
        self.response(ModelResponse::tool_calls(calls, SCRIPTED_MODEL_NAME))
    }

    /// Queues any response.
    pub fn response(self, response: ModelResponse) -> Self {
        lock(&self.queue).responses.push_back(Ok(response));
        self
    }

    /// Queues a failure.
    pub fn error(self, error: ModelError) -> Self {
        lock(&self.queue).responses.push_back(Err(error));
        self
    }

    /// Refuses requests over `bytes` (serialised messages and tools) as too long.
    pub fn with_max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = Some(bytes);
        self
    }

    /// Queues the answer to the next runtime call made for `purpose` (not an agent's turn).
    pub fn side(self, purpose: Purpose, answer: Result<ModelResponse, ModelError>) -> Self {
        lock(&self.side_queues)
            .entry(purpose)
            .or_default()
            .responses
            .push_back(answer);
        self
    }

    /// Queues a text answer to the next runtime call made for `purpose`.
    pub fn side_text(self, purpose: Purpose, text: impl Into<String>) -> Self {
        self.side(purpose, Ok(ModelResponse::text(text, SCRIPTED_MODEL_NAME)))
    }

    /// Loads a script file (format in the module docs).
    pub fn from_json_file(path: &Path) -> Result<Self, ScriptError> {
        let read_error = |reason: String| ScriptError::Read {
            path: path.display().to_string(),
            reason,
        };
        // A FIFO or device named as the script is refused at once instead of blocking the run.
        let bytes = crate::store::read::read_regular(
            path,
            crate::store::read::Links::Follow,
            crate::store::read::MAX_STATE_FILE_BYTES,
        )
        .map_err(|err| read_error(err.to_string()))?
        .ok_or_else(|| read_error("no such file".to_owned()))?;
        let text =
            String::from_utf8(bytes).map_err(|err| read_error(format!("not UTF-8 ({err})")))?;
        Self::from_json_str(&text)
    }

    /// Parses a script (format in the module docs).
    pub fn from_json_str(text: &str) -> Result<Self, ScriptError> {
        let file: ScriptFile =
            troupe_wire::strict::from_json_str(text, "").map_err(|err| ScriptError::Parse {
                reason: err.to_string(),
            })?;
        if file.responses.is_none() && file.agents.is_none() {
            return Err(ScriptError::Parse {
                reason: "it needs `responses`, `agents` or both".to_owned(),
            });
        }
        let mut model = Self::new();
        model.max_request_bytes = file.max_request_bytes;
        for (index, entry) in file.responses.unwrap_or_default().into_iter().enumerate() {
            let scripted = model
                .entry(entry)
                .map_err(|reason| ScriptError::Entry { index, reason })?;
            lock(&model.queue).responses.push_back(scripted);
        }
        for (name, entries) in file.agents.unwrap_or_default() {
            let agent = AgentName::parse(&name).map_err(|e| ScriptError::AgentName {
                reason: e.to_string(),
            })?;
            let mut queue = Queue::default();
            for (index, entry) in entries.into_iter().enumerate() {
                let scripted = model
                    .entry(entry)
                    .map_err(|reason| ScriptError::AgentEntry {
                        agent: name.clone(),
                        index,
                        reason,
                    })?;
                queue.responses.push_back(scripted);
            }
            lock(&model.agent_queues).insert(agent, queue);
        }
        for (purpose, entries) in file.side.unwrap_or_default() {
            if purpose.is_turn() {
                return Err(ScriptError::Parse {
                    reason: "`side` answers the runtime's own calls; turns go in `responses` or `agents`"
                        .to_owned(),
                });
            }
            let mut queue = Queue::default();
            for (index, entry) in entries.into_iter().enumerate() {
                let scripted = model.entry(entry).map_err(|reason| ScriptError::Entry {
                    index,
                    reason: format!("(side `{}`) {reason}", purpose.as_str()),
                })?;
                queue.responses.push_back(scripted);
            }
            lock(&model.side_queues).insert(purpose, queue);
        }
        Ok(model)
    }

    /// The model as `agent` sees it: calls on the view are answered from the agent's own queue
    /// when the script gives it one, else from the shared queue (see the module docs).
    pub fn for_agent(model: &Arc<Self>, agent: &AgentName) -> Arc<dyn ModelClient> {
        Arc::new(AgentView {
            model: model.clone(),
            agent: agent.clone(),
        })
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// Every runtime call (summaries, memory queries) received so far, in order.
    pub fn side_requests(&self) -> Vec<ModelRequest> {
        lock(&self.side_requests).clone()
    }

    /// Queued responses not served yet, in the shared queue and the agents' own (the function,
    /// if any, is not counted).
    pub fn remaining(&self) -> usize {
        let own: usize = lock(&self.agent_queues)
            .values()
            .map(|q| q.responses.len())
            .sum();
        lock(&self.queue).responses.len() + own
    }

    fn call_id(&mut self) -> String {
        let id = format!("call_{}", self.next_call_number);
        self.next_call_number += 1;
        id
    }

    fn entry(&mut self, entry: ScriptEntry) -> Result<Result<ModelResponse, ModelError>, String> {
        if let Some(error) = entry.error {
            if entry.text.is_some() || entry.tool_calls.is_some() || entry.usage.is_some() {
                return Err("an `error` entry has no other keys".to_owned());
            }
            return Ok(Err(ModelError::from_status(
                error.status,
                SCRIPTED_MODEL_NAME,
                SCRIPTED_MODEL_NAME,
                error.message,
            )));
        }
        if entry.text.is_none() && entry.tool_calls.is_none() {
            return Err("it needs `text`, `tool_calls` or `error`".to_owned());
        }
        let tool_calls: Vec<ToolCall> = entry
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| {
                let arguments = match call.arguments {
                    Some(Value::String(raw)) => raw,
                    Some(other) => other.to_string(),
                    None => "{}".to_owned(),
                };
                let id = match call.id {
                    Some(id) => id,
                    None => self.call_id(),
                };
                ToolCall::new(id, call.name, arguments)
            })
            .collect();
        let finish_reason = match entry.finish_reason {
            Some(reason) => FinishReason::from(reason),
            None if tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        Ok(Ok(ModelResponse {
            message: AssistantMessage {
                content: entry.text,
                tool_calls,
                ..AssistantMessage::default()
            },
            finish_reason,
            usage: entry.usage,
            model: SCRIPTED_MODEL_NAME.to_owned(),
        }))
    }
}

impl ScriptedModel {
    /// Answers a call made by `agent` (`None`: a call on the model itself).
    fn answer(
        &self,
        agent: Option<&AgentName>,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        if let Some(refused) = self.too_long(request) {
            if request.purpose.is_turn() {
                lock(&self.requests).push(request.clone());
            } else {
                lock(&self.side_requests).push(request.clone());
            }
            return Err(refused);
        }
        if !request.purpose.is_turn() {
            return self.answer_side(request);
        }
        lock(&self.requests).push(request.clone());
        if let Some(agent) = agent {
            if let Some(queue) = lock(&self.agent_queues).get_mut(agent) {
                return match queue.responses.pop_front() {
                    Some(next) => {
                        queue.served += 1;
                        next
                    }
                    None => Err(ScriptExhausted::Agent {
                        agent: agent.to_string(),
                        served: queue.served,
                    }
                    .into()),
                };
            }
        }
        let served = {
            let mut queue = lock(&self.queue);
            if let Some(next) = queue.responses.pop_front() {
                queue.served += 1;
                return next;
            }
            queue.served
        };
        match lock(&self.responder).as_mut() {
            Some(respond) => respond(request),
            None => Err(ScriptExhausted::Shared { served }.into()),
        }
    }
}

impl ScriptedModel {
    /// The refusal of a request over `max_request_bytes`, if it is one.
    fn too_long(&self, request: &ModelRequest) -> Option<ModelError> {
        let limit = self.max_request_bytes?;
        let size = serde_json::to_vec(&request.messages).map_or(0, |b| b.len())
            + serde_json::to_vec(&request.tools).map_or(0, |b| b.len());
        (size > limit).then(|| {
            ModelError::from_status(
                400,
                SCRIPTED_MODEL_NAME,
                SCRIPTED_MODEL_NAME,
                Some(format!(
                    "context_length_exceeded: this request is {size} bytes, the scripted \
                     model's context window is {limit} bytes"
                )),
            )
        })
    }

    /// A runtime call: its purpose's queue, else the built-in answer.
    fn answer_side(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        lock(&self.side_requests).push(request.clone());
        if let Some(queue) = lock(&self.side_queues).get_mut(&request.purpose) {
            if let Some(next) = queue.responses.pop_front() {
                queue.served += 1;
                return next;
            }
        }
        let text = match request.purpose {
            Purpose::Summary => default_summary(request),
            _ => "[]".to_owned(),
        };
        Ok(ModelResponse::text(text, SCRIPTED_MODEL_NAME))
    }
}

/// The built-in summary: a valid object that says how much it was shown (a constant goal: the
/// request is the rendered conversation, which must not be echoed back into the next summary).
fn default_summary(request: &ModelRequest) -> String {
    let shown: usize = request
        .messages
        .iter()
        .map(|m| match m {
            super::ChatMessage::User { content } | super::ChatMessage::System { content } => {
                content.len()
            }
            _ => 0,
        })
        .sum();
    serde_json::json!({
        "current_goal": "Continue the work of the conversation so far.",
        "key_findings": [format!("a scripted summary of {shown} bytes of conversation")],
        "files_read_or_changed": [],
        "remaining_work": [],
        "user_constraints": [],
    })
    .to_string()
}

#[async_trait::async_trait]
impl ModelClient for ScriptedModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        streamed(request, self.answer(None, request))
    }
}

/// One agent's view of a shared [`ScriptedModel`] (see [`ScriptedModel::for_agent`]).
struct AgentView {
    model: Arc<ScriptedModel>,
    agent: AgentName,
}

#[async_trait::async_trait]
impl ModelClient for AgentView {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        streamed(request, self.model.answer(Some(&self.agent), request))
    }
}

/// A turn's scripted text, reported word by word as a server streams it
/// ([`crate::model::progress::CallProgress::Text`]), before the whole answer is returned.
fn streamed(
    request: &ModelRequest,
    answer: Result<ModelResponse, ModelError>,
) -> Result<ModelResponse, ModelError> {
    if let (true, Ok(response)) = (request.purpose.is_turn(), &answer) {
        if let Some(text) = response.message.content.as_deref() {
            for piece in text.split_inclusive(' ') {
                crate::model::progress::report(crate::model::progress::CallProgress::Text(
                    piece.to_owned(),
                ));
            }
        }
    }
    answer
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("remaining", &self.remaining())
            .field("has_responder", &lock(&self.responder).is_some())
            .finish_non_exhaustive()
    }
}

/// A panic in a test's responder must not hide every later assertion behind a poisoned lock.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    crate::sync::lock(mutex)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    responses: Option<Vec<ScriptEntry>>,
    /// By agent name; sorted, so that made-up call ids are numbered the same on every load.
    agents: Option<BTreeMap<String, Vec<ScriptEntry>>>,
    /// Answers to the runtime's own calls, by purpose.
    side: Option<BTreeMap<Purpose, Vec<ScriptEntry>>>,
    /// Requests larger than this many bytes are refused as too long.
    max_request_bytes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptEntry {
    text: Option<String>,
    tool_calls: Option<Vec<ScriptToolCall>>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    error: Option<ScriptErrorEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptToolCall {
    id: Option<String>,
    name: String,
    arguments: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptErrorEntry {
    status: u16,
    message: Option<String>,
}
