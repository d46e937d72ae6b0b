//! Token usage of a run (stub until the usage store lands).

use troupe_wire::AgentName;

use crate::model::{ModelResponse, Purpose, Usage};

/// Where every model response's token usage goes.
pub trait UsageSink: Send + Sync {
    fn record(&self, agent: &AgentName, purpose: Purpose, response: &ModelResponse);
    fn run_total(&self) -> u64;
    fn per_agent(&self) -> Vec<(AgentName, Usage)>;
}

/// Records nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoUsage;

impl UsageSink for NoUsage {
    fn record(&self, _agent: &AgentName, _purpose: Purpose, _response: &ModelResponse) {}
    fn run_total(&self) -> u64 {
        0
    }
    fn per_agent(&self) -> Vec<(AgentName, Usage)> {
        Vec::new()
    }
}
