//! Work from the task board (SPEC §12): what an idle teammate pulls, and the leases behind it.
//!
//! - [`BoardWork::next_for`]: the next task that fits a teammate — pending (or with a lease that
//!   ran out), every blocker completed, assigned to it or unassigned with no tags or a tag among
//!   its skills — claimed for it through [`HeldClaims`], oldest first. Two teammates racing
//!   for one task: the board gives it to one, the other takes the next.
//! - [`BoardWork::anything_for`]: the same question without claiming, to decide whom a board
//!   change wakes. Nothing polls: a teammate is woken by a board change (a task created,
//!   completed, released, or returned by an expired lease), and goes idle when nothing fits.
//! - [`BoardWork::return_claims_of`]: at a takeover, the claims a teammate's earlier worker
//!   made come back to the board at once, fenced by their tokens, instead of sitting
//!   `in_progress` until their lease runs out.
//! - [`keep_leases`]: one task per process that renews every claim held here at a third of the
//!   lease, and returns tasks whose lease ran out (reporting each); it sleeps until the next
//!   renewal or expiry, and waits without a timer while there is nothing to renew or expire.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, UtcTime};

use crate::clock::Clock;
use crate::store::tasks::{HeldClaims, Task, TaskError, TaskId, TaskStatus, TaskView};

/// The board as a source of work for teammates.
pub struct BoardWork {
    claims: Arc<HeldClaims>,
    clock: Arc<dyn Clock>,
    /// How long a claim lasts unless renewed (the board's lease): renewals run at a third.
    lease: Duration,
    /// Signalled on every board change made through this process: the keeper looks again.
    changed: Notify,
}

/// What the keeper reports: a task whose lease ran out came back to the board. The keeper
/// awaits what it returns (the team wakes whom the task fits) before it looks on.
pub type ExpiredSink =
    Arc<dyn Fn(&Task) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

impl BoardWork {
    pub fn new(claims: Arc<HeldClaims>, clock: Arc<dyn Clock>, lease: Duration) -> Self {
        Self {
            claims,
            clock,
            lease,
            changed: Notify::new(),
        }
    }

    pub fn claims(&self) -> &Arc<HeldClaims> {
        &self.claims
    }

    /// A board change happened here: the keeper looks at the board again.
    pub fn note_change(&self) {
        self.changed.notify_one();
    }

    /// Claims the next task that fits `agent` with `skills`, oldest first; `None` when none
    /// does.
    pub async fn next_for(
        &self,
        agent: &AgentName,
        skills: &[String],
    ) -> Result<Option<Task>, TaskError> {
        for id in self.candidates(agent, skills).await? {
            match self.claims.claim(&id, agent).await {
                Ok(task) => return Ok(Some(task)),
                // Someone else took it (or a blocker reopened): the next one.
                Err(
                    TaskError::Claimed { .. }
                    | TaskError::State { .. }
                    | TaskError::Blocked { .. }
                    | TaskError::NotFound(_),
                ) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Of `agents` (each with its skills), those that some task on the board fits now: one
    /// read of the board for all of them.
    pub async fn who_has_work<'a>(
        &self,
        agents: impl IntoIterator<Item = (&'a AgentName, Vec<String>)>,
    ) -> Vec<&'a AgentName> {
        let now = self.clock.now();
        let tasks = match self.claims.board().list().await {
            Ok(tasks) => tasks,
            Err(e) => {
                tracing::warn!("could not read the task board: {e}");
                return Vec::new();
            }
        };
        let views = crate::store::tasks::views(&tasks);
        let open: Vec<&Task> = claimable(&views, now).collect();
        agents
            .into_iter()
            .filter(|(agent, skills)| open.iter().any(|task| task.fits(agent, skills)))
            .map(|(agent, _)| agent)
            .collect()
    }

    /// Whether some task is in progress under a lease this process does not hold (a run or
    /// worker that died, or another process): it comes back to the board when the lease runs
    /// out, unless its holder completes it first.
    pub async fn held_elsewhere(&self) -> bool {
        match self.claims.board().list().await {
            Ok(tasks) => tasks.iter().any(|task| {
                task.status == TaskStatus::InProgress
                    && task.lease.is_some()
                    && task
                        .owner
                        .as_ref()
                        .is_some_and(|owner| !self.claims.holds(owner, &task.id))
            }),
            Err(e) => {
                tracing::warn!("could not read the task board: {e}");
                false
            }
        }
    }

    /// Returns to the board every task `agent` holds under a claim this process did not make:
    /// what an earlier incarnation of the teammate claimed in a process that died or lost the
    /// teammate's lease. Called when this process takes the teammate over: the teammate lease's
    /// new fencing token says the earlier holder can no longer act for it, so its claims need
    /// not wait for their own (longer) lease to run out. The claim token read with the task
    /// fences the return: a claim renewed meanwhile is returned, one completed or claimed
    /// again is left as it is.
    pub async fn return_claims_of(&self, agent: &AgentName, reason: &str) -> Vec<Task> {
        let tasks = match self.claims.board().list().await {
            Ok(tasks) => tasks,
            Err(e) => {
                tracing::warn!("could not read the task board to return {agent}'s claims: {e}");
                return Vec::new();
            }
        };
        let now = self.clock.now();
        let mut returned = Vec::new();
        for task in tasks {
            let Some(lease) = task.lease.filter(|_| task.status == TaskStatus::InProgress) else {
                continue;
            };
            if task.owner.as_ref() != Some(agent) || self.claims.holds(agent, &task.id) {
                continue;
            }
            let board = self.claims.board();
            let result = if task.lease_expired(now) {
                board.expire(&task.id).await
            } else {
                board.release(&task.id, agent, &lease.token, reason).await
            };
            match result {
                Ok(task) => returned.push(task),
                // Completed, claimed again or returned in between: nothing to do.
                Err(
                    TaskError::State { .. }
                    | TaskError::LeaseLost { .. }
                    | TaskError::Claimed { .. }
                    | TaskError::NotFound(_),
                ) => {}
                Err(e) => tracing::warn!(
                    "could not return {agent}'s claim on task {} to the board ({e}); its lease \
                     will run out",
                    task.id
                ),
            }
        }
        returned
    }

    /// The ids of the tasks `agent` could claim now, oldest first.
    async fn candidates(
        &self,
        agent: &AgentName,
        skills: &[String],
    ) -> Result<Vec<TaskId>, TaskError> {
        let now = self.clock.now();
        let tasks = self.claims.board().list().await?;
        Ok(claimable(&crate::store::tasks::views(&tasks), now)
            .filter(|task| task.fits(agent, skills))
            .map(|task| task.id)
            .collect())
    }

    /// Returns every task whose lease ran out by now; the earliest lease still running, if any.
    async fn sweep(&self, expired: &ExpiredSink) -> Option<UtcTime> {
        let now = self.clock.now();
        let tasks = match self.claims.board().list().await {
            Ok(tasks) => tasks,
            Err(e) => {
                tracing::warn!("could not read the task board to expire leases: {e}");
                return None;
            }
        };
        let mut next: Option<UtcTime> = None;
        for task in &tasks {
            let Some(lease) = task.lease.filter(|_| task.status == TaskStatus::InProgress) else {
                continue;
            };
            if lease.expires_at_utc > now {
                next = Some(next.map_or(lease.expires_at_utc, |n| n.min(lease.expires_at_utc)));
                continue;
            }
            match self.claims.board().expire(&task.id).await {
                Ok(returned) => expired(&returned).await,
                // Renewed, completed or taken over in between: nothing to do.
                Err(TaskError::State { .. }) => {}
                Err(e) => tracing::warn!("could not return task {} to the board: {e}", task.id),
            }
        }
        next
    }
}

/// The tasks of `views` that can be claimed at `now`: pending, or in progress with a lease that
/// ran out; every blocker completed.
fn claimable(views: &[TaskView], now: UtcTime) -> impl Iterator<Item = &Task> {
    views.iter().filter_map(move |view| {
        let task = &view.task;
        let open = task.status == TaskStatus::Pending || task.lease_expired(now);
        (open && view.open_blockers.is_empty()).then_some(task)
    })
}

/// Renews the claims held here and returns expired tasks until `closing`. `spans_processes`:
/// other processes claim from the same board, so claims this process never saw can expire —
/// the board is looked at again once per lease while any task is in progress.
pub async fn keep_leases(
    work: Arc<BoardWork>,
    expired: ExpiredSink,
    spans_processes: bool,
    closing: CancellationToken,
) {
    let renew_every = (work.lease / 3).max(Duration::from_millis(100));
    let mut next_renewal = tokio::time::Instant::now() + renew_every;
    loop {
        let next_expiry = work.sweep(&expired).await;
        let holding = !work.claims.is_empty();
        let now = work.clock.now();
        let until_expiry = next_expiry.map(|at| {
            let millis = at.millis_since(now).max(0) as u64;
            // Across processes a lease is renewed by its holder; look again no later than a
            // lease from now, in case it was not.
            let wait = Duration::from_millis(millis) + Duration::from_millis(10);
            if spans_processes {
                wait.min(work.lease)
            } else {
                wait
            }
        });
        let deadline = match (holding, until_expiry) {
            (true, Some(wait)) => Some(next_renewal.min(tokio::time::Instant::now() + wait)),
            (true, None) => Some(next_renewal),
            (false, Some(wait)) => Some(tokio::time::Instant::now() + wait),
            (false, None) => None,
        };
        tokio::select! {
            () = closing.cancelled() => return,
            () = work.changed.notified() => {}
            () = work.claims.added() => {}
            () = sleep_until(deadline) => {}
        }
        if !work.claims.is_empty() && tokio::time::Instant::now() >= next_renewal {
            for (agent, id, why) in work.claims.renew_all().await {
                tracing::warn!("{agent} lost its claim on task {id}: {why}");
            }
            next_renewal = tokio::time::Instant::now() + renew_every;
        } else if work.claims.is_empty() {
            next_renewal = tokio::time::Instant::now() + renew_every;
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The text a teammate works on for a task it pulled from the board.
pub fn task_prompt(task: &Task) -> String {
    let mut prompt = format!("[task] {} — {}", task.id, task.subject);
    if !task.description.is_empty() {
        prompt.push('\n');
        prompt.push_str(&task.description);
    }
    prompt.push_str(
        "\n(You took this task from the team's board. Do it; your final answer is its result, \
         and the task is completed for you when you answer.)",
    );
    prompt
}

/// Whether `agent` completed `task` (the teammate may complete a pulled task itself with
/// `complete_task` before it answers).
pub fn completed_by(task: &Task, agent: &AgentName) -> bool {
    task.status == TaskStatus::Completed && task.owner.as_ref() == Some(agent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::ids::SequentialIds;
    use crate::store::tasks::{MemoryTaskBoard, NewTask, TaskBoard};

    fn name(raw: &str) -> AgentName {
        AgentName::parse(raw).unwrap()
    }

    fn work() -> (Arc<BoardWork>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::at_spec_epoch());
        let board: Arc<dyn TaskBoard> = Arc::new(
            MemoryTaskBoard::new(clock.clone(), Arc::new(SequentialIds::new()))
                .with_lease(Duration::from_secs(60)),
        );
        let claims = Arc::new(HeldClaims::new(board));
        (
            Arc::new(BoardWork::new(
                claims,
                clock.clone(),
                Duration::from_secs(60),
            )),
            clock,
        )
    }

    async fn add(work: &BoardWork, subject: &str, tags: &[&str], assignee: Option<&str>) -> Task {
        work.claims
            .board()
            .create(NewTask {
                subject: subject.into(),
                tags: tags.iter().map(|t| t.to_string()).collect(),
                assignee: assignee.map(name),
                ..NewTask::default()
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_teammate_takes_only_what_fits_it_oldest_first() {
        let (work, _) = work();
        let docs = add(&work, "docs", &["docs"], None).await;
        let for_bob = add(&work, "bob's", &[], Some("bob")).await;
        let anyone = add(&work, "anyone", &[], None).await;
        let rust = vec!["rust".to_owned()];
        let taken = work.next_for(&name("alice"), &rust).await.unwrap().unwrap();
        assert_eq!(taken.id, anyone.id);
        assert_eq!(work.next_for(&name("alice"), &rust).await.unwrap(), None);
        let (alice, carol) = (name("alice"), name("carol"));
        let docs_skill = vec!["docs".to_owned()];
        assert_eq!(
            work.who_has_work([(&alice, rust.clone()), (&carol, docs_skill.clone())])
                .await,
            [&carol]
        );
        assert_eq!(
            work.next_for(&name("carol"), &docs_skill)
                .await
                .unwrap()
                .unwrap()
                .id,
            docs.id
        );
        assert_eq!(
            work.next_for(&name("bob"), &[]).await.unwrap().unwrap().id,
            for_bob.id
        );
    }

    #[tokio::test]
    async fn a_blocked_task_waits_for_its_blocker() {
        let (work, _) = work();
        let first = add(&work, "first", &[], None).await;
        let second = work
            .claims
            .board()
            .create(NewTask {
                subject: "second".into(),
                blocked_by: vec![first.id],
                ..NewTask::default()
            })
            .await
            .unwrap();
        let alice = name("alice");
        assert_eq!(
            work.next_for(&alice, &[]).await.unwrap().unwrap().id,
            first.id
        );
        assert_eq!(work.next_for(&name("bob"), &[]).await.unwrap(), None);
        work.claims.complete(&first.id, &alice).await.unwrap();
        assert_eq!(
            work.next_for(&name("bob"), &[]).await.unwrap().unwrap().id,
            second.id
        );
    }

    #[tokio::test]
    async fn a_taken_over_teammates_claims_from_elsewhere_come_back_and_its_own_stay() {
        let (work, _) = work();
        let (alice, bob) = (name("alice"), name("bob"));
        let earlier = add(&work, "earlier", &[], Some("alice")).await;
        let others = add(&work, "bob's", &[], Some("bob")).await;
        // Claimed by alice's earlier worker (another process: its own HeldClaims) and by bob.
        let elsewhere = HeldClaims::new(work.claims.board().clone());
        elsewhere.claim(&earlier.id, &alice).await.unwrap();
        elsewhere.claim(&others.id, &bob).await.unwrap();
        // Claimed for alice here, after the takeover.
        let mine = add(&work, "mine", &[], Some("alice")).await;
        work.next_for(&alice, &[]).await.unwrap().unwrap();
        let returned = work.return_claims_of(&alice, "taken over").await;
        assert_eq!(
            returned.iter().map(|t| t.id).collect::<Vec<_>>(),
            [earlier.id]
        );
        let board = work.claims.board();
        let now = board.get(&earlier.id).await.unwrap();
        assert_eq!(now.status, TaskStatus::Pending);
        assert_eq!(now.returned.unwrap().reason, "released: taken over");
        assert_eq!(
            board.get(&others.id).await.unwrap().status,
            TaskStatus::InProgress
        );
        assert_eq!(
            board.get(&mine.id).await.unwrap().status,
            TaskStatus::InProgress
        );
        // The earlier worker's token is dead: it cannot complete the task.
        assert_eq!(
            crate::error::ErrorCode::code(
                &elsewhere.complete(&earlier.id, &alice).await.unwrap_err()
            ),
            "task_state"
        );
    }

    #[tokio::test]
    async fn an_expired_lease_is_swept_back_and_reported_once() {
        let (work, clock) = work();
        let task = add(&work, "t", &[], None).await;
        let alice = name("alice");
        work.next_for(&alice, &[]).await.unwrap().unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink: ExpiredSink = {
            let seen = seen.clone();
            Arc::new(move |t: &Task| {
                seen.lock().unwrap().push(t.clone());
                Box::pin(async {})
            })
        };
        let next = work.sweep(&sink).await.unwrap();
        assert!(seen.lock().unwrap().is_empty());
        clock.advance_millis(next.millis_since(clock.now()));
        assert_eq!(work.sweep(&sink).await, None);
        assert_eq!(work.sweep(&sink).await, None);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].id, task.id);
        assert_eq!(seen[0].status, TaskStatus::Pending);
        assert_eq!(seen[0].returned.as_ref().unwrap().owner, alice);
        // The stale holder cannot complete it; the next claimer can.
        assert_eq!(
            crate::error::ErrorCode::code(
                &work.claims.complete(&task.id, &alice).await.unwrap_err()
            ),
            "task_state"
        );
        let bob = name("bob");
        work.next_for(&bob, &[]).await.unwrap().unwrap();
        assert_eq!(
            work.claims.complete(&task.id, &bob).await.unwrap().status,
            TaskStatus::Completed
        );
    }
}
