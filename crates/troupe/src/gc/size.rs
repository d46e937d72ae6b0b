//! The size of a workspace's state: what `troupe status` shows and `troupe gc` reports.

use std::path::Path;

use crate::layout::Layout;
use crate::store::IoError;

/// Past this, `troupe status` suggests `troupe gc`.
pub const SUGGEST_GC_ABOVE: u64 = 1 << 30;

/// The bytes of every regular file under `.troupe/` (symlinks not followed; the teammates'
/// worktrees included, as they live there). No state is 0.
pub fn state_bytes(layout: &Layout) -> Result<u64, IoError> {
    folder_bytes(&layout.state_dir())
}

fn folder_bytes(dir: &Path) -> Result<u64, IoError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(IoError::new("list", dir, e)),
    };
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", dir, e))?;
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() {
            total = total.saturating_add(folder_bytes(&entry.path())?);
        } else if meta.is_file() {
            total = total.saturating_add(meta.len());
        }
    }
    Ok(total)
}
