//! A repetition's fresh workspace, made from its case's fixture.
//!
//! A folder is copied file by file: folders, regular files (with their permissions) and
//! relative symbolic links that stay inside the fixture. Anything else — a link out of the
//! fixture (or absolute, which would point back at the fixture itself), a dangling link, a
//! FIFO, a socket, a device — refuses the fixture, when the suite is read and again at each
//! copy, so nothing is read from outside it and nothing blocks on a pipe. The fixture's own
//! `.troupe/` (a previous run's state) is never copied.
//!
//! A git revision is cloned with troupe's git runner (`troupe::worktree::git`: no hooks, no
//! configured programs, `GIT_*` cleared) — `clone --no-checkout --no-hardlinks`, then a
//! detached checkout of the commit the revision named when the suite was read.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use troupe::worktree::git::{Git, Place};

/// The state folder a fixture may hold and a copy never gets.
const STATE_DIR: &str = ".troupe";

/// Checks that the folder `root` can be copied (see the module docs).
pub fn inspect_folder(root: &Path) -> Result<(), String> {
    walk(root, root, None)
}

/// Copies the folder `root` into `into` (an empty folder).
pub fn copy_folder(root: &Path, into: &Path) -> Result<(), String> {
    walk(root, root, Some(into))
}

fn walk(root: &Path, dir: &Path, into: Option<&Path>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("fixture {}: {e}", dir.display()))?;
    let mut entries: Vec<_> = entries
        .collect::<Result<_, _>>()
        .map_err(|e| format!("fixture {}: {e}", dir.display()))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        if dir == root && entry.file_name() == STATE_DIR {
            continue;
        }
        let target = into.map(|into| into.join(entry.file_name()));
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("fixture {}: {e}", path.display()))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            if let Some(target) = &target {
                std::fs::create_dir(target)
                    .map_err(|e| format!("copying {}: {e}", path.display()))?;
            }
            walk(root, &path, target.as_deref())?;
        } else if kind.is_file() {
            if let Some(target) = &target {
                std::fs::copy(&path, target)
                    .map_err(|e| format!("copying {}: {e}", path.display()))?;
            }
        } else if kind.is_symlink() {
            let link = inner_link(root, &path)?;
            if let Some(target) = &target {
                symlink(&link, target).map_err(|e| format!("copying {}: {e}", path.display()))?;
            }
        } else {
            return Err(format!(
                "fixture {} holds {}, which is not a file, folder or link; a fixture may \
                 hold none",
                root.display(),
                path.display()
            ));
        }
    }
    Ok(())
}

/// The text of the link at `path` if it is relative and resolves inside `root`.
fn inner_link(root: &Path, path: &Path) -> Result<PathBuf, String> {
    let refuse = |why: &str| {
        Err(format!(
            "fixture {}: the link {} {why}; a fixture's links must be relative and stay inside it",
            root.display(),
            path.display()
        ))
    };
    let link = std::fs::read_link(path).map_err(|e| format!("fixture {}: {e}", path.display()))?;
    if link.is_absolute() {
        return refuse("is absolute");
    }
    match std::fs::canonicalize(path) {
        Ok(resolved) if resolved.starts_with(root) => Ok(link),
        Ok(_) => refuse("points outside the fixture"),
        Err(_) => refuse("points nowhere"),
    }
}

/// The commit `rev` names in the repository at `repo`.
pub fn resolve_rev(repo: &Path, rev: &str) -> Result<String, String> {
    if rev.trim().is_empty() || rev.starts_with('-') {
        return Err(format!("{rev:?} is not a revision"));
    }
    let spec = format!("{rev}^{{commit}}");
    let output = Git::new(
        &Place::Checkout(repo.to_path_buf()),
        [
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )
    .read_only()
    .output()
    .map_err(|e| format!("fixture {}: {e}", repo.display()))?;
    let commit = output.stdout.trim();
    if !output.ok() || commit.is_empty() {
        return Err(format!(
            "fixture {}: git knows no commit {rev:?}",
            repo.display()
        ));
    }
    Ok(commit.to_owned())
}

/// Clones `repo` into `into` (which must not exist yet) and checks `commit` out, detached.
/// Blocking: git runs to its end.
pub fn checkout_git(repo: &Path, commit: &str, into: &Path) -> Result<(), String> {
    let parent = into
        .parent()
        .ok_or_else(|| format!("{} has no parent folder", into.display()))?;
    let run = |place: Place, args: Vec<&std::ffi::OsStr>| -> Result<(), String> {
        let output = Git::new(&place, args).output().map_err(|e| e.to_string())?;
        if output.ok() {
            Ok(())
        } else {
            Err(format!("git: {}", output.why()))
        }
    };
    run(
        Place::Checkout(parent.to_path_buf()),
        vec![
            "clone".as_ref(),
            "--quiet".as_ref(),
            "--no-checkout".as_ref(),
            "--no-hardlinks".as_ref(),
            "--".as_ref(),
            repo.as_os_str(),
            into.as_os_str(),
        ],
    )?;
    run(
        Place::Checkout(into.to_path_buf()),
        vec![
            "checkout".as_ref(),
            "--quiet".as_ref(),
            "--detach".as_ref(),
            commit.as_ref(),
        ],
    )?;
    // A state folder committed to the repository is a previous run's state, never a fixture's.
    let state = into.join(STATE_DIR);
    if std::fs::symlink_metadata(&state).is_ok() {
        let removed = if state.is_dir() && !state.is_symlink() {
            std::fs::remove_dir_all(&state)
        } else {
            std::fs::remove_file(&state)
        };
        removed.map_err(|e| format!("removing {}: {e}", state.display()))?;
    }
    Ok(())
}
