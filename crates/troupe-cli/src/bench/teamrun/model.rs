//! The teamrun's scripted team: one model per agent that records the request it is called with
//! (see `record.rs`), waits the latency, and decides from the tail of its conversation. What
//! they keep between calls is counters, never the requests.
//!
//! - The lead, on each of its turn calls (numbered from 1): spawns the next teammate on call 1
//!   and then every `spawn_every` calls, until all are spawned. On the events of a turn: approves
//!   every plan request (`review_plan`); gives the teammate of every finished piece of work (a
//!   result carrying [`DONE`]) its next one, in turn a board task assigned to it (`create_task`)
//!   or a message asking for planned work (`send_message`); other events (progress messages,
//!   results of a submitted plan) are noted. After its tools' results it answers. Its last call
//!   (`turns`) cancels the run.
//! - A teammate, on its first task: answers [`DONE`]. On the lead's work message: submits a plan,
//!   then answers that it waits; on the plan's approval: sends the lead a progress message, then
//!   answers [`DONE`]. On a board task: completes it (`complete_task`), then answers [`DONE`].
//!
//! So every teammate always has work or a finished piece of it on its way to the lead, and the
//! lead is called until its last turn; and its roster (statuses), pending requests and board
//! change all along.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::ModelChooser;
use troupe::model::{ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, ToolCall};
use troupe::sync::lock;
use troupe::wire::AgentName;

use crate::scripted::{last_calls, side_answer, trailing_user};

/// What a summary of this bench's conversations says the goal is.
const GOAL: &str = "Keep the team busy: spawn, hand out work, approve plans.";

use super::record::Recorder;

/// What a teammate's answer carries when a piece of work is finished: the lead gives it the next.
pub const DONE: &str = "teamrun done";
/// What the lead's work message carries.
const WORK: &str = "teamrun work";
/// The model name on every answer.
const MODEL: &str = "teamrun";

/// What the lead's model keeps between its calls.
#[derive(Debug, Default)]
struct LeadState {
    /// Turn calls so far.
    calls: usize,
    spawned: usize,
    /// Pieces of work handed out: even ones are board tasks, odd ones messages.
    work: u64,
}

/// What the lead's script did, as counted by its model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeadCounts {
    pub turns: usize,
    pub spawns: usize,
    pub board_tasks: u64,
    pub work_messages: u64,
}

/// What every agent's model shares.
pub struct Script {
    /// The lead's last turn call.
    turns: usize,
    spawn_every: usize,
    latency: Duration,
    teammates: Vec<AgentName>,
    recorder: Recorder,
    lead: Mutex<LeadState>,
    /// Cancelled by the lead's last call: the run ends.
    stop: CancellationToken,
    /// Numbers tool calls, unique over the run.
    next_call: AtomicU64,
    /// Tool results that were errors.
    tool_errors: AtomicU64,
    reviews: AtomicU64,
}

impl Script {
    pub fn new(
        turns: usize,
        teammates: Vec<AgentName>,
        latency: Duration,
        stop: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Self {
            turns,
            spawn_every: spawn_every(turns, teammates.len()),
            latency,
            teammates,
            recorder: Recorder::default(),
            lead: Mutex::new(LeadState::default()),
            stop,
            next_call: AtomicU64::new(1),
            tool_errors: AtomicU64::new(0),
            reviews: AtomicU64::new(0),
        })
    }

    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    pub fn spawn_every(&self) -> usize {
        self.spawn_every
    }

    pub fn tool_errors(&self) -> u64 {
        self.tool_errors.load(Ordering::Relaxed)
    }

    /// `review_plan` calls the lead made.
    pub fn reviews(&self) -> u64 {
        self.reviews.load(Ordering::Relaxed)
    }

    pub fn lead_counts(&self) -> LeadCounts {
        let state = lock(&self.lead);
        LeadCounts {
            turns: state.calls,
            spawns: state.spawned,
            board_tasks: state.work.div_ceil(2),
            work_messages: state.work / 2,
        }
    }

    fn call(&self, tool: &str, args: Value) -> ToolCall {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        ToolCall::new(format!("call_{n}"), tool, args.to_string())
    }
}

/// Lead calls between two spawns: the spawns spread over the first four fifths of the run.
pub fn spawn_every(turns: usize, teammates: usize) -> usize {
    (turns * 4 / 5 / teammates.max(1)).max(1)
}

/// Every agent gets its own view of the script.
pub struct TeamrunModels(pub Arc<Script>);

impl ModelChooser for TeamrunModels {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        Arc::new(AgentModel {
            agent: agent.clone(),
            script: self.0.clone(),
        })
    }
}

struct AgentModel {
    agent: AgentName,
    script: Arc<Script>,
}

#[async_trait::async_trait]
impl ModelClient for AgentModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.script.recorder.record(&self.agent, request);
        if !self.script.latency.is_zero() {
            tokio::time::sleep(self.script.latency).await;
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
                self.script.tool_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(if self.agent.is_lead() {
            lead(&self.script, messages)
        } else {
            teammate(&self.script, &self.agent, messages)
        })
    }
}

/// What the lead does about one event of its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reaction {
    Approve(String),
    NextWork(String),
    Note,
}

/// One `[event] {…}` text of the lead's history.
fn reaction(text: &str) -> Reaction {
    let Some(event) = text
        .strip_prefix("[event] ")
        .and_then(|body| serde_json::from_str::<Value>(body).ok())
    else {
        return Reaction::Note;
    };
    if event["protocol_kind"] == "plan_approval_request" {
        if let Some(id) = event["request_id"].as_str() {
            return Reaction::Approve(id.to_owned());
        }
    }
    let done = event["content"].as_str().is_some_and(|c| c.contains(DONE));
    match event["sender"].as_str() {
        Some(sender) if event["kind"] == "result" && done => Reaction::NextWork(sender.to_owned()),
        _ => Reaction::Note,
    }
}

fn lead(script: &Script, messages: &[ChatMessage]) -> ModelResponse {
    let mut state = lock(&script.lead);
    state.calls += 1;
    if state.calls >= script.turns {
        script.stop.cancel();
        return ModelResponse::text("That was the last turn.", MODEL);
    }
    let mut calls = Vec::new();
    if state.spawned < script.teammates.len() && state.calls > state.spawned * script.spawn_every {
        let name = &script.teammates[state.spawned];
        state.spawned += 1;
        calls.push(script.call(
            "spawn_teammate",
            json!({"name": name.as_str(), "role": "teamrun worker",
                   "prompt": "You joined the teamrun. Say that you are ready."}),
        ));
    }
    // After its own tools' results the lead has no events to read.
    if !matches!(messages.last(), Some(ChatMessage::Tool { .. })) {
        for text in trailing_user(messages) {
            match reaction(text) {
                Reaction::Approve(id) => {
                    script.reviews.fetch_add(1, Ordering::Relaxed);
                    calls.push(
                        script.call("review_plan", json!({"request_id": id, "approve": true})),
                    );
                }
                Reaction::NextWork(mate) => {
                    let n = state.work;
                    state.work += 1;
                    calls.push(if n.is_multiple_of(2) {
                        script.call(
                            "create_task",
                            json!({"subject": format!("teamrun task {n} for {mate}"),
                                   "assignee": mate}),
                        )
                    } else {
                        script.call(
                            "send_message",
                            json!({"to": mate,
                                   "content": format!("{WORK} {n}: plan it, then tell me how it goes")}),
                        )
                    });
                }
                Reaction::Note => {}
            }
        }
    }
    if calls.is_empty() {
        ModelResponse::text("Noted.", MODEL)
    } else {
        ModelResponse::tool_calls(calls, MODEL)
    }
}

fn teammate(script: &Script, me: &AgentName, messages: &[ChatMessage]) -> ModelResponse {
    let one =
        |tool: &str, args: Value| ModelResponse::tool_calls(vec![script.call(tool, args)], MODEL);
    match messages.last() {
        Some(ChatMessage::Tool { .. }) => {
            let after = last_calls(messages)
                .and_then(|calls| calls.first())
                .map(|c| c.name.as_str());
            match after {
                Some("submit_plan") => ModelResponse::text("Plan submitted; waiting.", MODEL),
                Some("send_message") => ModelResponse::text(format!("{DONE}: work"), MODEL),
                Some("complete_task") => ModelResponse::text(format!("{DONE}: task"), MODEL),
                _ => ModelResponse::text("OK.", MODEL),
            }
        }
        Some(ChatMessage::User { content }) => {
            if let Some(rest) = content.split("[task] ").nth(1) {
                let id: String = rest.chars().take(36).collect();
                one("complete_task", json!({"task_id": id}))
            } else if content.starts_with("Plan approved") {
                one(
                    "send_message",
                    json!({"to": "lead", "content": format!("Progress from {me}: under way.")}),
                )
            } else if content.contains(WORK) {
                one(
                    "submit_plan",
                    json!({"plan": "Do the work asked, then report progress to the lead."}),
                )
            } else {
                ModelResponse::text(format!("{DONE}: ready"), MODEL)
            }
        }
        _ => ModelResponse::text("OK.", MODEL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn spawns_spread_over_four_fifths_of_the_run() {
        assert_eq!(spawn_every(200, 8), 20);
        assert_eq!(spawn_every(10, 8), 1);
        assert_eq!(spawn_every(200, 0), 160);
    }

    #[test]
    fn the_lead_reacts_to_plans_and_finished_work_only() {
        let plan = json!({"kind": "protocol", "protocol_kind": "plan_approval_request",
                          "sender": "mate-0", "request_id": "r1", "content": "a plan"});
        let done = json!({"kind": "result", "sender": "mate-1", "content": "teamrun done: task"});
        let waiting = json!({"kind": "result", "sender": "mate-1", "content": "Plan submitted"});
        let progress = json!({"kind": "message", "sender": "mate-1", "content": "teamrun done"});
        assert_eq!(
            reaction(&format!("[event] {plan}")),
            Reaction::Approve("r1".into())
        );
        assert_eq!(
            reaction(&format!("[event] {done}")),
            Reaction::NextWork("mate-1".into())
        );
        assert_eq!(reaction(&format!("[event] {waiting}")), Reaction::Note);
        assert_eq!(reaction(&format!("[event] {progress}")), Reaction::Note);
        assert_eq!(reaction("teamrun: start"), Reaction::Note);
    }
}
