//! The roster of a running team: every teammate's role and status, as the port
//! [`RosterRecords`] keeps it, with two adapters — [`FileRoster`], kept in memory and written to
//! `team.json` on each change so that `troupe status` (another process) sees it, and
//! [`LeasedRecords`], a shared team's roster (the [`LeasedRoster`] port, in PostgreSQL)
//! with the last records read kept for when a read fails.
//!
//! On files, adding a teammate (or replacing a stopped one) is written durably: its name, role
//! and plan rule must survive a crash. Status changes are atomic but not fsynced: they happen at
//! every worker start and stop, and a status lost in a crash is rebuilt at the next start anyway
//! (`running` comes back `idle`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use troupe_wire::{AgentName, TeamRoster, TeammateRecord, TeammateStatus};

use super::roster::{read_file, LeasedRoster};
use super::{durable, BackendError, IoError};
use crate::clock::Clock;
use crate::layout::Layout;

/// A running team's roster. Reads never fail (a database roster answers with the last records
/// read); writes report their storage error.
#[async_trait::async_trait]
pub trait RosterRecords: Send + Sync {
    async fn get(&self, name: &AgentName) -> Option<TeammateRecord>;
    async fn all(&self) -> Vec<TeammateRecord>;
    /// Adds a new teammate, durably; false if the name is taken.
    async fn add(&self, record: TeammateRecord) -> Result<bool, IoError>;
    /// Replaces, durably, a teammate that is shut down or failed with a new one of the same
    /// name (a respawn); false if there is none or it is running or idle.
    async fn replace_stopped(&self, record: TeammateRecord) -> Result<bool, IoError>;
    /// Sets a status (and its detail); returns the previous status.
    async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    ) -> Result<Option<TeammateStatus>, IoError>;
}

type Records = Mutex<BTreeMap<AgentName, TeammateRecord>>;

fn locked(records: &Records) -> std::sync::MutexGuard<'_, BTreeMap<AgentName, TeammateRecord>> {
    crate::sync::lock(records)
}

/// A workspace's roster: the records in memory, `team.json` written on each change.
pub struct FileRoster {
    layout: Layout,
    clock: Arc<dyn Clock>,
    records: Records,
}

impl FileRoster {
    /// [`load`](Self::load) from async code: the file is read off the async threads (a file
    /// adapter's section, `sync::blocking`).
    pub async fn open(layout: &Layout, clock: Arc<dyn Clock>) -> Result<Self, IoError> {
        crate::sync::blocking(|| Self::load(layout, clock))
    }

    /// Loads `team.json` if there is one. Teammates that were `running` or `failed` in a run that
    /// is gone come back `idle`; `shutdown` stays.
    pub fn load(layout: &Layout, clock: Arc<dyn Clock>) -> Result<Self, IoError> {
        let loaded = read_file(&layout.team_file()).map_err(|e| {
            IoError::new(
                "load",
                &layout.team_file(),
                std::io::Error::other(e.to_string()),
            )
        })?;
        let records = loaded
            .teammates
            .into_iter()
            .map(|mut r| {
                // No worker of this process runs anyone yet; a teammate that failed in an earlier
                // run gets another chance (its released message is retried, and if the cause is
                // still there it fails again and says so).
                if matches!(r.status, TeammateStatus::Running | TeammateStatus::Failed) {
                    r.status = TeammateStatus::Idle;
                    r.detail = None;
                }
                (r.name.clone(), r)
            })
            .collect();
        Ok(Self {
            layout: layout.clone(),
            clock,
            records: Mutex::new(records),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<AgentName, TeammateRecord>> {
        locked(&self.records)
    }

    /// [`Self::replace_stopped`] in `team.json` (a disk write).
    fn replace_stopped_on_file(&self, record: TeammateRecord) -> Result<bool, IoError> {
        let mut records = self.lock();
        let stopped = records.get(&record.name).is_some_and(|old| {
            matches!(
                old.status,
                TeammateStatus::Shutdown | TeammateStatus::Failed
            )
        });
        if !stopped {
            return Ok(false);
        }
        let name = record.name.clone();
        let old = records.insert(name.clone(), record);
        if let Err(e) = self.save(&records, true) {
            if let Some(old) = old {
                records.insert(name, old);
            }
            return Err(e);
        }
        Ok(true)
    }

    /// [`Self::set_status`] in `team.json` (a disk write).
    fn set_status_on_file(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    ) -> Result<Option<TeammateStatus>, IoError> {
        let mut records = self.lock();
        let Some(record) = records.get_mut(name) else {
            return Ok(None);
        };
        let previous = record.status;
        if previous == status && record.detail == detail {
            return Ok(Some(previous));
        }
        record.status = status;
        record.detail = detail;
        record.updated_at_utc = self.clock.now();
        self.save(&records, false)?;
        Ok(Some(previous))
    }

    fn save(
        &self,
        records: &BTreeMap<AgentName, TeammateRecord>,
        durably: bool,
    ) -> Result<(), IoError> {
        let roster = TeamRoster {
            version: TeamRoster::VERSION,
            teammates: records.values().cloned().collect(),
        };
        let bytes = roster.to_json_bytes();
        if durably {
            durable::ensure_real_dir(&self.layout.state_dir())?;
            durable::replace(&self.layout.team_file(), &bytes)
        } else {
            durable::replace_view(&self.layout.team_file(), &bytes)
        }
    }
}

#[async_trait::async_trait]
impl RosterRecords for FileRoster {
    async fn get(&self, name: &AgentName) -> Option<TeammateRecord> {
        self.lock().get(name).cloned()
    }

    async fn all(&self) -> Vec<TeammateRecord> {
        self.lock().values().cloned().collect()
    }

    async fn add(&self, record: TeammateRecord) -> Result<bool, IoError> {
        crate::sync::blocking(|| {
            let mut records = self.lock();
            if records.contains_key(&record.name) {
                return Ok(false);
            }
            records.insert(record.name.clone(), record);
            self.save(&records, true)?;
            Ok(true)
        })
    }

    async fn replace_stopped(&self, record: TeammateRecord) -> Result<bool, IoError> {
        crate::sync::blocking(|| self.replace_stopped_on_file(record))
    }

    async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    ) -> Result<Option<TeammateStatus>, IoError> {
        crate::sync::blocking(|| self.set_status_on_file(name, status, detail))
    }
}

/// A shared team's roster: the [`LeasedRoster`] is the truth, shared with workers in other
/// processes; the last records read answer when a read fails.
pub struct LeasedRecords {
    clock: Arc<dyn Clock>,
    records: Records,
    pg: Arc<dyn LeasedRoster>,
}

impl LeasedRecords {
    /// Teammates that were `running` or `failed` and whose lease nobody holds any more (their
    /// worker is gone) come back `idle`, as in [`FileRoster::load`].
    pub async fn open(
        clock: Arc<dyn Clock>,
        pg: Arc<dyn LeasedRoster>,
    ) -> Result<Self, BackendError> {
        let held: std::collections::HashSet<String> = pg
            .holders()
            .await?
            .into_iter()
            .filter(|h| h.live && h.holder.is_some())
            .map(|h| h.name)
            .collect();
        for record in pg.all().await? {
            if matches!(
                record.status,
                TeammateStatus::Running | TeammateStatus::Failed
            ) && !held.contains(record.name.as_str())
            {
                pg.set_status(&record.name, TeammateStatus::Idle, None, clock.now())
                    .await?;
            }
        }
        let roster = Self {
            clock,
            records: Mutex::new(BTreeMap::new()),
            pg,
        };
        roster.refresh().await;
        Ok(roster)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<AgentName, TeammateRecord>> {
        locked(&self.records)
    }

    /// Reads the database roster into the cache; on failure the cache stands (and says so).
    async fn refresh(&self) {
        match self.pg.all().await {
            Ok(records) => {
                *self.lock() = records.into_iter().map(|r| (r.name.clone(), r)).collect();
            }
            Err(e) => tracing::warn!("could not read the roster ({e}); using the last one read"),
        }
    }

    fn db_error(&self, e: BackendError) -> IoError {
        IoError::new(
            "write",
            std::path::Path::new("the roster in PostgreSQL"),
            std::io::Error::other(e.to_string()),
        )
    }
}

#[async_trait::async_trait]
impl RosterRecords for LeasedRecords {
    async fn get(&self, name: &AgentName) -> Option<TeammateRecord> {
        match self.pg.get(name).await {
            Ok(Some(record)) => {
                self.lock().insert(name.clone(), record.clone());
                return Some(record);
            }
            Ok(None) => {
                self.lock().remove(name);
                return None;
            }
            Err(e) => {
                tracing::warn!("could not read teammate {name} ({e}); using the last read")
            }
        }
        self.lock().get(name).cloned()
    }

    async fn all(&self) -> Vec<TeammateRecord> {
        self.refresh().await;
        self.lock().values().cloned().collect()
    }

    async fn add(&self, record: TeammateRecord) -> Result<bool, IoError> {
        let added = self.pg.add(&record).await.map_err(|e| self.db_error(e))?;
        if added {
            self.lock().insert(record.name.clone(), record);
        }
        Ok(added)
    }

    async fn replace_stopped(&self, record: TeammateRecord) -> Result<bool, IoError> {
        let replaced = self
            .pg
            .replace_stopped(&record)
            .await
            .map_err(|e| self.db_error(e))?;
        if replaced {
            self.lock().insert(record.name.clone(), record);
        }
        Ok(replaced)
    }

    async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    ) -> Result<Option<TeammateStatus>, IoError> {
        let previous = self
            .pg
            .set_status(name, status, detail.clone(), self.clock.now())
            .await
            .map_err(|e| self.db_error(e))?;
        if let Some(record) = self.lock().get_mut(name) {
            record.status = status;
            record.detail = detail;
        }
        Ok(previous)
    }
}
