//! A cloned repository is hostile too: one that ships `.troupe/worktrees/<name>.json` (and a
//! `team.json` naming the teammate) whose `git_dir` points at a folder of its own, holding a
//! `config` with a clean filter and `* filter=x` in `.gitattributes`. troupe's git must never use
//! that folder: `troupe worktrees` and a run's close refuse the record, naming it, and the
//! filter never runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use troupe::layout::Layout;
use troupe::wire::{AgentName, Isolation, TeamRoster, TeammateRecord, TeammateStatus};

use super::support::{json, troupe_in};

/// `git <args>` in `dir` with a test identity, nothing taken from the environment's `GIT_*`.
fn git(dir: &Path, args: &[&str]) -> String {
    super::support::git(dir, dir, args)
}

/// What the hostile repository's files look like once cloned: a checkout with one commit and
/// `* filter=x` in `.gitattributes`, a branch `troupe/alice` (a clone's default branch can be
/// named so), a folder `.troupe/worktrees/alice` with a file in it, a git folder of its own
/// whose index tracks that file (with other stat data, so git hashes it again) and whose
/// `config` defines filter `x` as a command that touches `PWNED`, a record naming that
/// folder as `git_dir`, and a roster with alice shut down in a worktree.
struct Hostile {
    _dir: tempfile::TempDir,
    _outside: tempfile::TempDir,
    ws: PathBuf,
    /// The record's `git_dir`, absolute.
    evil: PathBuf,
    files: PathBuf,
    pwned: PathBuf,
}

impl Hostile {
    /// With `relative`, the record's `git_dir` is that path (relative to the worktree's folder,
    /// where git resolves it) to a folder inside the workspace; without, an absolute path to a
    /// folder outside it.
    fn new(relative: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let outside_path = std::fs::canonicalize(outside.path()).unwrap();
        let pwned = outside_path.join("PWNED");
        git(&ws, &["init", "--quiet"]);
        std::fs::write(ws.join(".gitattributes"), "* filter=x\n").unwrap();
        std::fs::write(ws.join("README.md"), "# project\n").unwrap();
        git(&ws, &["add", ".gitattributes", "README.md"]);
        git(&ws, &["commit", "--quiet", "-m", "first"]);
        git(&ws, &["branch", "troupe/alice"]);

        let files = ws.join(".troupe/worktrees/alice");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("notes.txt"), "anything\n").unwrap();
        std::fs::write(files.join(".gitattributes"), "* filter=x\n").unwrap();
        let evil = match relative {
            Some(relative) => std::fs::canonicalize(&files).unwrap().join(relative),
            None => outside_path.join("evil-git"),
        };
        git(&ws, &["init", "--quiet", "--bare", evil.to_str().unwrap()]);
        let evil = std::fs::canonicalize(&evil).unwrap();
        let mut add = Command::new("git");
        let out = add
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("--git-dir")
            .arg(&evil)
            .arg("--work-tree")
            .arg(&files)
            .args(["add", "notes.txt"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // Other stat data than the index holds, same size: git reads the file through the
        // filter to tell whether it changed.
        let file = std::fs::File::options()
            .write(true)
            .open(files.join("notes.txt"))
            .unwrap();
        file.set_modified(
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000),
        )
        .unwrap();
        let config = evil.join("config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[core]\n\tbare = false\n[filter \"x\"]\n\tclean = touch {} && cat\n",
            pwned.display()
        ));
        std::fs::write(&config, text).unwrap();

        let base = git(&ws, &["rev-parse", "HEAD"]).trim().to_owned();
        let git_dir = relative.map_or_else(|| evil.display().to_string(), str::to_owned);
        let record = json!({"version": 1, "name": "alice", "branch": "troupe/alice",
                            "base": base, "git_dir": git_dir});
        std::fs::write(
            ws.join(".troupe/worktrees/alice.json"),
            serde_json::to_vec_pretty(&record).unwrap(),
        )
        .unwrap();
        let roster = TeamRoster {
            version: TeamRoster::VERSION,
            teammates: vec![TeammateRecord {
                name: AgentName::parse("alice").unwrap(),
                role: "writer".into(),
                status: TeammateStatus::Shutdown,
                detail: None,
                updated_at_utc: troupe::clock::Clock::now(&troupe::clock::SystemClock),
                plan_required: false,
                earlier_plan: None,
                definition: None,
                isolation: Isolation::Worktree,
            }],
        };
        std::fs::write(Layout::new(&ws).team_file(), roster.to_json_bytes()).unwrap();
        Self {
            _dir: dir,
            _outside: outside,
            ws,
            evil,
            files,
            pwned,
        }
    }

    /// The test's own control: `git status` with that folder, as troupe ran it, runs the
    /// filter — so its absence below means troupe refused the folder, not a broken trap.
    fn check_the_trap_works(&self) {
        let out = Command::new("git")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .arg("--git-dir")
            .arg(&self.evil)
            .arg("--work-tree")
            .arg(&self.files)
            .args(["status", "--porcelain"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(self.pwned.exists(), "the trap did not fire: {out:?}");
        std::fs::remove_file(&self.pwned).unwrap();
    }
}

fn refused(problem: &str) {
    assert!(problem.contains("alice.json"), "{problem}");
    assert!(problem.contains("cannot be used"), "{problem}");
}

#[test]
fn troupe_worktrees_refuses_a_shipped_record_with_a_relative_git_dir() {
    let repo = Hostile::new(Some("../../evil-git"));
    repo.check_the_trap_works();
    let listed = json(&troupe_in(&repo.ws, &["worktrees", "--json"]));
    assert!(!repo.pwned.exists(), "the repository's filter ran");
    let view = &listed["worktrees"][0];
    assert_eq!(view["name"], "alice", "{listed}");
    assert_eq!(view["dirty"], Value::Null, "{listed}");
    let problem = view["problem"].as_str().unwrap();
    refused(problem);
    assert!(problem.contains("relative"), "{problem}");
}

#[test]
fn troupe_worktrees_refuses_a_shipped_record_with_a_git_dir_elsewhere() {
    let repo = Hostile::new(None);
    repo.check_the_trap_works();

    let text = troupe_in(&repo.ws, &["worktrees"]);
    assert_eq!(text.code, 0, "{text:#?}");
    assert!(!repo.pwned.exists(), "the repository's filter ran");
    refused(&text.stdout);
    assert!(
        text.stdout.contains("git knows no worktree"),
        "{}",
        text.stdout
    );
    let listed = json(&troupe_in(&repo.ws, &["worktrees", "--json"]));
    assert!(!repo.pwned.exists(), "the repository's filter ran");
    refused(listed["worktrees"][0]["problem"].as_str().unwrap());
}

#[test]
fn a_run_s_close_refuses_a_shipped_record_and_keeps_it() {
    let repo = Hostile::new(None);
    repo.check_the_trap_works();
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("script.json");
    let script_text = json!({"agents": {"lead": [{"text": "nothing to do"}]}});
    std::fs::write(&script, script_text.to_string()).unwrap();
    let out = troupe_in(
        &repo.ws,
        &[
            "run",
            "--prompt",
            "Look around.",
            "--model-script",
            script.to_str().unwrap(),
            "--approval",
            "auto",
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!repo.pwned.exists(), "the repository's filter ran at close");
    // Refused, not removed: the record and the folder are as they were.
    assert!(repo.ws.join(".troupe/worktrees/alice.json").is_file());
    assert!(repo.ws.join(".troupe/worktrees/alice/notes.txt").is_file());
}
