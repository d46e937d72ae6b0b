//! Answers are single (SPEC §6): once an answer to a request has been sent, a second one — same or
//! opposite decision, from the lead's `review_plan` or another reviewer — is refused at once,
//! before anything is written; a plan whose sender is shut down or failed cannot be answered; a
//! teammate is `shutdown` before its shutdown answer exists; an answer a dead process recorded
//! but did not deliver is delivered at the next start.
//!
//! The first answer is kept unconsumed by keeping the writer busy: its worker is inside a model
//! call (held at a gate) for an ordinary message, so the plan response waits in `ready/`.

use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::bootstrap::build_team;
use troupe::inspect::read_roster;
use troupe::layout::Layout;
use troupe::model::ScriptedModel;
use troupe::store::mailbox::MailboxState;
use troupe::team::tools::{RequestShutdown, ReviewPlan};
use troupe::team::{TeamObserver, TeamUpdate};
use troupe::tools::{ToolContext, ToolHandler};
use troupe::wire::message::Envelope;
use troupe::wire::{
    Content, MailboxMessage, MessageId, OrdinaryKind, ProtocolMessage, ProtocolMessageKind,
    RequestStatus, TeammateStatus,
};

use super::support::{call, name, say, Fixture, Models, TestModel};

fn lead_ctx(f: &Fixture) -> ToolContext {
    ToolContext::new(name("lead"), f.workspace.clone())
}

async fn review(f: &Fixture, team: &troupe::bootstrap::Team, args: Value) -> Result<Value, String> {
    ReviewPlan(team.runtime.handle())
        .call(&lead_ctx(f), args)
        .await
        .map(|text| serde_json::from_str(&text).unwrap())
        .map_err(|e| e.to_tool_text())
}

/// The writer submits a plan on its first task, then works on whatever it is told.
fn planner(f: &Fixture) -> Arc<TestModel> {
    TestModel::new(&f.signal, |c| {
        let last = c.last_user();
        if last.starts_with("Plan ") || last.starts_with("Message from lead") {
            say("ok")
        } else if c.last_is_tool_result() {
            say("Submitted.")
        } else {
            call("submit_plan", json!({"plan": "Write NOTES.md."}))
        }
    })
}

/// Spawns `writer`, waits for its plan (left pending), then shuts it down; returns the plan.
async fn plan_then_shut_down(
    f: &Fixture,
    team: &troupe::bootstrap::Team,
    writer: &TestModel,
) -> troupe::wire::ProtocolRequest {
    team.runtime
        .spawn_teammate(&name("writer"), "writer", "Plan first.")
        .await
        .unwrap();
    f.signal
        .until("the plan submitted and the writer idle", || {
            writer.calls() == 2 && !team.runtime.any_worker_running()
        })
        .await;
    let plan = f.requests().await[0].clone();
    RequestShutdown(team.runtime.handle())
        .call(&lead_ctx(f), json!({"teammate": "writer"}))
        .await
        .unwrap();
    f.signal
        .until("the writer shut down", || {
            f.status_of(team, "writer") == Some(TeammateStatus::Shutdown)
        })
        .await;
    plan
}

async fn plan_responses(f: &Fixture, state: MailboxState) -> Vec<troupe::wire::ProtocolMessage> {
    f.messages("writer", state)
        .await
        .into_iter()
        .filter_map(|m| match m {
            MailboxMessage::Protocol(p)
                if p.kind() == ProtocolMessageKind::PlanApprovalResponse =>
            {
                Some(p)
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_answer_to_a_plan_is_refused_before_anything_is_written() {
    let f = Fixture::new();
    let writer = planner(&f);
    // Call 3 answers the lead's ordinary message: held, so the writer stays busy.
    let release = writer.gate(3);
    let team = f
        .build(Models::new(&f.signal, &[("writer", &writer)]))
        .await;
    team.runtime
        .spawn_teammate(&name("writer"), "writer", "Plan first.")
        .await
        .unwrap();
    f.signal
        .until("the plan submitted and the writer idle", || {
            writer.calls() == 2 && !team.runtime.any_worker_running()
        })
        .await;
    let plan = f.requests().await[0].clone();
    team.runtime
        .postman()
        .send_ordinary(
            &name("lead"),
            &name("writer"),
            OrdinaryKind::Message,
            "Wait.",
        )
        .await
        .unwrap();
    f.signal
        .until("the writer busy with the message", || writer.calls() == 3)
        .await;

    let first = review(
        &f,
        &team,
        json!({"request_id": plan.id(), "approve": true, "feedback": "Go."}),
    )
    .await
    .unwrap();
    assert_eq!(first["approved"], true);
    let state_after_first = f.state_bytes();
    let answers_after_first = plan_responses(&f, MailboxState::Ready).await;
    assert_eq!(answers_after_first.len(), 1);

    // Same decision, opposite decision, through the tool and through the runtime (`troupe
    // review`'s path): each refused, naming the answer that was sent.
    for approve in [true, false] {
        let refused = review(
            &f,
            &team,
            json!({"request_id": plan.id(), "approve": approve}),
        )
        .await
        .unwrap_err();
        assert!(
            refused.starts_with("Error [protocol_state_error]"),
            "{refused}"
        );
        assert!(refused.contains("already answered (approved)"), "{refused}");
        assert!(
            refused.contains(&answers_after_first[0].id().to_string()),
            "{refused}"
        );
    }
    let refused = team
        .runtime
        .protocol()
        .review_plan(
            &name("lead"),
            plan.id(),
            false,
            Some("No."),
            &troupe::wire::TeamRoster {
                version: troupe::wire::TeamRoster::VERSION,
                teammates: team.runtime.roster().await,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        troupe::error::ErrorCode::code(&refused),
        "protocol_state_error"
    );
    // Nothing was written: one answer in the writer's mailbox, state.json as it was.
    assert_eq!(
        plan_responses(&f, MailboxState::Ready).await,
        answers_after_first
    );
    assert_eq!(f.state_bytes(), state_after_first);

    // The writer consumes the one answer; nothing is quarantined.
    release.send(()).unwrap();
    f.signal
        .until("the answer consumed and the writer idle", || {
            writer.calls() == 4 && !team.runtime.any_worker_running()
        })
        .await;
    let resolved = f.requests().await[0].clone();
    assert_eq!(resolved.stored_status(), RequestStatus::Approved);
    assert_eq!(
        resolved.resolution().unwrap().message_id,
        answers_after_first[0].id()
    );
    assert_eq!(f.recorder.quarantined(), Vec::new());
    assert_eq!(f.count("writer", MailboxState::Quarantine).await, 0);
    // Once consumed, another answer is still refused, naming the decision.
    let late = review(
        &f,
        &team,
        json!({"request_id": plan.id(), "approve": false}),
    )
    .await
    .unwrap_err();
    assert!(late.starts_with("Error [protocol_state_error]"), "{late}");
    assert!(late.contains("already answered (approved)"), "{late}");
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_a_shut_down_teammate_cannot_be_answered() {
    let f = Fixture::new();
    let writer = planner(&f);
    let team = f
        .build(Models::new(&f.signal, &[("writer", &writer)]))
        .await;
    let plan = plan_then_shut_down(&f, &team, &writer).await;
    let before = f.count("writer", MailboxState::Ready).await;
    let state_before = f.state_bytes();

    for approve in [true, false] {
        let refused = review(
            &f,
            &team,
            json!({"request_id": plan.id(), "approve": approve}),
        )
        .await
        .unwrap_err();
        assert!(refused.starts_with("Error [teammate_state]"), "{refused}");
        assert!(refused.contains("writer is shutdown"), "{refused}");
    }
    assert_eq!(f.count("writer", MailboxState::Ready).await, before);
    assert_eq!(f.state_bytes(), state_before);
    assert!(f.requests().await[0].is_pending());
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_left_pending_by_an_earlier_teammate_of_the_name_cannot_be_answered() {
    let f = Fixture::new();
    let writer = planner(&f);
    let team = f
        .build(Models::new(&f.signal, &[("writer", &writer)]))
        .await;
    let old_plan = plan_then_shut_down(&f, &team, &writer).await;

    // The name is spawned again (waiting for the old worker to end); the new writer submits a
    // plan of its own.
    team.runtime
        .spawn(&name("writer"), "editor", "Plan first.", false)
        .await
        .unwrap();
    f.signal
        .until("the new plan submitted and the writer idle", || {
            writer.calls() == 4 && !team.runtime.any_worker_running()
        })
        .await;
    let plans: Vec<_> = f
        .requests()
        .await
        .into_iter()
        .filter(|r| r.kind().as_str() == "plan_approval")
        .collect();
    assert_eq!(plans.len(), 2);
    let new_plan = plans[1].clone();

    let state_before = f.state_bytes();
    let refused = review(
        &f,
        &team,
        json!({"request_id": old_plan.id(), "approve": true}),
    )
    .await
    .unwrap_err();
    assert!(refused.starts_with("Error [teammate_state]"), "{refused}");
    assert!(refused.contains("earlier teammate"), "{refused}");
    assert_eq!(f.state_bytes(), state_before);
    assert!(plan_responses(&f, MailboxState::Ready).await.is_empty());

    review(
        &f,
        &team,
        json!({"request_id": new_plan.id(), "approve": true}),
    )
    .await
    .unwrap();
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_a_failed_teammate_cannot_be_answered() {
    let f = Fixture::new();
    // Submits a plan, says so, then its model fails on the next message.
    let writer = Arc::new(
        ScriptedModel::new()
            .tool_call("submit_plan", json!({"plan": "Write NOTES.md."}))
            .text("Submitted."),
    );
    struct Chooser(Arc<ScriptedModel>);
    impl troupe::bootstrap::ModelChooser for Chooser {
        fn model_for(
            &self,
            agent: &troupe::wire::AgentName,
        ) -> Arc<dyn troupe::model::ModelClient> {
            if agent.is_lead() {
                Arc::new(ScriptedModel::new())
            } else {
                self.0.clone()
            }
        }
    }
    let team = f.build(Arc::new(Chooser(writer.clone()))).await;
    team.runtime
        .spawn_teammate(&name("writer"), "writer", "Plan first.")
        .await
        .unwrap();
    f.signal
        .until_async("the plan submitted", async || {
            f.requests().await.len() == 1 && !team.runtime.any_worker_running()
        })
        .await;
    let plan = f.requests().await[0].clone();
    team.runtime
        .postman()
        .send_ordinary(
            &name("lead"),
            &name("writer"),
            OrdinaryKind::Message,
            "Go on.",
        )
        .await
        .unwrap();
    f.signal
        .until("the writer failed", || {
            f.status_of(&team, "writer") == Some(TeammateStatus::Failed)
        })
        .await;
    let refused = review(&f, &team, json!({"request_id": plan.id(), "approve": true}))
        .await
        .unwrap_err();
    assert!(refused.starts_with("Error [teammate_state]"), "{refused}");
    assert!(refused.contains("writer is failed"), "{refused}");
    assert!(plan_responses(&f, MailboxState::Ready).await.is_empty());
    assert!(f.requests().await[0].is_pending());
    team.close().await;
}

/// Reads the teammate's status in `team.json` at the moment a shutdown response is announced
/// (right after it was written into the lead's mailbox).
struct StatusAtAnswer {
    layout: Layout,
    inner: Arc<super::support::Recorder>,
    seen: Mutex<Vec<TeammateStatus>>,
}

impl TeamObserver for StatusAtAnswer {
    fn update(&self, update: &TeamUpdate) {
        if let TeamUpdate::Sent(MailboxMessage::Protocol(p)) = update {
            if p.kind() == ProtocolMessageKind::ShutdownResponse {
                let roster = read_roster(&self.layout.team_file()).unwrap();
                let status = roster
                    .teammates
                    .iter()
                    .find(|r| &r.name == p.sender())
                    .map(|r| r.status)
                    .unwrap();
                self.seen.lock().unwrap().push(status);
            }
        }
        self.inner.update(update);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_is_shutdown_before_its_shutdown_answer_exists() {
    let f = Fixture::new();
    let writer = TestModel::new(&f.signal, |_| say("done"));
    let observer = Arc::new(StatusAtAnswer {
        layout: f.layout.clone(),
        inner: f.recorder.clone(),
        seen: Mutex::new(Vec::new()),
    });
    let mut settings = f.settings(Models::new(&f.signal, &[("writer", &writer)]));
    settings.team_observer = observer.clone();
    let team = build_team(settings).await.unwrap();
    team.runtime
        .spawn_teammate(&name("writer"), "writer", "Say done.")
        .await
        .unwrap();
    f.signal
        .until("the writer idle", || {
            writer.calls() == 1 && !team.runtime.any_worker_running()
        })
        .await;
    RequestShutdown(team.runtime.handle())
        .call(&lead_ctx(&f), json!({"teammate": "writer"}))
        .await
        .unwrap();
    f.signal
        .until("the shutdown answered", || {
            !observer.seen.lock().unwrap().is_empty()
        })
        .await;
    assert_eq!(
        *observer.seen.lock().unwrap(),
        [TeammateStatus::Shutdown],
        "team.json said shutdown when the answer reached the lead's mailbox"
    );
    // The status changed before the answer was sent, in the timeline too.
    let updates = f.recorder.updates();
    let shut = updates
        .iter()
        .position(|u| {
            matches!(
                u,
                TeamUpdate::Status {
                    status: TeammateStatus::Shutdown,
                    ..
                }
            )
        })
        .unwrap();
    let answered = updates
        .iter()
        .position(|u| {
            matches!(u, TeamUpdate::Sent(MailboxMessage::Protocol(p)) if p.kind() == ProtocolMessageKind::ShutdownResponse)
        })
        .unwrap();
    assert!(shut < answered, "{updates:#?}");
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_recorded_but_not_delivered_is_delivered_at_the_next_start() {
    let f = Fixture::new();
    let writer = planner(&f);
    let models = Models::new(&f.signal, &[("writer", &writer)]);
    let team = f.build(models.clone()).await;
    team.runtime
        .spawn_teammate(&name("writer"), "writer", "Plan first.")
        .await
        .unwrap();
    f.signal
        .until("the plan submitted and the writer idle", || {
            writer.calls() == 2 && !team.runtime.any_worker_running()
        })
        .await;
    let plan = f.requests().await[0].clone();
    team.close().await;

    // A reviewer recorded its answer, then died before writing it into the mailbox.
    let recorded = ProtocolMessage::response(
        Envelope {
            id: MessageId::parse("00000000-0000-4000-9000-00000000a001").unwrap(),
            sender: name("lead"),
            recipient: name("writer"),
            content: Content::parse("Go.").unwrap(),
            created_at_utc: f.now(),
        },
        ProtocolMessageKind::PlanApprovalResponse,
        plan.id(),
        true,
    )
    .unwrap();
    let answers = f.layout.protocol_answers_dir();
    std::fs::create_dir_all(&answers).unwrap();
    std::fs::write(
        answers.join(format!("{}.json", plan.id())),
        MailboxMessage::Protocol(recorded.clone()).to_json_bytes(),
    )
    .unwrap();
    assert!(plan_responses(&f, MailboxState::Ready).await.is_empty());

    let team = f.build(models).await;
    f.signal
        .until("the recorded answer consumed and the writer idle", || {
            writer.calls() == 3 && !team.runtime.any_worker_running()
        })
        .await;
    assert!(
        writer
            .user_texts(3)
            .last()
            .unwrap()
            .starts_with(&format!("Plan approved ({}). Feedback: Go.", plan.id())),
        "{:?}",
        writer.user_texts(3)
    );
    let resolved = f.requests().await[0].clone();
    assert_eq!(resolved.stored_status(), RequestStatus::Approved);
    assert_eq!(resolved.resolution().unwrap().message_id, recorded.id());
    assert_eq!(
        plan_responses(&f, MailboxState::Done).await,
        vec![recorded.clone()]
    );
    let refused = review(
        &f,
        &team,
        json!({"request_id": plan.id(), "approve": false}),
    )
    .await
    .unwrap_err();
    assert!(
        refused.contains(&format!(
            "already answered (approved) by lead in message {}",
            recorded.id()
        )),
        "{refused}"
    );
    team.close().await;
}
