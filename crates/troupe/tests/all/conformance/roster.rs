//! The roster on both backends: the `RosterRecords` port a running team keeps its teammates on
//! (`team.json`, or a shared team's roster under leases) and the `RosterReader` port the
//! commands that look at a team read it through. What one writes, a new instance and the reader
//! see; a teammate left running by a process that is gone comes back idle.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::clock::Clock;
use troupe::store::roster::WorkerRow;
use troupe_wire::{AgentName, Isolation, TeammateRecord, TeammateStatus};

use super::{both_async, Backend, Stores};

both_async!(
    a_roster_keeps_teammates_and_their_status_for_every_reader,
    a_teammate_left_running_comes_back_idle,
);

fn name(raw: &str) -> AgentName {
    AgentName::parse(raw).unwrap()
}

fn record(s: &Stores, raw: &str, role: &str, status: TeammateStatus) -> TeammateRecord {
    TeammateRecord {
        name: name(raw),
        role: role.into(),
        status,
        detail: None,
        updated_at_utc: s.clock.now(),
        plan_required: false,
        earlier_plan: None,
        definition: None,
        isolation: Isolation::None,
    }
}

fn statuses(records: &[TeammateRecord]) -> Vec<(String, String, TeammateStatus)> {
    let mut out: Vec<_> = records
        .iter()
        .map(|r| (r.name.to_string(), r.role.clone(), r.status))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn a_roster_keeps_teammates_and_their_status_for_every_reader(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let roster = s.roster_records().await;
    assert!(roster.all().await.is_empty());
    let alice = record(&s, "alice", "writer", TeammateStatus::Idle);
    assert!(roster.add(alice.clone()).await.unwrap());
    assert!(
        !roster
            .add(record(&s, "alice", "other", TeammateStatus::Idle))
            .await
            .unwrap(),
        "a name already taken is refused"
    );
    assert!(roster
        .add(record(&s, "bob", "tester", TeammateStatus::Idle))
        .await
        .unwrap());
    assert_eq!(roster.get(&name("alice")).await.unwrap().role, "writer");
    assert_eq!(roster.get(&name("carol")).await, None);

    assert!(
        !roster
            .replace_stopped(record(&s, "alice", "again", TeammateStatus::Idle))
            .await
            .unwrap(),
        "an idle teammate is not replaced"
    );
    let previous = roster
        .set_status(&name("alice"), TeammateStatus::Running, None)
        .await
        .unwrap();
    assert_eq!(previous, Some(TeammateStatus::Idle));
    let previous = roster
        .set_status(&name("alice"), TeammateStatus::Shutdown, None)
        .await
        .unwrap();
    assert_eq!(previous, Some(TeammateStatus::Running));
    assert_eq!(
        roster
            .set_status(&name("carol"), TeammateStatus::Idle, None)
            .await
            .unwrap(),
        None,
        "nobody by that name"
    );
    assert!(roster
        .replace_stopped(record(&s, "alice", "reviewer", TeammateStatus::Idle))
        .await
        .unwrap());
    let want = vec![
        (
            "alice".to_owned(),
            "reviewer".to_owned(),
            TeammateStatus::Idle,
        ),
        ("bob".to_owned(), "tester".to_owned(), TeammateStatus::Idle),
    ];
    assert_eq!(statuses(&roster.all().await), want);
    assert_eq!(
        statuses(&s.roster_records().await.all().await),
        want,
        "a new instance reads what the first wrote"
    );
    let reader = s.roster_reader();
    assert_eq!(statuses(&reader.teammates().await.unwrap()), want);
    let workers: Option<Vec<WorkerRow>> = reader.workers().await.unwrap();
    assert_eq!(
        workers.is_some(),
        backend == Backend::Postgres,
        "only a shared team has worker processes"
    );
}

async fn a_teammate_left_running_comes_back_idle(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let roster = s.roster_records().await;
    roster
        .add(record(&s, "alice", "writer", TeammateStatus::Idle))
        .await
        .unwrap();
    roster
        .set_status(&name("alice"), TeammateStatus::Running, None)
        .await
        .unwrap();
    drop(roster);
    let reopened: Arc<dyn troupe::store::roster_records::RosterRecords> = s.roster_records().await;
    assert_eq!(
        reopened.get(&name("alice")).await.map(|r| r.status),
        Some(TeammateStatus::Idle)
    );
}
