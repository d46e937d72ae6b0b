//! Reading files that a hostile user may have replaced: every reader of troupe's own files (and
//! the file tools, on workspace files) opens through here.
//!
//! A FIFO opened for reading blocks until a writer appears, and a character device may never end;
//! [`open_regular`] opens with `O_NONBLOCK` (which changes nothing for a regular file), checks the
//! type of what it opened, and refuses anything that is not a regular file with an error naming
//! the file. A symlink is refused too unless the caller follows links on purpose (the file tools,
//! whose confinement has already resolved the path inside the workspace).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::IoError;

/// The mode of a file troupe creates: read and written by the user only (transcripts hold the
/// files agents read, requests the calls' arguments).
pub const NEW_FILE_MODE: u32 = 0o600;

/// The most troupe reads of one of its JSON state files (`state.json`, `team.json`, `cron.json`, a
/// job record or process note): far above what a workspace writes, low enough that a planted
/// huge file is refused rather than read into memory.
pub const MAX_STATE_FILE_BYTES: u64 = 64 << 20;

/// Whether a symlink at the path itself is followed or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// troupe's own files: a symlink is refused (`O_NOFOLLOW`).
    Refuse,
    /// Workspace files whose path confinement already checked: the link is followed.
    Follow,
}

/// Opens `path` for reading if it is a regular file. `Ok(None)` when it does not exist; an error
/// naming the file when it is anything else (FIFO, socket, device, folder, symlink under
/// [`Links::Refuse`]). Never blocks on a special file.
pub fn open_regular(path: &Path, links: Links) -> Result<Option<File>, IoError> {
    match open_regular_with(path, OpenOptions::new().read(true), links) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens `path` with `options` — adding `O_NONBLOCK`, `O_CLOEXEC`, and `O_NOFOLLOW` under
/// [`Links::Refuse`] — and refuses what it opened unless it is a regular file. For troupe's own
/// files that are opened for writing rather than replaced (lock files, append-only logs): a FIFO
/// opened for writing blocks until a reader appears, so they need the same care as readers.
/// A missing file is an error (`NotFound`) unless `options` creates it.
pub fn open_regular_with(
    path: &Path,
    options: &mut OpenOptions,
    links: Links,
) -> Result<File, IoError> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    // Only a file this opening creates takes it: troupe's files are the user's alone.
    options.mode(NEW_FILE_MODE);
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match options.custom_flags(flags).open(path) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_regular(path, "a symbolic link (not followed)"));
        }
        // ENXIO: a socket, or a FIFO opened non-blocking for writing; EISDIR needs no read.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(not_regular(path, "a socket or special file"));
        }
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
            return Err(not_regular(path, "a folder"));
        }
        Err(e) => return Err(IoError::new("open", path, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| IoError::new("inspect", path, e))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a folder"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "a special file"
        };
        return Err(not_regular(path, what));
    }
    // Reads and writes of a regular file never block; the flag is left as it is.
    Ok(file)
}

/// Reads the whole of a regular file, refusing one larger than `max_bytes` without reading it
/// whole. `Ok(None)` when it does not exist.
pub fn read_regular(path: &Path, links: Links, max_bytes: u64) -> Result<Option<Vec<u8>>, IoError> {
    let Some(file) = open_regular(path, links)? else {
        return Ok(None);
    };
    let len = file
        .metadata()
        .map_err(|e| IoError::new("inspect", path, e))?
        .len();
    if len > max_bytes {
        return Err(too_large(path, len, max_bytes));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| IoError::new("read", path, e))?;
    if bytes.len() as u64 > max_bytes {
        // It grew after the size check.
        return Err(too_large(path, bytes.len() as u64, max_bytes));
    }
    Ok(Some(bytes))
}

fn not_regular(path: &Path, what: &str) -> IoError {
    IoError::new(
        "open",
        path,
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file ({what})"),
        ),
    )
}

fn too_large(path: &Path, len: u64, max: u64) -> IoError {
    IoError::new(
        "read",
        path,
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("file is {len} bytes, more than the {max} bytes allowed"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("state.json");
        mkfifo(&fifo);
        for links in [Links::Refuse, Links::Follow] {
            let err = read_regular(&fifo, links, 1024).unwrap_err().to_string();
            assert!(err.contains("state.json"), "{err}");
            assert!(err.contains("not a regular file (a FIFO)"), "{err}");
        }
    }

    #[test]
    fn a_folder_and_a_symlink_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular(dir.path(), Links::Refuse, 1024).unwrap_err();
        assert!(err.to_string().contains("a folder"), "{err}");
        let target = dir.path().join("t");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = read_regular(&link, Links::Refuse, 1024).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(
            read_regular(&link, Links::Follow, 1024).unwrap(),
            Some(b"x".to_vec())
        );
    }

    #[test]
    fn missing_is_none_and_large_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        assert_eq!(read_regular(&path, Links::Refuse, 4).unwrap(), None);
        std::fs::write(&path, b"12345").unwrap();
        let err = read_regular(&path, Links::Refuse, 4).unwrap_err();
        assert!(err.to_string().contains("more than the 4 bytes"), "{err}");
        assert_eq!(
            read_regular(&path, Links::Refuse, 5).unwrap(),
            Some(b"12345".to_vec())
        );
    }
}
