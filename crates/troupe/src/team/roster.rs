//! The roster: every teammate's role and status, kept in memory and written to `team.json` on
//! each change so that `troupe status` (another process) sees it.
//!
//! Adding a teammate (or replacing a stopped one) is written durably: its name, role and plan
//! rule must survive a crash. Status changes are atomic but not fsynced: they happen at every
//! worker start and stop, and a status lost in a crash is rebuilt at the next start anyway
//! (`running` comes back `idle`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use troupe_wire::{AgentName, TeamRoster, TeammateRecord, TeammateStatus};

use crate::clock::Clock;
use crate::layout::Layout;
use crate::store::roster::LeasedRoster;
use crate::store::{durable, BackendError, IoError};

pub use crate::store::roster::{read_file, RosterFileError};

pub struct Roster {
    layout: Layout,
    clock: Arc<dyn Clock>,
    /// The records; with a database, the last ones read (used when a read fails).
    records: Mutex<BTreeMap<AgentName, TeammateRecord>>,
    /// The roster in PostgreSQL: the truth, shared with workers in other processes.
    pg: Option<Arc<dyn LeasedRoster>>,
}

impl Roster {
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
            pg: None,
        })
    }

    /// The roster of a team in PostgreSQL. Teammates that were `running` or `failed` and whose
    /// lease nobody holds any more (their worker is gone) come back `idle`, as in `load`.
    pub async fn open_leased(
        layout: &Layout,
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
            layout: layout.clone(),
            clock,
            records: Mutex::new(BTreeMap::new()),
            pg: Some(pg),
        };
        roster.all().await;
        Ok(roster)
    }

    /// Reads the database roster into the cache; on failure the cache stands (and says so).
    async fn refresh(&self) {
        let Some(pg) = &self.pg else { return };
        match pg.all().await {
            Ok(records) => {
                *self.lock() = records.into_iter().map(|r| (r.name.clone(), r)).collect();
            }
            Err(e) => tracing::warn!("could not read the roster ({e}); using the last one read"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<AgentName, TeammateRecord>> {
        crate::sync::lock(&self.records)
    }

    pub async fn get(&self, name: &AgentName) -> Option<TeammateRecord> {
        if let Some(pg) = &self.pg {
            match pg.get(name).await {
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
        }
        self.lock().get(name).cloned()
    }

    pub async fn all(&self) -> Vec<TeammateRecord> {
        self.refresh().await;
        self.lock().values().cloned().collect()
    }

    /// Adds a new teammate, durably; false if the name is taken.
    pub async fn add(&self, record: TeammateRecord) -> Result<bool, IoError> {
        if let Some(pg) = &self.pg {
            let added = pg.add(&record).await.map_err(|e| self.db_error(e))?;
            if added {
                self.lock().insert(record.name.clone(), record);
            }
            return Ok(added);
        }
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

    /// Replaces, durably, a teammate that is shut down or failed with a new one of the same
    /// name (a respawn); false if there is none or it is running or idle. The old record is
    /// kept in memory if the write fails.
    pub async fn replace_stopped(&self, record: TeammateRecord) -> Result<bool, IoError> {
        if let Some(pg) = &self.pg {
            let replaced = pg
                .replace_stopped(&record)
                .await
                .map_err(|e| self.db_error(e))?;
            if replaced {
                self.lock().insert(record.name.clone(), record);
            }
            return Ok(replaced);
        }
        crate::sync::blocking(|| self.replace_stopped_on_file(record))
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

    /// Sets a status (and its detail); returns the previous status.
    pub async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    ) -> Result<Option<TeammateStatus>, IoError> {
        if let Some(pg) = &self.pg {
            let previous = pg
                .set_status(name, status, detail.clone(), self.clock.now())
                .await
                .map_err(|e| self.db_error(e))?;
            if let Some(record) = self.lock().get_mut(name) {
                record.status = status;
                record.detail = detail;
            }
            return Ok(previous);
        }
        crate::sync::blocking(|| self.set_status_on_file(name, status, detail))
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

    fn db_error(&self, e: BackendError) -> IoError {
        IoError::new(
            "write",
            std::path::Path::new("the roster in PostgreSQL"),
            std::io::Error::other(e.to_string()),
        )
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
