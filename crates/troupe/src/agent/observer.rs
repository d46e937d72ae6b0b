//! What a runner reports while it works. The CLI renders it on stderr; tests can record it.

use troupe_wire::AgentName;

use super::transcript::BoundaryKind;
use crate::model::{ModelResponse, ToolCall};
use crate::tools::ToolOutcome;

/// Callbacks at each step of a turn. All default to doing nothing.
pub trait RunObserver: Send + Sync {
    fn model_call_started(&self, _agent: &AgentName, _call_number: usize) {}
    fn model_call_finished(&self, _agent: &AgentName, _response: &ModelResponse) {}
    fn tool_started(&self, _agent: &AgentName, _call: &ToolCall) {}
    fn tool_finished(&self, _agent: &AgentName, _call: &ToolCall, _outcome: &ToolOutcome) {}
    fn compacted(&self, _agent: &AgentName, _report: &CompactionReport) {}
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

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullObserver;

impl RunObserver for NullObserver {}
