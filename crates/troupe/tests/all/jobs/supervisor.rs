//! The supervisor: submit returns at once; one completion and one final record per job;
//! close and time limits stop the whole process group.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::error::ErrorCode;
use troupe::jobs::{JobCompletion, JobEnd, JobError};
use troupe::store::artifacts::{ArtifactCopy, ArtifactKey, SharedArtifact};
use troupe::store::BackendError;
use troupe::wire::{AgentName, UtcTime};

use super::{make_fifo, pid_from, process_exits_within, release, seq_id, Fixture};

fn at(raw: &str) -> UtcTime {
    UtcTime::parse(raw).unwrap()
}

#[tokio::test]
async fn submit_returns_at_once_and_the_completion_arrives_on_the_channel() {
    let mut fx = Fixture::new();
    make_fifo(&fx.path("go.fifo"));
    let command = "read line < go.fifo; echo \"got $line\"";
    // The job cannot get past `read` until the test writes the FIFO, so submit returning here
    // proves it did not wait for the job.
    let id = fx
        .supervisor
        .submit(AgentName::lead(), command, fx.workspace())
        .await
        .unwrap();
    assert_eq!(id, seq_id(1));
    assert_eq!(fx.supervisor.running_count(), 1);
    assert!(!fx.supervisor.is_idle());
    assert!(fx.completions.try_recv().is_err());
    assert_eq!(
        fx.record_json(id),
        json!({"id": id.to_string(), "agent": "lead", "command": command,
               "status": "running", "exit_code": null,
               "started_at_utc": "2026-07-30T08:00:00.000Z", "finished_at_utc": null,
               "output_tail": null})
    );

    fx.clock.advance_millis(1500);
    release(fx.path("go.fifo"), "hello\n").await;
    let completion = fx.next_completion().await;
    assert_eq!(
        completion,
        JobCompletion {
            job_id: id,
            agent: AgentName::lead(),
            command: command.to_owned(),
            exit_code: Some(0),
            status: JobEnd::Completed,
            output_tail: "got hello\n".to_owned(),
            started_at_utc: at("2026-07-30T08:00:00.000Z"),
            finished_at_utc: at("2026-07-30T08:00:01.500Z"),
        }
    );
    assert_eq!(
        fx.record_json(id),
        json!({"id": id.to_string(), "agent": "lead", "command": command,
               "status": "completed", "exit_code": 0,
               "started_at_utc": "2026-07-30T08:00:00.000Z",
               "finished_at_utc": "2026-07-30T08:00:01.500Z",
               "output_tail": "got hello\n"})
    );
    fx.supervisor.close().await;
    assert!(fx.supervisor.is_idle());
    assert!(fx.completions.try_recv().is_err(), "one completion per job");
}

#[tokio::test]
async fn a_failing_command_is_reported_failed_with_its_exit_code() {
    let mut fx = Fixture::new();
    let id = fx
        .supervisor
        .submit(
            AgentName::parse("alice").unwrap(),
            "echo boom >&2; exit 7",
            fx.workspace(),
        )
        .await
        .unwrap();
    let completion = fx.next_completion().await;
    assert_eq!(completion.job_id, id);
    assert_eq!(completion.agent.as_str(), "alice");
    assert_eq!(completion.status, JobEnd::Failed);
    assert_eq!(completion.exit_code, Some(7));
    assert_eq!(completion.output_tail, "boom\n");
    let record = fx.record_json(id);
    assert_eq!(record["status"], "failed");
    assert_eq!(record["exit_code"], 7);
    assert_eq!(record["agent"], "alice");
}

/// What a shared team's artifact table would be handed: every copy, in order.
#[derive(Default)]
struct RecordedCopies(std::sync::Mutex<Vec<(String, Vec<u8>, u64)>>);

#[async_trait::async_trait]
impl ArtifactCopy for RecordedCopies {
    fn keeps(&self) -> bool {
        true
    }

    async fn copy(&self, key: &ArtifactKey, head: &[u8], bytes: u64) {
        let mut copies = self.0.lock().unwrap();
        copies.push((key.relative_path(), head.to_vec(), bytes));
    }

    async fn fetch(&self, _key: &ArtifactKey) -> Result<Option<SharedArtifact>, BackendError> {
        Ok(None)
    }
}

/// A job's whole output is copied where the agents' artifacts are (a shared team's database),
/// so that a process in another workspace can read the artifact the completion names.
#[tokio::test]
async fn a_jobs_whole_output_artifact_is_copied_like_an_agents() {
    let copies = Arc::new(RecordedCopies::default());
    let copy = copies.clone();
    let mut fx = Fixture::with(move |s| s.with_output_cap(100).with_artifact_copy(copy));
    fx.supervisor
        .submit(
            AgentName::lead(),
            "echo FIRST; head -c 3000 /dev/zero | tr '\\0' y; echo; echo LAST",
            fx.workspace(),
        )
        .await
        .unwrap();
    let tail = fx.next_completion().await.output_tail;
    let total = 6 + 3000 + 1 + 5;
    let named = tail
        .lines()
        .next()
        .and_then(|line| line.strip_prefix(&format!("[the whole output ({total} bytes): ")))
        .and_then(|rest| rest.strip_suffix("; read_file reads it]"))
        .unwrap_or_else(|| panic!("{tail}"))
        .to_owned();
    let copies = copies.0.lock().unwrap();
    assert_eq!(copies.len(), 1, "one copy per artifact");
    let (path, head, bytes) = &copies[0];
    assert_eq!(path, &named);
    assert_eq!(*bytes, total as u64);
    assert_eq!(head, &std::fs::read(fx.workspace().join(&named)).unwrap());
}

#[tokio::test]
async fn the_output_tail_keeps_the_end_and_an_artifact_the_whole_of_long_output() {
    let mut fx = Fixture::with(|s| s.with_output_cap(100));
    fx.supervisor
        .submit(
            AgentName::lead(),
            "echo FIRST; head -c 5000 /dev/zero | tr '\\0' x; echo; echo LAST",
            fx.workspace(),
        )
        .await
        .unwrap();
    let tail = fx.next_completion().await.output_tail;
    assert!(!tail.contains("FIRST"), "{tail}");
    assert!(tail.ends_with("xxx\nLAST\n"), "{tail}");
    let total = 6 + 5000 + 1 + 5;
    // The first line names the artifact that keeps the whole output.
    let (whole, tail) = tail.split_once('\n').unwrap();
    let path = whole
        .strip_prefix(&format!("[the whole output ({total} bytes): "))
        .and_then(|rest| rest.strip_suffix("; read_file reads it]"))
        .unwrap_or_else(|| panic!("{whole}"));
    assert!(path.starts_with(".troupe/artifacts/lead/"), "{path}");
    let kept = std::fs::read_to_string(fx.workspace().join(path)).unwrap();
    assert!(
        kept.starts_with("FIRST\nxxx"),
        "the whole output: {kept:.40}"
    );
    assert!(kept.ends_with("xxx\nLAST\n"));
    assert_eq!(kept.len(), total);
    assert!(
        tail.starts_with(&format!(
            "[output truncated: {} bytes omitted; the cap is 100 bytes, showing the first 0 and the last 100 of {total} bytes]\n",
            total - 100
        )),
        "{tail}"
    );
}

#[tokio::test]
async fn close_terminates_the_whole_process_group_and_records_cancelled() {
    let mut fx = Fixture::with(|s| s.with_term_grace(Duration::from_secs(20)));
    make_fifo(&fx.path("grandchild.fifo"));
    // The trap shows that SIGTERM came first: the shell gets to say so before it goes.
    let command =
        "trap 'echo terminated; exit 0' TERM; sleep 1000 & echo $! > grandchild.fifo; wait";
    let id = fx
        .supervisor
        .submit(AgentName::lead(), command, fx.workspace())
        .await
        .unwrap();
    let grandchild = pid_from(fx.path("grandchild.fifo")).await;
    fx.clock.advance_millis(250);
    let started = std::time::Instant::now();
    tokio::time::timeout(super::PATIENCE, fx.supervisor.close())
        .await
        .unwrap();
    // The shell honoured SIGTERM, so close did not sit out the 20 s grace.
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        process_exits_within(grandchild, Duration::from_secs(5)),
        "grandchild {grandchild} survived close"
    );
    assert!(fx.supervisor.is_idle());
    let completion = fx
        .completions
        .try_recv()
        .expect("close sends the completion");
    assert_eq!(
        completion,
        JobCompletion {
            job_id: id,
            agent: AgentName::lead(),
            command: command.to_owned(),
            exit_code: None,
            status: JobEnd::Cancelled,
            output_tail: "terminated\n".to_owned(),
            started_at_utc: at("2026-07-30T08:00:00.000Z"),
            finished_at_utc: at("2026-07-30T08:00:00.250Z"),
        }
    );
    let record = fx.record_json(id);
    assert_eq!(record["status"], "cancelled");
    assert_eq!(record["exit_code"], serde_json::Value::Null);
}

#[tokio::test]
async fn close_kills_a_job_that_ignores_sigterm_once_the_grace_has_passed() {
    let mut fx = Fixture::with(|s| s.with_term_grace(Duration::from_millis(300)));
    make_fifo(&fx.path("grandchild.fifo"));
    // An ignored signal stays ignored in the children, so nothing in the group obeys SIGTERM.
    let command = "trap '' TERM; sleep 1000 & echo $! > grandchild.fifo; wait";
    let id = fx
        .supervisor
        .submit(AgentName::lead(), command, fx.workspace())
        .await
        .unwrap();
    let grandchild = pid_from(fx.path("grandchild.fifo")).await;
    tokio::time::timeout(super::PATIENCE, fx.supervisor.close())
        .await
        .unwrap();
    assert!(
        process_exits_within(grandchild, Duration::from_secs(5)),
        "grandchild {grandchild} survived close"
    );
    let completion = fx.completions.try_recv().unwrap();
    assert_eq!(
        (completion.job_id, completion.status),
        (id, JobEnd::Cancelled)
    );
    assert_eq!(fx.record_json(id)["status"], "cancelled");
}

#[tokio::test]
async fn a_job_past_its_time_limit_is_timed_out_with_its_whole_group() {
    let mut fx = Fixture::with(|s| s.with_timeout(Some(Duration::from_millis(300))));
    make_fifo(&fx.path("grandchild.fifo"));
    let id = fx
        .supervisor
        .submit(
            AgentName::lead(),
            "echo before; sleep 1000 & echo $! > grandchild.fifo; wait",
            fx.workspace(),
        )
        .await
        .unwrap();
    let grandchild = pid_from(fx.path("grandchild.fifo")).await;
    let completion = fx.next_completion().await;
    assert_eq!(completion.job_id, id);
    assert_eq!(completion.status, JobEnd::TimedOut);
    assert_eq!(completion.exit_code, None);
    assert_eq!(completion.output_tail, "before\n");
    assert!(
        process_exits_within(grandchild, Duration::from_secs(5)),
        "grandchild {grandchild} survived the time limit"
    );
    assert_eq!(fx.record_json(id)["status"], "timed_out");
}

#[tokio::test]
async fn several_jobs_run_at_once_and_end_independently() {
    let mut fx = Fixture::new();
    let mut ids = Vec::new();
    for n in 0..5 {
        make_fifo(&fx.path(&format!("go-{n}.fifo")));
        let command = format!("read line < go-{n}.fifo; echo \"job {n} $line\"");
        ids.push(
            fx.supervisor
                .submit(AgentName::lead(), &command, fx.workspace())
                .await
                .unwrap(),
        );
    }
    assert_eq!(ids, (1..=5).map(seq_id).collect::<Vec<_>>());
    // All five are held at their FIFO at the same time.
    assert_eq!(fx.supervisor.running_count(), 5);
    for n in (0..5).rev() {
        release(fx.path(&format!("go-{n}.fifo")), "go\n").await;
        let completion = fx.next_completion().await;
        assert_eq!(completion.job_id, ids[n]);
        assert_eq!(completion.output_tail, format!("job {n} go\n"));
        assert_eq!(completion.status, JobEnd::Completed);
    }
    fx.supervisor.close().await;
    assert!(fx.supervisor.is_idle());
    for id in ids {
        assert_eq!(fx.record_json(id)["status"], "completed");
    }
}

#[tokio::test]
async fn a_job_stops_counting_as_running_only_after_its_completion_is_sent() {
    let mut fx = Fixture::new();
    const JOBS: usize = 40;
    for _ in 0..JOBS {
        fx.supervisor
            .submit(AgentName::lead(), "true", fx.workspace())
            .await
            .unwrap();
    }
    // What a quiescence check relies on: at any moment, every job is either still counted
    // running or its completion is already on the channel. (Count first, then drain.) On this
    // single-threaded runtime the check runs between any two steps of the job tasks, so an
    // `.await` between "not running" and "sent" would be caught.
    let mut received = 0;
    tokio::time::timeout(super::PATIENCE, async {
        loop {
            let running = fx.supervisor.running_count();
            while fx.completions.try_recv().is_ok() {
                received += 1;
            }
            assert!(
                received + running >= JOBS,
                "{running} running and {received} received of {JOBS}: a job was neither"
            );
            if running == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    assert_eq!(received, JOBS);
}

#[tokio::test]
async fn a_job_that_cannot_start_is_refused_and_recorded_failed() {
    let mut fx = Fixture::new();
    let missing = fx.path("no-such-folder");
    let err = fx
        .supervisor
        .submit(AgentName::lead(), "true", &missing)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "job_start_failed");
    assert!(matches!(err, JobError::Start(_)));
    assert!(fx.supervisor.is_idle());
    let record = fx.record_json(seq_id(1));
    assert_eq!(record["status"], "failed");
    assert!(
        record["output_tail"]
            .as_str()
            .unwrap()
            .starts_with("[cannot start sh:"),
        "{record}"
    );
    fx.supervisor.close().await;
    assert!(
        fx.completions.try_recv().is_err(),
        "the caller got the error instead"
    );
}

#[tokio::test]
async fn no_job_starts_after_close() {
    let mut fx = Fixture::new();
    fx.supervisor.close().await;
    let err = fx
        .supervisor
        .submit(AgentName::lead(), "touch ran", fx.workspace())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "jobs_closed");
    assert!(!fx.path("ran").exists());
    assert!(!fx.layout.jobs_dir().exists());
    assert!(fx.completions.try_recv().is_err());
}

/// A crash while staging an artifact leaves `.<name>.tmp-<pid>-<n>`: the next start removes
/// those whose writer is gone, and leaves a live writer's and every artifact alone.
#[tokio::test]
async fn stale_staged_artifacts_of_a_dead_writer_are_removed() {
    let fx = Fixture::new();
    let layout = troupe::layout::Layout::new(fx.workspace());
    let dir = layout.artifacts_dir(&AgentName::lead());
    std::fs::create_dir_all(&dir).unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = dir.join(format!(".0195.txt.tmp-{dead}-3"));
    let live = dir.join(format!(".0196.txt.tmp-{}-0", std::process::id()));
    let kept = dir.join("0197.txt");
    for path in [&stale, &live, &kept] {
        std::fs::write(path, "output").unwrap();
    }
    assert_eq!(troupe::store::artifacts::remove_stale_temps(&layout), 1);
    assert!(!stale.exists());
    assert!(live.exists());
    assert!(kept.exists());
}
