//! `CronRuntime::fire_due` with a manual clock: wakeups, one-shot vs recurring, missed fires.

use pretty_assertions::assert_eq;
use troupe::cron::{CronJobId, CronWakeup, ScheduledJob};
use troupe::error::ErrorCode;
use troupe::wire::Content;

use super::{at, drain, manual_runtime, request};

fn job_id(n: u32) -> CronJobId {
    CronJobId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap()
}

#[tokio::test]
async fn schedule_returns_the_id_and_the_first_fire_in_utc_and_in_the_zone() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let job = runtime
        .schedule(request("30 2 * * *", "Europe/Berlin", true, false))
        .await
        .unwrap();
    assert_eq!(
        job,
        ScheduledJob {
            id: job_id(1),
            next_fire_utc: at("2026-07-31T00:30:00.000Z"),
            next_fire_local: "2026-07-31T02:30:00.000+02:00".to_owned(),
            timezone: "Europe/Berlin",
        }
    );
    assert_eq!(runtime.next_due(), Some(at("2026-07-31T00:30:00.000Z")));
}

#[tokio::test]
async fn fire_due_delivers_wakeups_into_the_channel_and_plans_recurring_jobs_again() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, mut rx, clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    runtime
        .schedule(request("*/5 * * * *", "UTC", true, false))
        .await
        .unwrap();
    assert_eq!(
        runtime.fire_due(at("2026-07-30T08:04:59.999Z")).await,
        vec![]
    );
    assert_eq!(drain(&mut rx), vec![]);

    clock.set(at("2026-07-30T08:05:00.000Z"));
    let fired = runtime.fire_due(troupe::clock::Clock::now(&clock)).await;
    let expected = vec![CronWakeup {
        job_id: job_id(1),
        prompt: Content::parse("wake up for */5 * * * *").unwrap(),
        scheduled_for_utc: at("2026-07-30T08:05:00.000Z"),
        fired_at_utc: at("2026-07-30T08:05:00.000Z"),
    }];
    assert_eq!(fired, expected);
    assert_eq!(drain(&mut rx), expected);
    // Recurring: still there, next at 08:10; firing again at the same instant does nothing.
    assert_eq!(runtime.next_due(), Some(at("2026-07-30T08:10:00.000Z")));
    assert_eq!(
        runtime.fire_due(at("2026-07-30T08:05:00.000Z")).await,
        vec![]
    );
    assert_eq!(
        runtime.fire_due(at("2026-07-30T08:10:00.000Z")).await.len(),
        1
    );
    assert_eq!(runtime.jobs().len(), 1);
}

#[tokio::test]
async fn a_one_shot_fires_once_at_its_next_match_then_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, mut rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    runtime
        .schedule(request("0 9 * * *", "UTC", false, false))
        .await
        .unwrap();
    assert_eq!(
        runtime.fire_due(at("2026-07-30T09:00:00.000Z")).await.len(),
        1
    );
    assert_eq!(runtime.jobs(), vec![]);
    assert_eq!(runtime.next_due(), None);
    assert_eq!(
        runtime.fire_due(at("2026-07-31T09:00:00.000Z")).await,
        vec![]
    );
    assert_eq!(drain(&mut rx).len(), 1);
}

#[tokio::test]
async fn a_one_shot_in_the_repeated_hour_fires_once_on_the_fall_back_day() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, mut rx, _clock) = manual_runtime(dir.path(), "2026-10-24T12:00:00.000Z").await;
    runtime
        .schedule(request("30 2 * * *", "Europe/Berlin", false, false))
        .await
        .unwrap();
    let recurring = runtime
        .schedule(request("30 2 * * *", "Europe/Berlin", true, false))
        .await
        .unwrap();
    // First pass of 02:30 (CEST): both fire.
    assert_eq!(
        runtime.fire_due(at("2026-10-25T00:30:00.000Z")).await.len(),
        2
    );
    // Second pass of 02:30 (CET): neither fires again.
    assert_eq!(
        runtime.fire_due(at("2026-10-25T01:30:00.000Z")).await,
        vec![]
    );
    assert_eq!(drain(&mut rx).len(), 2);
    let jobs = runtime.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].id, recurring.id);
    assert_eq!(jobs[0].next_fire_utc, at("2026-10-26T01:30:00.000Z"));
}

#[tokio::test]
async fn missed_slots_collapse_into_one_fire_and_the_job_is_planned_from_now() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, mut rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    runtime
        .schedule(request("0 * * * *", "UTC", true, false))
        .await
        .unwrap();
    let fired = runtime.fire_due(at("2026-07-30T12:30:00.000Z")).await;
    assert_eq!(
        fired.len(),
        1,
        "09:00, 10:00, 11:00, 12:00 missed: one fire"
    );
    assert_eq!(fired[0].scheduled_for_utc, at("2026-07-30T09:00:00.000Z"));
    assert_eq!(fired[0].fired_at_utc, at("2026-07-30T12:30:00.000Z"));
    assert_eq!(runtime.next_due(), Some(at("2026-07-30T13:00:00.000Z")));
    assert_eq!(drain(&mut rx), fired);
}

#[tokio::test]
async fn several_due_jobs_fire_in_order_of_due_time() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, mut rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let late = runtime
        .schedule(request("30 8 * * *", "UTC", false, false))
        .await
        .unwrap();
    let early = runtime
        .schedule(request("10 8 * * *", "UTC", false, false))
        .await
        .unwrap();
    let not_yet = runtime
        .schedule(request("0 10 * * *", "UTC", false, false))
        .await
        .unwrap();
    let fired: Vec<CronJobId> = runtime
        .fire_due(at("2026-07-30T09:00:00.000Z"))
        .await
        .iter()
        .map(|w| w.job_id)
        .collect();
    assert_eq!(fired, vec![early.id, late.id]);
    let delivered: Vec<CronJobId> = drain(&mut rx).iter().map(|w| w.job_id).collect();
    assert_eq!(delivered, fired);
    assert_eq!(
        runtime.jobs().iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![not_yet.id]
    );
}

#[tokio::test]
async fn remove_takes_a_job_out() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let job = runtime
        .schedule(request("0 9 * * *", "UTC", true, false))
        .await
        .unwrap();
    assert!(runtime.remove(job.id).await.unwrap());
    assert!(!runtime.remove(job.id).await.unwrap());
    assert_eq!(
        runtime.fire_due(at("2026-07-30T09:00:00.000Z")).await,
        vec![]
    );
}

#[tokio::test]
async fn bad_requests_schedule_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let mut blank = request("0 9 * * *", "UTC", true, true);
    blank.prompt = "  \n ".to_owned();
    let cases = [
        (blank, "invalid_arguments"),
        (request("0 9 * *", "UTC", true, true), "invalid_arguments"),
        (
            request("0 9 * * *", "Nowhere/City", true, true),
            "invalid_arguments",
        ),
        (request("0 0 31 2 *", "UTC", true, true), "cron_never_fires"),
    ];
    for (req, code) in cases {
        let err = runtime.schedule(req).await.unwrap_err();
        assert_eq!(err.code(), code, "{err}");
    }
    assert_eq!(runtime.jobs(), vec![]);
    assert!(!dir.path().join(".troupe").exists());
}

#[tokio::test]
async fn a_closed_runtime_refuses_new_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    runtime.close().await;
    runtime.close().await;
    let err = runtime
        .schedule(request("0 9 * * *", "UTC", true, false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "cron_closed");
}

#[tokio::test]
async fn every_wakeup_is_reported_to_the_event_stream_as_cron_fired() {
    use std::sync::{Arc, Mutex};
    use troupe::store::events::{kinds, EventSink};

    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, String, serde_json::Value)>>);
    impl EventSink for Seen {
        fn emit(
            &self,
            agent: &str,
            kind: &'static str,
            fields: serde_json::Map<String, serde_json::Value>,
        ) {
            self.0.lock().unwrap().push((
                agent.into(),
                kind.into(),
                serde_json::Value::Object(fields),
            ));
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let seen = Arc::new(Seen::default());
    runtime.report_to(seen.clone());
    runtime
        .schedule(request("*/5 * * * *", "UTC", true, false))
        .await
        .unwrap();
    assert_eq!(
        runtime.fire_due(at("2026-07-30T08:05:00.000Z")).await.len(),
        1
    );
    let seen = seen.0.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (agent, kind, fields) = &seen[0];
    assert_eq!((agent.as_str(), kind.as_str()), ("lead", kinds::CRON_FIRED));
    assert_eq!(fields["job_id"], job_id(1).to_string());
    assert_eq!(fields["scheduled_for"], "2026-07-30T08:05:00.000Z");
    assert_eq!(fields["prompt"], "wake up for */5 * * * *");
}
