//! Cheap tools for tests and benchmarks (not offered to any model).
//!
//! [`NoopTool`] does nothing and returns `ok`, so timing a dispatch of it measures the dispatch
//! path itself: parsing, schema validation, hooks, the permission policy and the audit write.
//! [`CountingTool`] counts how many times its handler ran, to prove a denied call never runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

/// For tests and benchmarks: a tool named `noop` that returns `ok`.
#[derive(Debug, Clone)]
pub struct NoopTool {
    name: String,
    effect: Effect,
}

impl NoopTool {
    pub fn new(name: impl Into<String>, effect: Effect) -> Self {
        Self {
            name: name.into(),
            effect,
        }
    }
}

impl Default for NoopTool {
    fn default() -> Self {
        Self::new("noop", Effect::Read)
    }
}

fn noop_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Ignored."}},
        "additionalProperties": false
    })
}

#[async_trait]
impl ToolHandler for NoopTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: "Does nothing and returns `ok` (tests and benchmarks only).".to_owned(),
            parameters: noop_schema(),
            effect: self.effect,
        }
    }

    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<String, ToolError> {
        Ok("ok".to_owned())
    }
}

/// For tests: a tool that counts the runs of its handler. Clones share the count.
#[derive(Debug, Clone)]
pub struct CountingTool {
    name: String,
    effect: Effect,
    calls: Arc<AtomicUsize>,
}

impl CountingTool {
    pub fn new(name: impl Into<String>, effect: Effect) -> Self {
        Self {
            name: name.into(),
            effect,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many times the handler has run.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ToolHandler for CountingTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: "Counts its calls (tests only).".to_owned(),
            parameters: noop_schema(),
            effect: self.effect,
        }
    }

    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<String, ToolError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(format!("call {n}"))
    }
}
