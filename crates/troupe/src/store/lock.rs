//! Cross-process exclusive locks on sidecar files, with std `File::lock` (flock on Unix).
//!
//! Locks *wait*: a second process blocks until the holder releases, it does not give up after a
//! timeout. The lock is released when the guard is dropped (or the process dies, which the kernel
//! handles), so a crashed holder never leaves a stale lock behind.
//!
//! A lock file is opened like every file of troupe's own: never through a symlink, without
//! blocking, and refused unless it is a regular file (a FIFO in its place is an error naming it).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::read::{open_regular_with, Links};
use super::IoError;

/// Holds an exclusive lock until dropped.
#[derive(Debug)]
pub struct LockGuard {
    file: File,
    path: PathBuf,
}

impl LockGuard {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records who holds the lock (for "held by …" messages). Best effort.
    pub fn write_holder(&mut self, holder: &str) -> Result<(), IoError> {
        let result = (|| {
            self.file.set_len(0)?;
            self.file.seek(SeekFrom::Start(0))?;
            self.file.write_all(holder.as_bytes())?;
            self.file.sync_all()
        })();
        result.map_err(|e| IoError::new("write lock holder", &self.path, e))
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

fn open_lock_file(path: &Path) -> Result<File, IoError> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    open_regular_with(path, &mut options, Links::Refuse)
}

/// Blocks until the exclusive lock on `path` is held.
pub fn lock_exclusive(path: &Path) -> Result<LockGuard, IoError> {
    let file = open_lock_file(path)?;
    file.lock().map_err(|e| IoError::new("lock", path, e))?;
    Ok(LockGuard {
        file,
        path: path.to_path_buf(),
    })
}

/// Takes the lock if it is free; otherwise returns `Ok(Err(holder))` with what the holder wrote.
pub fn try_lock_exclusive(path: &Path) -> Result<Result<LockGuard, String>, IoError> {
    let file = open_lock_file(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Ok(LockGuard {
            file,
            path: path.to_path_buf(),
        })),
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = (&file).read_to_string(&mut holder);
            Ok(Err(holder.trim().to_owned()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(IoError::new("lock", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_try_sees_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.lock");
        let mut guard = try_lock_exclusive(&path).unwrap().unwrap();
        guard.write_holder("pid 42").unwrap();
        let second = try_lock_exclusive(&path).unwrap();
        assert_eq!(second.unwrap_err(), "pid 42");
        drop(guard);
        assert!(try_lock_exclusive(&path).unwrap().is_ok());
    }

    #[test]
    fn blocking_lock_waits_for_release() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let guard = lock_exclusive(&path).unwrap();
        let (seen_held, wait_for_release) =
            (std::sync::mpsc::channel(), std::sync::mpsc::channel());
        let p2 = path.clone();
        let (held_tx, released_rx) = (seen_held.0, wait_for_release.1);
        let t = std::thread::spawn(move || {
            // Another open file description contends like another process would.
            let held = try_lock_exclusive(&p2).unwrap().is_err();
            held_tx.send(held).unwrap();
            released_rx.recv().unwrap();
            lock_exclusive(&p2).unwrap();
        });
        assert!(
            seen_held.1.recv().unwrap(),
            "the lock must be held against a second opener"
        );
        drop(guard);
        wait_for_release.0.send(()).unwrap();
        t.join().unwrap();
    }
}
