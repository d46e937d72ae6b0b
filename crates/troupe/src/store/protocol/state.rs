//! `state.json`: reading and validating the snapshot, with a cache of the last good read.
//!
//! Every operation re-reads the file under the lock (another process may have written it). The
//! bytes are compared with the last bytes that passed validation and parsed again only when they
//! differ, so an unchanged file costs one small read and a comparison.

use std::path::PathBuf;

use troupe_wire::{ProtocolRequest, ProtocolSnapshot};

use super::ProtocolError;
use crate::store::read::{read_regular, Links, MAX_STATE_FILE_BYTES};

#[derive(Debug)]
pub(super) struct StateFile {
    path: PathBuf,
    /// The bytes behind `requests`; `None` when the file does not exist (an empty store).
    bytes: Option<Vec<u8>>,
    /// The validated snapshot of `bytes`, in array (creation) order.
    requests: Vec<ProtocolRequest>,
    /// False until a read succeeded (and after `reset`): forces the next read to parse.
    loaded: bool,
}

impl StateFile {
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            bytes: None,
            requests: Vec::new(),
            loaded: false,
        }
    }

    pub(super) fn requests(&self) -> &[ProtocolRequest] {
        &self.requests
    }

    /// Re-reads the file; on any error the previous good snapshot is kept in memory (and the
    /// error is returned, so the caller does not act on it).
    pub(super) fn reload(&mut self) -> Result<(), ProtocolError> {
        let bytes = read_regular(&self.path, Links::Refuse, MAX_STATE_FILE_BYTES)?;
        if self.loaded && bytes == self.bytes {
            return Ok(());
        }
        let requests = match &bytes {
            None => Vec::new(),
            Some(raw) => ProtocolSnapshot::from_json_bytes(raw)
                .map_err(|e| ProtocolError::Corrupt {
                    path: self.path.display().to_string(),
                    why: e.to_string(),
                })?
                .into_requests(),
        };
        self.bytes = bytes;
        self.requests = requests;
        self.loaded = true;
        Ok(())
    }

    /// Records what was just written.
    pub(super) fn written(&mut self, bytes: Vec<u8>, requests: Vec<ProtocolRequest>) {
        self.bytes = Some(bytes);
        self.requests = requests;
        self.loaded = true;
    }

    pub(super) fn reset(&mut self) {
        *self = Self::new(std::mem::take(&mut self.path));
    }
}
