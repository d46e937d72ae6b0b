//! The tool-result budget: what of a tool's result enters the history (SPEC §9, issue 10 item 1).
//!
//! One `cat` of a log can be larger than the model's whole window, and it would stay in the
//! history forever. So a result over [`PERSIST_THRESHOLD_BYTES`] — or one that would push the
//! results of one model response past [`TURN_BUDGET_BYTES`] — is written whole to an artifact
//! and the history gets a preview instead: a line naming the artifact (which `read_file` can
//! open), then the first [`PREVIEW_HEAD_BYTES`] and the last [`PREVIEW_TAIL_BYTES`] of it, cut
//! on character boundaries. Previews count toward the batch budget too, so a batch enters the
//! history with at most 200,000 bytes of whole results plus one preview (about 4 KB) per result
//! beyond that.
//!
//! If the artifact cannot be written the preview says the full result could not be kept: the
//! run goes on, with less.
//!
//! Admitting is async: the artifact's file is written off the async threads, then copied to
//! the team's store.

use crate::store::artifacts::ArtifactStore;
use crate::tools::read_file::MAX_READ_BYTES;

/// A result larger than this (in bytes) is kept as an artifact; one of exactly this size is not.
pub const PERSIST_THRESHOLD_BYTES: usize = 30_000;
/// At most this many bytes of results enter the history per model response's batch.
pub const TURN_BUDGET_BYTES: usize = 200_000;
/// The bytes of a kept result's start shown in its preview.
pub const PREVIEW_HEAD_BYTES: usize = 2_000;
/// The bytes of a kept result's end shown in its preview.
pub const PREVIEW_TAIL_BYTES: usize = 2_000;

/// Admits tool results into the history, one batch (one model response's results) at a time.
#[derive(Debug)]
pub struct ResultBudget {
    /// Where results too large for the history are kept.
    store: ArtifactStore,
    /// Bytes entered in the history in the current batch (whole results and previews).
    batch_bytes: usize,
    /// Bytes written to artifacts since this budget was made (for usage reports and benchmarks).
    artifact_bytes: u64,
}

impl ResultBudget {
    pub fn new(store: ArtifactStore) -> Self {
        Self {
            store,
            batch_bytes: 0,
            artifact_bytes: 0,
        }
    }

    /// Where results too large for the history are kept.
    pub fn store(&self) -> &ArtifactStore {
        &self.store
    }

    /// Starts a new batch: the runner calls it before the results of each model response.
    pub fn start_batch(&mut self) {
        self.batch_bytes = 0;
    }

    /// Bytes entered in the history in the current batch.
    pub fn batch_bytes(&self) -> usize {
        self.batch_bytes
    }

    /// Bytes written to artifacts by this budget so far.
    pub fn artifact_bytes(&self) -> u64 {
        self.artifact_bytes
    }

    /// What of `content` enters the history: the content itself, or a preview of it naming the
    /// artifact that keeps it whole.
    pub async fn admit(&mut self, content: String) -> String {
        let size = content.len();
        let over_batch = self.batch_bytes.saturating_add(size) > TURN_BUDGET_BYTES;
        // A result no larger than its preview would be is shown whole: a preview saves nothing.
        let previewable = size > PREVIEW_HEAD_BYTES + PREVIEW_TAIL_BYTES;
        if !(size > PERSIST_THRESHOLD_BYTES || (over_batch && previewable)) {
            self.batch_bytes += size;
            return content;
        }
        let why = if size > PERSIST_THRESHOLD_BYTES {
            "too large for the conversation".to_owned()
        } else {
            format!("past this turn's {TURN_BUDGET_BYTES}-byte budget for tool results")
        };
        let note = match self.store.write(&content).await {
            Ok(artifact) => {
                self.artifact_bytes += artifact.bytes as u64;
                kept_note(&why, &artifact.relative_path, size)
            }
            Err(err) => lost_note(&why, size, &err.to_string()),
        };
        let shown = format!(
            "{note}\n{}",
            preview(&content, PREVIEW_HEAD_BYTES, PREVIEW_TAIL_BYTES)
        );
        self.batch_bytes += shown.len();
        shown
    }
}

/// The line naming a kept result's artifact, its size, and how to read it back.
fn kept_note(why: &str, relative_path: &str, size: usize) -> String {
    let reading = if size > MAX_READ_BYTES {
        format!(
            "read_file shows its first {MAX_READ_BYTES} bytes (`limit` reads its first N lines); \
             use shell tools for the rest"
        )
    } else {
        "read_file opens it (`limit` reads its first N lines)".to_owned()
    };
    format!(
        "[Tool result {why} ({size} bytes): kept whole in \
         {relative_path}; {reading}. Preview of its start and end:]"
    )
}

/// The line saying a result too large for the conversation could not be kept.
fn lost_note(why: &str, size: usize, reason: &str) -> String {
    let reason = reason.replace(['\n', '\r'], " ");
    format!(
        "[Tool result {why} ({size} bytes); the full result could not \
         be kept ({reason}). Only this preview of its start and end remains:]"
    )
}

/// The first `head` and last `tail` bytes of `content` (fewer where a character would be cut),
/// with a line saying how many bytes are left out between them. Content no longer than
/// `head + tail` is returned whole.
pub fn preview(content: &str, head: usize, tail: usize) -> String {
    if content.len() <= head.saturating_add(tail) {
        return content.to_owned();
    }
    let head_end = floor_char_boundary(content, head);
    let tail_start = ceil_char_boundary(content, content.len() - tail);
    let omitted = tail_start - head_end;
    format!(
        "{}\n[… {omitted} bytes omitted …]\n{}",
        &content[..head_end],
        &content[tail_start..]
    )
}

/// The largest character boundary of `text` at or before `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `text` at or after `at`.
fn ceil_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
