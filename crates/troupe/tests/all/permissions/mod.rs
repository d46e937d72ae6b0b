//! Permissions: rule combination, the policy, approval providers, the audit log, and the
//! guarantee that a denied call never reaches its handler; settings rules (patterns, chains,
//! paths, deny > ask > allow, session allows, the plan gate above them); the plan gate over a
//! teammate's working toolset.

mod approval;
mod audit;
mod denied;
mod plan_gate;
mod rules;
mod settings_rules;

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use troupe::permissions::rules::FixedRule;
use troupe::permissions::{Decision, PermissionRequest, PermissionRule};
use troupe::tools::{Effect, Scope};
use troupe::wire::AgentName;

/// A rule with a fixed decision for every tool.
pub fn fixed(name: &str, decision: Decision) -> Arc<dyn PermissionRule> {
    Arc::new(FixedRule {
        name: name.to_owned(),
        tools: Vec::new(),
        decision,
        reason: format!("{name} says {}", decision.as_str()),
    })
}

pub fn request<'a>(
    agent: &'a AgentName,
    tool: &'a str,
    effect: Effect,
    args: &'a Value,
) -> PermissionRequest<'a> {
    PermissionRequest {
        agent,
        tool,
        effect,
        scope: Scope::World,
        arguments: args,
        sandbox: None,
        preview: None,
        protected: None,
    }
}

/// A `Write` that tests can read back.
#[derive(Clone, Default)]
pub struct SharedOutput(pub Arc<Mutex<Vec<u8>>>);

impl SharedOutput {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
