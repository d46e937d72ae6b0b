//! Renames that never replace their destination: the one way a mailbox file changes folder,
//! and how `durable::create_new` puts a new file in place.
//!
//! Plain `rename(2)` silently overwrites an existing destination, which would lose a message
//! whenever the same name exists in two folders (a duplicate id, or a second quarantined file
//! with the same name). On Linux `renameat2(RENAME_NOREPLACE)` makes the check and the move one
//! atomic step; elsewhere (or on a filesystem without it) we check first and accept the small
//! race, which only matters for duplicate names.
//!
//! These moves are not fsynced here: callers that need the move to survive a crash follow it
//! with [`crate::store::durable::fsync_dir`] on both folders.

use std::io;
use std::path::Path;

/// Renames `from` to `to`, failing with `AlreadyExists` if `to` exists. A symlink at `from` is
/// moved as the link itself; it is never followed.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    match atomic_rename_noreplace(from, to) {
        Some(result) => result,
        None => rename_checked(from, to),
    }
}

/// The atomic no-replace rename where the platform and filesystem have one (`renameat2` on
/// Linux); `None` where they do not, so the caller can choose its own fallback.
pub(crate) fn atomic_rename_noreplace(from: &Path, to: &Path) -> Option<io::Result<()>> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        match renameat2_noreplace(from, to) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) => None,
            other => Some(other),
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (from, to);
        None
    }
}

fn rename_checked(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(to) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "destination exists",
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::rename(from, to),
        Err(e) => Err(e),
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn renameat2_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let c_from = CString::new(from.as_os_str().as_bytes())?;
    let c_to = CString::new(to.as_os_str().as_bytes())?;
    // SAFETY: both pointers come from live NUL-terminated CStrings; AT_FDCWD makes the paths
    // resolve like `rename(2)` does; renameat2 does not keep the pointers after returning.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c_from.as_ptr(),
            libc::AT_FDCWD,
            c_to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn moves_and_refuses_to_replace() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::write(&a, b"one").unwrap();
        rename_noreplace(&a, &b).unwrap();
        assert!(!a.exists());
        fs::write(&a, b"two").unwrap();
        let err = rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&b).unwrap(), b"one");
        assert_eq!(fs::read(&a).unwrap(), b"two");
    }

    #[test]
    fn missing_source_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = rename_noreplace(&dir.path().join("x"), &dir.path().join("y")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn moves_a_symlink_itself() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"secret").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let moved = dir.path().join("moved");
        rename_noreplace(&link, &moved).unwrap();
        assert!(fs::symlink_metadata(&moved)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"secret");
    }
}
