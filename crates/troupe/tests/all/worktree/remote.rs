//! A shared team's branches through a git remote (`[team] remote`), on real repositories:
//! a bare repository is the remote, the lead's checkout and each worker's are clones of it.
//! The lead publishes a teammate's base at spawn, the clone that runs the teammate makes its
//! worktree from it and pushes its commits, the lead fetches and merges; a conflict is aborted,
//! diverged branches are refused, pushes are never forced, a teammate that moves to another
//! clone keeps its work.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::worktree::{Merged, Worktrees};

use super::support::{commit_line, git, rev, status, Repo, NOTES};
use crate::team::support::name;

/// A bare remote, the lead's clone (with one commit, pushed) and a place for workers' clones.
struct Team {
    _dir: tempfile::TempDir,
    remote: PathBuf,
    lead: Repo,
    root: PathBuf,
}

impl Team {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let remote = root.join("remote.git");
        std::fs::create_dir(&remote).unwrap();
        git(&remote, &["init", "--quiet", "--bare"]);
        let lead = Repo::new();
        git(
            &lead.path,
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
        git(&lead.path, &["push", "--quiet", "origin", "main"]);
        Self {
            _dir: dir,
            remote,
            lead,
            root,
        }
    }

    /// A worker's checkout: a clone of the remote.
    fn clone_for(&self, who: &str) -> PathBuf {
        let path = self.root.join(who);
        git(
            &self.root,
            &[
                "clone",
                "--quiet",
                self.remote.to_str().unwrap(),
                path.to_str().unwrap(),
            ],
        );
        path
    }

    fn lead_worktrees(&self) -> Worktrees {
        with_origin(&self.lead.path)
    }

    /// The commit of `branch` on the remote.
    fn remote_tip(&self, branch: &str) -> String {
        rev(&self.remote, &format!("refs/heads/{branch}"))
    }
}

fn with_origin(checkout: &Path) -> Worktrees {
    Worktrees::new(Layout::new(checkout)).with_remote(Some("origin".into()))
}

/// Commits `file` = `text` in the lead's checkout.
fn lead_commit(lead: &Repo, file: &str, text: &str, message: &str) {
    std::fs::write(lead.path.join(file), text).unwrap();
    git(&lead.path, &["add", file]);
    git(&lead.path, &["commit", "--quiet", "-m", message]);
}

/// `name`'s work in `w`: `file` = `text`, committed with `subject` and pushed.
fn work(w: &Worktrees, who: &str, file: &str, text: &str, subject: &str) -> String {
    std::fs::write(w.path_of(&name(who)).join(file), text).unwrap();
    let commit = w.commit(&name(who), subject).unwrap().unwrap();
    w.publish(&name(who)).unwrap();
    commit
}

#[test]
fn a_teammate_s_branch_travels_from_a_worker_s_clone_to_the_lead_and_merges() {
    let team = Team::new();
    // The lead's HEAD at spawn time has a commit the remote's main does not.
    lead_commit(&team.lead, "lead.txt", "lead\n", "lead work, not pushed");
    let spawned_at = team.lead.head();
    let lead = team.lead_worktrees();
    lead.prepare(&name("alice")).unwrap();
    assert_eq!(team.remote_tip("troupe/alice"), spawned_at);

    // The worker's clone makes the worktree from the published base, not from its own HEAD.
    let worker_checkout = team.clone_for("worker");
    let worker = with_origin(&worker_checkout);
    let attached = worker.attach(&name("alice")).unwrap();
    assert!(attached.created);
    assert_eq!(rev(&attached.path, "HEAD"), spawned_at);
    assert_eq!(attached.record.base, spawned_at);
    assert_eq!(
        std::fs::read_to_string(attached.path.join("lead.txt")).unwrap(),
        "lead\n"
    );
    let commit = work(&worker, "alice", "hello.txt", "hello\n", "Add a greeting");
    assert_eq!(team.remote_tip("troupe/alice"), commit);

    // The lead has no worktree of alice: it fetches the branch and merges it.
    let merged = lead.merge(&name("alice")).unwrap();
    assert_eq!(
        merged,
        Merged::Done {
            branch: "troupe/alice".into(),
            commit: commit.clone(),
            fast_forward: true,
            committed: None,
        }
    );
    assert_eq!(team.lead.head(), commit);
    assert_eq!(rev(&team.lead.path, "troupe/alice"), commit);
    assert_eq!(
        commit_line(&team.lead.path, "HEAD"),
        "alice <alice@troupe.invalid>|alice|Add a greeting"
    );
    assert_eq!(
        std::fs::read_to_string(team.lead.path.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(status(&team.lead.path), "");
    // Merging again: nothing to do.
    assert_eq!(
        lead.merge(&name("alice")).unwrap(),
        Merged::AlreadyMerged {
            branch: "troupe/alice".into()
        }
    );
}

#[test]
fn a_conflict_with_a_worker_s_branch_is_aborted_and_its_branch_kept() {
    let team = Team::new();
    let lead = team.lead_worktrees();
    lead.prepare(&name("bob")).unwrap();
    let worker_checkout = team.clone_for("worker");
    let worker = with_origin(&worker_checkout);
    worker.attach(&name("bob")).unwrap();
    let bob_notes = NOTES.replace("two", "two (bob)");
    let bob_tip = work(&worker, "bob", "notes.txt", &bob_notes, "bob's line");
    // Meanwhile the lead changes the same line.
    let lead_notes = NOTES.replace("two", "two (lead)");
    lead_commit(&team.lead, "notes.txt", &lead_notes, "lead's line");
    let head = team.lead.head();

    let conflict = lead.merge(&name("bob")).unwrap();
    assert_eq!(
        conflict,
        Merged::Conflict {
            branch: "troupe/bob".into(),
            files: vec!["notes.txt".into()],
            committed: None,
        }
    );
    assert_eq!(team.lead.head(), head);
    assert_eq!(
        std::fs::read_to_string(team.lead.path.join("notes.txt")).unwrap(),
        lead_notes
    );
    assert_eq!(status(&team.lead.path), "");
    assert!(!team.lead.path.join(".git/MERGE_HEAD").exists());
    assert_eq!(team.remote_tip("troupe/bob"), bob_tip);
    assert_eq!(rev(&team.lead.path, "troupe/bob"), bob_tip);
}

#[test]
fn branches_that_diverged_are_refused_and_no_push_is_forced() {
    let team = Team::new();
    let lead = team.lead_worktrees();
    lead.prepare(&name("carol")).unwrap();
    // carol ran here first (a commit not pushed yet), then in a worker's clone.
    lead.attach(&name("carol")).unwrap();
    std::fs::write(lead.path_of(&name("carol")).join("here.txt"), "here\n").unwrap();
    let here = lead.commit(&name("carol"), "here").unwrap().unwrap();
    let worker_checkout = team.clone_for("worker");
    let worker = with_origin(&worker_checkout);
    worker.attach(&name("carol")).unwrap();
    let there = work(&worker, "carol", "there.txt", "there\n", "there");
    let head = team.lead.head();

    let err = lead.merge(&name("carol")).unwrap_err();
    assert_eq!(err.code(), "branch_diverged", "{err}");
    assert!(err.to_string().contains("troupe/carol"), "{err}");
    // Nothing changed: the lead's checkout, its branch, and the remote's (not overwritten).
    assert_eq!(team.lead.head(), head);
    assert_eq!(status(&team.lead.path), "");
    assert_eq!(rev(&team.lead.path, "refs/heads/troupe/carol"), here);
    assert_eq!(team.remote_tip("troupe/carol"), there);
    // The lead's own copy is not pushed over the remote's either: never forced.
    assert!(lead.publish(&name("carol")).is_err());
    assert_eq!(team.remote_tip("troupe/carol"), there);
}

#[test]
fn a_teammate_that_moves_to_another_clone_keeps_its_work() {
    let team = Team::new();
    let lead = team.lead_worktrees();
    lead.prepare(&name("dave")).unwrap();
    let first_checkout = team.clone_for("first");
    let first = with_origin(&first_checkout);
    first.attach(&name("dave")).unwrap();
    let done = work(&first, "dave", "part1.txt", "one\n", "part one");

    // Its lease ran out on the first host; a second takes it over from the remote.
    let second_checkout = team.clone_for("second");
    let second = with_origin(&second_checkout);
    let attached = second.attach(&name("dave")).unwrap();
    assert_eq!(rev(&attached.path, "HEAD"), done);
    let more = work(&second, "dave", "part2.txt", "two\n", "part two");

    // The first host's worktree, reattached later, catches up (it is clean and behind).
    let again = first.attach(&name("dave")).unwrap();
    assert!(!again.created);
    assert_eq!(rev(&again.path, "HEAD"), more);

    assert!(matches!(
        lead.merge(&name("dave")).unwrap(),
        Merged::Done { commit, .. } if commit == more
    ));
    assert!(team.lead.path.join("part1.txt").is_file());
    assert!(team.lead.path.join("part2.txt").is_file());
}

#[test]
fn a_worker_whose_remote_lacks_the_branch_or_the_remote_says_what_is_missing() {
    let team = Team::new();
    let worker_checkout = team.clone_for("worker");
    // The lead never published erin's branch (it has no [team] remote).
    let err = with_origin(&worker_checkout)
        .attach(&name("erin"))
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments", "{err}");
    assert!(err.to_string().contains("troupe/erin"), "{err}");
    assert!(err.to_string().contains("[team] remote"), "{err}");
    assert!(!worker_checkout.join(".troupe/worktrees/erin").exists());

    let nowhere = Worktrees::new(Layout::new(&team.lead.path)).with_remote(Some("nowhere".into()));
    let err = nowhere.prepare(&name("erin")).unwrap_err();
    assert!(
        err.to_string().contains("a git remote named nowhere"),
        "{err}"
    );
}

#[test]
fn without_a_remote_a_branch_made_in_another_clone_is_not_found_here() {
    let team = Team::new();
    let worker_checkout = team.clone_for("worker");
    // A worker without a remote makes the branch from its own HEAD and keeps it.
    let worker = Worktrees::new(Layout::new(&worker_checkout));
    worker.attach(&name("fay")).unwrap();
    std::fs::write(worker.path_of(&name("fay")).join("x.txt"), "x\n").unwrap();
    worker.commit(&name("fay"), "x").unwrap().unwrap();
    let lead = Worktrees::new(Layout::new(&team.lead.path));
    let err = lead.merge(&name("fay")).unwrap_err();
    assert_eq!(err.code(), "worktree_not_found", "{err}");
    assert!(err.to_string().contains("[team] remote"), "{err}");
    assert!(git(&team.remote, &["branch", "--list", "troupe/*"]).is_empty());
}
