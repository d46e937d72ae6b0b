//! Append-only logs (JSON Lines): the one way troupe appends to a file.
//!
//! Transcripts, `audit.jsonl`, each mailbox's `quarantine.jsonl` and the protocol archive are
//! logs of `\n`-terminated lines that are only ever appended to. A crash in the middle of an
//! append leaves a last line without its `\n` (a *torn tail*). Readers ignore it; but the next
//! append would land right after it and glue a complete record onto the fragment, turning a
//! harmless tail into a corrupt line in the middle of the file that every later read trips over.
//!
//! So every append, under an exclusive `flock` on the log (and a mutex for this process's
//! threads, since a `flock` is shared by everyone using the same open file):
//! 1. if the last byte is not `\n`, cuts the file back to just after its last `\n` (to nothing
//!    if it has none) and fsyncs the cut — the fragment was never a record anyone read;
//! 2. writes the new lines at the end (`O_APPEND`);
//! 3. fsyncs them when the log asks for durability;
//! 4. on a failed write, cuts back what part of it landed (best effort; step 1 of the next
//!    append cuts it otherwise).
//!
//! Writers of one log take the same lock, so a writer never cuts another's append in progress.
//!
//! A log with a single writer process (the event stream, appended only under the workspace's
//! run lock) may use [`Journal::append_sole`] instead: no `flock`, and the end is checked for a
//! torn tail only on the first append of this open and after a failed one — the checks of every
//! append cost more than the write itself, and nothing else can tear the tail meanwhile.
//! A log is opened like every other file of troupe's: a regular file only, never through a
//! symlink, never blocking on a FIFO planted in its place ([`read::open_regular_with`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::durable::fsync_dir;
use super::read::{open_regular, open_regular_with, Links};
use super::IoError;

/// How far back a torn tail is searched for its line's start at a time.
const SCAN_CHUNK: u64 = 64 * 1024;

/// Whether an append waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync after every append: the lines survive a crash once `append` returns.
    Synced,
    /// No fsync: a record for people, where an fsync per line would cost more than it is worth.
    Unsynced,
}

/// An open append-only log.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// Opened read + append: reading finds the torn tail, `O_APPEND` puts every write at the end.
    file: File,
    /// Serialises this process's appends: the `flock` below does not exclude threads sharing the
    /// open file.
    appending: Mutex<()>,
    /// For [`Journal::append_sole`]: this process's last append ended the file with a whole line
    /// (false until the first append checked the end).
    sole_clean: AtomicBool,
}

impl Journal {
    /// Opens the log at `path`, creating it (and fsyncing its folder, so the new entry survives
    /// a crash) if it does not exist. The folder must exist. Refuses anything but a regular file.
    pub fn open(path: &Path) -> Result<Self, IoError> {
        let mut options = OpenOptions::new();
        options.read(true).append(true);
        let file = match open_regular_with(path, &mut options, Links::Refuse) {
            Ok(file) => file,
            Err(e) if e.source.kind() == io::ErrorKind::NotFound => {
                let file = open_regular_with(path, options.create(true), Links::Refuse)?;
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    fsync_dir(dir)?;
                }
                file
            }
            Err(e) => return Err(e),
        };
        Ok(Self {
            path: path.to_owned(),
            file,
            appending: Mutex::new(()),
            sole_clean: AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `bytes` (whole lines, each ending with `\n`) after cutting any torn tail.
    pub fn append(&self, bytes: &[u8], durability: Durability) -> Result<(), IoError> {
        let _thread = crate::sync::lock(&self.appending);
        self.under_flock(|| self.append_locked(bytes, durability))
    }

    /// Runs `f` under the log's `flock` (the caller holds `appending`).
    fn under_flock<T>(&self, f: impl FnOnce() -> Result<T, IoError>) -> Result<T, IoError> {
        self.file
            .lock()
            .map_err(|e| IoError::new("lock", &self.path, e))?;
        let result = f();
        let _ = self.file.unlock();
        result
    }

    /// fsyncs the appended lines when `durability` asks for it.
    fn sync_if(&self, durability: Durability) -> Result<(), IoError> {
        if durability == Durability::Synced {
            self.file
                .sync_data()
                .map_err(|e| IoError::new("fsync", &self.path, e))?;
        }
        Ok(())
    }

    /// Appends `bytes` (whole lines) to a log that no other process appends to (the caller's
    /// guarantee, e.g. by holding the run lock): like [`Journal::append`] on the first call and
    /// after a failed one; otherwise one `write`, without the `flock` and the check of the end,
    /// which this process's own last append left whole. A failed write is cut back to the last
    /// `\n` at once (best effort; the next append checks the end again either way).
    pub fn append_sole(&self, bytes: &[u8], durability: Durability) -> Result<(), IoError> {
        let _thread = crate::sync::lock(&self.appending);
        if !self.sole_clean.load(Ordering::Acquire) {
            let result = self.under_flock(|| self.append_locked(bytes, durability));
            self.sole_clean.store(result.is_ok(), Ordering::Release);
            return result;
        }
        if let Err(e) = (&self.file).write_all(bytes) {
            self.sole_clean.store(false, Ordering::Release);
            if self.cut_torn_tail().is_err() {
                tracing::warn!(path = %self.path.display(), "could not cut a failed append");
            }
            return Err(IoError::new("append to", &self.path, e));
        }
        self.sync_if(durability)
    }

    /// Cuts a torn tail now rather than at the next append (for logs whose readers want a clean
    /// end from the start).
    pub fn cut_torn_tail_now(&self) -> Result<(), IoError> {
        let _thread = crate::sync::lock(&self.appending);
        self.under_flock(|| self.cut_torn_tail().map(|_| ()))
    }

    fn append_locked(&self, bytes: &[u8], durability: Durability) -> Result<(), IoError> {
        let len = self.cut_torn_tail()?;
        if let Err(e) = (&self.file).write_all(bytes) {
            // Leave no fragment of this append behind if that can be helped.
            if self
                .file
                .set_len(len)
                .and_then(|()| self.file.sync_data())
                .is_err()
            {
                tracing::warn!(path = %self.path.display(), "could not cut a failed append");
            }
            return Err(IoError::new("append to", &self.path, e));
        }
        self.sync_if(durability)
    }

    /// Cuts the file back to its last `\n` if it does not end with one; returns its length.
    fn cut_torn_tail(&self) -> Result<u64, IoError> {
        let len = self
            .file
            .metadata()
            .map_err(|e| IoError::new("inspect", &self.path, e))?
            .len();
        let keep =
            complete_len(&self.file, len).map_err(|e| IoError::new("read", &self.path, e))?;
        if keep == len {
            return Ok(len);
        }
        tracing::warn!(
            path = %self.path.display(),
            at = keep,
            cut = len - keep,
            "cutting the torn last line of a log (left by an interrupted append)"
        );
        self.file
            .set_len(keep)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| IoError::new("truncate", &self.path, e))?;
        Ok(keep)
    }
}

/// The length of the first `len` bytes of `file` up to and including their last `\n` (0 if
/// there is none): everything after it is a torn tail.
fn complete_len(file: &File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut chunk = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(SCAN_CHUNK);
        chunk.resize(usize::try_from(end - start).unwrap_or(0), 0);
        file.read_exact_at(&mut chunk, start)?;
        if end == len && chunk.last() == Some(&b'\n') {
            return Ok(len);
        }
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Appends whole lines to the log at `path` (creating it) and fsyncs them: [`Journal::open`]
/// then [`Journal::append`], for writers that append now and then.
pub fn append(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    Journal::open(path)?.append(bytes, Durability::Synced)
}

/// Appends whole lines to a log that gc may replace (usage, audit), under its sidecar lock
/// ([`replace_lock`]), opening the log for this append alone: a line never lands in a log
/// already replaced by a newer file.
pub fn append_replaceable(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), IoError> {
    let _replacing = super::lock::lock_exclusive(&replace_lock(path))?;
    Journal::open(path)?.append(bytes, durability)
}

/// The sidecar lock of a log gc may replace (`.usage.lock` beside `usage.jsonl`): every
/// appender holds it while it opens the log and appends ([`append_replaceable`]); whoever
/// replaces the log holds it from its read to its replace. The log's own `flock` cannot serve:
/// it is on the file, and a replaced log is another file, so an appender waiting on the old one
/// would append to a file no longer named.
pub(crate) fn replace_lock(path: &Path) -> PathBuf {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "log".into());
    path.with_file_name(format!(".{name}.lock"))
}

/// The complete lines of the log at `path` — everything up to and including the last `\n`; a
/// torn tail is left out. `Ok(None)` when there is no log. Refuses anything but a regular file,
/// without blocking.
pub fn read_complete(path: &Path) -> Result<Option<Vec<u8>>, IoError> {
    let Some(mut file) = open_regular(path, Links::Refuse)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| IoError::new("read", path, e))?;
    let complete = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    bytes.truncate(complete);
    Ok(Some(bytes))
}

/// Calls `each` with every complete line of the log at `path` (without its `\n`) and its 1-based
/// number, reading a buffer at a time: a log of any size, never whole in memory. A torn tail is
/// left out, as by [`read_complete`]. `Ok(false)` when there is no log; the first error `each`
/// returns ends the read.
pub fn for_each_line(
    path: &Path,
    mut each: impl FnMut(usize, &[u8]) -> Result<(), IoError>,
) -> Result<bool, IoError> {
    let Some(file) = open_regular(path, Links::Refuse)? else {
        return Ok(false);
    };
    let mut reader = io::BufReader::new(file);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let read = io::BufRead::read_until(&mut reader, b'\n', &mut line)
            .map_err(|e| IoError::new("read", path, e))?;
        // The end, or a torn tail (no `\n`): never a record anyone appended whole.
        if read == 0 || line.last() != Some(&b'\n') {
            return Ok(true);
        }
        number += 1;
        line.pop();
        each(number, &line)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_with(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    #[test]
    fn a_torn_tail_is_cut_before_the_next_line() {
        for (before, after) in [
            (&b""[..], &b"new\n"[..]),
            (b"a\n", b"a\nnew\n"),
            (b"a\nhal", b"a\nnew\n"),
            (b"half", b"new\n"),
            (b"a\nb\n\xff\xfe", b"a\nb\nnew\n"),
        ] {
            let (_dir, path) = log_with(before);
            append(&path, b"new\n").unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), after, "{before:?}");
        }
    }

    #[test]
    fn lines_are_read_one_at_a_time_numbered_without_the_torn_tail() {
        for (bytes, lines) in [
            (&b""[..], &[][..]),
            (b"a\n\nb\n", &[(1, &b"a"[..]), (2, b""), (3, b"b")][..]),
            (b"a\nhal", &[(1, &b"a"[..])][..]),
            (b"half", &[][..]),
        ] {
            let (_dir, path) = log_with(bytes);
            let mut seen = Vec::new();
            assert!(for_each_line(&path, |n, line| {
                seen.push((n, line.to_vec()));
                Ok(())
            })
            .unwrap());
            let want: Vec<(usize, Vec<u8>)> = lines.iter().map(|(n, l)| (*n, l.to_vec())).collect();
            assert_eq!(seen, want, "{bytes:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(!for_each_line(&dir.path().join("none"), |_, _| Ok(())).unwrap());
    }

    #[test]
    fn a_torn_tail_longer_than_a_scan_chunk_is_found() {
        let mut bytes = b"first\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 3 * SCAN_CHUNK as usize + 7));
        let (_dir, path) = log_with(&bytes);
        let log = Journal::open(&path).unwrap();
        log.append(b"second\n", Durability::Unsynced).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first\nsecond\n");
    }

    #[test]
    fn a_missing_log_is_created_and_read_complete_leaves_the_tail_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.jsonl");
        assert_eq!(read_complete(&path).unwrap(), None);
        append(&path, b"one\n").unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"tw").unwrap();
        assert_eq!(read_complete(&path).unwrap(), Some(b"one\n".to_vec()));
    }

    #[test]
    fn special_files_and_symlinks_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("audit.jsonl");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = Journal::open(&fifo).unwrap_err().to_string();
        assert!(
            err.contains("audit.jsonl: not a regular file (a FIFO)"),
            "{err}"
        );
        let err = read_complete(&fifo).unwrap_err().to_string();
        assert!(err.contains("not a regular file (a FIFO)"), "{err}");
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
        let err = Journal::open(&link).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(!dir.path().join("elsewhere").exists());
    }

    #[test]
    fn a_sole_appender_checks_the_end_first_then_only_writes() {
        let (_dir, path) = log_with(b"a\nhal");
        let log = Journal::open(&path).unwrap();
        log.append_sole(b"b\n", Durability::Unsynced).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"a\nb\n",
            "the first append cuts"
        );
        for i in 0..100 {
            log.append_sole(format!("{i}\n").as_bytes(), Durability::Unsynced)
                .unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let expected: String = (0..100).map(|i| format!("{i}\n")).collect();
        assert_eq!(text, format!("a\nb\n{expected}"));
    }

    #[test]
    fn appenders_on_separate_opens_never_glue_lines() {
        let (_dir, path) = log_with(b"");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let log = Journal::open(&path).unwrap();
                    for i in 0..200 {
                        let line = format!("{{\"t\":{t},\"i\":{i}}}\n");
                        log.append(line.as_bytes(), Durability::Unsynced).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 800);
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line).unwrap();
        }
    }
}
