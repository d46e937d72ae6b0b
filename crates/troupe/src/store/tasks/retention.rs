//! Which finished tasks gc may remove (`[retention] tasks`), decided over a whole board by the
//! one rule engine, for the file board and the PostgreSQL board alike.
//!
//! A completed task's time is its completion (a completed task never changes again). What is
//! never removed: a task that is not completed (pending or claimed), and the blockers of every
//! task that stays — a board whose task names a missing blocker does not load (`rules::
//! check_graph`), and a missing blocker would count as open forever. A chain of finished
//! tasks past their age goes together; one that a staying task names keeps its own blockers.

use std::collections::BTreeMap;

use super::rules::Tasks;
use super::{Task, TaskId, TaskStatus};
use crate::store::retention::{decide, needed, Candidate, Kind, Report, Sweep};

/// The finished tasks `sweep` lets go, with their bytes (`bytes_of`: a task's size in its
/// backend). Every task kept is recorded in `report` with its reason; the caller removes those
/// returned and records them with [`Report::removed`].
pub fn finished_to_remove(
    tasks: &Tasks,
    bytes_of: impl Fn(&Task) -> u64,
    sweep: &Sweep,
    report: &mut Report,
) -> Vec<(TaskId, u64)> {
    let candidates = tasks
        .values()
        .map(|task| Candidate {
            item: task.id,
            at: task.updated_at_utc,
            bytes: bytes_of(task),
            needed: (task.status != TaskStatus::Completed).then_some(needed::UNFINISHED_TASK),
        })
        .collect();
    let mut gone: BTreeMap<TaskId, u64> = decide(Kind::Tasks, sweep, candidates, report)
        .into_iter()
        .collect();
    // Every task that stays must still find its blockers; keeping one may keep its own.
    loop {
        let named: Vec<TaskId> = tasks
            .values()
            .filter(|task| !gone.contains_key(&task.id))
            .flat_map(|task| task.blocked_by.iter().copied())
            .filter(|blocker| gone.contains_key(blocker))
            .collect();
        if named.is_empty() {
            break;
        }
        for id in named {
            if let Some(bytes) = gone.remove(&id) {
                report.kept(Kind::Tasks, needed::BLOCKS_A_TASK, bytes);
            }
        }
    }
    gone.into_iter().collect()
}

#[cfg(test)]
mod tests;
