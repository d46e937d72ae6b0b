//! The settings' `[[hooks]]` through `build_team`: the lead's prompt gets a UserPromptSubmit
//! hook's context, a PreToolUse hook blocks `shell` for the lead and for a teammate (audited
//! with the hook's name), Stop hooks run after each agent's answer, and a hook's allow does not
//! pass the plan gate.

use std::path::PathBuf;

use serde_json::{json, Value};
use troupe::settings::{HookEvent, HookSpec, Settings, Source, DEFAULT_HOOK_TIMEOUT};

use super::support::{call, drive, name, say, Fixture, Models, TestModel};

fn spec(
    f: &Fixture,
    index: usize,
    event: HookEvent,
    matcher: Option<&str>,
    body: &str,
) -> HookSpec {
    let dir = f.workspace.join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{index}.sh")), body).unwrap();
    HookSpec {
        event,
        matcher: matcher.map(str::to_owned),
        command: format!("sh hooks/{index}.sh"),
        timeout: DEFAULT_HOOK_TIMEOUT,
        source: Source::Project(PathBuf::from("troupe.toml")),
        index,
    }
}

fn lines(f: &Fixture, file: &str) -> Vec<Value> {
    std::fs::read_to_string(f.workspace.join(file))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn agents(inputs: &[Value]) -> Vec<&str> {
    let mut agents: Vec<&str> = inputs
        .iter()
        .map(|i| i["agent"].as_str().unwrap())
        .collect();
    agents.sort_unstable();
    agents.dedup();
    agents
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_hooks_apply_to_the_lead_and_to_every_teammate() {
    let f = Fixture::new();
    let hooks = vec![
        spec(
            &f,
            0,
            HookEvent::UserPromptSubmit,
            None,
            r#"echo '{"additional_context":"Hooks are on."}'"#,
        ),
        spec(
            &f,
            1,
            HookEvent::PreToolUse,
            Some("shell"),
            "cat >> pre-inputs.jsonl; echo 'no shell in this team' >&2; exit 2",
        ),
        spec(&f, 2, HookEvent::Stop, None, "cat >> stop-inputs.jsonl"),
    ];
    let lead = TestModel::new(&f.signal, |c| {
        if c.last_is_tool_result() {
            say("lead done")
        } else if c.last_user().ends_with("Hooks are on.") {
            call("shell", json!({"command": "echo ran > lead-ran"}))
        } else {
            // Later turns: the events of the teammate.
            say("lead done")
        }
    });
    let alice = TestModel::new(&f.signal, |c| {
        if c.last_is_tool_result() {
            say("alice done")
        } else {
            call("shell", json!({"command": "echo ran > alice-ran"}))
        }
    });
    let models = Models::new(&f.signal, &[("lead", &lead), ("alice", &alice)]);
    let mut settings = f.settings(models);
    settings.settings = Settings {
        hooks,
        ..Settings::default()
    };
    let mut team = troupe::bootstrap::build_team(settings).await.unwrap();
    team.runtime
        .spawn_teammate(&name("alice"), "tester", "Run a command.")
        .await
        .unwrap();
    f.signal
        .until("alice answered and is idle", || {
            alice.calls() == 2 && !team.runtime.any_worker_running()
        })
        .await;
    let outcome = drive(&mut team, "go").await;
    assert_eq!(outcome.answer, "lead done");
    assert_eq!(
        lead.user_texts(1).first().map(String::as_str),
        Some("go\n\nHooks are on.")
    );
    assert!(!f.workspace.join("lead-ran").exists());
    assert!(!f.workspace.join("alice-ran").exists());
    for model in [&lead, &alice] {
        let messages = model.wire_messages(2);
        let result = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
        let text = result["content"].as_str().unwrap();
        assert!(text.contains("no shell in this team"), "{text}");
    }
    let hook_denials: Vec<String> = f
        .audit()
        .iter()
        .filter(|a| a["rule"] == "hook:troupe.toml hooks[1] PreToolUse")
        .map(|a| a["agent"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(hook_denials, ["alice", "lead"]);
    assert_eq!(agents(&lines(&f, "pre-inputs.jsonl")), ["alice", "lead"]);
    assert_eq!(agents(&lines(&f, "stop-inputs.jsonl")), ["alice", "lead"]);
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_gate_still_applies_after_a_hook_allows() {
    let f = Fixture::new();
    let hooks = vec![spec(
        &f,
        0,
        HookEvent::PreToolUse,
        None,
        r#"cat >> pre-inputs.jsonl; echo '{"decision":"allow"}'"#,
    )];
    let alice = TestModel::new(&f.signal, |c| {
        if c.last_is_tool_result() {
            say("alice done")
        } else {
            call("write_file", json!({"path": "NOTES.md", "content": "x"}))
        }
    });
    let models = Models::new(&f.signal, &[("alice", &alice)]);
    let mut settings = f.settings(models);
    settings.require_plans = true;
    settings.settings = Settings {
        hooks,
        ..Settings::default()
    };
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    team.runtime
        .spawn_teammate(&name("alice"), "writer", "Write NOTES.md.")
        .await
        .unwrap();
    f.signal
        .until("alice answered and is idle", || {
            alice.calls() == 2 && !team.runtime.any_worker_running()
        })
        .await;
    let messages = alice.wire_messages(2);
    let result = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
    let text = result["content"].as_str().unwrap();
    assert!(
        text.starts_with("Error [permission_denied]: write_file was denied (plan_gate)"),
        "{text}"
    );
    assert!(!f.workspace.join("NOTES.md").exists());
    assert_eq!(
        agents(&lines(&f, "pre-inputs.jsonl")),
        ["alice"],
        "the hook ran"
    );
    team.close().await;
}

/// A `matcher` reads like a permission rule: `shell(rm:*)` fires for a chain with an `rm` in
/// it and not for a plain `echo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_style_matcher_fires_only_for_the_calls_it_names() {
    let f = Fixture::new();
    let hooks = vec![spec(
        &f,
        0,
        HookEvent::PreToolUse,
        Some("shell(rm:*)"),
        "cat >> matched.jsonl; echo 'no rm here' >&2; exit 2",
    )];
    let lead = TestModel::new(&f.signal, |c| match c.calls_named("shell").len() {
        0 => call("shell", json!({"command": "echo kept > kept.txt"})),
        1 => call(
            "shell",
            json!({"command": "echo gone > gone.txt && rm -f kept.txt"}),
        ),
        _ => say("lead done"),
    });
    let models = Models::new(&f.signal, &[("lead", &lead)]);
    let mut settings = f.settings(models);
    settings.approval = std::sync::Arc::new(troupe::permissions::AutoApproval);
    settings.settings = Settings {
        hooks,
        ..Settings::default()
    };
    let mut team = troupe::bootstrap::build_team(settings).await.unwrap();
    let outcome = drive(&mut team, "go").await;
    assert_eq!(outcome.answer, "lead done");
    // The echo ran; the chain with an rm was blocked before it ran.
    assert!(f.workspace.join("kept.txt").exists());
    assert!(!f.workspace.join("gone.txt").exists());
    let matched = lines(&f, "matched.jsonl");
    assert_eq!(matched.len(), 1, "{matched:?}");
    assert!(matched[0]["arguments"]["command"]
        .as_str()
        .unwrap()
        .contains("rm -f"));
    team.close().await;
}
