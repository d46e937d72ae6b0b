//! The background job records as the views read them, on both backends (the `JobList` port): a
//! workspace's `.troupe/jobs/` or the records every process copied to a shared team — by
//! start time, a finished record replacing its running one.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::jobs::record::{write_and_copy, JobId, JobRecord, JobState};
use troupe::jobs::JobEnd;
use troupe::store::team_copy::{CopyTo, JobLine, TeamCopy};
use troupe_wire::{AgentName, UtcTime};

use super::{both_async, Backend, Stores};

both_async!(the_job_list_is_every_record_by_start_time,);

fn at(second: u32) -> UtcTime {
    UtcTime::parse(&format!("2026-07-30T08:00:{second:02}.000Z")).unwrap()
}

fn record(n: u128, command: &str, start: u32) -> JobRecord {
    JobRecord {
        id: JobId::from_uuid(uuid::Uuid::from_u128((0x4000 << 64) | (0x8000 << 48) | n)).unwrap(),
        agent: AgentName::lead(),
        command: command.into(),
        started_at_utc: at(start),
        state: JobState::Running,
    }
}

async fn the_job_list_is_every_record_by_start_time(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let copy = match &s.pg {
        None => CopyTo::nowhere(),
        Some(pg) => CopyTo::to(
            Some(
                Arc::new(troupe::store::postgres::jobs::PgJobs::new(pg.clone()))
                    as Arc<dyn TeamCopy<JobLine>>,
            ),
            "the team's job list misses it",
        ),
    };
    let list = s.job_list();
    assert!(list.all().await.unwrap().is_empty());
    let later = record(1, "make test", 20);
    let earlier = record(2, "make lint", 10);
    write_and_copy(&s.layout, &copy, &later).await.unwrap();
    write_and_copy(&s.layout, &copy, &earlier).await.unwrap();
    let finished = JobRecord {
        state: JobState::Finished {
            end: JobEnd::Completed,
            exit_code: Some(0),
            finished_at_utc: at(30),
            output_tail: "ok\n".into(),
        },
        ..later.clone()
    };
    write_and_copy(&s.layout, &copy, &finished).await.unwrap();
    assert_eq!(list.all().await.unwrap(), vec![earlier, finished]);
}
