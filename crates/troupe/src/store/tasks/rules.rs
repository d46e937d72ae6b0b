//! The task board's transitions as pure functions: given every task and the time, what the
//! changed task is, or why the change is refused. No I/O, so each rule is tested directly and
//! both board implementations apply the same rules.

use std::collections::{BTreeMap, HashSet};

use troupe_wire::{AgentName, UtcTime};

use std::time::Duration;

use super::{
    check_tag, ClaimToken, Lease, NewTask, Returned, Task, TaskError, TaskId, TaskStatus,
    MAX_BLOCKERS, MAX_DESCRIPTION_CHARS, MAX_SUBJECT_CHARS, MAX_TAGS,
};

/// Every task of a board, by id.
pub type Tasks = BTreeMap<TaskId, Task>;

/// The task `new` becomes under `id`, or why it is refused.
pub fn create(tasks: &Tasks, id: TaskId, new: NewTask, now: UtcTime) -> Result<Task, TaskError> {
    let subject = new.subject.trim();
    if subject.is_empty() {
        return Err(TaskError::Invalid("the subject is blank".to_owned()));
    }
    if subject.chars().count() > MAX_SUBJECT_CHARS {
        return Err(TaskError::Invalid(format!(
            "the subject is longer than {MAX_SUBJECT_CHARS} characters; put details in the description"
        )));
    }
    let description = new.description.unwrap_or_default();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(TaskError::Invalid(format!(
            "the description is longer than {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    if tasks.contains_key(&id) {
        return Err(TaskError::IdTaken(id));
    }
    // Repeating a blocker says nothing new; keep the first mention, in the order given.
    let mut blocked_by: Vec<TaskId> = Vec::new();
    for blocker in new.blocked_by {
        if !blocked_by.contains(&blocker) {
            blocked_by.push(blocker);
        }
    }
    if blocked_by.len() > MAX_BLOCKERS {
        return Err(TaskError::Invalid(format!(
            "a task may be blocked by at most {MAX_BLOCKERS} tasks"
        )));
    }
    if blocked_by.contains(&id) {
        return Err(TaskError::Invalid(format!(
            "task {id} cannot be blocked by itself"
        )));
    }
    if let Some(unknown) = blocked_by.iter().find(|b| !tasks.contains_key(b)) {
        return Err(TaskError::UnknownBlocker(*unknown));
    }
    let mut tags: Vec<String> = Vec::new();
    for tag in new.tags {
        let tag = tag.trim().to_lowercase();
        check_tag(&tag).map_err(TaskError::Invalid)?;
        if !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(TaskError::Invalid(format!(
            "a task may carry at most {MAX_TAGS} tags"
        )));
    }
    let task = Task {
        id,
        subject: subject.to_owned(),
        description: description.trim().to_owned(),
        blocked_by,
        status: TaskStatus::Pending,
        owner: None,
        tags,
        assignee: new.assignee,
        lease: None,
        returned: None,
        created_at_utc: now,
        updated_at_utc: now,
    };
    refuse_cycle(tasks, &task)?;
    Ok(task)
}

/// The claimed task, or why `agent` cannot claim it. The claim gets `token` and a lease of
/// `lease` from `now`. An in-progress task whose lease ran out is claimable: it is returned
/// (recorded in `returned`) and claimed in the same step.
pub fn claim(
    tasks: &Tasks,
    id: &TaskId,
    agent: &AgentName,
    now: UtcTime,
    token: ClaimToken,
    lease: Duration,
) -> Result<Task, TaskError> {
    let stored = tasks.get(id).ok_or(TaskError::NotFound(*id))?;
    let returned;
    let task = if stored.lease_expired(now) {
        returned = expire(tasks, id, now)?;
        &returned
    } else {
        stored
    };
    match (task.status, &task.owner) {
        (TaskStatus::Pending, None) => {}
        (TaskStatus::InProgress, Some(owner)) => {
            return Err(TaskError::Claimed {
                id: *id,
                owner: owner.clone(),
                hint: if owner == agent {
                    " (you): it is yours already"
                } else {
                    ""
                },
            })
        }
        (status, owner) => {
            return Err(TaskError::State {
                id: *id,
                status,
                message: match owner {
                    Some(owner) => format!("it was completed by {owner} and cannot be claimed"),
                    None => "it cannot be claimed".to_owned(),
                },
            })
        }
    }
    if let Some(assignee) = task.assignee.as_ref().filter(|a| *a != agent) {
        return Err(TaskError::State {
            id: *id,
            status: task.status,
            message: format!("it is assigned to {assignee}; only {assignee} may claim it"),
        });
    }
    let open = open_blockers(tasks, task);
    if !open.is_empty() {
        return Err(TaskError::Blocked { id: *id, open });
    }
    Ok(Task {
        status: TaskStatus::InProgress,
        owner: Some(agent.clone()),
        lease: Some(Lease {
            token,
            expires_at_utc: lease_end(now, lease)?,
        }),
        updated_at_utc: later(task.updated_at_utc, now),
        ..task.clone()
    })
}

/// When a lease of `lease` taken at `now` runs out.
fn lease_end(now: UtcTime, lease: Duration) -> Result<UtcTime, TaskError> {
    now.checked_add(lease)
        .ok_or_else(|| TaskError::Invalid(format!("a lease of {lease:?} is out of range")))
}

/// The task whose live claim `agent` holds with `token`, or why the claim is not live. A
/// task claimed before leases existed (no lease) is its owner's without a token.
fn live_claim<'a>(
    tasks: &'a Tasks,
    id: &TaskId,
    agent: &AgentName,
    token: &ClaimToken,
    now: UtcTime,
) -> Result<&'a Task, TaskError> {
    let task = tasks.get(id).ok_or(TaskError::NotFound(*id))?;
    match (task.status, &task.owner) {
        (TaskStatus::InProgress, Some(owner)) if owner == agent => {}
        (TaskStatus::InProgress, Some(owner)) => {
            return Err(TaskError::Claimed {
                id: *id,
                owner: owner.clone(),
                hint: "; only its owner can complete it",
            })
        }
        (TaskStatus::Pending, _) => {
            return Err(TaskError::State {
                id: *id,
                status: task.status,
                message: match &task.returned {
                    Some(r) if &r.owner == agent => format!(
                        "it came back to the board at {} ({}); claim it again",
                        r.at_utc, r.reason
                    ),
                    _ => "it is not claimed; claim it before completing it".to_owned(),
                },
            })
        }
        (status, _) => {
            return Err(TaskError::State {
                id: *id,
                status,
                message: "it is completed already".to_owned(),
            })
        }
    }
    match &task.lease {
        None => Ok(task),
        Some(lease) if lease.token != *token => Err(TaskError::LeaseLost {
            id: *id,
            message: format!(
                "it was claimed again since (claim {}); yours was {token}",
                lease.token
            ),
        }),
        Some(lease) if lease.expires_at_utc <= now => Err(TaskError::LeaseLost {
            id: *id,
            message: format!(
                "its lease ran out at {}; the task goes back to the board",
                lease.expires_at_utc
            ),
        }),
        Some(_) => Ok(task),
    }
}

/// The task with the live claim of `agent` extended by `lease` from `now`.
pub fn renew(
    tasks: &Tasks,
    id: &TaskId,
    agent: &AgentName,
    token: &ClaimToken,
    now: UtcTime,
    lease: Duration,
) -> Result<Task, TaskError> {
    let task = live_claim(tasks, id, agent, token, now)?;
    Ok(Task {
        lease: task.lease.map(|l| Lease {
            expires_at_utc: lease_end(now, lease).unwrap_or(l.expires_at_utc),
            ..l
        }),
        updated_at_utc: later(task.updated_at_utc, now),
        ..task.clone()
    })
}

/// The completed task, or why `agent` cannot complete it with `token`.
pub fn complete(
    tasks: &Tasks,
    id: &TaskId,
    agent: &AgentName,
    token: &ClaimToken,
    now: UtcTime,
) -> Result<Task, TaskError> {
    let task = live_claim(tasks, id, agent, token, now)?;
    Ok(Task {
        status: TaskStatus::Completed,
        lease: None,
        updated_at_utc: later(task.updated_at_utc, now),
        ..task.clone()
    })
}

/// The task back in `pending` because its lease ran out by `now`, or why not.
pub fn expire(tasks: &Tasks, id: &TaskId, now: UtcTime) -> Result<Task, TaskError> {
    let task = tasks.get(id).ok_or(TaskError::NotFound(*id))?;
    match (&task.owner, &task.lease) {
        (Some(owner), Some(lease)) if task.lease_expired(now) => {
            let reason = format!("its lease ran out at {}", lease.expires_at_utc);
            Ok(returned(task, owner, now, reason))
        }
        _ => Err(TaskError::State {
            id: *id,
            status: task.status,
            message: "it has no lease that ran out".to_owned(),
        }),
    }
}

/// The task back in `pending` because `agent` let its live claim go, for `reason`.
pub fn release(
    tasks: &Tasks,
    id: &TaskId,
    agent: &AgentName,
    token: &ClaimToken,
    now: UtcTime,
    reason: &str,
) -> Result<Task, TaskError> {
    let task = live_claim(tasks, id, agent, token, now)?;
    Ok(returned(task, agent, now, format!("released: {reason}")))
}

fn returned(task: &Task, owner: &AgentName, now: UtcTime, reason: String) -> Task {
    Task {
        status: TaskStatus::Pending,
        owner: None,
        lease: None,
        returned: Some(Returned {
            owner: owner.clone(),
            at_utc: later(task.updated_at_utc, now),
            reason,
        }),
        updated_at_utc: later(task.updated_at_utc, now),
        ..task.clone()
    }
}

/// The blockers of `task` that are not completed, in the order they were given. A blocker
/// missing from `tasks` counts as open: it can never be completed.
pub fn open_blockers(tasks: &Tasks, task: &Task) -> Vec<TaskId> {
    task.blocked_by
        .iter()
        .filter(|b| tasks.get(b).map(|t| t.status) != Some(TaskStatus::Completed))
        .copied()
        .collect()
}

/// Checks a whole board as loaded: every blocker exists and the graph has no cycle.
pub fn check_graph(tasks: &Tasks) -> Result<(), String> {
    for task in tasks.values() {
        if let Some(unknown) = task.blocked_by.iter().find(|b| !tasks.contains_key(b)) {
            return Err(format!(
                "task {} is blocked by {unknown}, which does not exist",
                task.id
            ));
        }
    }
    let mut cleared: HashSet<TaskId> = HashSet::new();
    let blockers = |id: &TaskId| tasks.get(id).map_or(&[][..], |t| t.blocked_by.as_slice());
    for task in tasks.values() {
        if let Some(cycle) = find_cycle(&blockers, task.id, &mut cleared) {
            return Err(format!("dependency cycle {}", render_cycle(&cycle)));
        }
    }
    Ok(())
}

/// Refuses `task` if adding it to `tasks` (or replacing the task of the same id) closes a cycle.
/// Only a task reachable from itself can be on a new cycle, so one walk from it suffices.
fn refuse_cycle(tasks: &Tasks, task: &Task) -> Result<(), TaskError> {
    // The graph as it would be, without copying the board: `task` overlays its stored self.
    let blockers = |id: &TaskId| {
        if *id == task.id {
            task.blocked_by.as_slice()
        } else {
            tasks.get(id).map_or(&[][..], |t| t.blocked_by.as_slice())
        }
    };
    match find_cycle(&blockers, task.id, &mut HashSet::new()) {
        Some(cycle) => Err(TaskError::Invalid(format!(
            "blocked_by would create a dependency cycle: {}",
            render_cycle(&cycle)
        ))),
        None => Ok(()),
    }
}

/// A cycle reachable from `start`, as the path that closes it. `cleared` holds tasks already
/// known to reach no cycle, so checking a whole board is linear.
fn find_cycle<'a>(
    blockers_of: &impl Fn(&TaskId) -> &'a [TaskId],
    start: TaskId,
    cleared: &mut HashSet<TaskId>,
) -> Option<Vec<TaskId>> {
    if cleared.contains(&start) {
        return None;
    }
    // Iterative depth-first walk: a deep chain of blockers must not overflow the stack.
    // `stack` is the current path, each task with the index of its next blocker to visit.
    let mut stack: Vec<(TaskId, usize)> = vec![(start, 0)];
    let mut on_path: HashSet<TaskId> = HashSet::from([start]);
    while let Some((id, next)) = stack.last().copied() {
        match blockers_of(&id).get(next) {
            Some(&blocker) => {
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                if on_path.contains(&blocker) {
                    let at = stack.iter().position(|(p, _)| *p == blocker).unwrap_or(0);
                    let mut cycle: Vec<TaskId> = stack[at..].iter().map(|(p, _)| *p).collect();
                    cycle.push(blocker);
                    return Some(cycle);
                }
                if !cleared.contains(&blocker) {
                    stack.push((blocker, 0));
                    on_path.insert(blocker);
                }
            }
            None => {
                stack.pop();
                on_path.remove(&id);
                cleared.insert(id);
            }
        }
    }
    None
}

fn render_cycle(cycle: &[TaskId]) -> String {
    cycle
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// A task's times never go backwards, even if the injected clock does: they are shown to
/// people, and `created ≤ updated` is checked on load.
fn later(a: UtcTime, b: UtcTime) -> UtcTime {
    a.max(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::error::ErrorCode;
    use crate::ids::{IdGenerator, SequentialIds};

    fn id(ids: &SequentialIds) -> TaskId {
        TaskId::from_uuid(ids.next_uuid()).unwrap()
    }

    fn add(tasks: &mut Tasks, ids: &SequentialIds, blocked_by: Vec<TaskId>) -> TaskId {
        let now = ManualClock::at_spec_epoch().now();
        let new = NewTask {
            subject: "s".into(),
            blocked_by,
            ..NewTask::default()
        };
        let task = create(tasks, id(ids), new, now).unwrap();
        let task_id = task.id;
        tasks.insert(task_id, task);
        task_id
    }

    #[test]
    fn a_cycle_made_by_replacing_a_task_is_refused() {
        // Creation cannot close a cycle, so build one by hand: a is blocked by b, then b is
        // rewritten to be blocked by a.
        let ids = SequentialIds::new();
        let mut tasks = Tasks::new();
        let b = add(&mut tasks, &ids, vec![]);
        let a = add(&mut tasks, &ids, vec![b]);
        let mut b_task = tasks[&b].clone();
        b_task.blocked_by = vec![a];
        let err = refuse_cycle(&tasks, &b_task).unwrap_err();
        assert_eq!(err.code(), "invalid_arguments");
        assert_eq!(
            err.to_string(),
            format!("blocked_by would create a dependency cycle: {b} -> {a} -> {b}")
        );
        tasks.insert(b, b_task);
        assert_eq!(
            check_graph(&tasks).unwrap_err(),
            format!("dependency cycle {b} -> {a} -> {b}")
        );
    }

    #[test]
    fn diamonds_are_not_cycles() {
        let ids = SequentialIds::new();
        let mut tasks = Tasks::new();
        let root = add(&mut tasks, &ids, vec![]);
        let left = add(&mut tasks, &ids, vec![root]);
        let right = add(&mut tasks, &ids, vec![root]);
        add(&mut tasks, &ids, vec![left, right, root]);
        assert_eq!(check_graph(&tasks), Ok(()));
    }

    #[test]
    fn a_long_chain_does_not_overflow() {
        let ids = SequentialIds::new();
        let mut tasks = Tasks::new();
        let first = add(&mut tasks, &ids, vec![]);
        // Built by hand: creating each link through `create` walks the chain every time.
        let mut last = tasks[&first].clone();
        for _ in 0..100_000 {
            let next = Task {
                id: id(&ids),
                blocked_by: vec![last.id],
                ..last.clone()
            };
            tasks.insert(next.id, next.clone());
            last = next;
        }
        assert_eq!(check_graph(&tasks), Ok(()));
        let looped = Task {
            blocked_by: vec![last.id],
            ..tasks[&first].clone()
        };
        assert!(refuse_cycle(&tasks, &looped).is_err());
    }

    #[test]
    fn repeated_blockers_are_kept_once() {
        let ids = SequentialIds::new();
        let mut tasks = Tasks::new();
        let a = add(&mut tasks, &ids, vec![]);
        let b = add(&mut tasks, &ids, vec![a, a]);
        assert_eq!(tasks[&b].blocked_by, vec![a]);
    }

    #[test]
    fn times_never_go_backwards() {
        let ids = SequentialIds::new();
        let clock = ManualClock::at_spec_epoch();
        let mut tasks = Tasks::new();
        let a = add(&mut tasks, &ids, vec![]);
        clock.advance_millis(-5_000);
        let token = ClaimToken::from_uuid(ids.next_uuid()).unwrap();
        let lease = Duration::from_secs(60);
        let claimed = claim(&tasks, &a, &AgentName::lead(), clock.now(), token, lease).unwrap();
        assert_eq!(claimed.updated_at_utc, claimed.created_at_utc);
        assert_eq!(claimed.check(), Ok(()));
    }
}
