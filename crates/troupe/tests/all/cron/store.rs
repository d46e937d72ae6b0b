//! `.troupe/cron.json`: durable jobs persist and reload; non-durable ones never touch the disk;
//! a corrupt file is a clear error; `Inspector::cron_jobs` lists without creating anything.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::clock::{Clock, ManualClock};
use troupe::cron::{CronRuntime, CronStore};
use troupe::error::ErrorCode;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;

use super::{at, drain, manual_runtime, open_runtime, request};

fn stored(dir: &std::path::Path) -> serde_json::Value {
    let bytes = std::fs::read(dir.join(".troupe/cron.json")).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn durable_jobs_are_written_and_reloaded_by_a_new_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _rx, clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let daily = first
        .schedule(request("30 2 * * *", "Europe/Berlin", true, true))
        .await
        .unwrap();
    let once = first
        .schedule(request("0 9 * * *", "UTC", false, true))
        .await
        .unwrap();
    first
        .schedule(request("*/5 * * * *", "UTC", true, false))
        .await
        .unwrap();
    assert_eq!(
        stored(dir.path()),
        json!({"version": 1, "jobs": [
            {"id": daily.id.to_string(), "cron": "30 2 * * *", "timezone": "Europe/Berlin",
             "prompt": "wake up for 30 2 * * *", "recurring": true,
             "created_at_utc": "2026-07-30T08:00:00.000Z",
             "next_fire_utc": "2026-07-31T00:30:00.000Z"},
            {"id": once.id.to_string(), "cron": "0 9 * * *", "timezone": "UTC",
             "prompt": "wake up for 0 9 * * *", "recurring": false,
             "created_at_utc": "2026-07-30T08:00:00.000Z",
             "next_fire_utc": "2026-07-30T09:00:00.000Z"}
        ]})
    );
    first.close().await;
    drop(first);

    // The next run sees the durable jobs only, as they were.
    let (second, mut rx) = open_runtime(dir.path(), Arc::new(clock.clone()), 1).await;
    let jobs = second.jobs();
    assert_eq!(
        jobs.iter().map(|j| (j.id, j.durable)).collect::<Vec<_>>(),
        vec![(once.id, true), (daily.id, true)]
    );
    assert_eq!(jobs[1].next_fire_local, "2026-07-31T02:30:00.000+02:00");

    // The durable one-shot fires once and leaves the file; the recurring one moves on.
    assert_eq!(
        second.fire_due(at("2026-07-30T09:00:00.000Z")).await.len(),
        1
    );
    assert_eq!(
        stored(dir.path())["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>(),
        vec![daily.id.to_string()]
    );
    assert_eq!(
        second.fire_due(at("2026-07-31T00:30:00.000Z")).await.len(),
        1
    );
    assert_eq!(
        stored(dir.path())["jobs"][0]["next_fire_utc"],
        "2026-08-01T00:30:00.000Z"
    );
    assert_eq!(drain(&mut rx).len(), 2);

    // A third runtime sees the fired one-shot gone.
    let (third, _rx) = open_runtime(dir.path(), Arc::new(clock), 2).await;
    assert_eq!(
        third.jobs().iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![daily.id]
    );
}

#[tokio::test]
async fn non_durable_jobs_never_touch_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _rx, clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    first
        .schedule(request("0 9 * * *", "UTC", false, false))
        .await
        .unwrap();
    first
        .schedule(request("*/5 * * * *", "UTC", true, false))
        .await
        .unwrap();
    assert_eq!(
        first.fire_due(at("2026-07-30T09:00:00.000Z")).await.len(),
        2
    );
    assert!(!dir.path().join(".troupe").exists());
    let (second, _rx) = open_runtime(dir.path(), Arc::new(clock), 1).await;
    assert_eq!(second.jobs(), vec![]);
}

#[tokio::test]
async fn a_durable_job_missed_while_troupe_was_down_fires_once_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _rx, clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let job = first
        .schedule(request("0 9 * * *", "UTC", true, true))
        .await
        .unwrap();
    drop(first);

    // Three days later: 09:00 was missed three times.
    clock.set(at("2026-08-02T10:00:00.000Z"));
    let (second, mut rx) = open_runtime(dir.path(), Arc::new(clock.clone()), 1).await;
    assert_eq!(second.next_due(), Some(at("2026-07-30T09:00:00.000Z")));
    let fired = second.fire_due(clock.now()).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].job_id, job.id);
    assert_eq!(fired[0].scheduled_for_utc, at("2026-07-30T09:00:00.000Z"));
    assert_eq!(fired[0].fired_at_utc, at("2026-08-02T10:00:00.000Z"));
    assert_eq!(drain(&mut rx), fired);
    assert_eq!(
        stored(dir.path())["jobs"][0]["next_fire_utc"],
        "2026-08-03T09:00:00.000Z"
    );
}

#[tokio::test]
async fn removing_a_durable_job_removes_it_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    let job = runtime
        .schedule(request("0 9 * * *", "UTC", true, true))
        .await
        .unwrap();
    assert!(runtime.remove(job.id).await.unwrap());
    assert_eq!(stored(dir.path()), json!({"version": 1, "jobs": []}));
}

async fn open_with_file(contents: &str) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".troupe")).unwrap();
    let path = dir.path().join(".troupe/cron.json");
    std::fs::write(&path, contents).unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let err = CronRuntime::open(
        &Layout::new(dir.path()),
        Arc::new(ManualClock::at_spec_epoch()),
        Arc::new(SequentialIds::new()),
        tx,
    )
    .await
    .err()
    .unwrap();
    (dir, err.code().to_owned(), err.to_string())
}

const GOOD_JOB: &str = r#"{"id":"00000000-0000-4000-8000-000000000001","cron":"0 9 * * *",
    "timezone":"UTC","prompt":"p","recurring":true,
    "created_at_utc":"2026-07-30T08:00:00.000Z","next_fire_utc":"2026-07-30T09:00:00.000Z"}"#;

#[tokio::test]
async fn a_corrupt_cron_file_is_a_clear_error() {
    let with_job = |job: &str| format!(r#"{{"version":1,"jobs":[{job}]}}"#);
    let cases = [
        ("{not json".to_owned(), "key must be a string"),
        (
            r#"{"version":2,"jobs":[]}"#.to_owned(),
            "version 2 is not supported",
        ),
        (r#"{"jobs":[]}"#.to_owned(), "missing field `version`"),
        (
            r#"{"version":1,"jobs":[],"extra":1}"#.to_owned(),
            "unknown field `extra`",
        ),
        (
            format!(r#"{{"version":1,"jobs":[{GOOD_JOB},{GOOD_JOB}]}}"#),
            "appears twice",
        ),
        (
            with_job(&GOOD_JOB.replace("0 9 * * *", "0 9 * *")),
            "it has 4 fields",
        ),
        (
            with_job(&GOOD_JOB.replace("\"UTC\"", "\"Mars/Base\"")),
            "unknown time zone",
        ),
        (
            with_job(&GOOD_JOB.replace("\"p\"", "\" \"")),
            "content must not be blank",
        ),
        (
            with_job(&GOOD_JOB.replace("00000000-0000-4000-8000-000000000001", "job-1")),
            "invalid cron job id",
        ),
        (
            with_job(&GOOD_JOB.replace("\"recurring\":true,", "")),
            "missing field `recurring`",
        ),
        (
            with_job(&GOOD_JOB.replace(
                "\"recurring\":true,",
                "\"recurring\":true,\"durable\":true,",
            )),
            "unknown field `durable`",
        ),
        (
            with_job(&GOOD_JOB.replace("09:00:00.000Z", "09:00:00Z")),
            "invalid time",
        ),
    ];
    for (contents, reason) in cases {
        let (dir, code, message) = open_with_file(&contents).await;
        let path = dir.path().join(".troupe/cron.json");
        assert_eq!(code, "cron_state_corrupt", "{message}");
        assert!(
            message.starts_with(&format!("{} is not a valid cron store: ", path.display())),
            "{message}"
        );
        assert!(message.contains(reason), "want {reason:?} in {message}");
        // Never repaired: the bytes are left as they were.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), contents);
    }
    // The same file with a well-formed job loads.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".troupe")).unwrap();
    std::fs::write(dir.path().join(".troupe/cron.json"), with_job(GOOD_JOB)).unwrap();
    assert_eq!(
        CronStore::new(&Layout::new(dir.path()))
            .load()
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn inspector_lists_durable_jobs_without_creating_anything() {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::at_spec_epoch());
    let inspector = troupe::bootstrap::inspector_on_files(Layout::new(dir.path()), clock.clone());
    assert_eq!(inspector.cron_jobs().await.unwrap(), vec![]);
    assert!(!dir.path().join(".troupe").exists());

    let (runtime, _rx) = open_runtime(dir.path(), clock, 0).await;
    let later = runtime
        .schedule(request("0 9 * * MON", "Europe/Berlin", true, true))
        .await
        .unwrap();
    let sooner = runtime
        .schedule(request("0 9 * * *", "UTC", false, true))
        .await
        .unwrap();
    runtime
        .schedule(request("*/5 * * * *", "UTC", true, false))
        .await
        .unwrap();
    let listed = inspector.cron_jobs().await.unwrap();
    assert_eq!(
        serde_json::to_value(&listed).unwrap(),
        json!([
            {"id": sooner.id.to_string(), "cron": "0 9 * * *", "timezone": "UTC",
             "prompt": "wake up for 0 9 * * *", "recurring": false, "durable": true,
             "next_fire_utc": "2026-07-30T09:00:00.000Z",
             "next_fire_local": "2026-07-30T09:00:00.000+00:00"},
            {"id": later.id.to_string(), "cron": "0 9 * * MON", "timezone": "Europe/Berlin",
             "prompt": "wake up for 0 9 * * MON", "recurring": true, "durable": true,
             "next_fire_utc": "2026-08-03T07:00:00.000Z",
             "next_fire_local": "2026-08-03T09:00:00.000+02:00"}
        ])
    );

    std::fs::write(dir.path().join(".troupe/cron.json"), "[]").unwrap();
    let err = inspector.cron_jobs().await.unwrap_err();
    assert_eq!(err.code(), "cron_state_corrupt");
}

#[tokio::test]
async fn a_durable_job_that_cannot_be_written_is_not_scheduled() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    // A file where the state folder should be: nothing can be written under it.
    std::fs::write(dir.path().join(".troupe"), "not a folder").unwrap();
    let err = runtime
        .schedule(request("0 9 * * *", "UTC", true, true))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "storage_error", "{err}");
    assert_eq!(runtime.jobs(), vec![]);
    // A non-durable job needs no disk.
    assert!(runtime
        .schedule(request("0 9 * * *", "UTC", true, false))
        .await
        .is_ok());
}

#[tokio::test]
async fn a_fire_is_delivered_even_when_cron_json_cannot_be_updated() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, mut rx, _clock) = manual_runtime(dir.path(), "2026-07-30T08:00:00.000Z").await;
    runtime
        .schedule(request("0 9 * * *", "UTC", false, true))
        .await
        .unwrap();
    // cron.json turns into a folder: the write after the fire fails.
    let path = dir.path().join(".troupe/cron.json");
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    assert_eq!(
        runtime.fire_due(at("2026-07-30T09:00:00.000Z")).await.len(),
        1
    );
    assert_eq!(drain(&mut rx).len(), 1);
    assert_eq!(
        runtime.jobs(),
        vec![],
        "memory moved on: no second fire in this run"
    );
}
