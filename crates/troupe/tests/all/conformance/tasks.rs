//! The task board port's contract on both backends: the rules of create, claim and complete,
//! durability across instances, claims raced by instances of their own (one owner), and a
//! corrupt record reported, never skipped.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use troupe::clock::Clock;
use troupe::error::ErrorCode;
use troupe::store::postgres::retention::PgState;
use troupe::store::retention::files::FileState;
use troupe::store::retention::{needed, Kind, Policy, Prune, Report, Rule, Sweep, WITHIN_AGE};
use troupe::store::tasks::{ClaimToken, NewTask, Task, TaskBoard, TaskId, TaskStatus};
use troupe::wire::AgentName;

use super::{both_async, Backend, Stores};
use crate::board::store::race_threads;

both_async!(
    tasks_follow_the_rules_and_outlive_the_instance,
    instances_racing_to_claim_give_one_owner,
    a_board_is_the_teams_own,
    a_claim_is_live_only_with_its_token_and_before_its_lease_runs_out,
    an_expired_lease_returns_the_task_once_and_the_stale_holder_cannot_complete,
    renewing_keeps_a_claim_live_and_a_release_gives_it_back,
    tags_and_the_assignee_are_kept_and_an_assigned_task_is_its_assignees,
    gc_removes_finished_tasks_past_their_age_and_what_stays_still_loads,
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

async fn tasks_follow_the_rules_and_outlive_the_instance(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let board = s.board();
    let a = board.create(new_task("a", vec![])).await.unwrap();
    s.clock.advance_millis(5);
    let b = board
        .create(NewTask {
            subject: "b".into(),
            description: Some("details".into()),
            blocked_by: vec![a.id],
            ..Default::default()
        })
        .await
        .unwrap();
    let unknown = TaskId::parse("00000000-0000-4000-8000-0000000000ff").unwrap();
    let refusals = [
        board
            .create(new_task(" ", vec![]))
            .await
            .unwrap_err()
            .code(),
        board
            .create(new_task("c", vec![unknown]))
            .await
            .unwrap_err()
            .code(),
        board.claim(&b.id, &agent("bob")).await.unwrap_err().code(),
        board
            .claim(&unknown, &agent("bob"))
            .await
            .unwrap_err()
            .code(),
        board
            .complete(&a.id, &agent("alice"), &no_claim())
            .await
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
    let claimed = board.claim(&a.id, &agent("alice")).await.unwrap();
    assert_eq!(claimed.owner, Some(agent("alice")));
    let token = claimed.lease.unwrap().token;
    assert_eq!(
        board.claim(&a.id, &agent("bob")).await.unwrap_err().code(),
        "task_claimed"
    );
    assert_eq!(
        board
            .complete(&a.id, &agent("bob"), &token)
            .await
            .unwrap_err()
            .code(),
        "task_claimed"
    );
    s.clock.advance_millis(10);
    let done = board
        .complete(&a.id, &agent("alice"), &token)
        .await
        .unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.updated_at_utc, s.clock.now());

    // Another instance (another process) reads the same board, in creation order.
    let other = s.board();
    assert_eq!(other.list().await.unwrap(), vec![done.clone(), b.clone()]);
    assert_eq!(other.get(&b.id).await.unwrap(), b);
    assert_eq!(
        other.get(&unknown).await.unwrap_err().code(),
        "task_not_found"
    );
    assert_eq!(
        other.claim(&b.id, &agent("bob")).await.unwrap().status,
        TaskStatus::InProgress
    );
    assert_eq!(
        board.get(&b.id).await.unwrap().owner,
        Some(agent("bob")),
        "the first instance sees the second one's claim"
    );
}

async fn instances_racing_to_claim_give_one_owner(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    for round in 0..3 {
        let id = s
            .board()
            .create(new_task("contested", vec![]))
            .await
            .unwrap()
            .id;
        let boards: Vec<Arc<dyn TaskBoard>> = (0..6).map(|_| s.board()).collect();
        let winners: Vec<AgentName> = race_threads(boards, id)
            .into_iter()
            .filter(|(_, won)| *won)
            .map(|(who, _)| who)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(
            s.board().get(&id).await.unwrap().owner.as_ref(),
            Some(&winners[0])
        );
    }
}

async fn a_board_is_the_teams_own(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let task = s.board().create(new_task("ours", vec![])).await.unwrap();
    match backend {
        // Another workspace is another board.
        Backend::File => {
            let other = Stores::new(Backend::File).unwrap();
            assert_eq!(other.board().list().await.unwrap(), vec![]);
        }
        // Another team in the same database is another board.
        Backend::Postgres => {
            let db = s.db.as_ref().unwrap();
            let theirs = troupe::store::postgres::PgTaskBoard::new(
                db.store("team-b"),
                Arc::new(s.clock.clone()),
                s.ids.clone(),
            );
            assert_eq!(theirs.list().await.unwrap(), vec![]);
            assert_eq!(
                theirs.get(&task.id).await.unwrap_err().code(),
                "task_not_found"
            );
        }
    }
    assert_eq!(s.board().list().await.unwrap(), vec![task]);
}

/// A row troupe cannot read back is `task_store_corrupt` naming it (the file board's corrupt
/// files are tested with the board itself), and a change is refused rather than decided
/// without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_row_is_reported_never_skipped() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let board = s.board();
    let task = board.create(new_task("fine", vec![])).await.unwrap();
    let db = s.db.as_ref().unwrap();
    db.execute(
        "INSERT INTO troupe_tasks (team, id, status, owner, body) VALUES \
         ('team-a', '00000000-0000-4000-8000-0000000000aa', 'pending', NULL, '{\"id\": 1}')",
    )
    .unwrap();
    let err = board.list().await.unwrap_err();
    assert_eq!(err.code(), "task_store_corrupt");
    assert!(
        err.to_string()
            .contains("00000000-0000-4000-8000-0000000000aa"),
        "{err}"
    );
    assert_eq!(
        board
            .claim(&task.id, &agent("alice"))
            .await
            .unwrap_err()
            .code(),
        "task_store_corrupt"
    );
    assert_eq!(
        board.get(&task.id).await.unwrap().status,
        TaskStatus::Pending
    );
}

/// The lead's lock, held for a whole run, is not the task board's: a board change of the same
/// team goes through while a lead holds it (they once shared a key, and every change waited
/// for the run to end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_lead_does_not_block_the_task_board() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.as_ref().unwrap();
    let _lead = troupe::store::postgres::lead_lock(pg)
        .await
        .unwrap()
        .expect("the lead lock is free");
    let board = s.board();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _ = done.send(
            runtime
                .block_on(board.create(new_task("while a lead runs", vec![])))
                .map(|t| t.id),
        );
    });
    let created = finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("a board change waited for the lead's lock");
    assert!(created.is_ok(), "{created:?}");
}

/// Claims carry a fresh token and a lease of the board's length; completing needs the owner,
/// its token, and a lease that has not run out.
async fn a_claim_is_live_only_with_its_token_and_before_its_lease_runs_out(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let board = s.board_with_lease(Duration::from_secs(60));
    let a = board.create(new_task("a", vec![])).await.unwrap();
    let claimed = board.claim(&a.id, &agent("alice")).await.unwrap();
    let lease = claimed.lease.unwrap();
    assert_eq!(lease.expires_at_utc.millis_since(s.clock.now()), 60_000);
    // Another instance (process) sees the same lease.
    assert_eq!(s.board().get(&a.id).await.unwrap().lease, Some(lease));
    assert_eq!(
        board
            .complete(&a.id, &agent("alice"), &no_claim())
            .await
            .unwrap_err()
            .code(),
        "task_lease_lost"
    );
    s.clock.advance_millis(60_000);
    let late = board
        .complete(&a.id, &agent("alice"), &lease.token)
        .await
        .unwrap_err();
    assert_eq!(late.code(), "task_lease_lost");
    assert!(late.to_string().contains("lease ran out"), "{late}");
    // Nothing changed: the task is still alice's until it is expired or claimed again.
    assert_eq!(board.get(&a.id).await.unwrap(), claimed);
}

/// A lease that ran out: `expire` returns the task to pending once, recording who held it; a
/// second expire is refused; the next claimer gets a new token; the stale holder can neither
/// complete nor renew, and the new holder completes it exactly once.
async fn an_expired_lease_returns_the_task_once_and_the_stale_holder_cannot_complete(
    backend: Backend,
) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let board = s.board_with_lease(Duration::from_secs(30));
    let a = board.create(new_task("a", vec![])).await.unwrap();
    let b = board.create(new_task("b", vec![])).await.unwrap();
    let first = board
        .claim(&a.id, &agent("alice"))
        .await
        .unwrap()
        .lease
        .unwrap();
    assert_eq!(board.expire(&a.id).await.unwrap_err().code(), "task_state");
    s.clock.advance_millis(30_000);
    let returned = board.expire(&a.id).await.unwrap();
    assert_eq!(returned.status, TaskStatus::Pending);
    assert_eq!(returned.owner, None);
    assert_eq!(returned.lease, None);
    let why = returned.returned.clone().unwrap();
    assert_eq!(why.owner, agent("alice"));
    assert!(why.reason.contains("lease ran out"), "{}", why.reason);
    assert_eq!(board.expire(&a.id).await.unwrap_err().code(), "task_state");
    assert_eq!(
        board
            .complete(&a.id, &agent("alice"), &first.token)
            .await
            .unwrap_err()
            .code(),
        "task_state"
    );
    let second = board
        .claim(&a.id, &agent("bob"))
        .await
        .unwrap()
        .lease
        .unwrap();
    assert_ne!(second.token, first.token);
    assert_eq!(
        board
            .renew(&a.id, &agent("alice"), &first.token)
            .await
            .unwrap_err()
            .code(),
        "task_claimed"
    );
    assert_eq!(
        board
            .complete(&a.id, &agent("bob"), &second.token)
            .await
            .unwrap()
            .status,
        TaskStatus::Completed
    );
    assert_eq!(
        board
            .complete(&a.id, &agent("bob"), &second.token)
            .await
            .unwrap_err()
            .code(),
        "task_state"
    );
    // A claim of a task whose lease ran out (not yet expired by anyone) takes it over in one
    // step, recording why it came back.
    let old = board
        .claim(&b.id, &agent("alice"))
        .await
        .unwrap()
        .lease
        .unwrap();
    s.clock.advance_millis(30_000);
    let taken = board.claim(&b.id, &agent("carol")).await.unwrap();
    assert_eq!(taken.owner, Some(agent("carol")));
    assert_eq!(taken.returned.unwrap().owner, agent("alice"));
    assert_eq!(
        board
            .complete(&b.id, &agent("alice"), &old.token)
            .await
            .unwrap_err()
            .code(),
        "task_claimed"
    );
    // The same agent claiming again gets a new token: the old one is stale.
    s.clock.advance_millis(30_000);
    let carol_old = s.board().get(&b.id).await.unwrap().lease.unwrap();
    let carol_new = board
        .claim(&b.id, &agent("carol"))
        .await
        .unwrap()
        .lease
        .unwrap();
    assert_ne!(carol_new.token, carol_old.token);
    assert_eq!(
        board
            .complete(&b.id, &agent("carol"), &carol_old.token)
            .await
            .unwrap_err()
            .code(),
        "task_lease_lost"
    );
}

/// Renewing moves the lease on from now; a release gives the task back with its reason.
async fn renewing_keeps_a_claim_live_and_a_release_gives_it_back(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let board = s.board_with_lease(Duration::from_secs(30));
    let a = board.create(new_task("a", vec![])).await.unwrap();
    let lease = board
        .claim(&a.id, &agent("alice"))
        .await
        .unwrap()
        .lease
        .unwrap();
    for _ in 0..3 {
        s.clock.advance_millis(20_000);
        let renewed = board
            .renew(&a.id, &agent("alice"), &lease.token)
            .await
            .unwrap();
        assert_eq!(
            renewed
                .lease
                .unwrap()
                .expires_at_utc
                .millis_since(s.clock.now()),
            30_000
        );
    }
    assert_eq!(
        board
            .renew(&a.id, &agent("bob"), &lease.token)
            .await
            .unwrap_err()
            .code(),
        "task_claimed"
    );
    let released = board
        .release(&a.id, &agent("alice"), &lease.token, "alice shut down")
        .await
        .unwrap();
    assert_eq!(released.status, TaskStatus::Pending);
    assert_eq!(
        released.returned.unwrap().reason,
        "released: alice shut down"
    );
    assert_eq!(
        board
            .release(&a.id, &agent("alice"), &lease.token, "again")
            .await
            .unwrap_err()
            .code(),
        "task_state"
    );
}

/// Tags and the assignee are stored (lowercased, repeats kept once) and read back by another
/// instance; only the assignee may claim an assigned task; bad tags are refused.
async fn tags_and_the_assignee_are_kept_and_an_assigned_task_is_its_assignees(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let board = s.board();
    let task = board
        .create(NewTask {
            subject: "docs".into(),
            tags: vec!["Docs".into(), "rust".into(), "docs".into()],
            assignee: Some(agent("bob")),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(task.tags, ["docs", "rust"]);
    assert_eq!(s.board().get(&task.id).await.unwrap(), task);
    let refused = board.claim(&task.id, &agent("alice")).await.unwrap_err();
    assert_eq!(refused.code(), "task_state");
    assert!(refused.to_string().contains("assigned to bob"), "{refused}");
    assert_eq!(
        board.claim(&task.id, &agent("bob")).await.unwrap().owner,
        Some(agent("bob"))
    );
    for bad in ["", "two words", "x".repeat(41).as_str(), "semi;colon"] {
        let err = board
            .create(NewTask {
                subject: "t".into(),
                tags: vec![bad.to_owned()],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), "invalid_arguments", "{bad:?}");
    }
}

/// Claims and completes `id` as `who`.
async fn finish(board: &dyn TaskBoard, id: &TaskId, who: &str) {
    let claimed = board.claim(id, &agent(who)).await.unwrap();
    let token = claimed.lease.unwrap().token;
    board.complete(id, &agent(who), &token).await.unwrap();
}

/// One gc pass over the backend's own state (the workspace's files, or the team's tables).
async fn gc(s: &Stores, tasks: Rule, dry_run: bool) -> Report {
    let mut policy = Policy::default();
    policy.set(Kind::Tasks, tasks);
    let sweep = Sweep {
        policy,
        now: s.clock.now(),
        dry_run,
    };
    let mut report = Report::new(dry_run);
    match &s.pg {
        Some(pg) => PgState::new(pg.clone()).prune(&sweep, &mut report).await,
        None => {
            FileState::new(s.layout.clone())
                .prune(&sweep, &mut report)
                .await
        }
    }
    .unwrap();
    report
}

async fn gc_removes_finished_tasks_past_their_age_and_what_stays_still_loads(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let board = s.board();
    let day = 24 * 3600 * 1000;
    // Day 0: a <- b finished (they go together); c finished, but d (pending) is blocked by
    // it; e claimed and never finished.
    let a = board.create(new_task("a", vec![])).await.unwrap();
    finish(&*board, &a.id, "alice").await;
    let b = board.create(new_task("b", vec![a.id])).await.unwrap();
    finish(&*board, &b.id, "alice").await;
    let c = board.create(new_task("c", vec![])).await.unwrap();
    finish(&*board, &c.id, "alice").await;
    let d = board.create(new_task("d", vec![c.id])).await.unwrap();
    let e = board.create(new_task("e", vec![])).await.unwrap();
    board.claim(&e.id, &agent("bob")).await.unwrap();
    // Day 39: f finished, within the age at day 40.
    s.clock.advance_millis(39 * day);
    let f = board.create(new_task("f", vec![])).await.unwrap();
    finish(&*board, &f.id, "alice").await;
    s.clock.advance_millis(day);
    let thirty_days = Rule {
        age: Some(Duration::from_secs(30 * 24 * 3600)),
        size: None,
    };
    let subjects = |tasks: Vec<Task>| tasks.into_iter().map(|t| t.subject).collect::<Vec<_>>();
    let all = subjects(board.list().await.unwrap());

    let dry = gc(&s, thirty_days, true).await;
    assert_eq!(
        subjects(board.list().await.unwrap()),
        all,
        "a dry run removed tasks"
    );
    let report = gc(&s, thirty_days, false).await;
    assert_eq!(
        report,
        Report {
            dry_run: false,
            ..dry
        },
        "the dry run said what gc did"
    );
    let tasks = &report.kinds[&Kind::Tasks];
    assert_eq!(tasks.removed.items, 2, "{report:?}");
    let kept = |why: &str| tasks.kept.get(why).map_or(0, |t| t.items);
    assert_eq!(kept(needed::UNFINISHED_TASK), 2);
    assert_eq!(kept(needed::BLOCKS_A_TASK), 1);
    assert_eq!(kept(WITHIN_AGE), 1);

    // What stays loads and works: d's blocker c is there and completed, so d is claimable; a
    // removed task can no longer be named as a blocker.
    assert_eq!(subjects(board.list().await.unwrap()), ["c", "d", "e", "f"]);
    board.claim(&d.id, &agent("alice")).await.unwrap();
    board.create(new_task("g", vec![c.id])).await.unwrap();
    let err = board.create(new_task("h", vec![a.id])).await.unwrap_err();
    assert_eq!(err.code(), "task_not_found", "{err}");
    // A second gc finds nothing more to remove.
    let again = gc(&s, thirty_days, false).await;
    assert_eq!(again.kinds[&Kind::Tasks].removed.items, 0, "{again:?}");
}
