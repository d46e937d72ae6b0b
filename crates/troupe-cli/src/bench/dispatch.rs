//! The dispatch suite: runtime overhead of one tool call — argument parsing, schema validation,
//! hooks, permission rules, the approval provider and an audit line in a real file — around a
//! handler that does nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use troupe::clock::SystemClock;
use troupe::layout::Layout;
use troupe::permissions::hooks::Hooks;
use troupe::permissions::{AutoApproval, JsonlAuditSink, PermissionPolicy};
use troupe::tools::testing::NoopTool;
use troupe::tools::{Dispatcher, Effect, ToolContext, ToolRegistry};
use troupe::wire::AgentName;

use crate::result::BenchResult;
use crate::stats::{p50_us, round2};

pub fn run(dir: &Path, calls: usize) -> BenchResult<Value> {
    let disk = crate::disk::durable_writes_per_s(dir, std::time::Duration::from_secs(2))?;
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let audit = JsonlAuditSink::open(&Layout::new(workspace.path()), Arc::new(SystemClock))
        .map_err(|e| e.to_string())?;
    let mut registry = ToolRegistry::new();
    // A `write` tool: the default policy asks, the automatic provider answers, the audit records.
    registry
        .register(Arc::new(NoopTool::new("noop", Effect::Write)))
        .map_err(|e| e.to_string())?;
    let dispatcher = Dispatcher::new(
        Arc::new(registry),
        PermissionPolicy::default_policy(Arc::new(AutoApproval), Arc::new(audit)),
        Hooks::new(),
    );
    let ctx = ToolContext::new(AgentName::lead(), workspace.path());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let arguments = json!({"text": "benchmark"}).to_string();
    let samples = runtime.block_on(async {
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            let start = Instant::now();
            let outcome = dispatcher.dispatch(&ctx, "noop", &arguments).await;
            samples.push(start.elapsed());
            if outcome.is_error {
                return Err(outcome.content);
            }
        }
        Ok(samples)
    })?;
    let mut samples = samples;
    let p50 = p50_us(&mut samples);
    let p99 = samples
        .get(samples.len() * 99 / 100)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6);
    Ok(json!({
        "suite": "dispatch",
        "calls": calls,
        "disk_durable_writes_per_s": round2(disk),
        "dispatch_us_p50": round2(p50),
        "dispatch_us_p99": round2(p99),
    }))
}
