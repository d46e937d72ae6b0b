//! Where a run starts and where it ends: the git starting point (`HEAD`, and `git stash
//! create`'s object of the uncommitted changes, which changes nothing) and the digest of the
//! workspace's files.
//!
//! The tree digest walks the workspace as the file tools do — `.git` and `.troupe/` left out,
//! what the ignore files exclude skipped, links never followed (a link is digested as its
//! target's text), FIFOs and other special files left out — and gives up (none) past
//! [`MAX_FILES`] files or [`MAX_BYTES`] bytes, so that the end of a run in a large repository
//! costs at most that.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::mask::hex;
use super::record::GitStart;
use crate::store::read::{open_regular, Links};
use crate::tools::confine::Workspace;
use crate::tools::ignore_rules::IgnoreRules;
use crate::worktree::git::{Git, Place};

/// The most files a tree digest reads.
pub const MAX_FILES: usize = 20_000;
/// The most bytes a tree digest reads.
pub const MAX_BYTES: u64 = 512 * 1024 * 1024;

/// The git starting point of `workspace`, when it is in a repository with a commit. Git is not
/// run at all for a workspace with no `.git` in it or above it.
pub fn git_start(workspace: &Path) -> Option<GitStart> {
    if !workspace
        .ancestors()
        .any(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
    {
        return None;
    }
    let place = Place::Checkout(workspace.to_owned());
    let git = |args: &[&str]| Git::new(&place, args).run().ok();
    let head = git(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])?
        .trim()
        .to_owned();
    let prefix = git(&["rev-parse", "--show-prefix"])?.trim().to_owned();
    let changes = git(&["stash", "create"])
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let untracked = git(&[
        "ls-files",
        "--others",
        "--exclude-standard",
        "-z",
        "--",
        ".",
    ])
    .map(|out| {
        out.split('\0')
            .filter(|p| !p.is_empty() && !p.starts_with(".troupe/"))
            .count()
    })
    .unwrap_or(0);
    Some(GitStart {
        head,
        prefix,
        changes,
        untracked,
    })
}

/// The digest of the workspace's files and how many there are; none past the bounds.
pub fn tree_digest(root: &Path) -> Option<(String, usize)> {
    let workspace = Workspace::new(root).ok()?;
    let mut entries: Vec<(PathBuf, Kind)> = Vec::new();
    let mut bytes = 0u64;
    let mut stack: Vec<(PathBuf, Option<Rc<IgnoreRules>>)> = vec![(
        PathBuf::new(),
        IgnoreRules::down_to(&workspace, Path::new("")),
    )];
    while let Some((rel, rules)) = stack.pop() {
        let dir = workspace.root().join(&rel);
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read.flatten() {
            let name = entry.file_name();
            let path = rel.join(&name);
            if rel.as_os_str().is_empty() && (name == ".git" || name == ".troupe") {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if IgnoreRules::ignores(rules.as_deref(), &path, kind.is_dir()) {
                continue;
            }
            if kind.is_dir() {
                let below = IgnoreRules::of_folder(&workspace, &dir.join(&name), rules.clone());
                stack.push((path, below));
            } else if kind.is_symlink() {
                let target = std::fs::read_link(entry.path()).ok()?;
                entries.push((path, Kind::Link(target)));
            } else if kind.is_file() {
                bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
                entries.push((path, Kind::File));
            }
            if entries.len() > MAX_FILES || bytes > MAX_BYTES {
                return None;
            }
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut digest = Sha256::new();
    for (path, kind) in &entries {
        digest.update(path.as_os_str().as_encoded_bytes());
        digest.update([0]);
        match kind {
            Kind::Link(target) => {
                digest.update(b"link\0");
                digest.update(target.as_os_str().as_encoded_bytes());
            }
            Kind::File => {
                digest.update(b"file\0");
                let mut file = open_regular(&workspace.root().join(path), Links::Refuse).ok()??;
                let mut buffer = [0u8; 64 * 1024];
                loop {
                    let n = file.read(&mut buffer).ok()?;
                    if n == 0 {
                        break;
                    }
                    digest.update(&buffer[..n]);
                }
            }
        }
        digest.update([0]);
    }
    Some((hex(&digest.finalize()), entries.len()))
}

enum Kind {
    File,
    Link(PathBuf),
}

/// The digest of the workspace's `troupe.toml` as it is (`none` without one).
pub fn settings_digest(workspace: &Path) -> String {
    match crate::store::read::read_regular(
        &workspace.join(crate::settings::PROJECT_FILE_NAME),
        Links::Refuse,
        crate::settings::MAX_SETTINGS_FILE_BYTES,
    ) {
        Ok(Some(bytes)) => hex(&Sha256::digest(&bytes)),
        _ => "none".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_digest_follows_content_and_skips_state_and_ignored_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/b.rs"), "b").unwrap();
        let (first, files) = tree_digest(root).unwrap();
        assert_eq!(files, 2);
        std::fs::create_dir_all(root.join(".troupe")).unwrap();
        std::fs::write(root.join(".troupe/x"), "state").unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("target/out"), "built").unwrap();
        let (second, files) = tree_digest(root).unwrap();
        assert_eq!(files, 3, "only .gitignore is new");
        assert_ne!(first, second);
        std::fs::remove_file(root.join(".gitignore")).unwrap();
        std::fs::remove_dir_all(root.join("target")).unwrap();
        assert_eq!(tree_digest(root).unwrap().0, first);
        std::fs::write(root.join("src/b.rs"), "B").unwrap();
        assert_ne!(tree_digest(root).unwrap().0, first);
    }
}
