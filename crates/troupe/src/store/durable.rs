//! Durable file primitives. Every durable write in troupe goes through this module:
//! temp file in the same folder → `sync_all` → rename (or link) → fsync of the folder.
//!
//! A crash at any point leaves either the old bytes or the new bytes at the destination, never a
//! mix; a leftover temp file (`.<name>.tmp-*`) is ignored by readers and cleaned up by the next
//! writer of the same folder that finds it stale.
//!
//! What troupe creates is the user's alone ([`NEW_FILE_MODE`], [`NEW_DIR_MODE`]): transcripts
//! hold the files agents read, requests hold the calls' arguments. A replaced file keeps the
//! mode it had (a person's `troupe.toml` stays as readable as they made it).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::IoError;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

pub use super::read::NEW_FILE_MODE;
/// The mode of a folder troupe creates (`.troupe/` and everything in it).
pub const NEW_DIR_MODE: u32 = crate::layout::Layout::DIR_MODE;

/// The permission bits `dest` has now, if it exists.
fn existing_mode(dest: &Path) -> Option<u32> {
    fs::metadata(dest)
        .ok()
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
}

/// Prefix of temporary files; readers skip names that start with it.
pub const TEMP_PREFIX: char = '.';

fn temp_path_for(dest: &Path) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp_name = format!(".{name}.tmp-{}-{n}", std::process::id());
    dest.with_file_name(temp_name)
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to a fresh temp file beside `dest` and fsyncs it. Returns the temp path.
fn write_temp(dest: &Path, bytes: &[u8]) -> Result<PathBuf, IoError> {
    let temp = temp_path_for(dest);
    let kept = existing_mode(dest);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(NEW_FILE_MODE)
            .open(&temp)?;
        if let Some(mode) = kept {
            file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match result {
        Ok(()) => Ok(temp),
        Err(e) => {
            let _ = fs::remove_file(&temp);
            Err(IoError::new("write", &temp, e))
        }
    }
}

/// fsyncs a folder so that renames and creations inside it survive a crash. Opens with
/// `O_DIRECTORY`, so a FIFO swapped in for the folder is refused instead of blocking the open.
pub fn fsync_dir(dir: &Path) -> Result<(), IoError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| IoError::new("fsync folder", dir, e))
}

/// Atomically replaces `dest` with `bytes`. On failure the old file is untouched.
pub fn replace(dest: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let temp = write_temp(dest, bytes)?;
    if let Err(e) = fs::rename(&temp, dest) {
        let _ = fs::remove_file(&temp);
        return Err(IoError::new("rename into", dest, e));
    }
    fsync_dir(parent_of(dest))
}

/// Atomically replaces `dest` without waiting for the disk: readers see the old or the new bytes,
/// never a mix, but a crash may lose the update. For views that are rebuilt on start anyway
/// (the roster's statuses), where an fsync per worker transition would double a round trip.
pub fn replace_view(dest: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let temp = temp_path_for(dest);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(NEW_FILE_MODE)
        .open(&temp)
        .and_then(|mut f| f.write_all(bytes));
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(IoError::new("write", &temp, e));
    }
    fs::rename(&temp, dest).map_err(|e| {
        let _ = fs::remove_file(&temp);
        IoError::new("rename into", dest, e)
    })
}

/// Durably creates `dest` with `bytes`, failing with `AlreadyExists` if it exists. The file
/// appears complete or not at all (it is linked into place only after its bytes are synced).
pub fn create_new(dest: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let temp = write_temp(dest, bytes)?;
    // One atomic no-replace rename where the platform has it (one folder change, like
    // `replace`); otherwise a hard link, which also refuses an existing destination.
    let placed = match super::moves::atomic_rename_noreplace(&temp, dest) {
        Some(result) => result,
        None => fs::hard_link(&temp, dest),
    };
    if temp.exists() {
        let _ = fs::remove_file(&temp);
    }
    placed.map_err(|e| IoError::new("create", dest, e))?;
    fsync_dir(parent_of(dest))
}

/// A file written piece by piece (a command's output as it is read) and placed under its final
/// name only when complete: the same temp → `sync_all` → no-clobber link → folder fsync as
/// [`create_new`], with the writes spread over time. Writing before the single `sync_all` is
/// fine: the file has no name anyone reads until it is linked, so a crash leaves at most a
/// stale temp file, never a partial file under the final name. Dropped before it is placed, the
/// temp file is removed.
pub struct StagedFile {
    file: std::fs::File,
    /// The temp file's path; `None` once it has been placed (or removed).
    temp: Option<PathBuf>,
}

impl StagedFile {
    /// Creates a temp file for a file that will be placed at `dest` (same folder). Opened
    /// through [`super::read::open_regular_with`]: never through a symlink, and nothing but a
    /// fresh regular file.
    pub fn create(dest: &Path) -> Result<Self, IoError> {
        let temp = temp_path_for(dest);
        let file = super::read::open_regular_with(
            &temp,
            OpenOptions::new().write(true).create_new(true),
            super::read::Links::Refuse,
        )?;
        Ok(Self {
            file,
            temp: Some(temp),
        })
    }

    /// Appends `bytes` (no fsync: see the type's doc).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        let temp = self.temp.as_deref().unwrap_or(Path::new("."));
        self.file
            .write_all(bytes)
            .map_err(|e| IoError::new("write", temp, e))
    }

    /// Syncs the bytes and places them at `dest`, failing with `AlreadyExists` (the staged file
    /// kept, to be placed under another name) if `dest` exists.
    pub fn place_new(&mut self, dest: &Path) -> Result<(), IoError> {
        let temp = self.synced_temp(dest)?;
        let placed = match super::moves::atomic_rename_noreplace(&temp, dest) {
            Some(result) => result,
            None => fs::hard_link(&temp, dest),
        };
        placed.map_err(|e| IoError::new("create", dest, e))?;
        if temp.exists() {
            let _ = fs::remove_file(&temp);
        }
        self.temp = None;
        fsync_dir(parent_of(dest))
    }
}

impl StagedFile {
    /// The staged file's temporary path, its bytes synced, before it is placed at `dest`; an
    /// error when it was placed already.
    fn synced_temp(&mut self, dest: &Path) -> Result<std::path::PathBuf, IoError> {
        let Some(temp) = self.temp.clone() else {
            return Err(IoError::new(
                "create",
                dest,
                std::io::Error::other("the staged file was already placed"),
            ));
        };
        self.file
            .sync_all()
            .map_err(|e| IoError::new("write", &temp, e))?;
        Ok(temp)
    }

    /// Syncs the bytes and places them at `dest`, replacing what is there atomically (readers
    /// see the old file or the whole new one).
    pub fn place(&mut self, dest: &Path) -> Result<(), IoError> {
        let temp = self.synced_temp(dest)?;
        fs::rename(&temp, dest).map_err(|e| IoError::new("rename into", dest, e))?;
        self.temp = None;
        fsync_dir(parent_of(dest))
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            let _ = fs::remove_file(temp);
        }
    }
}

/// Cuts `dest` back to `len` bytes and fsyncs it (removing the torn tail of an append-only log).
pub fn truncate(dest: &Path, len: u64) -> Result<(), IoError> {
    OpenOptions::new()
        .write(true)
        .open(dest)
        .and_then(|file| {
            file.set_len(len)?;
            file.sync_all()
        })
        .map_err(|e| IoError::new("truncate", dest, e))
}

/// Renames `from` to `to` and fsyncs the destination folder (and the source folder when it
/// differs), so the move survives a crash.
pub fn rename(from: &Path, to: &Path) -> Result<(), IoError> {
    fs::rename(from, to).map_err(|e| IoError::new("move", from, e))?;
    let to_dir = parent_of(to);
    fsync_dir(to_dir)?;
    let from_dir = parent_of(from);
    if from_dir != to_dir {
        fsync_dir(from_dir)?;
    }
    Ok(())
}

/// Removes `path` (the entry itself, never what a symlink names) and fsyncs its folder, so the
/// removal survives a crash. `Ok(false)` when there was nothing to remove.
pub fn remove(path: &Path) -> Result<bool, IoError> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(IoError::new("remove", path, e)),
    }
    fsync_dir(parent_of(path))?;
    Ok(true)
}

/// Removes the entries `names` of `dir` (each the entry itself, never what a symlink names) and
/// fsyncs `dir` once, so the removals survive a crash. Returns how many were there to remove.
pub fn remove_in(dir: &Path, names: &[std::ffi::OsString]) -> Result<usize, IoError> {
    let mut removed = 0;
    for name in names {
        let path = dir.join(name);
        match fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(IoError::new("remove", &path, e)),
        }
    }
    if removed > 0 {
        fsync_dir(dir)?;
    }
    Ok(removed)
}

/// Renames without fsync: for moves that recovery undoes anyway (ready → processing).
pub fn rename_fast(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::rename(from, to)
}

/// Creates `dir` (and parents) and refuses it if it is a symlink or not a folder.
pub fn ensure_real_dir(dir: &Path) -> Result<(), IoError> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(IoError::new(
            "use folder",
            dir,
            std::io::Error::other("it is a symbolic link; troupe refuses symlinked state folders"),
        )),
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(IoError::new(
            "use folder",
            dir,
            std::io::Error::other("it exists and is not a folder"),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(NEW_DIR_MODE)
                .create(dir)
                .map_err(|e| IoError::new("create folder", dir, e))?;
            // Re-check: a racing process may have put a symlink there.
            match fs::symlink_metadata(dir) {
                Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {
                    fsync_dir(parent_of(dir))
                }
                _ => Err(IoError::new(
                    "use folder",
                    dir,
                    std::io::Error::other("not a real folder after creation"),
                )),
            }
        }
        Err(e) => Err(IoError::new("inspect folder", dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_writes_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("state.json");
        replace(&dest, b"one").unwrap();
        replace(&dest, b"two").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn failed_replace_keeps_old_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("state.json");
        replace(&dest, b"old").unwrap();
        // A folder in the destination's place makes the rename fail.
        let blocked = dir.path().join("blocked");
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("x"), b"x").unwrap();
        assert!(replace(&blocked, b"new").is_err());
        assert_eq!(fs::read(&dest).unwrap(), b"old");
        let leftovers = fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".tmp-")
            })
            .count();
        assert_eq!(leftovers, 0);
    }

    #[test]
    fn create_new_refuses_existing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("m.json");
        create_new(&dest, b"first").unwrap();
        let err = create_new(&dest, b"second").unwrap_err();
        assert_eq!(err.source.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&dest).unwrap(), b"first");
    }

    #[test]
    fn a_staged_file_appears_only_when_placed_and_never_over_another() {
        let dir = tempfile::tempdir().unwrap();
        let taken = dir.path().join("taken.txt");
        create_new(&taken, b"first").unwrap();
        let dest = dir.path().join("new.txt");
        let mut staged = StagedFile::create(&dest).unwrap();
        staged.write_all(b"one ").unwrap();
        staged.write_all(b"two").unwrap();
        assert!(!dest.exists());
        let err = staged.place_new(&taken).unwrap_err();
        assert_eq!(err.source.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&taken).unwrap(), b"first");
        staged.place_new(&dest).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"one two");
        drop(staged);
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["new.txt", "taken.txt"]);
        // Dropped unplaced: nothing is left behind.
        let staged = StagedFile::create(&dir.path().join("gone.txt")).unwrap();
        drop(staged);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn ensure_real_dir_refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(ensure_real_dir(&link).is_err());
        assert!(ensure_real_dir(&real).is_ok());
        assert!(ensure_real_dir(&dir.path().join("a/b")).is_ok());
    }

    #[test]
    fn fsync_dir_refuses_a_fifo_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        fsync_dir(dir.path()).unwrap();
        let fifo = dir.path().join("not-a-folder");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = fsync_dir(&fifo).unwrap_err();
        assert_eq!(err.source.raw_os_error(), Some(libc::ENOTDIR), "{err}");
    }
}
