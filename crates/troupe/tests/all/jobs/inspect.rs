//! The `jobs` inspection view: records read back in start order, in `troupe status` too; a
//! workspace without jobs shows none and is not touched; a corrupt record is an error.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::jobs::JobStatus;
use troupe::wire::AgentName;

use super::{make_fifo, release, seq_id, Fixture};

#[tokio::test]
async fn the_view_lists_every_job_with_its_status_in_start_order() {
    let mut fx = Fixture::new();
    make_fifo(&fx.path("go.fifo"));
    fx.supervisor
        .submit(AgentName::lead(), "exit 0", fx.workspace())
        .await
        .unwrap();
    fx.next_completion().await;
    fx.clock.advance_millis(10);
    fx.supervisor
        .submit(
            AgentName::parse("alice").unwrap(),
            "read x < go.fifo",
            fx.workspace(),
        )
        .await
        .unwrap();

    let inspector =
        troupe::bootstrap::inspector_on_files(fx.layout.clone(), Arc::new(fx.clock.clone()));
    let jobs = inspector.jobs().await.unwrap();
    let summary: Vec<_> = jobs
        .iter()
        .map(|r| (r.id, r.agent.to_string(), r.status()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (seq_id(1), "lead".to_owned(), JobStatus::Completed),
            (seq_id(2), "alice".to_owned(), JobStatus::Running),
        ]
    );
    assert_eq!(inspector.status().await.unwrap().jobs, jobs);
    // The JSON of the view is the records' own shape.
    let json = serde_json::to_value(&jobs).unwrap();
    assert_eq!(json[1]["status"], "running");
    assert_eq!(json[0]["exit_code"], 0);

    release(fx.path("go.fifo"), "\n").await;
    fx.next_completion().await;
    assert_eq!(
        inspector.jobs().await.unwrap()[1].status(),
        JobStatus::Completed
    );
}

#[tokio::test]
async fn a_workspace_without_jobs_shows_none_and_is_not_touched() {
    let dir = tempfile::tempdir().unwrap();
    let layout = troupe::layout::Layout::new(dir.path());
    let inspector = troupe::bootstrap::inspector_on_files(
        layout.clone(),
        Arc::new(troupe::clock::ManualClock::at_spec_epoch()),
    );
    assert!(inspector.jobs().await.unwrap().is_empty());
    assert!(inspector.status().await.unwrap().jobs.is_empty());
    assert!(!layout.state_dir().exists());
}

#[tokio::test]
async fn a_corrupt_record_is_an_error_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let layout = troupe::layout::Layout::new(dir.path());
    std::fs::create_dir_all(layout.jobs_dir()).unwrap();
    let id = seq_id(1);
    std::fs::write(
        layout.jobs_dir().join(format!("{}.json", seq_id(2))),
        format!(
            r#"{{"id":"{id}","agent":"lead","command":"x","status":"running","exit_code":null,
                "started_at_utc":"2026-07-30T08:00:00.000Z","finished_at_utc":null,"output_tail":null}}"#
        ),
    )
    .unwrap();
    // An interrupted write's temp file is not a record.
    std::fs::write(layout.jobs_dir().join(".x.json.tmp-1-1"), "garbage").unwrap();
    let inspector = troupe::bootstrap::inspector_on_files(
        layout,
        Arc::new(troupe::clock::ManualClock::at_spec_epoch()),
    );
    let err = inspector.jobs().await.unwrap_err();
    assert_eq!(err.code(), "job_record_corrupt");
    assert!(err.to_string().contains("does not match its id"), "{err}");
}
