//! Dispatch overhead: a no-op tool through the whole path, auditing to a real file.

use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe::clock::SystemClock;
use troupe::layout::Layout;
use troupe::permissions::{AutoApproval, JsonlAuditSink, PermissionPolicy};
use troupe::tools::testing::NoopTool;
use troupe::tools::{Dispatcher, Effect, ToolRegistry};

use super::lead_ctx;

/// Prints p50/p99 (run with --nocapture) and fails only if dispatch becomes pathologically slow
/// (debug builds on a loaded 2-core machine are far slower than release).
#[tokio::test]
async fn dispatch_overhead_of_a_noop_tool() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let audit = Arc::new(JsonlAuditSink::open(&layout, Arc::new(SystemClock)).unwrap());
    let mut registry = ToolRegistry::new();
    // A write tool, so the call goes rules → approval provider → audit.
    registry
        .register(Arc::new(NoopTool::new("noop", Effect::Write)))
        .unwrap();
    let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), audit);
    let dispatcher = Dispatcher::new(Arc::new(registry), policy, Default::default());
    let ctx = lead_ctx(dir.path());
    let mut samples = Vec::with_capacity(2000);
    for i in 0..2000 {
        let args = format!("{{\"text\":\"call {i}\"}}");
        let start = Instant::now();
        let outcome = dispatcher.dispatch(&ctx, "noop", &args).await;
        samples.push(start.elapsed());
        assert_eq!(outcome.content, "ok");
    }
    samples.sort();
    let p50 = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    println!("dispatch+policy+audit(file): p50 {p50:?}, p99 {p99:?}");
    let lines = std::fs::read_to_string(layout.audit_log())
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, 2000);
    assert!(p50 < Duration::from_millis(5), "p50 {p50:?}");
}
