//! Background shell jobs: `shell` with `run_in_background: true` (SPEC §4.1).
//!
//! # Layout
//!
//! - [`supervisor`]: the [`JobSupervisor`]: starts jobs, watches them to their end, reports each
//!   end once as a [`JobCompletion`] on a channel, and stops every running job on `close`.
//! - [`record`]: [`JobId`], the job statuses and the record file `.troupe/jobs/<job-id>.json`
//!   (written at start as `running`, replaced once at the end), read back by `troupe jobs`.
//! - [`orphans`]: jobs a killed run left behind: the `<job-id>.process` note naming a running
//!   job's process group, and `settle_orphans`, which at start stops such a group (only when it
//!   is provably the job's) and records the job `cancelled`. It builds on `record`, never the
//!   reverse.
//!
//! **Architecture Invariant:** every job that was submitted successfully ends exactly once: one
//! final record and one [`JobCompletion`] sent — whether it exited, timed out or was cancelled
//! by `close`. Its completion is on the channel before it stops counting as running, so a
//! quiescence check that sees [`JobSupervisor::is_idle`] and then drains the channel misses
//! nothing.
//!
//! **API Boundary:** the supervisor knows nothing of agents' loops: turning a completion into
//! a lead event is the driver's business.

pub mod orphans;
pub mod record;
pub mod supervisor;

pub use record::{JobEnd, JobId, JobRecord, JobState, JobStatus};
pub use supervisor::{JobCompletion, JobSupervisor, DEFAULT_JOB_TIMEOUT, DEFAULT_TERM_GRACE};

use crate::error::ErrorCode;
use crate::store::IoError;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// `close` has begun: no new jobs.
    #[error("background jobs are closed: the runtime is shutting down")]
    Closed,
    /// `submit` was called outside a Tokio runtime.
    #[error("background jobs need a Tokio runtime")]
    NoRuntime,
    #[error("cannot start sh: {0}")]
    Start(std::io::Error),
    #[error(transparent)]
    Storage(#[from] IoError),
    /// A record file that does not parse or breaks an invariant; never repaired silently.
    #[error("job record {path} is corrupt: {why}")]
    Corrupt { path: String, why: String },
    /// A shared team's database failed (its own stable code).
    #[error(transparent)]
    Backend(crate::store::BackendError),
}

impl ErrorCode for JobError {
    fn code(&self) -> &'static str {
        match self {
            Self::Closed => "jobs_closed",
            Self::NoRuntime => "jobs_no_runtime",
            Self::Start(_) => "job_start_failed",
            Self::Storage(e) => e.code(),
            Self::Corrupt { .. } => "job_record_corrupt",
            Self::Backend(e) => e.code(),
        }
    }
}
