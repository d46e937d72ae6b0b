//! The protected paths of a workspace (SPEC §4.1, issue 39): **one list, checked by every
//! writer** — the file tools (through the call path, `tools::dispatch`) and the sandbox of
//! every command (`sandbox`).
//!
//! What is on it, and why:
//!
//! - `.troupe/` — troupe's own state (mailboxes, requests, the audit): tools never write it;
//! - `.git` — the folder itself and everything in it (or, in a git worktree, the `.git` *file*
//!   that names its admin folder): git runs what its `config`, `hooks/` and `info/attributes`
//!   name (`core.fsmonitor`, hooks, filters) the next time anyone — the person or troupe —
//!   runs git here;
//! - `troupe.toml` — the settings: permissions, hooks, the sandbox itself;
//! - `.env` — keys and the model server they go to;
//! - the settings' own additions (`[sandbox] deny_write`): absolute, `~/…` or relative to the
//!   workspace.
//!
//! Each is protected **whether or not it exists yet**: a path is judged by where it would be,
//! once every symlink of its existing part is resolved ([`real`]), so `docs/../.git/config`, a
//! symlink to `.git` and a `troupe.toml` that does not exist yet are all caught.
//!
//! What a writer does with a protected path is its own business, but the list is this one:
//! a file tool's write there is asked of a person (never allowed by `--approval auto` or a
//! broad rule; only a rule naming the path exactly allows it), and `.troupe/` is refused
//! outright; a confined command can neither write, rename nor replace them.

use std::path::{Component, Path, PathBuf};

use crate::layout::Layout;

/// Why a path is protected: what writing it would let someone do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protection {
    /// `.troupe/`: troupe's own state. No tool writes it, whatever anyone answers.
    TroupeState,
    /// `.git`: git runs programs its config, hooks and attributes name.
    Git,
    /// `troupe.toml`: permissions, hooks and the sandbox are decided there.
    Settings,
    /// `.env`: keys, and which server they are sent to.
    Secrets,
    /// Named by the settings' `[sandbox] deny_write`.
    Configured,
}

impl Protection {
    /// One clause for a refusal or a prompt: why this path is protected.
    pub fn why(self) -> &'static str {
        match self {
            Self::TroupeState => "it is troupe's own state",
            Self::Git => {
                "git runs the programs its config, hooks and attributes name (core.fsmonitor, \
                 hooks, filters)"
            }
            Self::Settings => "it decides permissions, hooks and the sandbox",
            Self::Secrets => "it holds keys and decides where they are sent",
            Self::Configured => "the settings' [sandbox] deny_write names it",
        }
    }

    /// A stable word for it (audit lines, tests).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TroupeState => "troupe_state",
            Self::Git => "git",
            Self::Settings => "settings",
            Self::Secrets => "secrets",
            Self::Configured => "configured",
        }
    }
}

/// The workspace entries protected in every workspace, by name.
pub const BUILT_IN: [(&str, Protection); 4] = [
    (Layout::STATE_DIR, Protection::TroupeState),
    (".git", Protection::Git),
    ("troupe.toml", Protection::Settings),
    (".env", Protection::Secrets),
];

/// One protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedPath {
    /// Absolute, without symlinks in its existing part ([`real`]).
    pub path: PathBuf,
    pub protection: Protection,
}

/// A protected path a write would reach: the entry, and the written path as the workspace
/// shows it (`.git/config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub entry: ProtectedPath,
    /// The written path, relative to the workspace when inside it (`/`-separated).
    pub shown: String,
}

impl Hit {
    /// `.git/config is protected: git runs the programs …`.
    pub fn explain(&self) -> String {
        format!(
            "{} is a protected path ({})",
            self.shown,
            self.entry.protection.why()
        )
    }
}

/// The protected paths of one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedPaths {
    /// The workspace, resolved.
    root: PathBuf,
    entries: Vec<ProtectedPath>,
}

impl ProtectedPaths {
    /// The built-in entries of `workspace` and the settings' `additions` (absolute, `~/…` with
    /// `home`, or relative to the workspace; blank entries are ignored).
    pub fn of(workspace: &Path, additions: &[String], home: Option<&Path>) -> Self {
        let root = real(workspace);
        let mut entries: Vec<ProtectedPath> = BUILT_IN
            .iter()
            .map(|(name, protection)| ProtectedPath {
                path: root.join(name),
                protection: *protection,
            })
            .collect();
        for addition in additions.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
            let path = match (addition.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ if Path::new(addition).is_absolute() => PathBuf::from(addition),
                _ => root.join(addition),
            };
            entries.push(ProtectedPath {
                path: real(&path),
                protection: Protection::Configured,
            });
        }
        entries.dedup_by(|a, b| a.path == b.path);
        Self { root, entries }
    }

    /// The built-in entries only.
    pub fn built_in(workspace: &Path) -> Self {
        Self::of(workspace, &[], None)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn entries(&self) -> &[ProtectedPath] {
        &self.entries
    }

    /// The entry `path` (absolute; resolved or not — it is resolved here) is, or lies under.
    pub fn find(&self, path: &Path) -> Option<Hit> {
        let resolved = real(path);
        let entry = self
            .entries
            .iter()
            .find(|e| resolved.starts_with(&e.path))?;
        let shown = match resolved.strip_prefix(&self.root) {
            Ok(relative) => slashed(relative),
            Err(_) => resolved.display().to_string(),
        };
        Some(Hit {
            entry: entry.clone(),
            shown,
        })
    }

    /// Whether `path` is a protected path or lies under one.
    pub fn contains(&self, path: &Path) -> bool {
        self.find(path).is_some()
    }

    /// The entries that do not exist now (lstat): what a confined command must not create.
    pub fn missing(&self) -> Vec<ProtectedPath> {
        self.entries
            .iter()
            .filter(|e| std::fs::symlink_metadata(&e.path).is_err())
            .cloned()
            .collect()
    }
}

/// `relative` with `/` between its parts (`.` for the empty path).
pub fn slashed(relative: &Path) -> String {
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
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

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn lexical_paths_lose_dots_and_never_climb_above_the_root() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(lexical(Path::new("/../../x")), PathBuf::from("/x"));
    }

    #[test]
    fn a_missing_path_resolves_through_its_existing_ancestor() {
        let (_dir, root) = workspace();
        std::os::unix::fs::symlink(&root, root.join("link")).unwrap();
        assert_eq!(real(&root.join("link/missing/x")), root.join("missing/x"));
    }

    #[test]
    fn every_built_in_entry_is_protected_whether_or_not_it_exists() {
        let (_dir, root) = workspace();
        let protected = ProtectedPaths::built_in(&root);
        for (path, protection) in [
            (".git", Protection::Git),
            (".git/config", Protection::Git),
            (".git/hooks/pre-commit", Protection::Git),
            (".git/info/attributes", Protection::Git),
            ("troupe.toml", Protection::Settings),
            (".env", Protection::Secrets),
            (".troupe/team.json", Protection::TroupeState),
        ] {
            let hit = protected.find(&root.join(path)).unwrap();
            assert_eq!(hit.entry.protection, protection, "{path}");
            assert_eq!(hit.shown, path);
        }
        for free in [
            "src/main.rs",
            ".gitignore",
            ".github/x",
            "troupe.toml.bak",
            "a/.git",
        ] {
            assert!(protected.find(&root.join(free)).is_none(), "{free}");
        }
    }

    #[test]
    fn a_path_is_judged_where_it_leads_not_how_it_is_spelled() {
        let (_dir, root) = workspace();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::os::unix::fs::symlink(root.join(".git"), root.join("docs/g")).unwrap();
        let protected = ProtectedPaths::built_in(&root);
        assert_eq!(
            protected
                .find(&root.join("docs/../.git/config"))
                .unwrap()
                .shown,
            ".git/config"
        );
        assert_eq!(
            protected.find(&root.join("docs/g/config")).unwrap().shown,
            ".git/config"
        );
    }

    #[test]
    fn the_settings_additions_join_the_list() {
        let (_dir, root) = workspace();
        let home = root.join("home");
        let protected = ProtectedPaths::of(
            &root,
            &["ci/deploy.sh".into(), "~/.bashrc".into(), " ".into()],
            Some(&home),
        );
        let hit = protected.find(&root.join("ci/deploy.sh")).unwrap();
        assert_eq!(hit.entry.protection, Protection::Configured);
        assert!(protected.contains(&home.join(".bashrc")));
        assert_eq!(protected.entries().len(), BUILT_IN.len() + 2);
    }

    #[test]
    fn missing_lists_what_does_not_exist_yet() {
        let (_dir, root) = workspace();
        std::fs::write(root.join("troupe.toml"), "").unwrap();
        let missing: Vec<_> = ProtectedPaths::built_in(&root)
            .missing()
            .into_iter()
            .map(|e| e.path.strip_prefix(&root).unwrap().to_owned())
            .collect();
        assert_eq!(
            missing,
            [PathBuf::from(".troupe"), ".git".into(), ".env".into()]
        );
    }
}
