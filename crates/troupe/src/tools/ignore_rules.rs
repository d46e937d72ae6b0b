//! The workspace's ignore files as the file tools that walk folders (`glob`, `grep`) read them.
//!
//! What the workspace's ignore files exclude is skipped, as git and ripgrep skip it: `.gitignore`
//! and `.ignore` in every folder a walk enters (a deeper file wins; `.ignore` wins over
//! `.gitignore` in the same folder; `!` re-includes) and the root's `.git/info/exclude`, whether
//! or not the workspace is a git repository. The patterns are matched by the `ignore` crate's
//! gitignore matcher, but the files are read here, through `store::read` and inside the
//! workspace only: an ignore file that is a FIFO, a symlink or over [`MAX_IGNORE_FILE_BYTES`] is
//! not read rather than blocking or leaving the workspace, and files above the workspace or in
//! the user's git configuration are not consulted. (The `ignore` crate's own walker opens ignore
//! files with a plain `open`, which blocks on a FIFO, and reads folders above the one it
//! starts in: that is why the walks are troupe's own.)

use std::path::{Path, PathBuf};
use std::rc::Rc;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

use super::confine::Workspace;
use crate::store::read::{read_regular, Links};

/// The ignore files read in each folder, in increasing precedence.
pub const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];
/// An ignore file larger than this is not read.
pub const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;

/// The ignore rules in force in one folder: its own, then its parents' (a chain, shared by the
/// folders below it). `None` stands for "no rules".
pub(crate) struct IgnoreRules {
    /// The patterns of one folder's ignore files (or of `.git/info/exclude`).
    matcher: Gitignore,
    /// The rules of the folders above, which this folder's rules override.
    parent: Option<Rc<IgnoreRules>>,
}

impl IgnoreRules {
    /// The rules in force in `folder` (relative to the workspace root, without `..`): the
    /// exclude file's, the root's, then those of every folder down to `folder`.
    pub(crate) fn down_to(workspace: &Workspace, folder: &Path) -> Option<Rc<IgnoreRules>> {
        let rules = Self::of_exclude_file(workspace);
        let mut dir = workspace.root().to_owned();
        let mut rules = Self::of_folder(workspace, &dir, rules);
        for c in folder.components() {
            dir.push(c);
            rules = Self::of_folder(workspace, &dir, rules);
        }
        rules
    }

    /// `parent` plus the ignore files of `dir`.
    pub(crate) fn of_folder(
        workspace: &Workspace,
        dir: &Path,
        parent: Option<Rc<IgnoreRules>>,
    ) -> Option<Rc<IgnoreRules>> {
        let files = IGNORE_FILES.map(|name| dir.join(name));
        Self::load(workspace, dir, &files, parent)
    }

    /// The repository's own exclude file, which applies like a root `.gitignore` of lower
    /// precedence. Read only when `.git` resolves inside the workspace.
    fn of_exclude_file(workspace: &Workspace) -> Option<Rc<IgnoreRules>> {
        let file = workspace.root().join(".git").join("info").join("exclude");
        if !workspace.contains_resolved(&file) {
            return None;
        }
        Self::load(workspace, workspace.root(), &[file], None)
    }

    /// `parent` plus the patterns of `files`, relative to `dir`. A file that cannot be read is
    /// skipped.
    fn load(
        workspace: &Workspace,
        dir: &Path,
        files: &[PathBuf],
        parent: Option<Rc<IgnoreRules>>,
    ) -> Option<Rc<IgnoreRules>> {
        let mut builder = GitignoreBuilder::new(dir);
        let mut lines = 0usize;
        for file in files {
            // A symlink is refused, so the file is inside the workspace like its folder.
            let bytes = match read_regular(file, Links::Refuse, MAX_IGNORE_FILE_BYTES) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(file = %workspace.display(file), error = %e, "ignore file not read");
                    continue;
                }
            };
            for line in String::from_utf8_lossy(&bytes).lines() {
                // A pattern git could not parse is skipped, as git skips it.
                if builder.add_line(Some(file.clone()), line).is_ok() {
                    lines += 1;
                }
            }
        }
        if lines == 0 {
            return parent;
        }
        match builder.build() {
            Ok(matcher) => Some(Rc::new(IgnoreRules { matcher, parent })),
            Err(_) => parent,
        }
    }

    /// Whether the nearest rule that matches `path` ignores it (a `!` rule re-includes).
    pub(crate) fn ignores(mut rules: Option<&IgnoreRules>, path: &Path, is_dir: bool) -> bool {
        while let Some(current) = rules {
            match current.matcher.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => rules = current.parent.as_deref(),
            }
        }
        false
    }
}
