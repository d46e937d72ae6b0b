//! The soak's scripted team: one model per agent that decides from the tail of its
//! conversation, answers after a fixed latency, and keeps nothing per call (a model that
//! recorded its requests would itself grow for the whole soak).
//!
//! - The lead, on `soak setup`: spawns the teammates. On `soak cycle N`: creates a board task
//!   assigned to each teammate, then sends each one a message. On events: approves every plan
//!   request among them (`review_plan`), and notes the teammates' messages' round trips.
//! - A teammate, on the lead's message: submits a plan; once it is approved, writes its file,
//!   reads it back, runs a shell command and sends the lead a message; on a board task
//!   (`[task] <id>`, pulled from the board when idle): completes it.
//!
//! The round trip measured is from a teammate's model answering with `send_message` to the
//! lead's model being called with that message's event in its conversation: the tool's
//! dispatch, the durable send, the lead's wakeup and the start of its event turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::bootstrap::ModelChooser;
use troupe::model::{ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, ToolCall};
use troupe::sync::lock;
use troupe::wire::AgentName;

use crate::scripted::{last_calls, side_answer, trailing_user};

/// What a summary of this bench's conversations says the goal is.
const GOAL: &str = "Run soak cycles: dispatch work, approve plans, note messages.";

/// What the teammates' messages to the lead carry, followed by a number: the key of a round trip.
const ROUND_TRIP_TAG: &str = "soak-rt ";

/// The model name on every answer.
const MODEL: &str = "soak";

/// What every agent's model shares: the latency, the round trips in flight and measured, and
/// counters.
pub struct Shared {
    latency: Duration,
    teammates: Vec<AgentName>,
    /// Numbers tool calls and round trips, unique over the soak.
    next: AtomicU64,
    /// Round trips sent and not yet seen by the lead, by key.
    in_flight: Mutex<HashMap<u64, Instant>>,
    /// Round trips seen since the last [`Shared::take_round_trips`], in microseconds.
    measured: Mutex<Vec<u32>>,
    /// Tool results that were errors, over the soak.
    tool_errors: AtomicU64,
    /// Model calls (turns and the runtime's own), over the soak.
    calls: AtomicU64,
}

impl Shared {
    pub fn new(latency: Duration, teammates: Vec<AgentName>) -> Arc<Self> {
        Arc::new(Self {
            latency,
            teammates,
            next: AtomicU64::new(1),
            in_flight: Mutex::new(HashMap::new()),
            measured: Mutex::new(Vec::new()),
            tool_errors: AtomicU64::new(0),
            calls: AtomicU64::new(0),
        })
    }

    /// The round trips measured since the last call, in microseconds.
    pub fn take_round_trips(&self) -> Vec<u32> {
        std::mem::take(&mut *lock(&self.measured))
    }

    /// Forgets round trips the lead never saw (a cycle that failed); how many.
    pub fn drop_unseen(&self) -> usize {
        let mut in_flight = lock(&self.in_flight);
        let n = in_flight.len();
        in_flight.clear();
        n
    }

    pub fn tool_errors(&self) -> u64 {
        self.tool_errors.load(Ordering::Relaxed)
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn number(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn calls_of(&self, tool: &str, args: impl IntoIterator<Item = Value>) -> ModelResponse {
        let calls = args
            .into_iter()
            .map(|a| ToolCall::new(format!("call_{}", self.number()), tool, a.to_string()))
            .collect();
        ModelResponse::tool_calls(calls, MODEL)
    }

    fn call(&self, tool: &str, args: Value) -> ModelResponse {
        self.calls_of(tool, [args])
    }
}

/// Every agent gets its own view of the shared script.
pub struct SoakModels(pub Arc<Shared>);

impl ModelChooser for SoakModels {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        Arc::new(AgentModel {
            agent: agent.clone(),
            shared: self.0.clone(),
        })
    }
}

struct AgentModel {
    agent: AgentName,
    shared: Arc<Shared>,
}

#[async_trait::async_trait]
impl ModelClient for AgentModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.shared.calls.fetch_add(1, Ordering::Relaxed);
        if !self.shared.latency.is_zero() {
            tokio::time::sleep(self.shared.latency).await;
        }
        if !request.purpose.is_turn() {
            return Ok(ModelResponse::text(
                side_answer(request.purpose, GOAL),
                MODEL,
            ));
        }
        let messages = &request.messages;
        if let Some(ChatMessage::Tool { content, .. }) = messages.last() {
            if content.starts_with("Error [") {
                self.shared.tool_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(if self.agent.is_lead() {
            lead(&self.shared, messages)
        } else {
            teammate(&self.shared, &self.agent, messages)
        })
    }
}

fn lead(shared: &Shared, messages: &[ChatMessage]) -> ModelResponse {
    if matches!(messages.last(), Some(ChatMessage::Tool { .. })) {
        let after = last_calls(messages)
            .and_then(|calls| calls.first())
            .map(|c| c.name.as_str());
        return match after {
            Some("create_task") => shared.calls_of(
                "send_message",
                shared.teammates.iter().map(|mate| {
                    json!({"to": mate.as_str(),
                           "content": "soak cycle: plan, then write, read and check your file"})
                }),
            ),
            _ => ModelResponse::text("Noted.", MODEL),
        };
    }
    let trailing = trailing_user(messages);
    let mut plans = Vec::new();
    for text in &trailing {
        let Some(body) = text.strip_prefix("[event] ") else {
            if text.contains("soak setup") {
                return shared.calls_of(
                    "spawn_teammate",
                    shared.teammates.iter().map(|mate| {
                        json!({"name": mate.as_str(), "role": "soak worker",
                               "prompt": "Stand by."})
                    }),
                );
            }
            if text.contains("soak cycle") {
                return shared.calls_of(
                    "create_task",
                    shared.teammates.iter().map(|mate| {
                        json!({"subject": format!("soak task for {mate}"),
                               "assignee": mate.as_str()})
                    }),
                );
            }
            continue;
        };
        let Ok(event) = serde_json::from_str::<Value>(body) else {
            continue;
        };
        if event["protocol_kind"] == "plan_approval_request" {
            if let Some(id) = event["request_id"].as_str() {
                plans.push(json!({"request_id": id, "approve": true}));
            }
        }
        if let Some(key) = event["content"]
            .as_str()
            .and_then(|c| c.split(ROUND_TRIP_TAG).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
        {
            seen(shared, key);
        }
    }
    if plans.is_empty() {
        ModelResponse::text("Noted.", MODEL)
    } else {
        shared.calls_of("review_plan", plans)
    }
}

/// The lead's model was called with round trip `key` in its conversation.
fn seen(shared: &Shared, key: u64) {
    let sent = lock(&shared.in_flight).remove(&key);
    if let Some(sent) = sent {
        let micros = u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX);
        lock(&shared.measured).push(micros);
    }
}

fn teammate(shared: &Shared, me: &AgentName, messages: &[ChatMessage]) -> ModelResponse {
    let file = format!("soak/{me}.txt");
    match messages.last() {
        Some(ChatMessage::Tool { .. }) => {
            let after = last_calls(messages)
                .and_then(|calls| calls.first())
                .map(|c| c.name.as_str());
            match after {
                Some("submit_plan") => ModelResponse::text("Waiting for approval.", MODEL),
                Some("write_file") => shared.call("read_file", json!({"path": file})),
                Some("read_file") => shared.call("shell", json!({"command": "echo soak"})),
                Some("shell") => {
                    let key = shared.number();
                    lock(&shared.in_flight).insert(key, Instant::now());
                    shared.call(
                        "send_message",
                        json!({"to": "lead", "content": format!("{ROUND_TRIP_TAG}{key} from {me}")}),
                    )
                }
                Some("send_message") => ModelResponse::text("Done.", MODEL),
                Some("complete_task") => ModelResponse::text("Task done.", MODEL),
                _ => ModelResponse::text("OK.", MODEL),
            }
        }
        Some(ChatMessage::User { content }) => {
            if let Some(rest) = content.split("[task] ").nth(1) {
                let id: String = rest.chars().take(36).collect();
                shared.call("complete_task", json!({"task_id": id}))
            } else if content.starts_with("Plan approved") {
                let n = shared.number();
                shared.call(
                    "write_file",
                    json!({"path": file, "content": format!("soak work {n}\n")}),
                )
            } else if content.contains("soak cycle") {
                shared.call(
                    "submit_plan",
                    json!({"plan": "Write my file, read it back, check it, tell the lead."}),
                )
            } else {
                ModelResponse::text("Ready.", MODEL)
            }
        }
        _ => ModelResponse::text("OK.", MODEL),
    }
}
