//! Workspace confinement for every file tool (SPEC §4.1).
//!
//! A path given by the model is resolved against the workspace root and then checked on the
//! *resolved* form: `..`, absolute paths elsewhere and symlinks at any component that lead
//! outside the workspace are refused with `permission_denied`. A path that does not exist yet
//! (write_file creating a file) is resolved through its deepest existing ancestor, and the
//! missing rest may hold only plain names. The workspace's `.troupe/` folder is troupe's own
//! state: tools may read it but never write into it.
//!
//! Tools act on the resolved path, so a symlink inside the workspace that points inside the
//! workspace works, and one that points out is refused rather than followed.

use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use super::ToolError;
use crate::layout::Layout;

/// A canonical workspace root and the checks made against it.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    state_dir: PathBuf,
}

impl Workspace {
    /// Resolves the root itself (it must exist) so later prefix checks compare real paths.
    pub fn new(root: &Path) -> Result<Self, ToolError> {
        let root = fs::canonicalize(root).map_err(|e| {
            ToolError::io("cannot use the workspace", &root.display().to_string(), &e)
        })?;
        let state_dir = root.join(Layout::STATE_DIR);
        Ok(Self { root, state_dir })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path to read. It must exist (else `not_found`) and lie in the workspace.
    pub fn resolve_read(&self, raw: &str) -> Result<PathBuf, ToolError> {
        let resolved = self.resolve(raw)?;
        if resolved.missing {
            return Err(ToolError::NotFound(format!("{raw}: no such file")));
        }
        Ok(resolved.path)
    }

    /// Resolves a path in the workspace that may not exist (its missing part plain names).
    pub fn resolve_maybe_missing(&self, raw: &str) -> Result<PathBuf, ToolError> {
        self.resolve(raw).map(|resolved| resolved.path)
    }

    /// Resolves a path to write: inside the workspace, outside `.troupe/`. It may not exist
    /// yet; its missing folders will be created inside the workspace.
    pub fn resolve_write(&self, raw: &str) -> Result<PathBuf, ToolError> {
        let resolved = self.resolve(raw)?;
        if resolved.path.starts_with(&self.state_dir) {
            return Err(ToolError::PermissionDenied(format!(
                "{raw}: the workspace's {}/ folder is troupe's own state and cannot be written by tools",
                Layout::STATE_DIR
            )));
        }
        if resolved.path == self.root {
            return Err(ToolError::PermissionDenied(format!(
                "{raw}: is the workspace folder itself, not a file"
            )));
        }
        Ok(resolved.path)
    }

    /// How a resolved path is shown to the model: relative to the workspace.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Whether `path`, once every symlink is resolved, lies inside the workspace.
    pub fn contains_resolved(&self, path: &Path) -> bool {
        fs::canonicalize(path).is_ok_and(|real| real.starts_with(&self.root))
    }

    fn resolve(&self, raw: &str) -> Result<Resolved, ToolError> {
        if raw.is_empty() {
            return Err(ToolError::InvalidArguments("the path is empty".to_owned()));
        }
        if raw.contains('\0') {
            return Err(ToolError::InvalidArguments(
                "the path contains a NUL byte".to_owned(),
            ));
        }
        let given = Path::new(raw);
        let candidate = if given.is_absolute() {
            given.to_owned()
        } else {
            self.root.join(given)
        };
        let outside = || {
            ToolError::PermissionDenied(format!(
                "{raw}: is outside the workspace; file tools only reach files under {}",
                self.root.display()
            ))
        };
        // Find the deepest ancestor that exists (lstat: a dangling symlink exists too).
        let mut existing = candidate.as_path();
        let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
        loop {
            match fs::symlink_metadata(existing) {
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(ToolError::io("cannot inspect", raw, &e)),
            }
            let Some(parent) = existing.parent() else {
                return Err(outside());
            };
            match existing.components().next_back() {
                Some(Component::Normal(name)) => missing.push(name),
                Some(Component::CurDir) => {}
                // `..` below a missing folder cannot be resolved honestly: refuse it.
                _ => return Err(outside()),
            }
            existing = parent;
        }
        let real = match fs::canonicalize(existing) {
            Ok(real) => real,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(ToolError::PermissionDenied(format!(
                    "{raw}: goes through a symbolic link whose target does not exist"
                )))
            }
            Err(e) => return Err(ToolError::io("cannot resolve", raw, &e)),
        };
        if !real.starts_with(&self.root) {
            return Err(outside());
        }
        let is_missing = !missing.is_empty();
        let mut path = real;
        for name in missing.into_iter().rev() {
            path.push(name);
        }
        Ok(Resolved {
            path,
            missing: is_missing,
        })
    }
}

struct Resolved {
    path: PathBuf,
    missing: bool,
}
