//! The Landlock ruleset a confined command restricts itself with, built by the parent before the
//! fork (it opens folders and reads directories, which the child must not).
//!
//! Landlock only grants, so "read everything but `~/.ssh`" is granted as: every entry of `/`
//! except the ones leading to a protected path, and so on down to the protected path's siblings.
//! Symlinks are never granted (access through them is judged on their target). `/dev` is not
//! granted as a whole (a disk device would expose everything): only the harmless devices are.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, ABI,
};

use super::{Sandbox, SandboxError};

/// The rights handled (and so denied unless granted). ABI 5 adds device ioctls; later rights
/// (connecting to Unix sockets by path) are left to the kernel's ordinary checks.
const HANDLED: ABI = ABI::V5;

/// Devices a command may read and write.
const DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Device folders a command may use freely. Not the host's `/dev/shm`: a private one of the
/// run's is mounted over it (`namespace`) and granted by its own rule below.
const DEVICE_FOLDERS: [&str; 1] = ["/dev/pts"];

/// The Landlock ABI of the running kernel, if it has Landlock.
pub fn abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and size 0 and the VERSION flag, the call only returns the
    // ABI version (or an error); it reads and writes no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(version).ok().filter(|v| *v >= 1)
}

fn failed(what: impl std::fmt::Display) -> SandboxError {
    SandboxError::Prepare(format!("landlock: {what}"))
}

/// The ruleset for `sandbox`, as a file descriptor the child passes to `landlock_restrict_self`.
pub fn ruleset(sandbox: &Sandbox) -> Result<OwnedFd, SandboxError> {
    let all = AccessFs::from_all(HANDLED);
    let paths = sandbox.protected();
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(failed)?
        .scope(Scope::from_all(ABI::V6))
        .map_err(failed)?
        .create()
        .map_err(failed)?;

    // Protected paths inside a writable folder are masked by a mount instead (the folder's
    // grant covers them): see `namespace`.
    let writable = paths.writable(sandbox.mode());
    let mut excluded: Vec<PathBuf> = paths
        .deny_read()
        .iter()
        .filter(|d| !writable.iter().any(|w| d.starts_with(w)))
        .cloned()
        .collect();
    excluded.push(PathBuf::from("/dev"));
    let mut grants = Vec::new();
    readable(Path::new("/"), &excluded, &mut grants);
    for (path, rights) in grants {
        ruleset = grant(ruleset, &path, rights)?;
    }
    ruleset = grant(ruleset, Path::new("/dev"), AccessFs::ReadDir.into())?;
    for device in DEVICES {
        ruleset = grant(
            ruleset,
            Path::new(device),
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev,
        )?;
    }
    for folder in DEVICE_FOLDERS {
        ruleset = grant(ruleset, Path::new(folder), all)?;
    }
    for root in &writable {
        ruleset = grant(ruleset, root, all)?;
    }
    // Seen at /dev/shm through a bind mount, whose root is judged on its own inode.
    if let Some(shm) = paths.private_shm() {
        ruleset = grant(ruleset, &shm, all)?;
    }
    let fd: Option<OwnedFd> = ruleset.into();
    fd.ok_or_else(|| failed("the kernel does not support it"))
}

/// Grants `rights` beneath `path`, if it exists (rights a file cannot take are dropped for a
/// file). A path that vanished in between is skipped: nothing is granted there.
fn grant(
    ruleset: RulesetCreated,
    path: &Path,
    rights: BitFlags<AccessFs>,
) -> Result<RulesetCreated, SandboxError> {
    let Ok(metadata) = std::fs::metadata(path) else {
        return Ok(ruleset);
    };
    let rights = if metadata.is_dir() {
        rights
    } else {
        rights & AccessFs::from_file(HANDLED)
    };
    if rights.is_empty() {
        return Ok(ruleset);
    }
    let Ok(fd) = PathFd::new(path) else {
        return Ok(ruleset);
    };
    ruleset
        .add_rule(PathBeneath::new(fd, rights))
        .map_err(|e| failed(format!("{}: {e}", path.display())))
}

/// Read grants for everything beneath `dir` except `excluded` (and what lies under them): `dir`
/// whole when nothing excluded is inside it, else its listing and each entry in turn.
fn readable(dir: &Path, excluded: &[PathBuf], out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>) {
    if excluded.iter().any(|e| e == dir) {
        return;
    }
    if !excluded.iter().any(|e| e.starts_with(dir)) {
        out.push((dir.to_owned(), AccessFs::from_read(HANDLED)));
        return;
    }
    // An ancestor of a protected path: its listing is readable (names, not contents).
    out.push((dir.to_owned(), AccessFs::ReadDir.into()));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        let path = entry.path();
        if kind.is_dir() {
            readable(&path, excluded, out);
        } else if !excluded.iter().any(|e| e == &path) {
            out.push((path, AccessFs::from_read(HANDLED)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_granted_around_a_protected_path_never_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for p in ["home/.ssh", "home/code", "other"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        std::fs::write(root.join("home/notes"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("home/.ssh"), root.join("home/link")).unwrap();
        let mut out = Vec::new();
        readable(&root, &[root.join("home/.ssh")], &mut out);
        let full: Vec<_> = out
            .iter()
            .filter(|(_, r)| r.contains(AccessFs::ReadFile))
            .map(|(p, _)| p.strip_prefix(&root).unwrap().to_owned())
            .collect();
        let mut full = full;
        full.sort();
        assert_eq!(
            full,
            [
                PathBuf::from("home/code"),
                "home/notes".into(),
                "other".into()
            ]
        );
        assert!(out
            .iter()
            .all(|(p, _)| !p.starts_with(root.join("home/.ssh")) && !p.ends_with("link")));
    }
}
