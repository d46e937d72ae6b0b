//! Durable storage: the primitives every durable write goes through, and the two stores.
//!
//! - [`durable`]: atomic replace (temp file → fsync → rename → folder fsync), no-clobber create,
//!   durable rename. **Architecture Invariant:** no other module writes a durable file itself.
//! - [`artifacts`]: tool results too large for a history, kept whole under `.troupe/artifacts/`;
//!   [`artifact_stream`]: a command's output written to one as it is read, redacted and bounded.
//! - [`events`]: `.troupe/events.jsonl`, the run's event stream (SPEC §10): cheap appends with a
//!   gapless `seq`, readers that follow it, and the stores' decorators that report to it.
//! - [`journal`]: append-only logs (transcripts, audit, quarantine journals, the protocol
//!   archive): a torn last line is cut before the next append, under a lock on the log.
//! - [`read`]: opening troupe's own files (and workspace files) only when they are regular files,
//!   never blocking on a FIFO or device.
//! - [`lock`]: cross-process exclusive locks on sidecar files (std `File::lock`).
//! - [`lock_probe`]: whether a lock file is held, asked of the kernel without taking the lock.
//! - [`document`]: the `TeamDocument` port: a team's small whole documents (cron jobs), in a
//!   workspace's file (`FileDocument`) or a shared team's database.
//! - [`memory`]: durable agent memory (SPEC §9) on the `MemoryRecords` port: one Markdown
//!   record per file (`FileMemory`), or per row of a shared team.
//! - [`mailbox`]: the `MailboxStore` port and its file implementation (SPEC §3).
//! - [`protocol`]: the `ProtocolStore` port and its JSON implementation (SPEC §5).
//! - [`tasks`]: the `TaskBoard` port (the lead's task board) and its file implementation.
//! - [`postgres`]: the same ports in PostgreSQL, for teams across processes and hosts.
//! - [`roster`]: the `LeasedRoster` port (a shared team's roster with teammate leases) and
//!   the `RosterReader` port (the roster as inspection reads it: `team.json` or the database);
//!   [`roster_records`]: the `RosterRecords` port a running team's roster is kept on
//!   (`FileRoster`: `team.json`; `LeasedRecords`: over a `LeasedRoster`).
//! - [`usage`]: `.troupe/usage.jsonl`, the token usage of every model response, and its totals;
//!   [`usage_groups`]: the same summed per agent, model and day (what cost is reckoned on), and
//!   `FileUsage`, the file adapter of the `TeamUsage` port.
//! - [`retention`]: what `troupe gc` may remove (issue 45): the policy, the one rule engine
//!   and the `Prune` port of both backends.
//! - [`team_copy`]: the one way records kept locally (audit, usage, job records) are copied to
//!   a shared team's store.

pub mod artifact_stream;
pub mod artifacts;
pub mod document;
pub mod durable;
pub mod events;
pub mod journal;
pub mod lock;
pub mod lock_probe;
pub mod mailbox;
pub mod memory;
pub(crate) mod moves;
pub mod postgres;
pub mod protocol;
pub mod read;
pub mod recordings;
pub mod response_ack;
pub mod retention;
pub mod roster;
pub mod roster_records;
pub mod tasks;
pub mod team_copy;
pub mod usage;
pub mod usage_groups;

use crate::error::ErrorCode;

/// An I/O failure with the path it happened on.
#[derive(Debug, thiserror::Error)]
#[error("{action} {path}: {source}")]
pub struct IoError {
    pub action: &'static str,
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    pub fn new(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        Self {
            action,
            path: path.display().to_string(),
            source,
        }
    }
}

impl ErrorCode for IoError {
    fn code(&self) -> &'static str {
        "storage_error"
    }
}

/// A failure of a database backend (PostgreSQL), with its stable code: `store_unavailable`
/// (no connection), `store_timeout` (a statement cancelled by its time-out),
/// `store_schema_newer` (the database was migrated by a newer troupe), `store_error` (any
/// other refusal), `store_corrupt` (a row troupe cannot read back), `invalid_arguments`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    pub code: &'static str,
    pub message: String,
    /// The connection broke under the statement (a server restart): the statement did not
    /// complete, or — for an autocommit statement — its outcome is unknown. Operations that are
    /// safe to repeat are retried on such an error (`postgres::retrying`).
    pub connection_lost: bool,
}

impl BackendError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            connection_lost: false,
        }
    }
}

impl ErrorCode for BackendError {
    fn code(&self) -> &'static str {
        self.code
    }
}

/// Why a port with a file adapter and a database adapter failed: the file system's error or
/// the database's, each with its own stable code.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl ErrorCode for PortError {
    fn code(&self) -> &'static str {
        match self {
            Self::Io(e) => e.code(),
            Self::Backend(e) => e.code(),
        }
    }
}

/// A shared team's state as `troupe gc --store` prunes it (`postgres::retention::PgState`), on
/// a store connected to `url` for `team` (its schema brought up to date first).
pub async fn shared_state(
    url: &str,
    team: &str,
) -> Result<std::sync::Arc<dyn retention::Prune>, BackendError> {
    let store = postgres::PgStore::connect(url, team).await?;
    Ok(std::sync::Arc::new(postgres::retention::PgState::new(
        store,
    )))
}

/// Whether a store URL names PostgreSQL (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}
