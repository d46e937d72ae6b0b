//! The timer task in real time: it sleeps until the next due job and is re-planned when a job
//! is added. Bounded: every wait is a channel receive under a timeout, never a fixed sleep.

use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe::clock::Clock;
use troupe::wire::UtcTime;

use super::{at, open_runtime, request};

/// Real time, shifted: it reads `start` when created and then moves with the real clock, so
/// that a cron minute boundary can be a few milliseconds away.
struct ShiftedClock {
    start: UtcTime,
    origin: Instant,
}

impl ShiftedClock {
    fn at(start: &str) -> Self {
        Self {
            start: at(start),
            origin: Instant::now(),
        }
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> UtcTime {
        let elapsed = i64::try_from(self.origin.elapsed().as_millis()).unwrap();
        UtcTime::from_unix_millis(self.start.unix_millis() + elapsed).unwrap()
    }
}

/// On the current-thread test runtime, one yield runs the freshly spawned timer task until it
/// waits, so the job scheduled next reaches a timer that is already asleep (not one that has
/// not looked at the jobs yet) — the case a missing re-plan would break.
async fn let_the_timer_wait() {
    tokio::task::yield_now().await;
}

const BOUND: Duration = Duration::from_secs(10);

#[tokio::test]
async fn the_timer_fires_a_job_due_in_a_few_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    // 08:59:59.960: the next `* * * * *` match, 09:00:00, is 40 ms away.
    let clock = Arc::new(ShiftedClock::at("2026-07-30T08:59:59.960Z"));
    let (runtime, mut rx) = open_runtime(dir.path(), clock.clone(), 0).await;
    // Started with no jobs: the timer waits for a change, and the schedule call wakes it.
    runtime.start().unwrap();
    let_the_timer_wait().await;
    let job = runtime
        .schedule(request("* * * * *", "UTC", false, false))
        .await
        .unwrap();
    assert_eq!(job.next_fire_utc, at("2026-07-30T09:00:00.000Z"));
    let started = Instant::now();
    let wakeup = tokio::time::timeout(BOUND, rx.recv())
        .await
        .expect("the timer did not fire in time")
        .unwrap();
    assert_eq!(wakeup.job_id, job.id);
    assert_eq!(wakeup.scheduled_for_utc, at("2026-07-30T09:00:00.000Z"));
    assert!(wakeup.fired_at_utc >= wakeup.scheduled_for_utc);
    assert!(started.elapsed() < BOUND);
    assert_eq!(runtime.jobs(), vec![]);
    runtime.close().await;
}

#[tokio::test]
async fn adding_an_earlier_job_replans_the_sleep() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ShiftedClock::at("2026-07-30T08:59:59.950Z"));
    let (runtime, mut rx) = open_runtime(dir.path(), clock, 0).await;
    // The timer first sleeps towards New Year...
    let far = runtime
        .schedule(request("0 0 1 1 *", "UTC", true, false))
        .await
        .unwrap();
    runtime.start().unwrap();
    let_the_timer_wait().await;
    // ...then a job due in 50 ms must still fire on time.
    let near = runtime
        .schedule(request("0 9 * * *", "UTC", true, false))
        .await
        .unwrap();
    let wakeup = tokio::time::timeout(BOUND, rx.recv())
        .await
        .expect("the timer was not re-planned")
        .unwrap();
    assert_eq!(wakeup.job_id, near.id);
    let ids: Vec<_> = runtime.jobs().iter().map(|j| j.id).collect();
    assert_eq!(
        ids,
        vec![near.id, far.id],
        "near is planned again for tomorrow"
    );
    runtime.close().await;
}

#[tokio::test]
async fn close_stops_the_timer_task_and_releases_the_channel() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ShiftedClock::at("2026-07-30T08:00:00.000Z"));
    let (runtime, mut rx) = open_runtime(dir.path(), clock, 0).await;
    runtime
        .schedule(request("0 9 * * *", "UTC", true, false))
        .await
        .unwrap();
    runtime.start().unwrap();
    tokio::time::timeout(BOUND, runtime.close())
        .await
        .expect("close did not stop the timer task");
    // start after close does nothing; once the runtime is gone, no sender is left anywhere
    // (the timer task held one), so the channel ends instead of delivering.
    runtime.start().unwrap();
    drop(runtime);
    let end = tokio::time::timeout(BOUND, rx.recv())
        .await
        .expect("a sender outlived close");
    assert_eq!(end, None);
}

#[tokio::test]
async fn dropping_every_handle_stops_the_timer_task_without_close() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ShiftedClock::at("2026-07-30T08:00:00.000Z"));
    let (runtime, mut rx) = open_runtime(dir.path(), clock, 0).await;
    runtime
        .schedule(request("0 9 * * *", "UTC", true, false))
        .await
        .unwrap();
    runtime.start().unwrap();
    let_the_timer_wait().await;
    drop(runtime);
    // The task held the last sender; it only lets go by ending.
    let end = tokio::time::timeout(BOUND, rx.recv())
        .await
        .expect("the timer task outlived its runtime");
    assert_eq!(end, None);
}

#[test]
fn start_outside_a_tokio_runtime_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ShiftedClock::at("2026-07-30T08:00:00.000Z"));
    // Opened on a runtime of its own, then started outside it.
    let (runtime, _rx) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(open_runtime(dir.path(), clock, 0));
    let err = runtime.start().unwrap_err();
    assert_eq!(troupe::error::ErrorCode::code(&err), "cron_no_runtime");
}
