//! What a runner reports while it works. The CLI renders it on stderr; tests can record it.

use troupe_wire::AgentName;

use crate::model::{ModelResponse, ToolCall};
use crate::tools::ToolOutcome;

/// Callbacks at each step of a turn. All default to doing nothing.
pub trait RunObserver: Send + Sync {
    fn model_call_started(&self, _agent: &AgentName, _call_number: usize) {}
    fn model_call_finished(&self, _agent: &AgentName, _response: &ModelResponse) {}
    fn tool_started(&self, _agent: &AgentName, _call: &ToolCall) {}
    fn tool_finished(&self, _agent: &AgentName, _call: &ToolCall, _outcome: &ToolOutcome) {}
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullObserver;

impl RunObserver for NullObserver {}
