//! The paths a sandbox is about: the workspace, its `.troupe/`, the temp folder, and the paths no
//! command may read — resolved once, to absolute paths without symlinks where they exist.

use std::path::{Component, Path, PathBuf};

use super::Mode;

/// The protected paths under the user's home, always denied for reading.
pub const HOME_SECRETS: [&str; 4] = [".ssh", ".aws", ".gnupg", ".config/gcloud"];

/// The workspace's files no command may read.
pub const WORKSPACE_SECRETS: [&str; 1] = [".env"];

/// What stays read-only inside a writable workspace: troupe's own state, its settings (they
/// decide permissions, hooks and this sandbox), and what makes git run commands later
/// (`.git/hooks`, `.git/config`: `core.hooksPath`, `core.fsmonitor`).
pub const WORKSPACE_READ_ONLY: [&str; 4] = [".troupe", "troupe.toml", ".git/hooks", ".git/config"];

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
}

impl Protected {
    /// `extra` entries are absolute, `~/…` (the user's home) or relative to the workspace.
    pub fn resolve(workspace: &Path, extra: &[String], host: &Host) -> Self {
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
        Self {
            workspace,
            host_temp: temp.clone(),
            temp,
            deny_read,
        }
    }

    /// The same paths with `root` as the workspace (a teammate's worktree): the protected
    /// paths kept, the new workspace's own secrets added.
    pub fn rooted_at(&self, root: &Path) -> Self {
        let workspace = real(root);
        let mut deny_read = self.deny_read.clone();
        deny_read.extend(WORKSPACE_SECRETS.iter().map(|p| real(&workspace.join(p))));
        deny_read.sort();
        deny_read.dedup();
        Self {
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

    /// The paths of [`WORKSPACE_READ_ONLY`] (existing or not).
    pub fn read_only(&self) -> Vec<PathBuf> {
        WORKSPACE_READ_ONLY
            .iter()
            .map(|p| self.workspace.join(p))
            .collect()
    }

    /// Whether `path` is one of [`WORKSPACE_READ_ONLY`] or lies under one.
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

/// `path` without symlinks where it exists: its longest existing ancestor is canonicalised and
/// the rest appended (so a protected path that does not exist yet still names the right place).
pub fn real(path: &Path) -> PathBuf {
    let path = lexical(path);
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            let mut out = canonical;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path,
        }
    }
}

/// `.` and `..` taken out without touching the file system (`..` at the root stays the root).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_paths_lose_dots_and_never_climb_above_the_root() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(lexical(Path::new("/../../x")), PathBuf::from("/x"));
    }

    #[test]
    fn a_missing_path_resolves_through_its_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(&root, root.join("link")).unwrap();
        assert_eq!(real(&root.join("link/missing/x")), root.join("missing/x"));
    }
}
