//! Real git repositories for the worktree tests: `git` with an identity given by `-c`, every
//! `GIT_*` variable of the environment removed, so the machine's settings never matter.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `git <args>` in `dir` and returns its stdout; panics with stderr when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir, args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `git <args>` in `dir`, with the tests' identity and nothing from the environment.
pub fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("git");
    for (key, _) in std::env::vars() {
        if key.starts_with("GIT_") {
            command.env_remove(key);
        }
    }
    command
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .args([
            "-c",
            "user.name=Test Person",
            "-c",
            "user.email=person@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgSign=false",
        ])
        .arg("-C")
        .arg(dir)
        .args(args);
    command
}

/// Makes `dir` a repository with one commit holding `notes.txt` (five lines).
pub fn init_repo(dir: &Path) {
    git(dir, &["init", "--quiet"]);
    std::fs::write(dir.join("notes.txt"), NOTES).unwrap();
    git(dir, &["add", "notes.txt"]);
    git(dir, &["commit", "--quiet", "-m", "first"]);
}

pub const NOTES: &str = "one\ntwo\nthree\nfour\nfive\n";

/// A temp folder that is a fresh repository (canonical path).
pub struct Repo {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Repo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        init_repo(&path);
        Self { _dir: dir, path }
    }

    pub fn head(&self) -> String {
        rev(&self.path, "HEAD")
    }
}

/// The commit `what` names in the repository at `dir`.
pub fn rev(dir: &Path, what: &str) -> String {
    git(dir, &["rev-parse", what]).trim().to_owned()
}

/// `git status --porcelain` of `dir` (untracked files listed).
pub fn status(dir: &Path) -> String {
    git(dir, &["status", "--porcelain", "--untracked-files=all"])
}

/// `<author name> <author email>|<committer name>|<subject>` of the commit `what`.
pub fn commit_line(dir: &Path, what: &str) -> String {
    git(dir, &["log", "-1", "--format=%an <%ae>|%cn|%s", what])
        .trim()
        .to_owned()
}
