//! A team's small whole documents (the lead's durable cron jobs are the document `cron`): the
//! port for where a team keeps them, read whole and changed by one read-modify-write under the
//! team's lock. Two adapters: [`FileDocument`], a workspace's file replaced under a lock file
//! (`.troupe/cron.json` under `.troupe/.cron.lock`), and the PostgreSQL one
//! (`store/postgres/document.rs`, a row changed in one locked transaction). The caller parses
//! and checks the bytes.

use std::path::PathBuf;

use super::read::{read_regular, Links, MAX_STATE_FILE_BYTES};
use super::{durable, lock, IoError, PortError};

/// A change: the current bytes (none yet) → the new bytes, or why not (nothing is written).
pub type Change = Box<dyn FnOnce(Option<Vec<u8>>) -> Result<Vec<u8>, String> + Send>;

/// One named document of a team. Async: the database is awaited.
#[async_trait::async_trait]
pub trait TeamDocument: Send + Sync {
    /// Where it is, for messages.
    fn place(&self) -> String;
    /// Its bytes, if it was ever written. Reading never creates anything.
    async fn read(&self) -> Result<Option<Vec<u8>>, PortError>;
    /// Applies `change` to the current bytes atomically under the team's lock: `Ok(Err(why))`
    /// when the change refused (nothing written).
    async fn update(&self, change: Change) -> Result<Result<(), String>, PortError>;
}

/// A document in a workspace's file: read strictly (a regular file, no symlink, bounded), every
/// change a read-modify-write under a cross-process lock file, through [`durable::replace`]
/// (temp file, fsync, rename, folder fsync): a failed write leaves the old file.
#[derive(Debug, Clone)]
pub struct FileDocument {
    /// The folder the file and its lock are in (made, refusing a symlink, at the first write).
    dir: PathBuf,
    path: PathBuf,
    lock: PathBuf,
}

impl FileDocument {
    pub fn new(dir: PathBuf, path: PathBuf, lock: PathBuf) -> Self {
        Self { dir, path, lock }
    }

    /// The durable cron jobs of a workspace: `.troupe/cron.json` under `.troupe/.cron.lock`.
    pub fn cron(layout: &crate::layout::Layout) -> Self {
        Self::new(layout.state_dir(), layout.cron_file(), layout.cron_lock())
    }

    fn read_file(&self) -> Result<Option<Vec<u8>>, IoError> {
        read_regular(&self.path, Links::Refuse, MAX_STATE_FILE_BYTES)
    }
}

#[async_trait::async_trait]
impl TeamDocument for FileDocument {
    fn place(&self) -> String {
        self.path.display().to_string()
    }

    async fn read(&self) -> Result<Option<Vec<u8>>, PortError> {
        Ok(crate::sync::blocking(|| self.read_file())?)
    }

    async fn update(&self, change: Change) -> Result<Result<(), String>, PortError> {
        let updated = crate::sync::blocking(|| -> Result<Result<(), String>, IoError> {
            durable::ensure_real_dir(&self.dir)?;
            let _guard = lock::lock_exclusive(&self.lock)?;
            let bytes = match change(self.read_file()?) {
                Ok(bytes) => bytes,
                Err(why) => return Ok(Err(why)),
            };
            durable::replace(&self.path, &bytes)?;
            Ok(Ok(()))
        });
        Ok(updated?)
    }
}
