//! What a runner reports while it works. The CLI renders it on stderr; tests can record it.

use troupe_wire::AgentName;

use std::sync::Arc;

use troupe_wire::MessageId;

use super::transcript::BoundaryKind;
use crate::model::progress::{CallProgress, ProgressSink};
use crate::model::{ModelResponse, ToolCall};
use crate::tools::ToolOutcome;

/// Callbacks at each step of a turn. All default to doing nothing.
#[async_trait::async_trait]
pub trait RunObserver: Send + Sync {
    /// A turn is about to start: what the observer reads from an async port first (a worker's
    /// trace key, from the team's registry). Awaited by the runner just before
    /// [`Self::turn_started`].
    async fn turn_starting(&self, _agent: &AgentName) {}
    /// The agent's next turn works on these mailbox messages (a teammate's message, the lead's
    /// events), so that what handles a message can be traced back to what sent it.
    fn handling(&self, _agent: &AgentName, _messages: &[MessageId]) {}
    /// A turn starts: model calls and tool calls until an answer, a limit or a failure.
    fn turn_started(&self, _agent: &AgentName) {}
    /// The turn ended: how, or the failure's code.
    fn turn_finished(&self, _agent: &AgentName, _end: Result<&TurnSummary, &str>) {}
    fn model_call_started(&self, _agent: &AgentName, _call_number: usize) {}
    fn model_call_finished(&self, _agent: &AgentName, _response: &ModelResponse) {}
    /// A retry or the switch to the fallback model, while the call goes on.
    fn model_progress(&self, _agent: &AgentName, _progress: &CallProgress) {}
    /// The call failed for good (after its retries and fallback); the turn fails with it.
    fn model_call_failed(&self, _agent: &AgentName, _error: &str, _code: &str) {}
    fn tool_started(&self, _agent: &AgentName, _call: &ToolCall) {}
    fn tool_finished(&self, _agent: &AgentName, _call: &ToolCall, _outcome: &ToolOutcome) {}
    fn compacted(&self, _agent: &AgentName, _report: &CompactionReport) {}
}

/// A finished turn, as observers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnSummary {
    /// `answered`, `cancelled`, `max_turns`, `token_budget` or `cost_budget`.
    pub end: &'static str,
    pub model_calls: usize,
    pub tool_calls: usize,
}

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The next request was over the budget.
    Budget,
    /// The server refused a request as too long for the context window.
    PromptTooLong,
    /// `troupe compact`.
    Manual,
}

impl Trigger {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Budget => "budget",
            Self::PromptTooLong => "prompt_too_long",
            Self::Manual => "manual",
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionReport {
    pub trigger: Trigger,
    /// `Summary`, or `Dropped` when the summary failed twice.
    pub kind: BoundaryKind,
    pub messages_before: usize,
    pub messages_after: usize,
    pub bytes_before: usize,
    pub bytes_after: usize,
}

/// Hands a model call's progress to a runner's observer, for one agent.
pub(crate) struct ProgressTo {
    pub observer: Arc<dyn RunObserver>,
    pub agent: AgentName,
}

impl ProgressSink for ProgressTo {
    fn progress(&self, progress: &CallProgress) {
        self.observer.model_progress(&self.agent, progress);
    }
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullObserver;

impl RunObserver for NullObserver {}
