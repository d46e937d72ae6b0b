//! [`CronRuntime`]: holds the jobs, sleeps until the next one is due, fires it.
//!
//! [`CronRuntime::fire_due`] is the one place jobs fire: it is deterministic in the `now` it is
//! given, so tests drive it with a `ManualClock`, and the timer task calls it with the injected
//! clock's time when its sleep ends. The timer task sleeps until the earliest fire time
//! (`tokio::time::sleep_until`) and is woken early by a `Notify` when a job is added or removed,
//! and by a cancellation token on close — it never ticks.
//!
//! Locking: the jobs sit behind a std mutex that is never held across an `.await`; durable
//! changes are written while it is held, so `cron.json` changes in the same order as memory.
//!
//! Durable writes and delivery: a job is written to `cron.json` before `schedule` returns (a
//! failed write schedules nothing). When jobs fire, memory moves on first, then the durable
//! changes are written, then the wakeups are sent. If that write fails the wakeups are still
//! sent and the failure is logged: a durable job may then fire again after a restart — at least
//! once, like mailbox delivery — rather than be lost.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, Content, UtcTime};

use super::schedule::CronSchedule;
use super::store::{CronChange, CronStore};
use super::{CronError, CronJob, CronJobId, CronJobView, CronWakeup};
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::layout::Layout;
use crate::store::events::{kinds, EventSink};

/// What `schedule_cron` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRequest {
    /// Five fields: minute hour day-of-month month day-of-week.
    pub cron: String,
    pub prompt: String,
    /// An IANA zone name, e.g. `Europe/Berlin`.
    pub timezone: String,
    pub recurring: bool,
    pub durable: bool,
}

/// A job just scheduled: its id and when it fires first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledJob {
    pub id: CronJobId,
    pub next_fire_utc: UtcTime,
    /// The same instant on the job's wall clock, RFC 3339 with its offset.
    pub next_fire_local: String,
    pub timezone: &'static str,
}

/// The cron jobs of one run and their timer. Cheap to clone; clones share everything. When the
/// last clone is dropped the timer task stops, even without [`close`](Self::close).
#[derive(Clone)]
pub struct CronRuntime {
    shared: Arc<Shared>,
    /// Kept apart from `shared` because the timer task holds `shared`: were the task handle in
    /// there, the task would keep itself alive after every runtime handle is gone.
    timer: Arc<TimerSlot>,
}

struct TimerSlot {
    task: Mutex<Option<JoinHandle<()>>>,
    /// The same token as `Shared::closed`.
    stop: CancellationToken,
}

impl Drop for TimerSlot {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct Shared {
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    store: CronStore,
    /// Every live job, durable or not; the timer plans from the earliest `next_fire_utc`.
    jobs: Mutex<Vec<CronJob>>,
    wakeups: UnboundedSender<CronWakeup>,
    /// Serialises the changes of the stored jobs (schedule, remove, fire), each of which writes
    /// the store before (or after) the list in memory, so the store sees them in one order.
    writing: tokio::sync::Mutex<()>,
    /// Wakes the timer task to plan again after the jobs changed. `notify_one` keeps a permit,
    /// so a change made while the task is between planning and waiting is not missed.
    replan: Notify,
    /// Cancelled by `close`: stops the timer task and refuses new jobs.
    closed: CancellationToken,
    /// Where `cron_fired` goes (SPEC §10); nowhere until [`CronRuntime::report_to`].
    events: std::sync::OnceLock<Arc<dyn EventSink>>,
}

impl CronRuntime {
    /// Loads the durable jobs of `layout` (creating nothing) and delivers wakeups into
    /// `wakeups`. Jobs fire only through [`fire_due`](Self::fire_due) until
    /// [`start`](Self::start) spawns the timer task.
    pub async fn open(
        layout: &Layout,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        wakeups: UnboundedSender<CronWakeup>,
    ) -> Result<Self, CronError> {
        Self::open_store(CronStore::new(layout), clock, ids, wakeups).await
    }

    /// [`Self::open`] on `store` (a shared team's: its database).
    pub async fn open_store(
        store: CronStore,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        wakeups: UnboundedSender<CronWakeup>,
    ) -> Result<Self, CronError> {
        let jobs = store.load().await?;
        let closed = CancellationToken::new();
        Ok(Self {
            shared: Arc::new(Shared {
                clock,
                ids,
                store,
                jobs: Mutex::new(jobs),
                writing: tokio::sync::Mutex::new(()),
                wakeups,
                replan: Notify::new(),
                closed: closed.clone(),
                events: std::sync::OnceLock::new(),
            }),
            timer: Arc::new(TimerSlot {
                task: Mutex::new(None),
                stop: closed,
            }),
        })
    }

    /// Reports every wakeup to `events` as `cron_fired` (from the first call on; later calls
    /// change nothing).
    pub fn report_to(&self, events: Arc<dyn EventSink>) {
        let _ = self.shared.events.set(events);
    }

    /// Spawns the timer task on the current tokio runtime. Calling it again, or after
    /// [`close`](Self::close), does nothing. Outside a tokio runtime it is refused.
    pub fn start(&self) -> Result<(), CronError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| CronError::NoRuntime)?;
        let mut task = lock(&self.timer.task);
        if task.is_some() || self.shared.closed.is_cancelled() {
            return Ok(());
        }
        let shared = self.shared.clone();
        *task = Some(runtime.spawn(async move { shared.run_timer().await }));
        Ok(())
    }

    /// Stops the timer task and waits for it to end; later `schedule` calls are refused.
    /// Idempotent. Durable jobs stay in `cron.json` for the next run.
    pub async fn close(&self) {
        self.shared.closed.cancel();
        let task = lock(&self.timer.task).take();
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "the cron timer task ended abnormally");
            }
        }
    }

    /// Adds a job. Its first fire is the first match strictly after now. A durable job is in
    /// `cron.json` when this returns.
    pub async fn schedule(&self, request: ScheduleRequest) -> Result<ScheduledJob, CronError> {
        if self.shared.closed.is_cancelled() {
            return Err(CronError::Closed);
        }
        let schedule = CronSchedule::parse(&request.cron, &request.timezone)?;
        let prompt = Content::parse(request.prompt).map_err(|_| CronError::BlankPrompt)?;
        let now = self.shared.clock.now();
        let next_fire_utc = schedule.next_after(now)?;
        // Both id generators yield v4/v7 UUIDs; a foreign one that does not still gets an id.
        let id = CronJobId::from_uuid(self.shared.ids.next_uuid())
            .unwrap_or_else(|_| CronJobId(uuid::Uuid::new_v4()));
        let job = CronJob {
            id,
            schedule,
            prompt,
            recurring: request.recurring,
            durable: request.durable,
            created_at_utc: now,
            next_fire_utc,
        };
        let scheduled = ScheduledJob {
            id,
            next_fire_utc,
            next_fire_local: job.schedule.local_time(next_fire_utc),
            timezone: job.schedule.timezone(),
        };
        {
            let _writing = self.shared.writing.lock().await;
            if job.durable {
                self.shared
                    .store
                    .apply(&[CronChange::Put(Box::new(job.clone()))])
                    .await?;
            }
            lock(&self.shared.jobs).push(job);
        }
        self.shared.replan.notify_one();
        Ok(scheduled)
    }

    /// Removes a job (from `cron.json` too when durable). Returns whether it existed.
    pub async fn remove(&self, id: CronJobId) -> Result<bool, CronError> {
        let removed = {
            let _writing = self.shared.writing.lock().await;
            let durable = {
                let jobs = lock(&self.shared.jobs);
                let Some(job) = jobs.iter().find(|j| j.id == id) else {
                    return Ok(false);
                };
                job.durable
            };
            if durable {
                self.shared.store.apply(&[CronChange::Remove(id)]).await?;
            }
            lock(&self.shared.jobs).retain(|j| j.id != id);
            true
        };
        self.shared.replan.notify_one();
        Ok(removed)
    }

    /// Fires every job due at `now` (`next_fire_utc <= now`), in order of due time: sends a
    /// wakeup for each into the channel and returns them. A recurring job is planned again from
    /// `now` (missed slots collapse into this one fire); a one-shot job is removed. Durable
    /// changes are written to `cron.json`.
    pub async fn fire_due(&self, now: UtcTime) -> Vec<CronWakeup> {
        let wakeups = self.shared.fire_due(now).await;
        if !wakeups.is_empty() {
            self.shared.replan.notify_one();
        }
        wakeups
    }

    /// The live jobs, soonest first.
    pub fn jobs(&self) -> Vec<CronJobView> {
        let mut views: Vec<CronJobView> =
            lock(&self.shared.jobs).iter().map(CronJob::view).collect();
        views.sort_by_key(|v| (v.next_fire_utc, v.id));
        views
    }

    /// The earliest fire time of any job.
    pub fn next_due(&self) -> Option<UtcTime> {
        self.shared.next_due()
    }
}

impl Shared {
    fn next_due(&self) -> Option<UtcTime> {
        lock(&self.jobs).iter().map(|j| j.next_fire_utc).min()
    }

    async fn fire_due(&self, now: UtcTime) -> Vec<CronWakeup> {
        let mut wakeups = Vec::new();
        {
            let _writing = self.writing.lock().await;
            let mut changes = Vec::new();
            lock(&self.jobs).retain_mut(|job| {
                if job.next_fire_utc > now {
                    return true;
                }
                wakeups.push(CronWakeup {
                    job_id: job.id,
                    prompt: job.prompt.clone(),
                    scheduled_for_utc: job.next_fire_utc,
                    fired_at_utc: now,
                });
                let next = if job.recurring {
                    match job.schedule.next_after(now) {
                        Ok(next) => Some(next),
                        Err(e) => {
                            tracing::warn!(job = %job.id, error = %e, "recurring cron job removed");
                            None
                        }
                    }
                } else {
                    None
                };
                match next {
                    Some(next_fire_utc) => {
                        job.next_fire_utc = next_fire_utc;
                        if job.durable {
                            changes.push(CronChange::Reschedule {
                                id: job.id,
                                next_fire_utc,
                            });
                        }
                        true
                    }
                    None => {
                        if job.durable {
                            changes.push(CronChange::Remove(job.id));
                        }
                        false
                    }
                }
            });
            if let Err(e) = self.store.apply(&changes).await {
                tracing::warn!(
                    error = %e,
                    "cron.json was not updated after jobs fired; durable jobs may fire again on restart"
                );
            }
        }
        wakeups.sort_by_key(|w| (w.scheduled_for_utc, w.job_id));
        for wakeup in &wakeups {
            if let Some(events) = self.events.get() {
                events.emit(
                    AgentName::LEAD,
                    kinds::CRON_FIRED,
                    kinds::fields(serde_json::json!({
                        "job_id": wakeup.job_id.to_string(),
                        "scheduled_for": wakeup.scheduled_for_utc,
                        "prompt": kinds::preview(wakeup.prompt.as_str()),
                    })),
                );
            }
            if self.wakeups.send(wakeup.clone()).is_err() {
                tracing::debug!(job = %wakeup.job_id, "cron wakeup dropped: nobody is listening");
            }
        }
        wakeups
    }

    /// Sleeps until the earliest job is due, fires, plans again. Ends when the runtime closes.
    async fn run_timer(&self) {
        loop {
            let due_in = self.next_due().map(|due| {
                Duration::from_millis(
                    u64::try_from(due.millis_since(self.clock.now())).unwrap_or(0),
                )
            });
            let sleep = async {
                match due_in {
                    Some(wait) => {
                        tokio::time::sleep_until(tokio::time::Instant::now() + wait).await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = self.closed.cancelled() => break,
                () = self.replan.notified() => {}
                () = sleep => {
                    self.fire_due(self.clock.now()).await;
                }
            }
        }
    }
}

/// A poisoned lock only means another thread panicked mid-update; the job list is still a
/// valid list, so carry on rather than take the lead down with it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    crate::sync::lock(mutex)
}
