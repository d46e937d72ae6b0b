//! Closing (SPEC §4.4): a worker cancelled in the middle of a message releases it — back in
//! `ready/`, nothing in `processing/` — and the next run picks it up; a plan response already
//! consumed is then a replay, not a second transition.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::store::mailbox::MailboxState;
use troupe::wire::{AgentName, RequestStatus, TeammateStatus};

use super::support::{call, name, say, Fixture, Models, TestModel, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_during_a_plan_response_releases_it_and_the_next_run_replays_it() {
    let f = Fixture::new();
    let writer = TestModel::new(&f.signal, |c| {
        if c.last_is_tool_result() {
            say("Submitted.")
        } else {
            call("submit_plan", json!({"plan": "Write NOTES.md."}))
        }
    });
    // Call 3 answers the "Plan approved" prompt: it never gets past its gate.
    let _held = writer.gate(3);
    let team = f
        .build(Models::new(&f.signal, &[("writer", &writer)]))
        .await;
    team.runtime
        .spawn_teammate(&name("writer"), "writer", "Plan, then write.")
        .await
        .unwrap();
    f.signal
        .until("the plan submitted and the writer idle", || {
            writer.calls() == 2 && !team.runtime.any_worker_running()
        })
        .await;
    let plan = f.requests().await[0].clone();
    let response = team
        .runtime
        .protocol()
        .review_plan(
            &AgentName::lead(),
            plan.id(),
            true,
            Some("Go."),
            &troupe::wire::TeamRoster {
                version: troupe::wire::TeamRoster::VERSION,
                teammates: team.runtime.roster().await,
            },
        )
        .await
        .unwrap();
    f.signal
        .until("the writer inside the response's model call", || {
            writer.calls() == 3
        })
        .await;
    assert_eq!(
        f.messages("writer", MailboxState::Processing)
            .await
            .iter()
            .map(|m| m.id())
            .collect::<Vec<_>>(),
        [response.id()]
    );
    // Consumed before the runner continued.
    let approved = f.requests().await[0].clone();
    assert_eq!(approved.stored_status(), RequestStatus::Approved);

    tokio::time::timeout(WAIT, team.close())
        .await
        .expect("close did not finish");
    assert_eq!(
        f.messages("writer", MailboxState::Ready)
            .await
            .iter()
            .map(|m| m.id())
            .collect::<Vec<_>>(),
        [response.id()]
    );
    assert_eq!(f.count("writer", MailboxState::Processing).await, 0);
    assert_eq!(f.count("writer", MailboxState::Quarantine).await, 0);
    let roster = troupe::inspect::read_roster(&f.layout.team_file()).unwrap();
    assert_eq!(roster.teammates[0].status, TeammateStatus::Idle);

    // The next run: the released response is delivered again. It is a replay for the store
    // (same message id): the request keeps its one resolution, and the runner continues.
    let next = TestModel::new(&f.signal, |_| say("Carried out."));
    let team = f.build(Models::new(&f.signal, &[("writer", &next)])).await;
    assert_eq!(team.recovered, 0, "nothing was left in processing/");
    f.signal
        .until_async("the response handled by the next run", async || {
            f.count("writer", MailboxState::Done).await == 2 && !team.runtime.any_worker_running()
        })
        .await;
    assert_eq!(next.calls(), 1);
    let prompt = next.user_texts(1).last().unwrap().clone();
    assert!(
        prompt.starts_with(&format!("Plan approved ({}). Feedback: Go.", plan.id())),
        "{prompt}"
    );
    assert_eq!(f.requests().await[0], approved, "no second transition");
    assert_eq!(f.count("writer", MailboxState::Ready).await, 0);
    team.close().await;
}
