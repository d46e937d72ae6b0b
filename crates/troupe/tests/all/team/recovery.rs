//! Recovery on start (SPEC §3.2): messages a dead run left in `processing/` go back to `ready/`
//! and are processed; a teammate the dead run left `running` comes back as a worker.

use pretty_assertions::assert_eq;
use troupe::store::durable;
use troupe::store::mailbox::{MailboxState, MailboxStore};
use troupe::wire::{
    AgentName, Content, MailboxMessage, MessageId, OrdinaryKind, OrdinaryMessage, TeamRoster,
    TeammateRecord, TeammateStatus,
};

use super::support::{drive, name, say, Fixture, Models, TestModel};

fn message(
    id: &str,
    from: &str,
    to: &str,
    kind: OrdinaryKind,
    text: &str,
    f: &Fixture,
) -> MailboxMessage {
    MailboxMessage::Ordinary(OrdinaryMessage {
        id: MessageId::parse(id).unwrap(),
        sender: name(from),
        recipient: name(to),
        kind,
        content: Content::parse(text).unwrap(),
        created_at_utc: f.now(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_left_in_processing_by_a_dead_run_are_recovered_and_processed() {
    let f = Fixture::new();
    // What a run killed mid-work leaves: a roster saying `running`, and a claimed message in
    // the teammate's and in the lead's mailbox.
    durable::ensure_real_dir(&f.layout.state_dir()).unwrap();
    let roster = TeamRoster {
        version: TeamRoster::VERSION,
        teammates: vec![TeammateRecord {
            name: name("writer"),
            role: "writer".into(),
            status: TeammateStatus::Running,
            detail: None,
            updated_at_utc: f.now(),
            plan_required: false,
            earlier_plan: None,
            definition: None,
            isolation: troupe_wire::Isolation::None,
        }],
    };
    durable::replace(&f.layout.team_file(), &roster.to_json_bytes()).unwrap();
    let task = message(
        "00000000-0000-4000-9000-000000000001",
        "lead",
        "writer",
        OrdinaryKind::Task,
        "Finish the report.",
        &f,
    );
    let result = message(
        "00000000-0000-4000-9000-000000000002",
        "writer",
        "lead",
        OrdinaryKind::Result,
        "Half of the report.",
        &f,
    );
    let dead = f.mailbox();
    for m in [&task, &result] {
        dead.send(m).await.unwrap();
        assert_eq!(dead.claim(m.recipient()).await.unwrap().as_ref(), Some(m));
    }
    assert_eq!(f.count("writer", MailboxState::Processing).await, 1);
    assert_eq!(f.count("lead", MailboxState::Processing).await, 1);

    let lead = TestModel::new(&f.signal, |_| say("Noted."));
    let writer = TestModel::new(&f.signal, |_| say("Report finished."));
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    assert_eq!(team.recovered, 2);
    let outcome = drive(&mut team, "Carry on.").await;
    assert_eq!(outcome.answer, "Noted.");

    // The teammate ran its recovered task, once, and reported.
    assert_eq!(writer.calls(), 1);
    assert_eq!(
        writer.user_texts(1),
        ["Task from lead:\nFinish the report."]
    );
    // The lead saw the recovered result exactly once, and the new one.
    let mut seen: Vec<String> = Vec::new();
    for n in 1..=lead.calls() {
        for text in lead.user_texts(n) {
            if text.starts_with("[event]") && !seen.contains(&text) {
                seen.push(text);
            }
        }
    }
    let contents: Vec<String> = seen
        .iter()
        .map(|t| {
            let body: serde_json::Value =
                serde_json::from_str(t.strip_prefix("[event] ").unwrap()).unwrap();
            body["content"].as_str().unwrap().to_owned()
        })
        .collect();
    let mut sorted = contents.clone();
    sorted.sort();
    assert_eq!(sorted, ["Half of the report.", "Report finished."]);
    let last = lead.user_texts(lead.calls());
    assert_eq!(
        last.iter()
            .filter(|t| t.contains("Half of the report."))
            .count(),
        1,
        "appended once"
    );
    for agent in ["lead", "writer"] {
        assert_eq!(f.count(agent, MailboxState::Ready).await, 0, "{agent}");
        assert_eq!(f.count(agent, MailboxState::Processing).await, 0, "{agent}");
    }
    assert_eq!(f.count("writer", MailboxState::Done).await, 1);
    assert_eq!(f.count("lead", MailboxState::Done).await, 2);
    assert_eq!(
        team.runtime.status_of(&name("writer")).await,
        Some(TeammateStatus::Idle)
    );
    assert!(team.runtime.status_of(&AgentName::lead()).await.is_none());
    team.close().await;
}

/// A message that reached a teammate's mailbox without a wake (on PostgreSQL: its sender was
/// killed between its commit and its wake) is handled once the process looks again at the agents
/// it runs — what a shared team does at every takeover look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_came_without_a_wake_is_handled_at_the_next_look() {
    let f = Fixture::new();
    let writer = TestModel::new(&f.signal, |_| say("done"));
    let team = f
        .build(Models::new(&f.signal, &[("writer", &writer)]))
        .await;
    team.runtime
        .spawn_teammate(&name("writer"), "writer", "Start.")
        .await
        .unwrap();
    f.signal
        .until("the writer's first turn, then idle", || {
            writer.calls() == 1 && !team.runtime.any_worker_running()
        })
        .await;
    // Written by another store on the same folders: no wake, and no watch in this fixture.
    let late = message(
        "0195a1b2-0000-4000-9000-00000000a0a0",
        "lead",
        "writer",
        OrdinaryKind::Message,
        "One more thing.",
        &f,
    );
    f.mailbox().send(&late).await.unwrap();
    assert_eq!(f.count("writer", MailboxState::Ready).await, 1);
    team.runtime.look_again().await;
    f.signal
        .until("the late message handled", || writer.calls() == 2)
        .await;
    f.signal
        .until_async("the late message done", async || {
            f.count("writer", MailboxState::Done).await == 2
        })
        .await;
}
