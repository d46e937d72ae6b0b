//! `.troupe/cron.json`: the durable cron jobs, reloaded by the next run.
//!
//! ```json
//! {"version":1,"jobs":[
//!  {"id":"<uuid>","cron":"30 2 * * *","timezone":"Europe/Berlin","prompt":"…",
//!   "recurring":true,"created_at_utc":"…Z","next_fire_utc":"…Z"}]}
//! ```
//!
//! Only durable jobs are here, so there is no `durable` key. Reading is strict: unknown or
//! missing keys, another version, a non-canonical or repeated id, a blank prompt, an invalid
//! expression or zone make the whole file an error naming the path — never silently repaired,
//! because a repaired file would drop or invent scheduled work. A missing file is no jobs, and
//! reading never creates anything.
//!
//! Every write is a read-modify-write under the cross-process lock `.troupe/.cron.lock`, through
//! `durable::replace` (temp file, fsync, rename, folder fsync): a failed write leaves the old
//! file. A shared team keeps the same document in its database (`troupe_documents`, name
//! `cron`), read and checked the same way, changed in one locked transaction. Both are adapters
//! of the `TeamDocument` port (`store/document.rs`).

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use troupe_wire::{strict, Content, UtcTime};

use super::schedule::CronSchedule;
use super::{CronJob, CronJobId};
use crate::error::ErrorCode;
use crate::layout::Layout;
use crate::store::document::{FileDocument, TeamDocument};
use crate::store::{BackendError, IoError, PortError};

/// The name of a shared team's document of durable jobs.
pub const CRON_DOCUMENT: &str = "cron";

/// The version this code reads and writes.
pub const CRON_FILE_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum CronStoreError {
    #[error(transparent)]
    Io(#[from] IoError),
    /// A shared team's database failed (its own stable code).
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{path} is not a valid cron store: {reason}")]
    Corrupt { path: String, reason: String },
}

impl ErrorCode for CronStoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Io(e) => e.code(),
            Self::Backend(e) => e.code(),
            Self::Corrupt { .. } => "cron_state_corrupt",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CronFile {
    version: u32,
    jobs: Vec<JobRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobRecord {
    id: CronJobId,
    cron: String,
    timezone: String,
    prompt: Content,
    recurring: bool,
    created_at_utc: UtcTime,
    next_fire_utc: UtcTime,
}

impl JobRecord {
    fn of(job: &CronJob) -> Self {
        Self {
            id: job.id,
            cron: job.schedule.expression().to_owned(),
            timezone: job.schedule.timezone().to_owned(),
            prompt: job.prompt.clone(),
            recurring: job.recurring,
            created_at_utc: job.created_at_utc,
            next_fire_utc: job.next_fire_utc,
        }
    }
}

/// What a write does to the stored jobs.
#[derive(Debug, Clone)]
pub enum CronChange {
    /// Adds the job, or replaces the stored job with its id.
    Put(Box<CronJob>),
    /// Sets the next fire time of a stored job; a job no longer stored is left out.
    Reschedule {
        id: CronJobId,
        next_fire_utc: UtcTime,
    },
    /// Removes a stored job (nothing if it is not stored).
    Remove(CronJobId),
}

/// The durable jobs of a team, in its document [`CRON_DOCUMENT`]: a workspace's
/// `.troupe/cron.json` ([`CronStore::new`]) or a shared team's row ([`CronStore::on`] with
/// the adapter bootstrap chose) — read and checked the same way, changed under its lock.
#[derive(Clone)]
pub struct CronStore {
    document: Arc<dyn TeamDocument>,
}

impl std::fmt::Debug for CronStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronStore")
            .field("document", &self.document.place())
            .finish()
    }
}

impl From<PortError> for CronStoreError {
    fn from(e: PortError) -> Self {
        match e {
            PortError::Io(e) => Self::Io(e),
            PortError::Backend(e) => Self::Backend(e),
        }
    }
}

impl CronStore {
    /// The durable jobs in the workspace's `.troupe/cron.json`.
    pub fn new(layout: &Layout) -> Self {
        Self::on(Arc::new(FileDocument::cron(layout)))
    }

    /// The durable jobs in `document`.
    pub fn on(document: Arc<dyn TeamDocument>) -> Self {
        Self { document }
    }

    /// Where the jobs are, for messages (the file's path, or the database's row).
    pub fn place(&self) -> String {
        self.document.place()
    }

    /// The stored jobs in document order (all durable). No document is no jobs.
    pub async fn load(&self) -> Result<Vec<CronJob>, CronStoreError> {
        match self.document.read().await? {
            Some(bytes) => self.parse(&bytes),
            None => Ok(Vec::new()),
        }
    }

    /// Applies `changes` in order to the stored jobs, under the lock, in one atomic write.
    pub async fn apply(&self, changes: &[CronChange]) -> Result<(), CronStoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let this = self.clone();
        let changes = changes.to_vec();
        self.document
            .update(Box::new(move |current| {
                let reason = |e: CronStoreError| match e {
                    CronStoreError::Corrupt { reason, .. } => reason,
                    other => other.to_string(),
                };
                let jobs = match current {
                    Some(bytes) => this.parse(&bytes).map_err(reason)?,
                    None => Vec::new(),
                };
                this.render(changed(jobs, &changes)).map_err(reason)
            }))
            .await?
            .map_err(|reason| self.corrupt(reason))
    }

    /// The document of `jobs`, as the file holds it.
    fn render(&self, jobs: Vec<CronJob>) -> Result<Vec<u8>, CronStoreError> {
        let file = CronFile {
            version: CRON_FILE_VERSION,
            jobs: jobs.iter().map(JobRecord::of).collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| self.corrupt(e))?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    fn corrupt(&self, reason: impl std::fmt::Display) -> CronStoreError {
        CronStoreError::Corrupt {
            path: self.document.place(),
            reason: reason.to_string(),
        }
    }

    fn parse(&self, bytes: &[u8]) -> Result<Vec<CronJob>, CronStoreError> {
        let file: CronFile = strict::from_json_bytes(bytes, "").map_err(|e| self.corrupt(e))?;
        if file.version != CRON_FILE_VERSION {
            return Err(self.corrupt(format_args!(
                "version {} is not supported (expected {CRON_FILE_VERSION})",
                file.version
            )));
        }
        let mut seen = HashSet::new();
        let mut jobs = Vec::with_capacity(file.jobs.len());
        for record in file.jobs {
            if !seen.insert(record.id) {
                return Err(self.corrupt(format_args!("job id {} appears twice", record.id)));
            }
            let schedule = CronSchedule::parse(&record.cron, &record.timezone)
                .map_err(|e| self.corrupt(format_args!("job {}: {e}", record.id)))?;
            if schedule.expression() != record.cron {
                return Err(self.corrupt(format_args!(
                    "job {}: cron {:?} has surrounding whitespace",
                    record.id, record.cron
                )));
            }
            jobs.push(CronJob {
                id: record.id,
                schedule,
                prompt: record.prompt,
                recurring: record.recurring,
                durable: true,
                created_at_utc: record.created_at_utc,
                next_fire_utc: record.next_fire_utc,
            });
        }
        Ok(jobs)
    }
}

/// `jobs` with `changes` applied in order.
fn changed(mut jobs: Vec<CronJob>, changes: &[CronChange]) -> Vec<CronJob> {
    for change in changes {
        match change {
            CronChange::Put(job) => match jobs.iter_mut().find(|j| j.id == job.id) {
                Some(stored) => *stored = (**job).clone(),
                None => jobs.push((**job).clone()),
            },
            CronChange::Reschedule { id, next_fire_utc } => {
                if let Some(stored) = jobs.iter_mut().find(|j| j.id == *id) {
                    stored.next_fire_utc = *next_fire_utc;
                }
            }
            CronChange::Remove(id) => jobs.retain(|j| j.id != *id),
        }
    }
    jobs
}
