//! The roster of a team whose teammates run under leases (a team shared through PostgreSQL):
//! the port the team runtime, inspection and the lead's tools use, whatever holds it.
//!
//! A process **leases** a teammate before it runs any of its turns; a lease this holder has is
//! [`Lease::Kept`], one it just took [`Lease::New`] (whatever it knew of the teammate may be
//! stale), one another live holder has [`Lease::Taken`]. Workers register with heartbeats, so
//! `troupe status` can show them ([`WorkerRow`]).

use troupe_wire::{AgentName, TeammateRecord, TeammateStatus, UtcTime};

use super::BackendError;

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
