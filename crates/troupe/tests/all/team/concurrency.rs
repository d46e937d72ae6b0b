//! Racing answers to one request through the runtime (SPEC §5, §6): exactly one answer is sent.
//!
//! Two reviewers (like two `troupe review` in two terminals, each with its own store instance)
//! answer one plan at the same time: exactly one succeeds, the other is refused
//! (`protocol_state_error`) before anything is written; one response reaches the teammate, which
//! makes one transition and is told the decision that was sent. Racing `consume_response` calls
//! in threads, instances and processes are the store's own tests (`protocol::concurrency`);
//! reviewers racing as real `troupe review` processes are the CLI's (`review`).

use std::sync::{Arc, Barrier};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::error::ErrorCode;
use troupe::ids::RandomIds;
use troupe::inspect::read_roster;
use troupe::store::mailbox::{FileMailboxStore, MailboxState};
use troupe::store::protocol::JsonProtocolStore;
use troupe::team::{NoTeamObserver, Postman, ProtocolRuntime, TeamError};
use troupe::wire::{AgentName, MessageId, RequestStatus};

use super::support::{call, name, say, Fixture, Models, TestModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reviewers_race_and_exactly_one_answer_is_sent() {
    let f = Fixture::new();
    let writer = TestModel::new(&f.signal, |c| {
        if c.last_user().starts_with("Plan ") || c.last_is_tool_result() {
            say("ok")
        } else {
            call("submit_plan", json!({"plan": "Write NOTES.md."}))
        }
    });
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

    // Two reviewers, each with its own stores, released together.
    let barrier = Arc::new(Barrier::new(2));
    let reviewers: Vec<_> = [true, false]
        .into_iter()
        .map(|approve| {
            let (layout, clock, barrier) = (f.layout.clone(), f.clock.clone(), barrier.clone());
            let plan_id = plan.id();
            std::thread::spawn(move || {
                let executor = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
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
                let roster = read_roster(&layout.team_file()).unwrap();
                barrier.wait();
                executor
                    .block_on(runtime.review_plan(
                        &AgentName::lead(),
                        plan_id,
                        approve,
                        None,
                        &roster,
                    ))
                    .map(|m| m.id())
            })
        })
        .collect();
    let results: Vec<Result<MessageId, TeamError>> =
        reviewers.into_iter().map(|t| t.join().unwrap()).collect();
    let codes: Vec<&str> = results
        .iter()
        .map(|r| r.as_ref().map_or_else(ErrorCode::code, |_| "ok"))
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == "ok").count(),
        1,
        "exactly one reviewer wins: {codes:?}"
    );
    assert!(codes.contains(&"protocol_state_error"), "{codes:?}");
    let sent = results
        .iter()
        .find_map(|r| r.as_ref().ok())
        .copied()
        .unwrap();
    assert_eq!(
        f.messages("writer", MailboxState::Ready)
            .await
            .iter()
            .map(|m| m.id())
            .collect::<Vec<_>>(),
        [sent],
        "one answer delivered"
    );

    team.runtime.wake_all().await;
    f.signal
        .until_async("the answer handled", async || {
            f.count("writer", MailboxState::Ready).await == 0 && !team.runtime.any_worker_running()
        })
        .await;
    let resolved = f.requests().await[0].clone();
    assert_eq!(resolved.resolution().unwrap().message_id, sent);
    assert_eq!(f.recorder.quarantined(), Vec::new());
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
