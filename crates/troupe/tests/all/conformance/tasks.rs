//! The task board port's contract on both backends: the rules of create, claim and complete,
//! durability across instances, claims raced by instances of their own (one owner), and a
//! corrupt record reported, never skipped.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::clock::Clock;
use troupe::error::ErrorCode;
use troupe::store::tasks::{ClaimToken, NewTask, TaskBoard, TaskId, TaskStatus};
use troupe::wire::AgentName;

use super::{both, Backend, Stores};
use crate::board::store::race_threads;

both!(
    tasks_follow_the_rules_and_outlive_the_instance,
    instances_racing_to_claim_give_one_owner,
    a_board_is_the_teams_own,
);

fn agent(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

/// A token no claim has.
fn no_claim() -> ClaimToken {
    ClaimToken::parse("00000000-0000-4000-8000-00000000abcd").unwrap()
}

fn new_task(subject: &str, blocked_by: Vec<TaskId>) -> NewTask {
    NewTask {
        subject: subject.into(),
        description: None,
        blocked_by,
        ..Default::default()
    }
}

fn tasks_follow_the_rules_and_outlive_the_instance(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let board = s.board();
    let a = board.create(new_task("a", vec![])).unwrap();
    s.clock.advance_millis(5);
    let b = board
        .create(NewTask {
            subject: "b".into(),
            description: Some("details".into()),
            blocked_by: vec![a.id],
            ..Default::default()
        })
        .unwrap();
    let unknown = TaskId::parse("00000000-0000-4000-8000-0000000000ff").unwrap();
    let refusals = [
        board.create(new_task(" ", vec![])).unwrap_err().code(),
        board
            .create(new_task("c", vec![unknown]))
            .unwrap_err()
            .code(),
        board.claim(&b.id, &agent("bob")).unwrap_err().code(),
        board.claim(&unknown, &agent("bob")).unwrap_err().code(),
        board
            .complete(&a.id, &agent("alice"), &no_claim())
            .unwrap_err()
            .code(),
    ];
    assert_eq!(
        refusals,
        [
            "invalid_arguments",
            "task_not_found",
            "task_blocked",
            "task_not_found",
            "task_state"
        ]
    );
    let claimed = board.claim(&a.id, &agent("alice")).unwrap();
    assert_eq!(claimed.owner, Some(agent("alice")));
    let token = claimed.lease.unwrap().token;
    assert_eq!(
        board.claim(&a.id, &agent("bob")).unwrap_err().code(),
        "task_claimed"
    );
    assert_eq!(
        board
            .complete(&a.id, &agent("bob"), &token)
            .unwrap_err()
            .code(),
        "task_claimed"
    );
    s.clock.advance_millis(10);
    let done = board.complete(&a.id, &agent("alice"), &token).unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.updated_at_utc, s.clock.now());

    // Another instance (another process) reads the same board, in creation order.
    let other = s.board();
    assert_eq!(other.list().unwrap(), vec![done.clone(), b.clone()]);
    assert_eq!(other.get(&b.id).unwrap(), b);
    assert_eq!(other.get(&unknown).unwrap_err().code(), "task_not_found");
    assert_eq!(
        other.claim(&b.id, &agent("bob")).unwrap().status,
        TaskStatus::InProgress
    );
    assert_eq!(
        board.get(&b.id).unwrap().owner,
        Some(agent("bob")),
        "the first instance sees the second one's claim"
    );
}

fn instances_racing_to_claim_give_one_owner(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    for round in 0..3 {
        let id = s.board().create(new_task("contested", vec![])).unwrap().id;
        let boards: Vec<Arc<dyn TaskBoard>> = (0..6).map(|_| s.board()).collect();
        let winners: Vec<AgentName> = race_threads(boards, id)
            .into_iter()
            .filter(|(_, won)| *won)
            .map(|(who, _)| who)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(
            s.board().get(&id).unwrap().owner.as_ref(),
            Some(&winners[0])
        );
    }
}

fn a_board_is_the_teams_own(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let task = s.board().create(new_task("ours", vec![])).unwrap();
    match backend {
        // Another workspace is another board.
        Backend::File => {
            let other = Stores::new(Backend::File).unwrap();
            assert_eq!(other.board().list().unwrap(), vec![]);
        }
        // Another team in the same database is another board.
        Backend::Postgres => {
            let db = s.db.as_ref().unwrap();
            let theirs = troupe::store::postgres::PgTaskBoard::new(
                db.store("team-b"),
                Arc::new(s.clock.clone()),
                s.ids.clone(),
            );
            assert_eq!(theirs.list().unwrap(), vec![]);
            assert_eq!(theirs.get(&task.id).unwrap_err().code(), "task_not_found");
        }
    }
    assert_eq!(s.board().list().unwrap(), vec![task]);
}

/// A row troupe cannot read back is `task_store_corrupt` naming it (the file board's corrupt
/// files are tested with the board itself), and a change is refused rather than decided
/// without it.
#[test]
fn a_corrupt_row_is_reported_never_skipped() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let board = s.board();
    let task = board.create(new_task("fine", vec![])).unwrap();
    let db = s.db.as_ref().unwrap();
    db.execute(
        "INSERT INTO troupe_tasks (team, id, status, owner, body) VALUES \
         ('team-a', '00000000-0000-4000-8000-0000000000aa', 'pending', NULL, '{\"id\": 1}')",
    )
    .unwrap();
    let err = board.list().unwrap_err();
    assert_eq!(err.code(), "task_store_corrupt");
    assert!(
        err.to_string()
            .contains("00000000-0000-4000-8000-0000000000aa"),
        "{err}"
    );
    assert_eq!(
        board.claim(&task.id, &agent("alice")).unwrap_err().code(),
        "task_store_corrupt"
    );
    assert_eq!(board.get(&task.id).unwrap().status, TaskStatus::Pending);
}

/// The lead's lock, held for a whole run, is not the task board's: a board change of the same
/// team goes through while a lead holds it (they once shared a key, and every change waited
/// for the run to end).
#[test]
fn a_running_lead_does_not_block_the_task_board() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.as_ref().unwrap();
    let _lead = troupe::store::postgres::lead_lock(pg)
        .unwrap()
        .expect("the lead lock is free");
    let board = s.board();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(
            board
                .create(new_task("while a lead runs", vec![]))
                .map(|t| t.id),
        );
    });
    let created = finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("a board change waited for the lead's lock");
    assert!(created.is_ok(), "{created:?}");
}
