//! The child's side of [`Mechanism::Landlock`](super::Mechanism::Landlock): new namespaces,
//! the mounts that protect `.troupe/` and mask protected paths inside writable folders, then the
//! Landlock ruleset — all between fork and exec.
//!
//! **Architecture Invariant:** [`Prepared::enter`] runs in the child of a multi-threaded process,
//! where only async-signal-safe calls are allowed: it makes system calls on byte strings and a
//! file descriptor prepared by [`Prepared::new`] in the parent, and allocates nothing.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use super::{landlock_rules, Network, Sandbox, SandboxError};

const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// Where the run's private `/dev/shm` is seen.
const SHM: &str = "/dev/shm";
const AT_RECURSIVE: libc::c_int = 0x8000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Everything the child needs, made before the fork.
pub struct Prepared {
    ruleset: OwnedFd,
    /// The run's private temp folder, bound over the host's: (private, host).
    temp_over: Option<(CString, CString)>,
    /// The run's private `/dev/shm`, bound over the host's.
    shm_over: Option<CString>,
    unshare: libc::c_int,
    uid_map: CString,
    gid_map: CString,
    /// Bind-mounted onto themselves, read-only (`.troupe/`, `troupe.toml`, `.git/hooks`, …).
    read_only: Vec<CString>,
    /// Protected folders inside writable ones: an empty, unreadable, read-only tmpfs on top.
    mask_folders: Vec<CString>,
    /// Protected files inside writable folders: `/dev/null`, read-only, on top.
    mask_files: Vec<CString>,
    loopback: bool,
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::Prepare(format!("a NUL byte in {}", path.display())))
}

impl Prepared {
    pub fn new(sandbox: &Sandbox) -> Result<Self, SandboxError> {
        let paths = sandbox.protected();
        let writable = paths.writable(sandbox.mode());
        let mut read_only = Vec::new();
        // Whatever writable folder contains them, in every mode.
        for path in paths.read_only() {
            if !writable.iter().any(|w| path.starts_with(w)) {
                continue;
            }
            // Unreadable too: masked below, read-only as well.
            if paths.is_denied(&path) {
                continue;
            }
            // A symlink is judged on its target; only what is really there is bound.
            match std::fs::symlink_metadata(&path) {
                Ok(m) if !m.file_type().is_symlink() => read_only.push(c_path(&path)?),
                _ => {}
            }
        }
        let temp_over = if paths.temp_mounted_over_host() {
            Some((c_path(paths.temp())?, c_path(paths.host_temp())?))
        } else {
            None
        };
        let shm_over = match paths.private_shm() {
            Some(shm) if Path::new(SHM).is_dir() => Some(c_path(&shm)?),
            _ => None,
        };
        let mut mask_folders = Vec::new();
        let mut mask_files = Vec::new();
        for denied in paths.deny_read() {
            if !writable.iter().any(|w| denied.starts_with(w)) {
                continue; // not granted by Landlock in the first place
            }
            match std::fs::symlink_metadata(denied) {
                Ok(m) if m.is_dir() => mask_folders.push(c_path(denied)?),
                Ok(m) if m.file_type().is_symlink() => {} // judged on its target
                Ok(_) => mask_files.push(c_path(denied)?),
                Err(_) => {} // nothing there to protect
            }
        }
        let mut unshare = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
        if sandbox.network() != Network::On {
            unshare |= libc::CLONE_NEWNET;
        }
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let map = |id: u32| CString::new(format!("{id} {id} 1\n")).unwrap_or_default();
        Ok(Self {
            ruleset: landlock_rules::ruleset(sandbox)?,
            temp_over,
            shm_over,
            unshare,
            uid_map: map(uid),
            gid_map: map(gid),
            read_only,
            mask_folders,
            mask_files,
            loopback: sandbox.network() == Network::Loopback,
        })
    }

    /// Makes `command` enter the sandbox in its child, just before exec.
    pub fn install(self, command: &mut std::process::Command) {
        // SAFETY: `enter` is async-signal-safe (see the module's invariant).
        unsafe {
            command.pre_exec(move || self.enter());
        }
    }

    fn enter(&self) -> io::Result<()> {
        // SAFETY (whole function): system calls on NUL-terminated strings owned by `self` and
        // on stack values; nothing is allocated.
        unsafe {
            check(libc::unshare(self.unshare))?;
            write_file(c"/proc/self/setgroups", c"deny")?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            // Before the temp folder is covered: the private /dev/shm lies in the host's.
            if let Some(private) = &self.shm_over {
                check(libc::mount(
                    private.as_ptr(),
                    c"/dev/shm".as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
            }
            if let Some((private, host)) = &self.temp_over {
                check(libc::mount(
                    private.as_ptr(),
                    host.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
            }
            for target in &self.read_only {
                check(libc::mount(
                    target.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
                set_read_only(target)?;
            }
            for folder in &self.mask_folders {
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    folder.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"mode=000,size=4k".as_ptr().cast(),
                ))?;
            }
            for file in &self.mask_files {
                check(libc::mount(
                    c"/dev/null".as_ptr(),
                    file.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
                set_read_only(file)?;
            }
            if self.loopback {
                loopback_up()?;
            }
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            check(libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            ) as libc::c_int)?;
        }
        Ok(())
    }
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Writes `content` to `path` (a `/proc` file) with one `write`.
unsafe fn write_file(path: &CStr, content: &CStr) -> io::Result<()> {
    // SAFETY: called from `enter`, on its prepared values.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd)?;
        let bytes = content.to_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written < 0 || written as usize != bytes.len() {
            return Err(error);
        }
        Ok(())
    }
}

/// Makes the mount at `target` (and every mount beneath it) read-only.
unsafe fn set_read_only(target: &CStr) -> io::Result<()> {
    // SAFETY: called from `enter`, on its prepared values.
    unsafe {
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        check(libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) as libc::c_int)
    }
}

/// Brings up `lo` in the new network namespace.
unsafe fn loopback_up() -> io::Result<()> {
    // SAFETY: called from `enter`, on its prepared values.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(fd)?;
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &request);
        let error = io::Error::last_os_error();
        libc::close(fd);
        if result < 0 {
            return Err(error);
        }
        Ok(())
    }
}
