//! The folder a replay runs in: the recorded starting point rebuilt, then today's team
//! configuration put over it.
//!
//! In a git repository: a detached worktree of the recorded commit, with the recorded
//! uncommitted changes applied (`git stash apply` of the object `git stash create` made);
//! outside git: a copy of the workspace as it is now (said as a warning). Then the
//! configuration replay is about — `troupe.toml`, the agent definitions (`agents/*.md`) and the
//! instruction files (`AGENTS.md`, `CLAUDE.md`) — is copied from the workspace as it is today,
//! so that a change to them shows as a difference.

use std::path::{Path, PathBuf};

use troupe::replay::record::Start;
use troupe::store::read::{read_regular, Links};
use troupe::worktree::git::{Git, Place};

use crate::error::CliError;

/// The files of today's configuration copied over the starting point.
const CONFIGURATION: [&str; 3] = ["troupe.toml", "AGENTS.md", "CLAUDE.md"];
/// The largest file copied.
const MAX_COPIED_FILE: u64 = 64 * 1024 * 1024;

/// Where the replay runs, and what was said about how it was built.
pub struct Built {
    /// The workspace of the replay (inside `dir`, at the recorded folder of the repository).
    pub workspace: PathBuf,
    pub warnings: Vec<String>,
    /// The repository whose worktree `dir` is (to prune once a temporary `dir` is gone).
    pub repository: Option<PathBuf>,
}

/// Builds the starting point of `start` (recorded in `source`) in the empty folder `dir`.
pub fn build(source: &Path, start: &Start, dir: &Path) -> Result<Built, CliError> {
    let mut warnings = Vec::new();
    let (workspace, repository) = match &start.git {
        Some(git) => {
            let place = Place::Checkout(source.to_owned());
            let top = Git::new(&place, ["rev-parse", "--show-toplevel"])
                .run()
                .map_err(|e| failed("find the repository of the workspace", &e.to_string()))?;
            let top = PathBuf::from(top.trim());
            Git::new(
                &Place::Checkout(top.clone()),
                [
                    "worktree",
                    "add",
                    "--detach",
                    "--quiet",
                    &dir.to_string_lossy(),
                    &git.head,
                ],
            )
            .run()
            .map_err(|e| failed("check out the recorded commit", &e.to_string()))?;
            if let Some(changes) = &git.changes {
                Git::new(
                    &Place::Checkout(dir.to_owned()),
                    ["stash", "apply", "--quiet", changes.as_str()],
                )
                .run()
                .map_err(|e| failed("apply the recorded uncommitted changes", &e.to_string()))?;
            }
            if git.untracked > 0 {
                warnings.push(format!(
                    "{} file(s) git did not track were in the workspace when it was recorded; \
                     they are not part of the starting point",
                    git.untracked
                ));
            }
            let prefix = git.prefix.trim_end_matches('/');
            let workspace = if prefix.is_empty() {
                dir.to_owned()
            } else {
                dir.join(prefix)
            };
            (workspace, Some(top))
        }
        None => {
            warnings.push(
                "the workspace was not in a git repository when the run was recorded: its files \
                 as they are now are the starting point, which may not be where the run started"
                    .to_owned(),
            );
            copy_tree(source, dir)?;
            (dir.to_owned(), None)
        }
    };
    put_configuration(source, &workspace)?;
    Ok(Built {
        workspace,
        warnings,
        repository,
    })
}

/// Today's configuration of `source` over `workspace`: each file there is replaced, one that
/// is not there today is removed.
fn put_configuration(source: &Path, workspace: &Path) -> Result<(), CliError> {
    for name in CONFIGURATION {
        copy_or_remove(&source.join(name), &workspace.join(name))?;
    }
    let definitions = troupe::team::definitions::DEFINITIONS_DIR;
    let (from, to) = (source.join(definitions), workspace.join(definitions));
    if to.is_dir() {
        for entry in std::fs::read_dir(&to)
            .map_err(|e| io("read", &to, &e))?
            .flatten()
        {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "md") && !from.join(entry.file_name()).exists()
            {
                std::fs::remove_file(&path).map_err(|e| io("remove", &path, &e))?;
            }
        }
    }
    if from.is_dir() {
        std::fs::create_dir_all(&to).map_err(|e| io("create", &to, &e))?;
        for entry in std::fs::read_dir(&from)
            .map_err(|e| io("read", &from, &e))?
            .flatten()
        {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "md") {
                copy_or_remove(&path, &to.join(entry.file_name()))?;
            }
        }
    }
    Ok(())
}

fn copy_or_remove(from: &Path, to: &Path) -> Result<(), CliError> {
    match read_regular(from, Links::Refuse, MAX_COPIED_FILE) {
        Ok(Some(bytes)) => std::fs::write(to, bytes).map_err(|e| io("write", to, &e)),
        Ok(None) => match std::fs::remove_file(to) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("remove", to, &e)),
            _ => Ok(()),
        },
        Err(e) => Err(CliError::failed(format!(
            "cannot copy today's configuration: {e}"
        ))),
    }
}

/// A copy of `from`'s files into `to`: folders and regular files, links as links; `.troupe/`
/// and `.git` left out, FIFOs and other special files skipped.
fn copy_tree(from: &Path, to: &Path) -> Result<(), CliError> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = from.join(&rel);
        for entry in std::fs::read_dir(&dir)
            .map_err(|e| io("read", &dir, &e))?
            .flatten()
        {
            let name = entry.file_name();
            if rel.as_os_str().is_empty() && (name == ".troupe" || name == ".git") {
                continue;
            }
            let (src, dest) = (entry.path(), to.join(&rel).join(&name));
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                std::fs::create_dir_all(&dest).map_err(|e| io("create", &dest, &e))?;
                stack.push(rel.join(&name));
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&src).map_err(|e| io("read", &src, &e))?;
                std::os::unix::fs::symlink(&target, &dest).map_err(|e| io("link", &dest, &e))?;
            } else if kind.is_file() {
                let bytes = read_regular(&src, Links::Refuse, MAX_COPIED_FILE)
                    .map_err(|e| CliError::failed(format!("cannot copy the workspace: {e}")))?
                    .unwrap_or_default();
                std::fs::write(&dest, bytes).map_err(|e| io("write", &dest, &e))?;
            }
        }
    }
    Ok(())
}

fn failed(what: &str, why: &str) -> CliError {
    CliError::failed(format!("replay cannot {what}: {why}")).with_code("replay_start_point")
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> CliError {
    CliError::failed(format!("replay cannot {what} {}: {e}", path.display()))
        .with_code("replay_start_point")
}
