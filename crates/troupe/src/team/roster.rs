//! The roster of a running team: every teammate's role and status, on the [`RosterRecords`]
//! port — a workspace's `team.json` or a shared team's database (see
//! `store/roster_records.rs`). `troupe status` (another process) reads it too.

use std::sync::Arc;

use troupe_wire::{AgentName, TeammateRecord, TeammateStatus};

use crate::clock::Clock;
use crate::layout::Layout;
use crate::store::roster::LeasedRoster;
use crate::store::roster_records::{FileRoster, LeasedRecords, RosterRecords};
use crate::store::{BackendError, IoError};

pub use crate::store::roster::{read_file, RosterFileError};

pub struct Roster {
    records: Arc<dyn RosterRecords>,
}

impl Roster {
    /// The roster kept by `records`.
    pub fn on(records: Arc<dyn RosterRecords>) -> Self {
        Self { records }
    }

    /// Loads `team.json` if there is one. Teammates that were `running` or `failed` in a run that
    /// is gone come back `idle`; `shutdown` stays.
    pub fn load(layout: &Layout, clock: Arc<dyn Clock>) -> Result<Self, IoError> {
        Ok(Self::on(Arc::new(FileRoster::load(layout, clock)?)))
    }

    /// The roster of a team in PostgreSQL. Teammates that were `running` or `failed` and whose
    /// lease nobody holds any more (their worker is gone) come back `idle`, as in `load`.
    pub async fn open_leased(
        clock: Arc<dyn Clock>,
        pg: Arc<dyn LeasedRoster>,
    ) -> Result<Self, BackendError> {
        Ok(Self::on(Arc::new(LeasedRecords::open(clock, pg).await?)))
    }

    pub async fn get(&self, name: &AgentName) -> Option<TeammateRecord> {
        self.records.get(name).await
    }

    pub async fn all(&self) -> Vec<TeammateRecord> {
        self.records.all().await
    }

    /// Adds a new teammate, durably; false if the name is taken.
    pub async fn add(&self, record: TeammateRecord) -> Result<bool, IoError> {
        self.records.add(record).await
    }

    /// Replaces, durably, a teammate that is shut down or failed with a new one of the same
    /// name (a respawn); false if there is none or it is running or idle. The old record is
    /// kept if the write fails.
    pub async fn replace_stopped(&self, record: TeammateRecord) -> Result<bool, IoError> {
        self.records.replace_stopped(record).await
    }

    /// Sets a status (and its detail); returns the previous status.
    pub async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    ) -> Result<Option<TeammateStatus>, IoError> {
        self.records.set_status(name, status, detail).await
    }
}
