use std::time::Duration;

use troupe_wire::UtcTime;

use super::finished_to_remove;
use crate::store::retention::{needed, Kind, Policy, Report, Rule, Sweep, WITHIN_AGE};
use crate::store::tasks::rules::{self, Tasks};
use crate::store::tasks::{NewTask, TaskId, TaskStatus};

const HOUR_MS: i64 = 3_600_000;
const NOW_MS: i64 = 1_800_000_000_000;

fn id(n: u128) -> TaskId {
    TaskId::from_uuid(uuid::Builder::from_random_bytes(n.to_be_bytes()).into_uuid()).unwrap()
}

/// Adds task `n` to `tasks`, blocked by `blockers`, last changed `hours_ago`; completed or
/// still pending.
fn add(tasks: &mut Tasks, n: u128, blockers: &[u128], hours_ago: i64, completed: bool) {
    let at = UtcTime::from_unix_millis(NOW_MS - hours_ago * HOUR_MS).unwrap();
    let new = NewTask {
        subject: format!("task {n}"),
        description: None,
        blocked_by: blockers.iter().map(|b| id(*b)).collect(),
        tags: Vec::new(),
        assignee: None,
    };
    let mut task = rules::create(tasks, id(n), new, at).unwrap();
    if completed {
        task.status = TaskStatus::Completed;
    }
    tasks.insert(task.id, task);
}

fn sweep(rule: Rule) -> Sweep {
    let mut policy = Policy::default();
    policy.set(Kind::Tasks, rule);
    Sweep {
        policy,
        now: UtcTime::from_unix_millis(NOW_MS).unwrap(),
        dry_run: false,
    }
}

fn older_than_a_day() -> Sweep {
    sweep(Rule {
        age: Some(Duration::from_secs(24 * 3600)),
        size: None,
    })
}

fn gone(tasks: &Tasks, sweep: &Sweep, report: &mut Report) -> Vec<u128> {
    let mut gone: Vec<u128> = finished_to_remove(tasks, |_| 100, sweep, report)
        .into_iter()
        .map(|(task, bytes)| {
            assert_eq!(bytes, 100);
            (1..=20).find(|n| id(*n) == task).unwrap()
        })
        .collect();
    gone.sort_unstable();
    gone
}

fn kept(report: &Report, why: &str) -> u64 {
    report.kinds[&Kind::Tasks]
        .kept
        .get(why)
        .map_or(0, |t| t.items)
}

#[test]
fn only_finished_tasks_past_their_age_go() {
    let mut tasks = Tasks::new();
    add(&mut tasks, 1, &[], 48, true);
    add(&mut tasks, 2, &[], 2, true);
    add(&mut tasks, 3, &[], 48, false);
    let mut report = Report::new(false);
    assert_eq!(gone(&tasks, &older_than_a_day(), &mut report), [1]);
    assert_eq!(kept(&report, WITHIN_AGE), 1);
    assert_eq!(kept(&report, needed::UNFINISHED_TASK), 1);
}

#[test]
fn the_blockers_of_a_task_that_stays_stay_down_the_chain() {
    let mut tasks = Tasks::new();
    // 1 <- 2 <- 3 (pending): 1 and 2 are old and finished, and both stay.
    add(&mut tasks, 1, &[], 72, true);
    add(&mut tasks, 2, &[1], 60, true);
    add(&mut tasks, 3, &[2], 50, false);
    // 4 <- 5, both old and finished: they go together.
    add(&mut tasks, 4, &[], 72, true);
    add(&mut tasks, 5, &[4], 60, true);
    // 6 <- 7 (finished within the age): 6 stays for 7.
    add(&mut tasks, 6, &[], 72, true);
    add(&mut tasks, 7, &[6], 1, true);
    let mut report = Report::new(false);
    assert_eq!(gone(&tasks, &older_than_a_day(), &mut report), [4, 5]);
    assert_eq!(kept(&report, needed::BLOCKS_A_TASK), 3);
    // What stays loads: every blocker of a staying task is there.
    let mut left = tasks.clone();
    left.retain(|task, _| ![id(4), id(5)].contains(task));
    rules::check_graph(&left).unwrap();
}

#[test]
fn a_size_rule_never_takes_a_blocker_of_a_task_it_keeps() {
    let mut tasks = Tasks::new();
    // Newest first fill 250 bytes: 3 and 2 stay, 1 would go, but 2 names it.
    add(&mut tasks, 1, &[], 3, true);
    add(&mut tasks, 2, &[1], 2, true);
    add(&mut tasks, 3, &[], 1, true);
    add(&mut tasks, 4, &[], 4, true);
    let size = sweep(Rule {
        age: None,
        size: Some(250),
    });
    let mut report = Report::new(false);
    assert_eq!(gone(&tasks, &size, &mut report), [4]);
    assert_eq!(kept(&report, needed::BLOCKS_A_TASK), 1);
}
