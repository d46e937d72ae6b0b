//! A worktree's record, `.troupe/worktrees/<name>.json`: what troupe knows of a teammate's
//! worktree that git does not keep — the commit it was made from (its *base*, the lead's `HEAD`
//! at spawn time) and git's admin folder of it, found when troupe made it (commands in the
//! worktree name that folder explicitly; see `git::Place`).
//!
//! ```json
//! {"version":1,"name":"alice","branch":"troupe/alice","base":"<40 hex>",
//!  "git_dir":"/abs/repo/.git/worktrees/alice"}
//! ```
//!
//! Written atomically when the worktree is made (or reattached without one), removed with the
//! worktree. It lives in `.troupe/`, which no agent can write — but a cloned repository can
//! ship one, so reading checks its shape (the branch is `troupe/<name>`, the base a commit id,
//! `git_dir` an absolute, plain path) and nothing runs git with it before `verify` compared it
//! with what git reports.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use troupe_wire::AgentName;

use super::WorktreeError;
use crate::layout::Layout;
use crate::store::durable;
use crate::store::read::{read_regular, Links};

/// The record of one teammate's worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorktreeRecord {
    pub version: u64,
    pub name: AgentName,
    /// `troupe/<name>`.
    pub branch: String,
    /// The commit the branch was made from (full hex).
    pub base: String,
    /// git's admin folder of the worktree (`<repo>/.git/worktrees/<name>`).
    pub git_dir: PathBuf,
}

impl WorktreeRecord {
    pub const VERSION: u64 = 1;
    /// A record is a few hundred bytes; anything larger is not one.
    const MAX_BYTES: u64 = 64 * 1024;

    /// The record of `name`, if there is one.
    pub fn read(layout: &Layout, name: &AgentName) -> Result<Option<Self>, WorktreeError> {
        let path = layout.worktree_record(name);
        let Some(bytes) = read_regular(&path, Links::Refuse, Self::MAX_BYTES)? else {
            return Ok(None);
        };
        let record: Self = troupe_wire::strict::from_json_bytes(&bytes, "worktree record")
            .map_err(|e| corrupt(&path, &e.to_string()))?;
        if record.version != Self::VERSION || &record.name != name {
            return Err(corrupt(
                &path,
                "another version or another teammate's record",
            ));
        }
        record.check().map_err(|why| corrupt(&path, &why))?;
        Ok(Some(record))
    }

    /// What any record must be, whatever git says: its branch `troupe/<name>`, its base a full
    /// commit id, its `git_dir` absolute with no `.` or `..` in it.
    fn check(&self) -> Result<(), String> {
        let branch = super::branch_of(&self.name);
        if self.branch != branch {
            return Err(format!("its branch {:?} is not {branch}", self.branch));
        }
        let hex = self
            .base
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !hex || !matches!(self.base.len(), 40 | 64) {
            return Err(format!("its base {:?} is not a commit id", self.base));
        }
        let plain = self
            .git_dir
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !self.git_dir.is_absolute() || !plain {
            return Err(format!(
                "its git_dir {} is not an absolute, plain path (relative paths are refused)",
                self.git_dir.display()
            ));
        }
        Ok(())
    }

    /// Writes it atomically (temp file, fsync, rename, folder fsync).
    pub fn write(&self, layout: &Layout) -> Result<(), WorktreeError> {
        let dir = layout.worktrees_dir();
        durable::ensure_real_dir(&dir)?;
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|e| WorktreeError::Git {
            command: "encode the worktree record".into(),
            why: e.to_string(),
        })?;
        bytes.push(b'\n');
        durable::replace(&layout.worktree_record(&self.name), &bytes)?;
        Ok(())
    }

    /// Removes the record of `name` (nothing when there is none).
    pub fn remove(layout: &Layout, name: &AgentName) -> Result<(), WorktreeError> {
        durable::remove(&layout.worktree_record(name))?;
        Ok(())
    }

    /// The names of every record under `.troupe/worktrees/`, sorted.
    pub fn names(layout: &Layout) -> Result<Vec<AgentName>, WorktreeError> {
        let dir = layout.worktrees_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(crate::store::IoError::new("list", &dir, e).into()),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| crate::store::IoError::new("list", &dir, e))?;
            let file = entry.file_name();
            let Some(stem) = file.to_str().and_then(|f| f.strip_suffix(".json")) else {
                continue;
            };
            if let Ok(name) = AgentName::parse(stem) {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
}

fn corrupt(path: &Path, why: &str) -> WorktreeError {
    WorktreeError::Corrupt {
        path: path.display().to_string(),
        why: why.to_owned(),
    }
}
