//! Racing answers to one request through the runtime (SPEC §5): exactly one transition wins.
//!
//! Two reviewers (like two `troupe review` in two terminals, each with its own store instance)
//! answer one plan at the same time: both answers pass review (it only reads) and are delivered;
//! the teammate's worker makes one transition and quarantines the other answer as a duplicate,
//! and the teammate is told the decision the store kept. Racing `consume_response` calls in
//! threads, instances and processes are the store's own tests (`protocol::concurrency`).

use std::sync::{Arc, Barrier};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::ids::RandomIds;
use troupe::store::mailbox::{FileMailboxStore, MailboxState};
use troupe::store::protocol::JsonProtocolStore;
use troupe::team::{NoTeamObserver, Postman, ProtocolRuntime};
use troupe::wire::{AgentName, MessageId, RequestStatus};

use super::support::{call, name, say, Fixture, Models, TestModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reviewers_race_and_the_teammate_makes_one_transition() {
    let f = Fixture::new();
    let writer = TestModel::new(&f.signal, |c| {
        if c.last_user().starts_with("Plan ") || c.last_is_tool_result() {
            say("ok")
        } else {
            call("submit_plan", json!({"plan": "Write NOTES.md."}))
        }
    });
    let team = f.build(Models::new(&f.signal, &[("writer", &writer)]));
    team.runtime
        .inner()
        .spawn_teammate(&name("writer"), "writer", "Plan first.")
        .unwrap();
    f.signal
        .until("the plan submitted and the writer idle", || {
            writer.calls() == 2 && !team.runtime.any_worker_running()
        })
        .await;
    let plan = f.requests()[0].clone();

    // Two reviewers, each with its own stores, released together.
    let barrier = Arc::new(Barrier::new(2));
    let reviewers: Vec<_> = [true, false]
        .into_iter()
        .map(|approve| {
            let (layout, clock, barrier) = (f.layout.clone(), f.clock.clone(), barrier.clone());
            let plan_id = plan.id();
            std::thread::spawn(move || {
                let store =
                    JsonProtocolStore::open(&layout, Arc::new(clock.clone()), Arc::new(RandomIds))
                        .unwrap();
                let postman = Arc::new(Postman::new(
                    Arc::new(FileMailboxStore::new(&layout, Arc::new(clock.clone()))),
                    Arc::new(clock),
                    Arc::new(RandomIds),
                    Arc::new(NoTeamObserver),
                ));
                let runtime =
                    ProtocolRuntime::new(Arc::new(store), postman, Duration::from_secs(300));
                barrier.wait();
                runtime
                    .review_plan(&AgentName::lead(), plan_id, approve, None)
                    .map(|m| m.id())
            })
        })
        .collect();
    let answers: Vec<MessageId> = reviewers
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    assert_eq!(
        f.count("writer", MailboxState::Ready),
        2,
        "both answers delivered"
    );

    team.runtime.wake_all();
    f.signal
        .until("both answers handled", || {
            f.count("writer", MailboxState::Ready) == 0 && !team.runtime.any_worker_running()
        })
        .await;
    let resolved = f.requests()[0].clone();
    let winner = resolved.resolution().unwrap().message_id;
    assert!(answers.contains(&winner));
    let loser = answers.iter().find(|id| **id != winner).unwrap();
    let quarantined = f.recorder.quarantined();
    assert_eq!(quarantined.len(), 1, "{quarantined:#?}");
    assert_eq!(quarantined[0].1, loser.to_string());
    assert!(
        quarantined[0].2.contains("duplicate"),
        "{}",
        quarantined[0].2
    );
    // The teammate was told once, and what it was told is what the store says.
    assert_eq!(writer.calls(), 3);
    let told = writer.user_texts(3).last().unwrap().clone();
    let expected = if resolved.stored_status() == RequestStatus::Approved {
        format!("Plan approved ({})", plan.id())
    } else {
        format!("Plan rejected ({})", plan.id())
    };
    assert!(told.starts_with(&expected), "{told} / {expected}");
    team.close().await;
}
