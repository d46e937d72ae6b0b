//! Background jobs: the supervisor (real processes, records, completions, close), the `shell`
//! tool's `run_in_background` through the real dispatch path, and the `jobs` inspection view.

mod inspect;
mod shell;
mod supervisor;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use troupe::clock::ManualClock;
use troupe::ids::SequentialIds;
use troupe::jobs::{JobCompletion, JobId, JobSupervisor};
use troupe::layout::Layout;

pub use crate::tools::shell::{process_exits_within, read_pid};

/// Long enough for a loaded 2-core machine; a passing test never waits for it.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub layout: Layout,
    pub clock: ManualClock,
    pub supervisor: Arc<JobSupervisor>,
    pub completions: UnboundedReceiver<JobCompletion>,
}

impl Fixture {
    /// A supervisor on a fresh workspace: manual clock at the SPEC epoch, sequential ids, no
    /// time limit, a short SIGTERM grace.
    pub fn new() -> Self {
        Self::with(|s| s)
    }

    pub fn with(configure: impl FnOnce(JobSupervisor) -> JobSupervisor) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let clock = ManualClock::at_spec_epoch();
        let (tx, completions) = unbounded_channel();
        let supervisor = JobSupervisor::new(
            layout.clone(),
            Arc::new(clock.clone()),
            Arc::new(SequentialIds::new()),
            tx,
        )
        .with_timeout(None)
        .with_term_grace(Duration::from_millis(500));
        Self {
            dir,
            layout,
            clock,
            supervisor: Arc::new(configure(supervisor)),
            completions,
        }
    }

    pub fn workspace(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The next completion, waiting at most [`PATIENCE`].
    pub async fn next_completion(&mut self) -> JobCompletion {
        tokio::time::timeout(PATIENCE, self.completions.recv())
            .await
            .expect("no completion arrived in time")
            .expect("the completion channel closed")
    }

    /// The record file of a job, as JSON.
    pub fn record_json(&self, id: JobId) -> serde_json::Value {
        let path = self.layout.jobs_dir().join(format!("{id}.json"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }
}

/// The n-th id of a fresh `SequentialIds`.
pub fn seq_id(n: u64) -> JobId {
    JobId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap()
}

/// Creates a FIFO. A job blocks on it until the test writes (or reads) its end, which lets a
/// test hold a job at a known point without sleeping.
pub fn make_fifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
}

/// Writes `text` into a FIFO (blocks, off the runtime, until the job opens it for reading).
pub async fn release(fifo: PathBuf, text: &'static str) {
    tokio::time::timeout(
        PATIENCE,
        tokio::task::spawn_blocking(move || std::fs::write(fifo, text).unwrap()),
    )
    .await
    .expect("the job never opened its FIFO")
    .unwrap();
}

/// Reads a pid the job writes into a FIFO (blocks, off the runtime, until it has).
pub async fn pid_from(fifo: PathBuf) -> i32 {
    tokio::time::timeout(
        PATIENCE,
        tokio::task::spawn_blocking(move || read_pid(&fifo)),
    )
    .await
    .expect("the job never wrote its pid")
    .unwrap()
}
