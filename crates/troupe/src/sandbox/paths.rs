//! The paths a sandbox is about: the workspace, its protected paths, the temp folder, and the
//! paths no command may read — resolved once, to absolute paths without symlinks where they
//! exist.

use std::path::{Path, PathBuf};

use super::Mode;
use crate::protected::ProtectedPaths;
pub use crate::protected::{lexical, real};

/// The protected paths under the user's home, always denied for reading.
pub const HOME_SECRETS: [&str; 4] = [".ssh", ".aws", ".gnupg", ".config/gcloud"];

/// The workspace's files no command may read.
pub const WORKSPACE_SECRETS: [&str; 1] = [".env"];

/// What a sandbox takes from the machine: the user's home, the temp folder, and a forced
/// mechanism ([`super::MECHANISM_VAR`]). Tests make their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub home: Option<PathBuf>,
    pub temp: PathBuf,
    pub mechanism: Option<String>,
}

impl Host {
    /// `$HOME`, `$TMPDIR` (else `/tmp`) and `$TROUPE_SANDBOX_MECHANISM`.
    pub fn from_env() -> Self {
        Self {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            temp: std::env::temp_dir(),
            mechanism: std::env::var(super::MECHANISM_VAR)
                .ok()
                .filter(|m| !m.is_empty()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    workspace: PathBuf,
    /// The machine's temp folder (`$TMPDIR`, else `/tmp`).
    host_temp: PathBuf,
    /// The temp folder commands may write: the host's until [`Protected::use_private_temp`],
    /// then a private folder of the run's.
    temp: PathBuf,
    deny_read: Vec<PathBuf>,
    /// What no command may write, rename or replace (`crate::protected`): the workspace's
    /// `.git`, `troupe.toml`, `.env`, `.troupe/` and the settings' `deny_write`.
    write_protected: ProtectedPaths,
    /// The settings' `deny_write`, kept to protect them again under another root.
    deny_write: Vec<String>,
    home: Option<PathBuf>,
    /// `.troupe/blocked/` of the workspace the sandbox was made for (kept under another root):
    /// where a protected path a command created is moved.
    blocked: PathBuf,
}

impl Protected {
    /// `extra` entries (unreadable) and `deny_write` entries (unwritable) are absolute, `~/…`
    /// (the user's home) or relative to the workspace.
    pub fn resolve(workspace: &Path, extra: &[String], deny_write: &[String], host: &Host) -> Self {
        let write_protected = ProtectedPaths::of(workspace, deny_write, host.home.as_deref());
        let workspace = real(workspace);
        let temp = real(&host.temp);
        let home = host.home.clone();
        let mut deny_read = Vec::new();
        if let Some(home) = &home {
            deny_read.extend(HOME_SECRETS.iter().map(|p| real(&home.join(p))));
        }
        deny_read.extend(WORKSPACE_SECRETS.iter().map(|p| real(&workspace.join(p))));
        for entry in extra {
            let path = match (entry.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ if Path::new(entry).is_absolute() => PathBuf::from(entry),
                _ => workspace.join(entry),
            };
            deny_read.push(real(&path));
        }
        deny_read.sort();
        deny_read.dedup();
        let blocked = workspace
            .join(crate::layout::Layout::STATE_DIR)
            .join("blocked");
        Self {
            workspace,
            host_temp: temp.clone(),
            temp,
            deny_read,
            write_protected,
            deny_write: deny_write.to_vec(),
            home,
            blocked,
        }
    }

    /// The same paths with `root` as the workspace (a teammate's worktree): the unreadable
    /// paths kept, the new workspace's own secrets added; the new workspace's own protected
    /// paths (its `.git` file, `troupe.toml`, …) unwritable.
    pub fn rooted_at(&self, root: &Path) -> Self {
        let workspace = real(root);
        let mut deny_read = self.deny_read.clone();
        deny_read.extend(WORKSPACE_SECRETS.iter().map(|p| real(&workspace.join(p))));
        deny_read.sort();
        deny_read.dedup();
        Self {
            write_protected: ProtectedPaths::of(&workspace, &self.deny_write, self.home.as_deref()),
            workspace,
            deny_read,
            ..self.clone()
        }
    }

    /// Confined commands write `dir` (a fresh folder of the run's) instead of the host's temp
    /// folder.
    pub fn use_private_temp(&mut self, dir: &Path) {
        self.temp = real(dir);
    }

    /// The commands' private `/dev/shm` (inside the private temp folder), once there is one.
    pub fn private_shm(&self) -> Option<PathBuf> {
        (self.temp != self.host_temp).then(|| self.temp.join("shm"))
    }

    pub fn host_temp(&self) -> &Path {
        &self.host_temp
    }

    /// Whether confined commands see the private temp folder in place of the host's (mounted
    /// over it), so that `/tmp/x` written by a command lands in the private folder. Not when
    /// the workspace lies in the host's temp folder or contains it (the mount would hide
    /// workspace files): then the host's temp folder is simply not writable, and `TMPDIR`
    /// names the private folder.
    pub fn temp_mounted_over_host(&self) -> bool {
        self.temp != self.host_temp
            && self.host_temp.parent().is_some()
            && !self.workspace.starts_with(&self.host_temp)
            && !self.host_temp.starts_with(&self.workspace)
            && self.host_temp.is_dir()
    }

    /// The temp folder as confined commands see it (their `TMPDIR`).
    pub fn command_temp(&self) -> &Path {
        if self.temp_mounted_over_host() {
            &self.host_temp
        } else {
            &self.temp
        }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn troupe_dir(&self) -> PathBuf {
        self.workspace.join(crate::layout::Layout::STATE_DIR)
    }

    /// The protected paths (existing or not): what no command writes, renames or replaces.
    pub fn write_protected(&self) -> &ProtectedPaths {
        &self.write_protected
    }

    /// Where a protected path a confined command created is moved (`.troupe/blocked/`).
    pub fn blocked_dir(&self) -> &Path {
        &self.blocked
    }

    /// The protected paths (existing or not), as paths.
    pub fn read_only(&self) -> Vec<PathBuf> {
        self.write_protected
            .entries()
            .iter()
            .map(|e| e.path.clone())
            .collect()
    }

    /// Whether `path` is a protected path or lies under one.
    pub fn is_read_only(&self, path: &Path) -> bool {
        self.read_only().iter().any(|r| path.starts_with(r))
    }

    pub fn temp(&self) -> &Path {
        &self.temp
    }

    /// Every path no command may read, existing or not.
    pub fn deny_read(&self) -> &[PathBuf] {
        &self.deny_read
    }

    /// Where a command under `mode` may write (besides the harmless devices).
    pub fn writable(&self, mode: Mode) -> Vec<PathBuf> {
        match mode {
            Mode::WorkspaceWrite => vec![self.workspace.clone(), self.temp.clone()],
            Mode::ReadOnly | Mode::Off => vec![self.temp.clone()],
        }
    }

    /// Whether `path` is a protected path or lies under one.
    pub fn is_denied(&self, path: &Path) -> bool {
        self.deny_read.iter().any(|d| path.starts_with(d))
    }
}
