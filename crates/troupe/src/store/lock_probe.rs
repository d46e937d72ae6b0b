//! Whether a lock file is held, asked of the kernel without taking the lock.
//!
//! `troupe status` must say whether a `troupe run` holds `.troupe/run.lock`. The file's text
//! (`pid N since T`) is only what the last holder wrote: a run killed with SIGKILL leaves it
//! behind, and its pid may since belong to any process. Trying the lock would tell, but a probe
//! that takes the lock even for a moment can make a `troupe run` starting at that moment fail its
//! own try-lock and report the workspace busy. So this probe takes nothing and writes nothing: it
//! opens the file read-only and looks it up, by device and inode, in the kernel's table of held
//! locks, `/proc/locks`.
//!
//! A line of `/proc/locks` reads `1: FLOCK  ADVISORY  WRITE 4242 fe:00:770190 0 EOF`: id, type,
//! mode, access, the locker's pid, `major:minor:inode` (major and minor in hex), range. A process
//! waiting for a lock is listed after the holder as `1: -> FLOCK …` and does not count. troupe's
//! locks are `flock`s (std `File::lock`), so only `FLOCK` lines count.
//!
//! The device there is the filesystem's superblock device. `stat` reports the same on most
//! filesystems but not all (a btrfs subvolume reports its own), so the device of the mount the
//! file was opened on (`mnt_id` in `/proc/self/fdinfo`, looked up in `/proc/self/mountinfo`) is
//! accepted too. Limits: the kernel lists only locks whose holder is visible in this process's
//! pid namespace; without `/proc` the answer is [`LockState::Unknown`].

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::read::{open_regular, Links};
use super::IoError;

/// What the kernel says about a lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// Nobody holds a `flock` on it.
    Free,
    /// A process holds a `flock` on it; `pid` is the process that took it, as the kernel
    /// recorded it.
    Held { pid: u32 },
    /// The kernel's lock table could not be read (no `/proc`).
    Unknown,
}

/// The lock state of the file at `path`, and the text it holds (at most 4 KiB, trimmed).
/// `Ok(None)` when there is no file. Opens read-only, never creates, never blocks: anything but a
/// regular file is refused with an error naming it.
pub fn probe(path: &Path) -> Result<Option<(LockState, String)>, IoError> {
    let Some(file) = open_regular(path, Links::Refuse)? else {
        return Ok(None);
    };
    let text = read_text(&file, path)?;
    let Ok(table) = std::fs::read_to_string("/proc/locks") else {
        return Ok(Some((LockState::Unknown, text)));
    };
    let meta = file
        .metadata()
        .map_err(|e| IoError::new("inspect", path, e))?;
    let mut devices = vec![(libc::major(meta.dev()), libc::minor(meta.dev()))];
    devices.extend(mount_device(&file));
    let state = holder_in(&table, &devices, meta.ino())
        .map_or(LockState::Free, |pid| LockState::Held { pid });
    Ok(Some((state, text)))
}

fn read_text(file: &File, path: &Path) -> Result<String, IoError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(4096)
        .read_to_end(&mut bytes)
        .map_err(|e| IoError::new("read", path, e))?;
    Ok(String::from_utf8_lossy(&bytes).trim().to_owned())
}

/// The pid of the first `FLOCK` holder of `ino` on one of `devices` in a `/proc/locks` table.
fn holder_in(table: &str, devices: &[(u32, u32)], ino: u64) -> Option<u32> {
    table.lines().find_map(|line| {
        let mut fields = line.split_whitespace().skip(1).peekable();
        if fields.peek() == Some(&"->") {
            return None; // a waiter, not a holder
        }
        if fields.next() != Some("FLOCK") {
            return None;
        }
        let fields: Vec<&str> = fields.collect();
        let at = fields.iter().position(|f| f.matches(':').count() == 2)?;
        let (device, inode) = parse_dev_ino(fields[at])?;
        let pid = fields.get(at.checked_sub(1)?)?.parse().ok()?;
        (inode == ino && devices.contains(&device)).then_some(pid)
    })
}

/// `fe:00:770190` → ((0xfe, 0x00), 770190).
fn parse_dev_ino(field: &str) -> Option<((u32, u32), u64)> {
    let mut parts = field.split(':');
    let major = u32::from_str_radix(parts.next()?, 16).ok()?;
    let minor = u32::from_str_radix(parts.next()?, 16).ok()?;
    let inode = parts.next()?.parse().ok()?;
    Some(((major, minor), inode))
}

/// The device (`major:minor`, decimal in mountinfo) of the mount `file` was opened on.
fn mount_device(file: &File) -> Option<(u32, u32)> {
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", file.as_raw_fd())).ok()?;
    let mnt_id = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))?
        .trim();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        if fields.next()? != mnt_id {
            return None;
        }
        let (major, minor) = fields.nth(1)?.split_once(':')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lock::try_lock_exclusive;

    #[test]
    fn the_table_is_read_by_device_and_inode_holders_only() {
        let table = "\
1: POSIX  ADVISORY  WRITE 3784 fe:00:770190 0 EOF
2: FLOCK  ADVISORY  WRITE 4242 fe:01:770190 0 EOF
2: -> FLOCK  ADVISORY  WRITE 4343 fe:00:770190 0 EOF
3: FLOCK  ADVISORY  READ 5151 fe:00:770190 0 EOF
4: LEASE  ACTIVE    READ 6161 fe:00:770190 0 EOF
";
        assert_eq!(holder_in(table, &[(0xfe, 0)], 770190), Some(5151));
        assert_eq!(holder_in(table, &[(0xfe, 1)], 770190), Some(4242));
        assert_eq!(holder_in(table, &[(0xfe, 0)], 770191), None);
        assert_eq!(holder_in(table, &[(0x08, 0)], 770190), None);
        assert_eq!(holder_in("", &[(0xfe, 0)], 770190), None);
        assert_eq!(parse_dev_ino("103:0a:12"), Some(((0x103, 0x0a), 12)));
    }

    #[test]
    fn a_lock_held_through_another_open_file_is_seen_and_its_release_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.lock");
        assert_eq!(probe(&path).unwrap(), None);
        let mut guard = try_lock_exclusive(&path).unwrap().unwrap();
        guard.write_holder("pid 1 since then").unwrap();
        let (state, text) = probe(&path).unwrap().unwrap();
        if state == LockState::Unknown {
            return; // no /proc here: nothing more to check
        }
        assert_eq!(
            state,
            LockState::Held {
                pid: std::process::id()
            }
        );
        assert_eq!(text, "pid 1 since then");
        drop(guard);
        assert_eq!(
            probe(&path).unwrap().unwrap(),
            (LockState::Free, "pid 1 since then".to_owned())
        );
    }
}
