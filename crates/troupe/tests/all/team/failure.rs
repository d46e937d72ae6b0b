//! SPEC §4.4: a teammate whose message fails for a reason other than its validity (here: its
//! model fails) releases the message back to `ready/`, becomes `failed`, and the lead is told.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::bootstrap::ModelChooser;
use troupe::model::{ModelClient, ScriptedModel};
use troupe::store::mailbox::MailboxState;
use troupe::wire::{AgentName, TeammateStatus};

use super::support::{call, drive, say, Fixture, Models, TestModel};

struct LeadAndBrokenMate {
    lead: Arc<TestModel>,
}

impl ModelChooser for LeadAndBrokenMate {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        if agent.is_lead() {
            self.lead.clone()
        } else {
            // An empty script: every call fails with `model_script_exhausted`.
            Arc::new(ScriptedModel::new())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_teammate_releases_its_message_and_the_lead_is_told() {
    let fx = Fixture::new();
    let lead = TestModel::new(&fx.signal, |c| {
        if let Some(failed) = c.events().iter().find(|e| e["kind"] == "teammate_failed") {
            return say(failed["content"].as_str().unwrap());
        }
        match c.last_tool_result() {
            Some(_) => say("spawned"),
            None => call(
                "spawn_teammate",
                json!({"name": "mate", "role": "r", "prompt": "work"}),
            ),
        }
    });
    let mut team = fx
        .build(Arc::new(LeadAndBrokenMate { lead: lead.clone() }))
        .await;
    let outcome = drive(&mut team, "go").await;
    assert!(
        outcome
            .answer
            .starts_with("mate failed and stopped working: model call failed"),
        "{}",
        outcome.answer
    );
    assert!(
        outcome.answer.contains("model_script") || outcome.answer.contains("script"),
        "{}",
        outcome.answer
    );
    assert_eq!(fx.status_of(&team, "mate"), Some(TeammateStatus::Failed));
    // The task went back to ready/, nothing is stuck in processing/.
    assert_eq!(fx.count("mate", MailboxState::Ready).await, 1);
    assert_eq!(fx.count("mate", MailboxState::Processing).await, 0);
    // The stream says why, and that the message went back.
    let failed = fx.events_of("model_call_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].agent, "mate");
    assert!(failed[0].str("code").is_some_and(|c| !c.is_empty()));
    let released = fx.events_of("message_released");
    assert_eq!(released.len(), 1, "{released:#?}");
    assert_eq!(released[0].agent, "mate");
    let status: Vec<_> = fx
        .events_of("teammate_status")
        .iter()
        .filter_map(|e| e.str("status").map(str::to_owned))
        .collect();
    assert_eq!(
        status.last().map(String::as_str),
        Some("failed"),
        "{status:?}"
    );
    // The roster shows the reason.
    let roster = team.runtime.roster().await;
    assert!(roster[0]
        .detail
        .as_deref()
        .unwrap()
        .contains("model call failed"));
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_that_failed_in_an_earlier_run_gets_another_chance() {
    let fx = Fixture::new();
    let lead = TestModel::new(&fx.signal, |c| {
        if c.last_user() == "go" {
            return match c.last_tool_result() {
                Some(_) => say("spawned"),
                None => call(
                    "spawn_teammate",
                    json!({"name": "mate", "role": "r", "prompt": "work"}),
                ),
            };
        }
        say("noted")
    });
    let mut first = fx
        .build(Arc::new(LeadAndBrokenMate { lead: lead.clone() }))
        .await;
    drive(&mut first, "go").await;
    first.close().await;
    assert_eq!(
        fx.count("mate", MailboxState::Ready).await,
        1,
        "the failed task was released"
    );

    // Next run: the teammate works again; its released task is retried and succeeds.
    let mate = TestModel::new(&fx.signal, |_| say("done at last"));
    let models = Models::new(&fx.signal, &[("lead", &lead), ("mate", &mate)]);
    let mut second = fx.build(models).await;
    drive(&mut second, "carry on").await;
    assert_eq!(mate.calls(), 1);
    assert_eq!(fx.count("mate", MailboxState::Done).await, 1);
    assert_eq!(fx.status_of(&second, "mate"), Some(TeammateStatus::Idle));
    second.close().await;
}
