//! Where the index's records are kept (its file, or memory when the file cannot be written),
//! the lock its writers take, and one record's bytes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::store::IoError;

/// One record: the line of `seq` starts at byte `offset` of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub offset: u64,
}

/// The size of one record: `seq` and offset, little-endian `u64`s.
pub const RECORD: u64 = 16;

/// Holds the index file's lock (a clone of its handle shares the lock).
pub struct IndexLock(pub Option<File>);

impl Drop for IndexLock {
    fn drop(&mut self) {
        if let Some(file) = &self.0 {
            let _ = file.unlock();
        }
    }
}

/// Where the records are kept.
pub enum Store {
    File(File),
    /// The index file could not be opened for writing: the records live in this process.
    Memory(Vec<u8>),
}

impl Store {
    pub fn len(&self, path: &Path) -> Result<u64, IoError> {
        match self {
            Self::File(file) => Ok(file
                .metadata()
                .map_err(|e| IoError::new("inspect", path, e))?
                .len()),
            Self::Memory(bytes) => Ok(bytes.len() as u64),
        }
    }

    pub fn read_at(&self, path: &Path, buf: &mut [u8], at: u64) -> Result<(), IoError> {
        match self {
            Self::File(file) => file
                .read_exact_at(buf, at)
                .map_err(|e| IoError::new("read", path, e)),
            Self::Memory(bytes) => {
                let start = usize::try_from(at).unwrap_or(usize::MAX);
                match bytes.get(start..start.saturating_add(buf.len())) {
                    Some(part) => {
                        buf.copy_from_slice(part);
                        Ok(())
                    }
                    None => Err(IoError::new(
                        "read",
                        path,
                        std::io::ErrorKind::UnexpectedEof.into(),
                    )),
                }
            }
        }
    }

    pub fn write_at(&mut self, path: &Path, bytes: &[u8], at: u64) -> Result<(), IoError> {
        match self {
            Self::File(file) => file
                .write_all_at(bytes, at)
                .map_err(|e| IoError::new("write", path, e)),
            Self::Memory(held) => {
                let start = usize::try_from(at).unwrap_or(usize::MAX);
                held.truncate(start);
                held.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    pub fn truncate(&mut self, path: &Path, len: u64) -> Result<(), IoError> {
        match self {
            Self::File(file) => file
                .set_len(len)
                .map_err(|e| IoError::new("truncate", path, e)),
            Self::Memory(held) => {
                held.truncate(usize::try_from(len).unwrap_or(usize::MAX));
                Ok(())
            }
        }
    }
}

pub fn encode(entry: Entry) -> [u8; RECORD as usize] {
    let mut out = [0u8; RECORD as usize];
    out[..8].copy_from_slice(&entry.seq.to_le_bytes());
    out[8..].copy_from_slice(&entry.offset.to_le_bytes());
    out
}

pub fn decode(bytes: &[u8; RECORD as usize]) -> Entry {
    let mut seq = [0u8; 8];
    let mut offset = [0u8; 8];
    seq.copy_from_slice(&bytes[..8]);
    offset.copy_from_slice(&bytes[8..]);
    Entry {
        seq: u64::from_le_bytes(seq),
        offset: u64::from_le_bytes(offset),
    }
}
