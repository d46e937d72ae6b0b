//! The audit log: one JSON line per decision in `.troupe/audit.jsonl`, read back from disk.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::ManualClock;
use troupe::layout::Layout;
use troupe::permissions::audit::input_digest;
use troupe::permissions::{
    AuditEntry, AuditSink, DenyApproval, HookDecision, Hooks, JsonlAuditSink, PermissionPolicy,
    PermissionRequest, PreToolUse,
};
use troupe::tools::testing::CountingTool;
use troupe::tools::{Dispatcher, Effect, ToolContext, ToolRegistry};
use troupe::wire::AgentName;

use super::fixed;

struct DenyNamed(&'static str);

#[async_trait::async_trait]
impl PreToolUse for DenyNamed {
    fn name(&self) -> &str {
        "deny-named"
    }
    async fn before(&self, call: &PermissionRequest<'_>) -> HookDecision {
        if call.tool == self.0 {
            HookDecision::Deny {
                reason: "hooked".to_owned(),
            }
        } else {
            HookDecision::Continue
        }
    }
}

fn read_lines(layout: &Layout) -> Vec<Value> {
    std::fs::read_to_string(layout.audit_log())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn every_decision_is_a_line_in_the_audit_file() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let clock = ManualClock::at_spec_epoch();
    let audit = Arc::new(JsonlAuditSink::open(&layout, Arc::new(clock.clone())).unwrap());
    let mut registry = ToolRegistry::new();
    for (name, effect) in [
        ("look", Effect::Read),
        ("change", Effect::Write),
        ("hooked", Effect::Read),
        ("message", Effect::External),
    ] {
        registry
            .register(Arc::new(CountingTool::new(name, effect)))
            .unwrap();
    }
    let policy = PermissionPolicy::default_policy(Arc::new(DenyApproval), audit);
    let dispatcher = Dispatcher::new(
        Arc::new(registry),
        policy.clone(),
        Hooks::new().with_pre(Arc::new(DenyNamed("hooked"))),
    );
    let ctx = ToolContext::new(AgentName::parse("bob").unwrap(), dir.path());
    dispatcher.dispatch(&ctx, "look", r#"{"text": "a"}"#).await;
    clock.advance_millis(5);
    dispatcher.dispatch(&ctx, "change", "{}").await;
    clock.advance_millis(5);
    dispatcher.dispatch(&ctx, "hooked", "{}").await;
    clock.advance_millis(5);
    dispatcher.dispatch(&ctx, "message", "{}").await;
    // Calls that never reach a decision leave no line.
    dispatcher.dispatch(&ctx, "look", "not json").await;
    dispatcher.dispatch(&ctx, "missing", "{}").await;
    // A policy extended with rules writes to the same file.
    let gated = Dispatcher::new(
        Arc::new(dispatcher.registry().clone()),
        policy.with_rules([fixed("gate", troupe::permissions::Decision::Deny)]),
        Hooks::new(),
    );
    clock.advance_millis(5);
    gated.dispatch(&ctx, "look", "{}").await;

    assert_eq!(
        read_lines(&layout),
        vec![
            json!({"at": "2026-07-30T08:00:00.000Z", "agent": "bob", "tool": "look",
                   "decision": "allow", "rule": "default", "reason": "read tools are allowed",
                   "input_digest": input_digest(&json!({"text": "a"}))}),
            json!({"at": "2026-07-30T08:00:00.005Z", "agent": "bob", "tool": "change",
                   "decision": "deny", "rule": "default+approval:deny",
                   "reason": "write tools are refused in this run (--approval deny)",
                   "input_digest": input_digest(&json!({}))}),
            json!({"at": "2026-07-30T08:00:00.010Z", "agent": "bob", "tool": "hooked",
                   "decision": "deny", "rule": "hook:deny-named", "reason": "hooked",
                   "input_digest": input_digest(&json!({}))}),
            json!({"at": "2026-07-30T08:00:00.015Z", "agent": "bob", "tool": "message",
                   "decision": "allow", "rule": "default",
                   "reason": "protocol and team tools are allowed",
                   "input_digest": input_digest(&json!({}))}),
            json!({"at": "2026-07-30T08:00:00.020Z", "agent": "bob", "tool": "look",
                   "decision": "deny", "rule": "gate", "reason": "gate says deny",
                   "input_digest": input_digest(&json!({}))}),
        ]
    );
    // Keys in the documented order.
    let first = std::fs::read_to_string(layout.audit_log()).unwrap();
    assert!(
        first.starts_with(r#"{"at":"2026-07-30T08:00:00.000Z","agent":"bob","tool":"look","decision":"allow","rule":"default","reason":"#),
        "{first}"
    );
}

#[test]
fn concurrent_appends_from_threads_and_sinks_never_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let clock = Arc::new(ManualClock::at_spec_epoch());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            // Each thread its own sink (its own open file), like separate processes.
            let sink = JsonlAuditSink::open(&layout, clock.clone()).unwrap();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    for i in 0..250 {
                        sink.record(AuditEntry {
                            agent: AgentName::lead(),
                            tool: format!("t{t}"),
                            allowed: true,
                            rule: "default".to_owned(),
                            reason: "x".repeat(i % 50 * 40),
                            input_digest: format!("{i:016}"),
                            sandbox: None,
                        })
                        .await
                        .unwrap();
                    }
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let lines = read_lines(&layout);
    assert_eq!(lines.len(), 1000);
    for t in 0..4 {
        let count = lines
            .iter()
            .filter(|l| l["tool"] == format!("t{t}"))
            .count();
        assert_eq!(count, 250);
    }
}

#[test]
fn the_audit_file_may_not_be_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    std::fs::create_dir(layout.state_dir()).unwrap();
    let elsewhere = dir.path().join("elsewhere.log");
    std::os::unix::fs::symlink(&elsewhere, layout.audit_log()).unwrap();
    assert!(JsonlAuditSink::open(&layout, Arc::new(ManualClock::at_spec_epoch())).is_err());
    assert!(!elsewhere.exists());
}

const CHILD_DIR_ENV: &str = "TROUPE_TEST_AUDIT_CHILD_DIR";
const CHILD_TAG_ENV: &str = "TROUPE_TEST_AUDIT_CHILD_TAG";
const LINES_PER_CHILD: usize = 300;

/// Child side of the multi-process test: appends lines when told to, else does nothing.
#[tokio::test]
async fn audit_child_writer() {
    let (Ok(dir), Ok(tag)) = (std::env::var(CHILD_DIR_ENV), std::env::var(CHILD_TAG_ENV)) else {
        return;
    };
    let layout = Layout::new(dir);
    let sink = JsonlAuditSink::open(&layout, Arc::new(ManualClock::at_spec_epoch())).unwrap();
    for i in 0..LINES_PER_CHILD {
        sink.record(AuditEntry {
            agent: AgentName::lead(),
            tool: tag.clone(),
            allowed: i % 2 == 0,
            rule: "default".to_owned(),
            // Lines of up to ~6 KB, larger than a pipe's atomic size, to stress the one write.
            reason: "y".repeat(i % 30 * 200),
            input_digest: format!("{i:016}"),
            sandbox: None,
        })
        .await
        .unwrap();
    }
}

#[test]
fn concurrent_appends_from_processes_never_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let children: Vec<_> = (0..3)
        .map(|n| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "permissions::audit::audit_child_writer",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_DIR_ENV, dir.path())
                .env(CHILD_TAG_ENV, format!("p{n}"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let lines = read_lines(&layout);
    assert_eq!(lines.len(), 3 * LINES_PER_CHILD);
    for n in 0..3 {
        let mine: Vec<&Value> = lines
            .iter()
            .filter(|l| l["tool"] == format!("p{n}"))
            .collect();
        assert_eq!(mine.len(), LINES_PER_CHILD);
        // Each process's lines keep their own order.
        for (i, line) in mine.iter().enumerate() {
            assert_eq!(line["input_digest"], format!("{i:016}"));
        }
    }
}
