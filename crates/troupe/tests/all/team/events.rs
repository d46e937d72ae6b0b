//! SPEC §4.3: an ordinary mailbox event does not interrupt a user turn of the lead; it waits for
//! the event turn after it.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::store::mailbox::MailboxState;

use super::support::{call, drive_in_background, finish, say, Fixture, Models, TestModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_result_waits_for_the_event_turn() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |c| {
        if !c.events().is_empty() {
            return say("Got the result.");
        }
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "mate", "role": "r", "prompt": "Say hi."}),
            );
        }
        if c.calls_named("glob").is_empty() {
            return call("glob", json!({"pattern": "*"}));
        }
        say("User turn done.")
    });
    // The lead's second call (still inside its user turn) waits until the teammate's result is
    // in the lead's mailbox.
    let release = lead.gate(2);
    let team = f.build(Models::new(&f.signal, &[("lead", &lead)])).await;
    let run = drive_in_background(team, "Spawn a teammate, then look around.");
    f.signal
        .until_async("the teammate's result in the lead's mailbox", async || {
            f.count("lead", MailboxState::Ready).await == 1
        })
        .await;
    release.send(()).unwrap();
    let (team, outcome) = finish(run).await;
    assert_eq!(outcome.answer, "Got the result.");

    let event_counts: Vec<usize> = (1..=lead.calls())
        .map(|n| {
            lead.user_texts(n)
                .iter()
                .filter(|t| t.starts_with("[event] "))
                .count()
        })
        .collect();
    // Calls 1–3 are the user turn (spawn, glob, answer): the result that arrived during it did
    // not enter it. Call 4 is the event turn.
    assert_eq!(event_counts, [0, 0, 0, 1]);
    team.close().await;
}
