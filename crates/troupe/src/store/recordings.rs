//! The team's run recordings as read (`replay`): which runs are recorded, and one run's
//! recording as its text. On files, `.troupe/recordings/<run>.jsonl` ([`FileRecordings`]); on a
//! shared team's database, the lines each lead process copied there (`postgres/recordings.rs`).
//! Writing is the recorder's (`replay/recorder.rs`): its own file, and a [`CopyTo`] of each line.
//!
//! [`CopyTo`]: super::team_copy::CopyTo

use crate::layout::Layout;
use crate::store::read::{read_regular, Links};
use crate::store::BackendError;

/// The largest recording read (the recorder stops writing at 256 MiB).
pub const MAX_RECORDING_READ: u64 = 257 * 1024 * 1024;

/// One line of a run's recording, as copied to the team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingLine {
    pub run: String,
    /// The line's place in the recording, from 0 (the start line).
    pub line_no: u64,
    /// The line without its newline.
    pub line: String,
}

/// The team's recordings.
#[async_trait::async_trait]
pub trait Recordings: Send + Sync {
    /// The recorded runs, oldest first.
    async fn runs(&self) -> Result<Vec<String>, BackendError>;
    /// Run `run`'s recording as text (whole lines); none when there is none.
    async fn text(&self, run: &str) -> Result<Option<String>, BackendError>;
}

/// A workspace's recordings, under `.troupe/recordings/`.
pub struct FileRecordings(pub Layout);

#[async_trait::async_trait]
impl Recordings for FileRecordings {
    async fn runs(&self) -> Result<Vec<String>, BackendError> {
        let dir = self.0.recordings_dir();
        crate::sync::offload("listing the recordings", move || {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                return Vec::new();
            };
            let mut runs: Vec<(std::time::SystemTime, String)> = entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let run = name.strip_suffix(".jsonl")?.to_owned();
                    let meta = e.metadata().ok().filter(|m| m.is_file())?;
                    Some((meta.modified().ok()?, run))
                })
                .collect();
            runs.sort();
            runs.into_iter().map(|(_, run)| run).collect()
        })
        .await
        .map_err(|e| BackendError::new("storage_error", e.to_string()))
    }

    async fn text(&self, run: &str) -> Result<Option<String>, BackendError> {
        let path = self.0.recording(run);
        crate::sync::offload("reading a recording", move || {
            let Some(bytes) = read_regular(&path, Links::Refuse, MAX_RECORDING_READ)
                .map_err(|e| BackendError::new("recording_invalid", e.to_string()))?
            else {
                return Ok(None);
            };
            String::from_utf8(bytes).map(Some).map_err(|_| {
                BackendError::new(
                    "recording_invalid",
                    format!("{} is not UTF-8", path.display()),
                )
            })
        })
        .await
        .map_err(|e| BackendError::new("storage_error", e.to_string()))?
    }
}
