//! The regular files of troupe's state folders as retention sees them: names, times, sizes;
//! never what a symlink names, never troupe's temp files.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use troupe_wire::UtcTime;

use crate::store::IoError;

/// One regular file of a state folder.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: OsString,
    pub path: PathBuf,
    pub modified: UtcTime,
    pub bytes: u64,
}

/// The regular files of `dir` (not what symlinks name, not troupe's temp files `.…`, not
/// folders), with their times and sizes. A missing folder has none; a symlinked folder is
/// refused by reading nothing from it.
pub fn listing(dir: &Path) -> Result<Vec<Listed>, IoError> {
    let mut out = Vec::new();
    if !is_real_dir(dir)? {
        return Ok(out);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| IoError::new("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", dir, e))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(IoError::new("inspect", &path, e)),
        };
        if !meta.file_type().is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        out.push(Listed {
            name,
            path,
            modified: utc_of(modified),
            bytes: meta.len(),
        });
    }
    Ok(out)
}

/// The real (not symlinked) subfolders of `dir`.
pub fn subfolders(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let mut out = Vec::new();
    if !is_real_dir(dir)? {
        return Ok(out);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| IoError::new("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", dir, e))?;
        let path = entry.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn is_real_dir(dir: &Path) -> Result<bool, IoError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => Ok(meta.is_dir()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(IoError::new("inspect", dir, e)),
    }
}

/// A file time as troupe's UTC time (before 1970, or unreadable: the epoch).
pub fn utc_of(time: SystemTime) -> UtcTime {
    let at = chrono::DateTime::<chrono::Utc>::from(time).max(chrono::DateTime::UNIX_EPOCH);
    UtcTime::from_datetime(at)
}
