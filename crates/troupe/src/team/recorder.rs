//! Turns what the runners and the team report into events (SPEC §10): model calls with their
//! latency, tokens, retries and fallback; the model's words; tool calls with their duration and
//! outcome; compactions; teammates spawned and changing status; requests expiring.
//!
//! Messages and protocol transitions are reported by the stores' decorators
//! ([`crate::store::events::observed`]), so `Sent`, `Resolved` and `Quarantined` updates are not
//! recorded here again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::json;
use troupe_wire::AgentName;

use super::observer::{TeamObserver, TeamUpdate};
use crate::agent::observer::{CompactionReport, TurnSummary};
use crate::agent::transcript::BoundaryKind;
use crate::agent::RunObserver;
use crate::model::progress::CallProgress;
use crate::model::{ModelResponse, ToolCall};
use crate::store::events::kinds::{self, compact, fields, preview};
use crate::store::events::observed::request_fields;
use crate::store::events::EventSink;
use crate::tools::ToolOutcome;

/// One agent's model call in flight.
struct Call {
    started: Instant,
    attempts: u32,
    fallback: bool,
}

/// Records runner and team reports as events.
pub struct EventRecorder {
    events: Arc<dyn EventSink>,
    calls: Mutex<HashMap<AgentName, Call>>,
    tools: Mutex<HashMap<(AgentName, String), Instant>>,
}

impl EventRecorder {
    pub fn new(events: Arc<dyn EventSink>) -> Self {
        Self {
            events,
            calls: Mutex::new(HashMap::new()),
            tools: Mutex::new(HashMap::new()),
        }
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl RunObserver for EventRecorder {
    fn model_call_started(&self, agent: &AgentName, call_number: usize) {
        crate::sync::lock(&self.calls).insert(
            agent.clone(),
            Call {
                started: Instant::now(),
                attempts: 1,
                fallback: false,
            },
        );
        self.events.emit(
            agent.as_str(),
            kinds::MODEL_CALL_STARTED,
            fields(json!({"call": call_number, "purpose": "turn"})),
        );
    }

    fn model_progress(&self, agent: &AgentName, progress: &CallProgress) {
        // Text as it streams is the answer's, not an attempt: the answer's event says it.
        if matches!(progress, CallProgress::Text(_)) {
            return;
        }
        if let Some(call) = crate::sync::lock(&self.calls).get_mut(agent) {
            call.attempts += 1;
            if matches!(progress, CallProgress::FallingBack { .. }) {
                call.fallback = true;
            }
        }
        match progress {
            CallProgress::Retrying {
                model,
                attempt,
                error,
                delay,
            } => self.events.emit(
                agent.as_str(),
                kinds::MODEL_RETRY,
                fields(json!({
                    "model": model,
                    "attempt": attempt,
                    "error": preview(error),
                    "delay_ms": u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                })),
            ),
            CallProgress::FallingBack { from, to, error } => self.events.emit(
                agent.as_str(),
                kinds::MODEL_FALLBACK,
                fields(json!({"from": from, "to": to, "error": preview(error)})),
            ),
            CallProgress::Text(_) => {}
        }
    }

    fn model_call_finished(&self, agent: &AgentName, response: &ModelResponse) {
        let call = crate::sync::lock(&self.calls).remove(agent);
        let (latency, attempts, fallback) = call.map_or((0, 1, false), |c| {
            (millis(c.started), c.attempts, c.fallback)
        });
        let usage = response.usage.as_ref();
        self.events.emit(
            agent.as_str(),
            kinds::MODEL_CALL_FINISHED,
            compact(json!({
                "model": response.model,
                "latency_ms": latency,
                "tokens_in": usage.map(|u| u.prompt_tokens),
                "tokens_out": usage.map(|u| u.completion_tokens),
                // Of `tokens_in`, what a prompt cache served and took (left out when none).
                "tokens_cached": usage.map(|u| u.cache_read_tokens).filter(|n| *n > 0),
                "tokens_cache_write": usage.map(|u| u.cache_write_tokens).filter(|n| *n > 0),
                // The server reported no usage: the tokens are troupe's estimate (left out
                // when the server counted).
                "estimated": usage.map(|u| u.estimated).filter(|estimated| *estimated),
                "finish_reason": response.finish_reason.as_str(),
                "attempts": attempts,
                "fallback_used": fallback,
            })),
        );
        if let Some(text) = response.message.content.as_deref() {
            if !text.trim().is_empty() {
                self.events.emit(
                    agent.as_str(),
                    kinds::ASSISTANT_TEXT,
                    fields(json!({"text": text})),
                );
            }
        }
    }

    fn model_call_failed(&self, agent: &AgentName, error: &str, code: &str) {
        let call = crate::sync::lock(&self.calls).remove(agent);
        self.events.emit(
            agent.as_str(),
            kinds::MODEL_CALL_FAILED,
            fields(json!({
                "error": error,
                "code": code,
                "latency_ms": call.map_or(0, |c| millis(c.started)),
            })),
        );
    }

    fn tool_started(&self, agent: &AgentName, call: &ToolCall) {
        crate::sync::lock(&self.tools).insert((agent.clone(), call.id.clone()), Instant::now());
        self.events.emit(
            agent.as_str(),
            kinds::TOOL_STARTED,
            kinds::tool_started(&call.id, &call.name, &call.arguments),
        );
    }

    fn tool_finished(&self, agent: &AgentName, call: &ToolCall, outcome: &ToolOutcome) {
        let started = crate::sync::lock(&self.tools).remove(&(agent.clone(), call.id.clone()));
        let denied = outcome.decision.as_ref().filter(|d| !d.allowed);
        let verdict = match (denied, outcome.is_error) {
            (Some(_), _) => "denied",
            (None, true) => "error",
            (None, false) => "ok",
        };
        self.events.emit(
            agent.as_str(),
            kinds::TOOL_FINISHED,
            compact(json!({
                "call_id": call.id,
                "tool": call.name,
                "duration_ms": started.map_or(0, millis),
                "outcome": verdict,
                "rule": outcome.decision.as_ref().map(|d| d.rule.clone()),
                "denial_reason": denied.map(|d| d.reason.clone()),
                "preview": preview(&outcome.content),
            })),
        );
    }

    fn compacted(&self, agent: &AgentName, report: &CompactionReport) {
        self.events.emit(
            agent.as_str(),
            kinds::COMPACTION,
            fields(json!({
                "trigger": report.trigger.as_str(),
                "how": match report.kind {
                    BoundaryKind::Summary => "summary",
                    BoundaryKind::Dropped => "dropped",
                },
                "messages_before": report.messages_before,
                "messages_after": report.messages_after,
                "bytes_before": report.bytes_before,
                "bytes_after": report.bytes_after,
            })),
        );
    }
}

impl TeamObserver for EventRecorder {
    fn update(&self, update: &TeamUpdate) {
        match update {
            TeamUpdate::Spawned { name, role } => self.events.emit(
                name.as_str(),
                kinds::TEAMMATE_SPAWNED,
                fields(json!({"role": role})),
            ),
            TeamUpdate::Status {
                name,
                status,
                detail,
            } => self.events.emit(
                name.as_str(),
                kinds::TEAMMATE_STATUS,
                compact(json!({"status": status.as_str(), "detail": detail})),
            ),
            TeamUpdate::Expired(request) => {
                if crate::store::events::observed::has_request_events(request.kind()) {
                    self.events.emit(
                        request.sender().as_str(),
                        kinds::REQUEST_EXPIRED,
                        request_fields(request),
                    );
                }
            }
            TeamUpdate::Merged {
                name,
                branch,
                commit,
                fast_forward,
            } => self.events.emit(
                name.as_str(),
                kinds::TEAMMATE_MERGED,
                fields(json!({"branch": branch, "commit": commit, "fast_forward": fast_forward})),
            ),
            TeamUpdate::MergeConflict {
                name,
                branch,
                files,
            } => self.events.emit(
                name.as_str(),
                kinds::MERGE_CONFLICT,
                fields(json!({"branch": branch, "files": files})),
            ),
            // Reported by the stores' decorators.
            TeamUpdate::Sent(_) | TeamUpdate::Resolved(_) | TeamUpdate::Quarantined { .. } => {}
        }
    }
}

/// Both observers get every report: the recorder first, then the caller's own.
pub struct Both<A: ?Sized, B: ?Sized>(pub Arc<A>, pub Arc<B>);

#[async_trait::async_trait]
impl<A: RunObserver + ?Sized, B: RunObserver + ?Sized> RunObserver for Both<A, B> {
    async fn turn_starting(&self, agent: &AgentName) {
        self.0.turn_starting(agent).await;
        self.1.turn_starting(agent).await;
    }
    fn handling(&self, agent: &AgentName, messages: &[troupe_wire::MessageId]) {
        self.0.handling(agent, messages);
        self.1.handling(agent, messages);
    }
    fn turn_started(&self, agent: &AgentName) {
        self.0.turn_started(agent);
        self.1.turn_started(agent);
    }
    fn turn_finished(&self, agent: &AgentName, end: Result<&TurnSummary, &str>) {
        self.0.turn_finished(agent, end);
        self.1.turn_finished(agent, end);
    }
    fn model_call_started(&self, agent: &AgentName, call_number: usize) {
        self.0.model_call_started(agent, call_number);
        self.1.model_call_started(agent, call_number);
    }
    fn model_call_finished(&self, agent: &AgentName, response: &ModelResponse) {
        self.0.model_call_finished(agent, response);
        self.1.model_call_finished(agent, response);
    }
    fn model_progress(&self, agent: &AgentName, progress: &CallProgress) {
        self.0.model_progress(agent, progress);
        self.1.model_progress(agent, progress);
    }
    fn model_call_failed(&self, agent: &AgentName, error: &str, code: &str) {
        self.0.model_call_failed(agent, error, code);
        self.1.model_call_failed(agent, error, code);
    }
    fn tool_started(&self, agent: &AgentName, call: &ToolCall) {
        self.0.tool_started(agent, call);
        self.1.tool_started(agent, call);
    }
    fn tool_finished(&self, agent: &AgentName, call: &ToolCall, outcome: &ToolOutcome) {
        self.0.tool_finished(agent, call, outcome);
        self.1.tool_finished(agent, call, outcome);
    }
    fn compacted(&self, agent: &AgentName, report: &CompactionReport) {
        self.0.compacted(agent, report);
        self.1.compacted(agent, report);
    }
}

impl<A: TeamObserver + ?Sized, B: TeamObserver + ?Sized> TeamObserver for Both<A, B> {
    fn update(&self, update: &TeamUpdate) {
        self.0.update(update);
        self.1.update(update);
    }
}
