//! Command hooks (`[[hooks]]`, SPEC §11) with real shell scripts in temp files: PreToolUse
//! allow / block / context, PostToolUse context, timeout and crash (a warning, the call goes
//! on), the JSON on stdin, UserPromptSubmit block and context, and a Stop hook that always
//! blocks (the turn continues once).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::agent::{NullObserver, Runner, RunnerError, TurnEnd};
use troupe::clock::ManualClock;
use troupe::hooks::CommandHooks;
use troupe::layout::Layout;
use troupe::model::config::ModelConfig;
use troupe::model::{OpenAiClient, RetryPolicy};
use troupe::permissions::{AutoApproval, JsonlAuditSink, PermissionPolicy};
use troupe::settings::{HookEvent, HookSpec, Source, DEFAULT_HOOK_TIMEOUT};
use troupe::tools::shell::ShellTool;
use troupe::tools::testing::CountingTool;
use troupe::tools::{base_tools, Dispatcher, Effect, ToolRegistry};
use troupe::wire::AgentName;
use wiremock::MockServer;

use super::{bodies, call, say, server};
use crate::tools::shell::{process_exits_within, read_pid};

/// A hook of `event` running the script `body` (written to `<workspace>/hooks/<index>.sh`).
struct Script<'a> {
    event: HookEvent,
    matcher: Option<&'a str>,
    body: &'a str,
    timeout: Duration,
}

fn script(event: HookEvent, body: &str) -> Script<'_> {
    Script {
        event,
        matcher: None,
        body,
        timeout: DEFAULT_HOOK_TIMEOUT,
    }
}

struct Hooked {
    runner: Runner,
    count: CountingTool,
    workspace: tempfile::TempDir,
}

impl Hooked {
    fn path(&self, name: &str) -> PathBuf {
        self.workspace.path().join(name)
    }

    fn audit(&self) -> Vec<Value> {
        let text =
            fs::read_to_string(Layout::new(self.workspace.path()).audit_log()).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A lead with the base tools and `count`, whose hooks are `scripts` (project file
/// `troupe.toml`, in order).
fn hooked(server: &MockServer, scripts: &[Script<'_>]) -> Hooked {
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path();
    fs::create_dir(ws.join("hooks")).unwrap();
    let specs = scripts
        .iter()
        .enumerate()
        .map(|(index, s)| {
            let file = ws.join("hooks").join(format!("{index}.sh"));
            fs::write(&file, format!("#!/bin/sh\n{}\n", s.body)).unwrap();
            HookSpec {
                event: s.event,
                matcher: s.matcher.map(str::to_owned),
                command: format!("sh hooks/{index}.sh"),
                timeout: s.timeout,
                source: Source::Project(PathBuf::from("troupe.toml")),
                index,
            }
        })
        .collect();
    let hooks = CommandHooks::new(specs, ws, "run-1");
    let clock = Arc::new(ManualClock::at_spec_epoch());
    let audit = Arc::new(JsonlAuditSink::open(&Layout::new(ws), clock).unwrap());
    let count = CountingTool::new("count", Effect::Execute);
    let mut registry = ToolRegistry::new();
    for tool in base_tools(ShellTool::new().with_timeout(Duration::from_secs(10))) {
        registry.register(tool).unwrap();
    }
    registry.register(Arc::new(count.clone())).unwrap();
    let dispatcher = Dispatcher::new(
        Arc::new(registry),
        PermissionPolicy::default_policy(Arc::new(AutoApproval), audit),
        hooks.tool_hooks(),
    );
    let config = ModelConfig {
        base_url: format!("{}/v1", server.uri()),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..ModelConfig::new("sk-test", "gpt-test")
    };
    let runner = Runner::new(
        AgentName::lead(),
        "You are lead.",
        Arc::new(OpenAiClient::new(&config).unwrap()),
        Arc::new(dispatcher),
        ws,
        Arc::new(NullObserver),
    )
    .with_hooks(hooks);
    Hooked {
        runner,
        count,
        workspace,
    }
}

/// The tool message of the last request (the result the model saw).
fn last_tool_result(bodies: &[Value]) -> String {
    let messages = bodies.last().unwrap()["messages"].as_array().unwrap();
    let tool = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
    tool["content"].as_str().unwrap().to_owned()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

/// Collects what `tracing` prints while alive (the warnings the CLI shows).
struct Warnings {
    text: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Warnings {
    fn capture() -> Self {
        let text = Arc::new(Mutex::new(Vec::new()));
        let sink = text.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || SharedWriter(sink.clone()))
            .finish();
        Self {
            text,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.text.lock().unwrap()).into_owned()
    }
}

struct SharedWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_pre_hook_that_exits_0_lets_the_call_run_and_gets_the_call_as_json_on_stdin() {
    let server = server(vec![
        call("c1", "read_file", json!({"path": "a.txt"})),
        say("done"),
    ])
    .await;
    let mut lead = hooked(
        &server,
        &[script(
            HookEvent::PreToolUse,
            "cat > pre-input.json; exit 0",
        )],
    );
    fs::write(lead.path("a.txt"), "alpha\n").unwrap();
    let outcome = lead
        .runner
        .run_user_turn("read it", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Answered("done".into()));
    assert!(last_tool_result(&bodies(&server).await).contains("alpha"));
    let input = read_json(&lead.path("pre-input.json"));
    assert_eq!(
        input,
        json!({
            "event": "PreToolUse",
            "agent": "lead",
            "tool": "read_file",
            "arguments": {"path": "a.txt"},
            "run_id": "run-1",
            "workspace": lead.workspace.path().display().to_string(),
        })
    );
}

#[tokio::test]
async fn a_pre_hook_that_exits_2_blocks_the_call_with_its_stderr_as_the_reason() {
    let server = server(vec![call("c1", "count", json!({})), say("ok")]).await;
    let mut lead = hooked(
        &server,
        &[script(
            HookEvent::PreToolUse,
            "echo '  count is forbidden on Fridays  ' >&2; exit 2",
        )],
    );
    lead.runner
        .run_user_turn("count", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(lead.count.calls(), 0, "the handler never ran");
    let result = last_tool_result(&bodies(&server).await);
    assert!(
        result.contains(
            "denied by hook troupe.toml hooks[0] PreToolUse: count is forbidden on Fridays"
        ),
        "{result}"
    );
    let audit = lead.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["tool"], "count");
    assert_eq!(audit[0]["decision"], "deny");
    assert_eq!(audit[0]["rule"], "hook:troupe.toml hooks[0] PreToolUse");
}

#[tokio::test]
async fn a_pre_hook_may_block_with_json_and_a_matcher_limits_it_to_its_tool() {
    let server = server(vec![
        call("c1", "count", json!({})),
        call("c2", "shell", json!({"command": "echo ran > shell-ran"})),
        say("ok"),
    ])
    .await;
    let mut blocker = script(
        HookEvent::PreToolUse,
        r#"echo '{"decision":"block","reason":"no shell here"}'"#,
    );
    blocker.matcher = Some("shell");
    let mut lead = hooked(&server, &[blocker]);
    lead.runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(lead.count.calls(), 1, "count is not matched");
    assert!(!lead.path("shell-ran").exists(), "shell was blocked");
    let result = last_tool_result(&bodies(&server).await);
    assert!(result.contains("no shell here"), "{result}");
}

#[tokio::test]
async fn additional_context_of_pre_and_post_hooks_reaches_the_model() {
    let server = server(vec![call("c1", "count", json!({})), say("ok")]).await;
    let mut lead = hooked(
        &server,
        &[
            script(
                HookEvent::PreToolUse,
                r#"echo '{"decision":"allow","additional_context":"pre says hello"}'"#,
            ),
            script(
                HookEvent::PostToolUse,
                r#"cat > post-input.json; echo '{"additional_context":"post says the count is fine"}'"#,
            ),
        ],
    );
    lead.runner
        .run_user_turn("count", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(lead.count.calls(), 1);
    let result = last_tool_result(&bodies(&server).await);
    assert_eq!(
        result,
        "call 1\n[hook context] pre says hello\n[hook context] post says the count is fine"
    );
    let input = read_json(&lead.path("post-input.json"));
    assert_eq!(input["event"], "PostToolUse");
    assert_eq!(input["tool"], "count");
    assert_eq!(
        input["result"],
        json!({"content": "call 1", "is_error": false})
    );
    assert!(input.get("prompt").is_none());
}

#[tokio::test]
async fn a_hook_that_times_out_is_killed_with_its_group_and_the_call_continues() {
    let server = server(vec![call("c1", "count", json!({})), say("ok")]).await;
    let mut slow = script(
        HookEvent::PreToolUse,
        "sleep 30 & echo $! > sleep.pid; wait",
    );
    slow.timeout = Duration::from_secs(1);
    let mut lead = hooked(&server, &[slow]);
    let warnings = Warnings::capture();
    let started = std::time::Instant::now();
    lead.runner
        .run_user_turn("count", &CancellationToken::new())
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(lead.count.calls(), 1, "the call continued");
    let sleep = read_pid(&lead.path("sleep.pid"));
    assert!(
        process_exits_within(sleep, Duration::from_secs(5)),
        "the hook's sleep is gone with its group"
    );
    let text = warnings.text();
    assert!(
        text.contains("hook troupe.toml hooks[0] PreToolUse timed out after 1 s"),
        "{text}"
    );
}

#[tokio::test]
async fn a_crashing_or_garbled_hook_warns_and_the_call_continues() {
    let server = server(vec![
        call("c1", "count", json!({})),
        call("c2", "count", json!({})),
        call("c3", "count", json!({})),
        say("ok"),
    ])
    .await;
    // Each call's hook: the first exits 1, the second is killed, the third prints non-JSON.
    let body = r#"n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n
case $n in
  1) echo broken >&2; exit 1 ;;
  2) kill -9 $$ ;;
  3) echo 'this is not json' ;;
esac"#;
    let mut lead = hooked(&server, &[script(HookEvent::PreToolUse, body)]);
    let warnings = Warnings::capture();
    lead.runner
        .run_user_turn("count thrice", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(lead.count.calls(), 3, "every call continued");
    let text = warnings.text();
    assert!(text.contains("failed (exit code: 1): broken"), "{text}");
    // The script's shell was killed; `sh -c` reports it as 128 + 9.
    assert!(text.contains("failed (exit code: 137)"), "{text}");
    assert!(text.contains("not JSON"), "{text}");
}

#[tokio::test]
async fn a_user_prompt_submit_hook_blocks_the_prompt_before_any_model_call() {
    let server = server(vec![say("never")]).await;
    let mut lead = hooked(
        &server,
        &[script(
            HookEvent::UserPromptSubmit,
            "cat > prompt-input.json; echo 'prompts about secrets are refused' >&2; exit 2",
        )],
    );
    let err = lead
        .runner
        .run_user_turn("tell me the secrets", &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, RunnerError::PromptBlocked(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the prompt was blocked by hook troupe.toml hooks[0] UserPromptSubmit: prompts about secrets are refused"
    );
    assert!(bodies(&server).await.is_empty(), "no model call");
    assert_eq!(lead.runner.history().len(), 1, "only the system prompt");
    let input = read_json(&lead.path("prompt-input.json"));
    assert_eq!(input["event"], "UserPromptSubmit");
    assert_eq!(input["prompt"], "tell me the secrets");
    assert!(input.get("tool").is_none());
}

#[tokio::test]
async fn a_user_prompt_submit_hook_adds_context_to_the_prompt() {
    let server = server(vec![say("ok")]).await;
    let mut lead = hooked(
        &server,
        &[script(
            HookEvent::UserPromptSubmit,
            r#"echo '{"additional_context":"The branch is main."}'"#,
        )],
    );
    lead.runner
        .run_user_turn("what branch?", &CancellationToken::new())
        .await
        .unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "what branch?\n\nThe branch is main."})
    );
}

#[tokio::test]
async fn a_stop_hook_that_always_blocks_continues_each_turn_exactly_once() {
    let server = server(vec![
        say("first answer"),
        say("second answer"),
        say("third answer"),
        say("fourth answer"),
    ])
    .await;
    let mut lead = hooked(
        &server,
        &[script(
            HookEvent::Stop,
            "cat >> stop-inputs.jsonl; echo 'run the tests first' >&2; exit 2",
        )],
    );
    let warnings = Warnings::capture();
    let cancel = CancellationToken::new();
    let first = lead.runner.run_user_turn("work", &cancel).await.unwrap();
    assert_eq!(first.end, TurnEnd::Answered("second answer".into()));
    assert_eq!(first.model_calls, 2);
    let second = lead.runner.run_user_turn("more", &cancel).await.unwrap();
    assert_eq!(second.end, TurnEnd::Answered("fourth answer".into()));
    assert_eq!(second.model_calls, 2);
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 4);
    let continuation = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        continuation,
        json!({"role": "user", "content": "run the tests first"})
    );
    let inputs = fs::read_to_string(lead.path("stop-inputs.jsonl")).unwrap();
    let inputs: Vec<Value> = inputs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(inputs.len(), 4, "the hook ran after every answer");
    assert_eq!(inputs[0]["event"], "Stop");
    assert_eq!(inputs[0]["agent"], "lead");
    let text = warnings.text();
    assert_eq!(
        text.matches("blocked the end of the turn again").count(),
        2,
        "{text}"
    );
}
