//! The write seam of the protocol store: the only three ways it changes bytes on disk.
//!
//! Production uses [`DurableFiles`] (the `store::durable` primitives). Tests inject their own
//! [`ProtocolFiles`] to make a write fail — tests run as root, so permission tricks cannot — and
//! check that a failed write leaves the old bytes and the old state.

use std::path::Path;

use crate::store::IoError;
use crate::store::{durable, journal};

/// How the protocol store writes. Implementations must be all-or-nothing for `replace_state`
/// (the old bytes stay on failure); `append_archive` may leave a torn tail on failure, which the
/// store tolerates.
pub trait ProtocolFiles: Send + Sync {
    /// Atomically replaces `state.json` with `bytes`.
    fn replace_state(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError>;

    /// Appends whole lines to `archive.jsonl` and makes them durable.
    fn append_archive(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError>;

    /// Durably creates an answer record, failing with `AlreadyExists` when there is one; the
    /// file appears complete or not at all.
    fn create_answer(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        durable::create_new(path, bytes)
    }
}

/// The real thing: temp file → fsync → rename → folder fsync, and fsynced appends.
#[derive(Debug, Default, Clone, Copy)]
pub struct DurableFiles;

impl ProtocolFiles for DurableFiles {
    fn replace_state(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        durable::replace(path, bytes)
    }

    fn append_archive(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        journal::append(path, bytes)
    }
}
