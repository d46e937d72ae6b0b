//! [`Mechanism::Bubblewrap`](super::Mechanism::Bubblewrap): the same view of the file system as
//! the Landlock mechanism, built by `bwrap` with mounts, for machines without Landlock (or
//! without unprivileged user namespaces, where `bwrap` may be allowed them).
//!
//! The differences, documented in docs/sandbox.md: a protected path reads as an empty folder (or
//! an empty file) instead of "permission denied", and `network = off` still has a private
//! loopback.

use std::ffi::OsString;
use std::path::PathBuf;

use super::{Network, Sandbox};

/// `bwrap` on `PATH`.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| candidate.is_file())
}

/// The options before `-- sh -c command`.
pub fn arguments(sandbox: &Sandbox) -> Vec<OsString> {
    let paths = sandbox.protected();
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |parts: &[&std::ffi::OsStr]| args.extend(parts.iter().map(|p| p.into()));
    push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
    push(&["--dev".as_ref(), "/dev".as_ref()]);
    if let Some(shm) = paths.private_shm() {
        push(&["--bind".as_ref(), shm.as_os_str(), "/dev/shm".as_ref()]);
    }
    let mut writable = paths.writable(sandbox.mode());
    writable.sort_by_key(|p| p.components().count());
    let over_host = paths.temp_mounted_over_host();
    let mut binds: Vec<(PathBuf, PathBuf)> = writable
        .iter()
        .map(|root| match (over_host, root == paths.temp()) {
            // The private temp folder is seen in place of the host's.
            (true, true) => (root.clone(), paths.host_temp().to_path_buf()),
            _ => (root.clone(), root.clone()),
        })
        .collect();
    binds.sort_by_key(|(_, at)| at.components().count());
    for (root, at) in &binds {
        push(&["--bind".as_ref(), root.as_os_str(), at.as_os_str()]);
    }
    // Whatever writable folder contains them, in every mode.
    for path in paths.read_only() {
        if writable.iter().any(|w| path.starts_with(w))
            && !paths.is_denied(&path)
            && std::fs::symlink_metadata(&path).is_ok_and(|m| !m.file_type().is_symlink())
        {
            push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
    }
    for denied in paths.deny_read() {
        match std::fs::symlink_metadata(denied) {
            Ok(m) if m.is_dir() => {
                push(&["--tmpfs".as_ref(), denied.as_os_str()]);
                push(&["--remount-ro".as_ref(), denied.as_os_str()]);
            }
            Ok(m) if m.file_type().is_symlink() => {}
            Ok(_) => push(&[
                "--ro-bind".as_ref(),
                "/dev/null".as_ref(),
                denied.as_os_str(),
            ]),
            Err(_) => {}
        }
    }
    if sandbox.network() != Network::On {
        push(&["--unshare-net".as_ref()]);
    }
    args
}
