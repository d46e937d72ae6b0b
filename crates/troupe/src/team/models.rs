//! Which model answers which agent ([`ModelChooser`]): the CLI uses one client for all (or one
//! per model name), tests and the demo script each agent, and a replay answers each from a
//! recording — and groups the lead's events as the recording did ([`EventPacing`]).

use std::sync::Arc;

use troupe_wire::AgentName;

use super::driver::EventPacing;
use crate::model::ModelClient;

/// Which model answers which agent (the CLI uses one client for all; tests and the demo script
/// each agent).
pub trait ModelChooser: Send + Sync {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient>;

    /// The client of `agent` when it is to run on the model named `model` (an agent
    /// definition's `model`, or `[model.agents]`); none: its default. The default ignores the
    /// name (one model, or a script whose per-agent queues know no model names).
    fn model_named(&self, agent: &AgentName, model: Option<&str>) -> Arc<dyn ModelClient> {
        let _ = model;
        self.model_for(agent)
    }

    /// How the lead's events are grouped into turns, when these models need it (a replay's
    /// do: `replay::Player`); none: as they come.
    fn pacing(&self) -> Option<Arc<dyn EventPacing>> {
        None
    }
}
