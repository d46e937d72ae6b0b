//! The roster of a team whose teammates run under leases (a team shared through PostgreSQL):
//! the port the team runtime, inspection and the lead's tools use, whatever holds it.
//!
//! A process **leases** a teammate before it runs any of its turns; a lease this holder has is
//! [`Lease::Kept`], one it just took [`Lease::New`] (whatever it knew of the teammate may be
//! stale), one another live holder has [`Lease::Taken`]. Workers register with heartbeats, so
//! `troupe status` can show them ([`WorkerRow`]).

use std::path::{Path, PathBuf};

use troupe_wire::{AgentName, TeamRoster, TeammateRecord, TeammateStatus, UtcTime, WireError};

use super::read::{read_regular, Links, MAX_STATE_FILE_BYTES};
use super::BackendError;

/// Why `team.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RosterFileError {
    #[error("read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Corrupt { path: String, source: WireError },
}

/// Reads `team.json` strictly; a missing file is an empty roster, anything but a regular file an
/// error (without blocking on a FIFO). What the runtime loads and `troupe status` shows.
pub fn read_file(path: &Path) -> Result<TeamRoster, RosterFileError> {
    let read = read_regular(path, Links::Refuse, MAX_STATE_FILE_BYTES).map_err(|e| {
        RosterFileError::Io {
            path: e.path,
            source: e.source,
        }
    })?;
    match read {
        Some(bytes) => {
            TeamRoster::from_json_bytes(&bytes).map_err(|source| RosterFileError::Corrupt {
                path: path.display().to_string(),
                source,
            })
        }
        None => Ok(TeamRoster::empty()),
    }
}

/// A team's roster as the commands that look at it read it: a workspace's `team.json`
/// ([`FileRosterReader`]) or a shared team's roster and worker registry (the PostgreSQL
/// adapter). Reading changes nothing.
#[async_trait::async_trait]
pub trait RosterReader: Send + Sync {
    /// Every teammate's record.
    async fn teammates(&self) -> Result<Vec<TeammateRecord>, RosterReadError>;
    /// The team's worker processes, where teammates run under leases (none on files).
    async fn workers(&self) -> Result<Option<Vec<WorkerRow>>, BackendError>;
}

/// Why a roster could not be read: its file's error, or the database's.
#[derive(Debug, thiserror::Error)]
pub enum RosterReadError {
    #[error(transparent)]
    File(#[from] RosterFileError),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A workspace's roster in `team.json` (none yet: no teammates).
#[derive(Debug, Clone)]
pub struct FileRosterReader {
    path: PathBuf,
}

impl FileRosterReader {
    pub fn open(layout: &crate::layout::Layout) -> Self {
        Self {
            path: layout.team_file(),
        }
    }
}

#[async_trait::async_trait]
impl RosterReader for FileRosterReader {
    async fn teammates(&self) -> Result<Vec<TeammateRecord>, RosterReadError> {
        Ok(crate::sync::blocking(|| read_file(&self.path))?.teammates)
    }

    async fn workers(&self) -> Result<Option<Vec<WorkerRow>>, BackendError> {
        Ok(None)
    }
}

/// One worker process, as `troupe status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerRow {
    pub id: String,
    pub host: String,
    pub pid: i32,
    pub role: String,
    /// Milliseconds since its last heartbeat (database time).
    pub heartbeat_age_ms: i64,
    /// The teammates it holds a live lease on.
    pub teammates: Vec<String>,
}

/// Who holds a teammate.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub name: String,
    pub holder: Option<String>,
    /// Whether the lease is still live (database time).
    pub live: bool,
}

/// What [`LeasedRoster::acquire`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Another holder's lease is live.
    Taken,
    /// This holder had it already (same fencing token).
    Kept,
    /// This holder has it now under a new token: whatever it knew of the teammate may be
    /// stale (another holder may have run it meanwhile).
    New,
}

/// A team's roster with teammate leases, as this process (its holder) sees it. Reads and
/// lease operations are safe to repeat. Async: the database is awaited.
#[async_trait::async_trait]
pub trait LeasedRoster: Send + Sync {
    /// This process as a holder (also its id in the worker registry).
    fn holder(&self) -> &str;
    async fn all(&self) -> Result<Vec<TeammateRecord>, BackendError>;
    async fn get(&self, name: &AgentName) -> Result<Option<TeammateRecord>, BackendError>;
    /// Who holds each teammate, and whether that lease is live.
    async fn holders(&self) -> Result<Vec<Holder>, BackendError>;
    /// Whether this holder's lease on `name` is live.
    async fn holds(&self, name: &AgentName) -> Result<bool, BackendError>;
    /// Takes (or keeps) the lease on `name` unless another live holder has it.
    async fn acquire(&self, name: &AgentName) -> Result<Lease, BackendError>;
    /// Adds a new teammate; false if the name is taken.
    async fn add(&self, record: &TeammateRecord) -> Result<bool, BackendError>;
    /// Replaces a teammate that is shut down or failed (a respawn); false if there is none or
    /// it is running or idle. The new teammate's lease starts free.
    async fn replace_stopped(&self, record: &TeammateRecord) -> Result<bool, BackendError>;
    /// Sets a status and its detail; returns the previous status.
    async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
        now: UtcTime,
    ) -> Result<Option<TeammateStatus>, BackendError>;
    /// The worker processes of the team, as `troupe status` shows them.
    async fn workers(&self) -> Result<Vec<WorkerRow>, BackendError>;
}
