//! Spawning a name again (SPEC §4.4): a teammate that shut down or failed can be replaced by a
//! new one with the same name — a fresh conversation (the old transcript is kept beside it as
//! `<name>.<n>.jsonl`), the new role and plan rule in `team.json`, messages left for the old
//! teammate quarantined, and plans of the old teammate not counted for the new one. A name whose
//! teammate is running or idle is still refused.
//!
//! Each step is its own driver run, so every earlier worker has ended before the next step.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::{ModelChooser, Team};
use troupe::error::ErrorCode;
use troupe::model::{ChatMessage, ModelClient, ScriptedModel};
use troupe::store::mailbox::MailboxState;
use troupe::wire::{AgentName, TeamRoster, TeammateStatus};

use super::support::{
    call, name, plan_request_events, say, Convo, Fixture, Models, Reply, TestModel, WAIT,
};

/// The lead does what each user prompt says; on events it approves new plans, else notes them.
///
/// - `spawn writer as ROLE` / `spawn writer as ROLE with a plan` → `spawn_teammate`
/// - `shut writer down` → `request_shutdown`
fn obedient_lead(c: &Convo<'_>) -> Reply {
    if c.last_is_tool_result() {
        return say(c.last_tool_result().unwrap_or(""));
    }
    let last = c.last_user();
    if last.starts_with("[event]") {
        let reviewed = c.calls_named("review_plan").len();
        return match plan_request_events(c).get(reviewed) {
            Some(plan) => call(
                "review_plan",
                json!({"request_id": plan["request_id"], "approve": true}),
            ),
            None => say("Noted."),
        };
    }
    if let Some(role) = last.strip_prefix("spawn writer as ") {
        let (role, plan_required) = match role.strip_suffix(" with a plan") {
            Some(role) => (role, true),
            None => (role, false),
        };
        return call(
            "spawn_teammate",
            json!({"name": "writer", "role": role, "prompt": format!("Work as the {role}."),
                   "plan_required": plan_required}),
        );
    }
    if last == "shut writer down" {
        return call("request_shutdown", json!({"teammate": "writer"}));
    }
    say("?")
}

/// Runs one user prompt to quiescence and returns the lead's answer.
async fn step(team: &mut Team, prompt: &str) -> String {
    let mut driver = team.driver();
    tokio::time::timeout(
        WAIT,
        driver.run(&mut team.lead, prompt, &CancellationToken::new()),
    )
    .await
    .expect("the step did not end")
    .unwrap()
    .answer
}

/// The result of the lead's latest `spawn_teammate` call, as JSON.
fn last_spawn(lead: &TestModel) -> Value {
    let requests = lead.requests();
    let messages = &requests.last().unwrap().messages;
    let mut spawn_ids = Vec::new();
    let mut result = None;
    for message in messages {
        match message {
            ChatMessage::Assistant(a) => spawn_ids.extend(
                a.tool_calls
                    .iter()
                    .filter(|c| c.name == "spawn_teammate")
                    .map(|c| c.id.clone()),
            ),
            ChatMessage::Tool {
                tool_call_id,
                content,
            } if spawn_ids.contains(tool_call_id) => result = Some(content.clone()),
            _ => {}
        }
    }
    serde_json::from_str(&result.expect("a spawn_teammate result")).unwrap()
}

fn roster(f: &Fixture) -> Value {
    let bytes = std::fs::read(f.layout.team_file()).unwrap();
    TeamRoster::from_json_bytes(&bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn transcript(f: &Fixture, file: &str) -> String {
    std::fs::read_to_string(f.layout.state_dir().join("transcripts").join(file)).unwrap()
}

/// The messages of the `n`-th request (1-based) as (role, text) pairs.
fn conversation(model: &TestModel, n: usize) -> Vec<(&'static str, String)> {
    model.requests()[n - 1]
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { content } => ("system", content.clone()),
            ChatMessage::User { content } => ("user", content.clone()),
            other => ("other", format!("{other:?}")),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_name_is_spawned_again_with_a_fresh_conversation_twice_in_a_row() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, obedient_lead);
    let writer = TestModel::new(&f.signal, |c| say(&format!("Ready; {}", c.last_user())));
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;

    step(&mut team, "spawn writer as drafter").await;
    step(&mut team, "shut writer down").await;
    assert_eq!(f.status_of(&team, "writer"), Some(TeammateStatus::Shutdown));
    let first_conversation = transcript(&f, "writer.jsonl");

    step(&mut team, "spawn writer as reviewer").await;
    let spawned = last_spawn(&lead);
    assert_eq!(
        spawned,
        json!({"spawned": "writer", "status": "running", "plan_required": false,
               "gated": "only once it submits a plan, until you approve it",
               "note": "its result will arrive as an event", "replaced": "shutdown",
               "earlier_transcript": ".troupe/transcripts/writer.1.jsonl",
               "quarantined_leftover_messages": 0})
    );
    // The new teammate started from nothing but its system prompt and its new task.
    assert_eq!(writer.calls(), 2);
    let fresh = conversation(&writer, 2);
    assert_eq!(fresh.len(), 2, "{fresh:?}");
    assert!(fresh[0].1.contains("Your role: reviewer"), "{fresh:?}");
    assert_eq!(
        fresh[1],
        ("user", "Task from lead:\nWork as the reviewer.".to_owned())
    );
    // The old conversation is kept whole beside the new one.
    assert_eq!(transcript(&f, "writer.1.jsonl"), first_conversation);
    assert!(first_conversation.contains("Your role: drafter"));
    let current = transcript(&f, "writer.jsonl");
    assert!(current.contains("Your role: reviewer"));
    assert!(!current.contains("drafter"), "{current}");
    let record = &roster(&f)["teammates"][0];
    assert_eq!(record["role"], "reviewer");
    assert_eq!(record["status"], "idle");
    assert_eq!(roster(&f)["teammates"].as_array().unwrap().len(), 1);

    // Once more: the next conversation goes to `.2`, `.1` is left alone.
    step(&mut team, "shut writer down").await;
    let second_conversation = transcript(&f, "writer.jsonl");
    step(&mut team, "spawn writer as editor").await;
    let spawned = last_spawn(&lead);
    assert_eq!(
        spawned["earlier_transcript"],
        ".troupe/transcripts/writer.2.jsonl"
    );
    assert_eq!(transcript(&f, "writer.1.jsonl"), first_conversation);
    assert_eq!(transcript(&f, "writer.2.jsonl"), second_conversation);
    assert_eq!(conversation(&writer, 3).len(), 2);
    assert_eq!(roster(&f)["teammates"][0]["role"], "editor");
    assert_eq!(f.status_of(&team, "writer"), Some(TeammateStatus::Idle));
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_or_idle_name_is_still_refused() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, obedient_lead);
    let writer = TestModel::new(&f.signal, |_| say("Ready."));
    // Hold the writer inside its first model call: it is running while the lead tries again.
    let release = writer.gate(1);
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    let runtime = team.runtime.clone();
    let run = tokio::spawn(async move {
        let mut team = team;
        let answer = step(&mut team, "spawn writer as drafter").await;
        (team, answer)
    });
    f.signal
        .until("the writer's first call", || writer.calls() == 1)
        .await;
    assert_eq!(
        runtime.status_of(&name("writer")).await,
        Some(TeammateStatus::Running)
    );
    let refused = runtime
        .spawn(&name("writer"), "reviewer", "Review.", false)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "teammate_exists");
    drop(release);
    let (mut team, _) = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();

    // Idle now: refused the same way, nothing replaced.
    let answer = step(&mut team, "spawn writer as reviewer").await;
    assert!(
        answer.starts_with("Error [teammate_exists]: a teammate named writer already exists"),
        "{answer}"
    );
    assert_eq!(roster(&f)["teammates"][0]["role"], "drafter");
    assert!(!f
        .layout
        .state_dir()
        .join("transcripts/writer.1.jsonl")
        .exists());
    assert_eq!(writer.calls(), 1);
    team.close().await;
}

/// The writer's model is broken for the first teammate and works for every later one.
struct BrokenFirstWriter {
    lead: Arc<TestModel>,
    writer: Arc<TestModel>,
    built: AtomicUsize,
}

impl ModelChooser for BrokenFirstWriter {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        if agent.is_lead() {
            return self.lead.clone();
        }
        match self.built.fetch_add(1, Ordering::SeqCst) {
            // An empty script: every call fails.
            0 => Arc::new(ScriptedModel::new()),
            _ => self.writer.clone(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_name_is_spawned_again_and_messages_left_for_the_old_teammate_are_quarantined() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, obedient_lead);
    let writer = TestModel::new(&f.signal, |c| say(&format!("Done: {}", c.last_user())));
    let mut team = f
        .build(Arc::new(BrokenFirstWriter {
            lead: lead.clone(),
            writer: writer.clone(),
            built: AtomicUsize::new(0),
        }))
        .await;

    step(&mut team, "spawn writer as drafter").await;
    assert_eq!(f.status_of(&team, "writer"), Some(TeammateStatus::Failed));
    // Its task went back to ready/ for it; it is the old teammate's, not the new one's.
    let left = f.messages("writer", MailboxState::Ready).await;
    assert_eq!(left.len(), 1);

    step(&mut team, "spawn writer as reviewer").await;
    let spawned = last_spawn(&lead);
    assert_eq!(spawned["replaced"], "failed");
    assert_eq!(spawned["quarantined_leftover_messages"], 1);
    let quarantined = f.messages("writer", MailboxState::Quarantine).await;
    assert_eq!(quarantined, left, "kept, never deleted");
    let reasons = f.recorder.quarantined();
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].1, left[0].id().to_string());
    assert!(
        reasons[0]
            .2
            .starts_with("left for the earlier teammate writer (failed, role: drafter)"),
        "{reasons:?}"
    );
    // The new teammate saw only its own task, and finished it.
    assert_eq!(writer.calls(), 1);
    assert_eq!(conversation(&writer, 1).len(), 2);
    assert_eq!(
        conversation(&writer, 1)[1].1,
        "Task from lead:\nWork as the reviewer."
    );
    assert_eq!(f.status_of(&team, "writer"), Some(TeammateStatus::Idle));
    let record = &roster(&f)["teammates"][0];
    assert_eq!(record["role"], "reviewer");
    assert_eq!(record["detail"], Value::Null);
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_the_earlier_teammate_does_not_open_the_new_ones_gate() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, obedient_lead);
    // Every writer plans first, then writes `<role>.txt` once its plan is approved.
    let writer = TestModel::new(&f.signal, |c| {
        let role = c
            .system()
            .split("Your role: ")
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap()
            .to_owned();
        if c.last_user().starts_with("Plan approved") {
            return match c.last_tool_result() {
                Some(result) => say(result),
                None => call(
                    "write_file",
                    json!({"path": format!("{role}.txt"), "content": role}),
                ),
            };
        }
        if c.calls_named("write_file").is_empty() {
            return call(
                "write_file",
                json!({"path": format!("{role}-early.txt"), "content": "early"}),
            );
        }
        if c.calls_named("submit_plan").is_empty() {
            return call("submit_plan", json!({"plan": "Write my file."}));
        }
        say("Submitted.")
    });
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    step(&mut team, "spawn writer as drafter with a plan").await;
    step(&mut team, "shut writer down").await;
    let plans = f.requests().await;
    let drafter_plan = plans
        .iter()
        .find(|r| r.kind().as_str() == "plan_approval")
        .unwrap()
        .clone();
    assert_eq!(drafter_plan.stored_status().to_string(), "approved");
    assert!(f.workspace.join("drafter.txt").exists());

    // The new writer may not use the old writer's approval.
    let _ = step(&mut team, "spawn writer as reviewer with a plan").await;
    assert_eq!(
        roster(&f)["teammates"][0]["earlier_plan"],
        drafter_plan.id().to_string()
    );
    assert!(!f.workspace.join("reviewer-early.txt").exists());
    assert!(f.workspace.join("reviewer.txt").exists());
    let denials: Vec<Value> = f
        .audit()
        .into_iter()
        .filter(|l| l["agent"] == "writer" && l["decision"] == "deny")
        .collect();
    assert_eq!(denials.len(), 2, "{denials:?}");
    for denial in &denials {
        assert!(
            denial["reason"]
                .as_str()
                .unwrap()
                .starts_with("no plan approved yet; submit_plan first"),
            "{denial}"
        );
    }
    team.close().await;
}

/// The lead that spawns `writer`, asks it to shut down once it answered, and spawns the name
/// again the moment the shutdown answer reaches it (no step in between).
fn hasty_lead(c: &Convo<'_>) -> Reply {
    if c.last_is_tool_result() {
        return say(c.last_tool_result().unwrap_or(""));
    }
    let spawns = c.calls_named("spawn_teammate").len();
    let answered = c
        .events()
        .iter()
        .filter(|e| e["protocol_kind"] == "shutdown_response")
        .count();
    match (spawns, c.calls_named("request_shutdown").len(), answered) {
        (0, _, _) => call(
            "spawn_teammate",
            json!({"name": "writer", "role": "drafter", "prompt": "Draft."}),
        ),
        (1, 0, _) => call("request_shutdown", json!({"teammate": "writer"})),
        (1, 1, 1) => call(
            "spawn_teammate",
            json!({"name": "writer", "role": "reviewer", "prompt": "Review."}),
        ),
        _ => say("Done."),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_name_can_be_spawned_again_the_moment_the_shutdown_answer_arrives() {
    // The old worker may still be acking its last message when the lead reacts: the roster
    // already says `shutdown` when the answer is sent, and the spawn waits for the worker.
    for _ in 0..5 {
        let f = Fixture::new();
        let lead = TestModel::new(&f.signal, hasty_lead);
        let writer = TestModel::new(&f.signal, |_| say("Ok."));
        let mut team = f
            .build(Models::new(
                &f.signal,
                &[("lead", &lead), ("writer", &writer)],
            ))
            .await;
        step(&mut team, "Draft, then review.").await;
        let spawned = last_spawn(&lead);
        assert_eq!(spawned["replaced"], "shutdown", "{spawned}");
        assert_eq!(roster(&f)["teammates"][0]["role"], "reviewer");
        assert_eq!(writer.calls(), 2);
        team.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reserved_names_user_and_troupe_are_never_spawned() {
    let f = Fixture::new();
    let team = f.build(Models::new(&f.signal, &[])).await;
    for reserved in ["user", "troupe"] {
        let err = team
            .runtime
            .spawn_teammate(&name(reserved), "writer", "Do the task.")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("reserved"), "{err}");
        assert!(team.runtime.record_of(&name(reserved)).await.is_none());
    }
    team.close().await;
}
