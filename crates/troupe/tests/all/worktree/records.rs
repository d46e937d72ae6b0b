//! A worktree record is a claim checked against git before use: one whose `git_dir` is not git's
//! admin folder of `.troupe/worktrees/<name>`, or whose worktree git shows on another branch, is
//! refused (`worktree_corrupt`, naming the record) by commit, merge, removal, reattach and the
//! list, and nothing runs with it. A nested repository a teammate makes in its worktree never
//! gets a `git status` of its own from troupe (its config, filters included, stays unread).

use std::path::Path;
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::worktree::{WorktreeError, WorktreeRecord, Worktrees};

use super::support::{git, git_command, rev, Repo};
use crate::team::support::name;

fn worktrees(repo: &Repo) -> Worktrees {
    Worktrees::new(Layout::new(&repo.path))
}

fn assert_refused(err: &WorktreeError, what: &str) {
    assert_eq!(err.code(), "worktree_corrupt", "{err}");
    let text = err.to_string();
    assert!(text.contains("alice.json"), "{text}");
    assert!(text.contains(what), "{text}");
}

/// Rewrites alice's record with `git_dir`.
fn point_record_at(w: &Worktrees, git_dir: &Path) {
    let mut record = WorktreeRecord::read(w.layout(), &name("alice"))
        .unwrap()
        .unwrap();
    record.git_dir = git_dir.to_owned();
    record.write(w.layout()).unwrap();
}

#[test]
fn a_record_naming_another_worktree_s_admin_folder_is_refused_everywhere() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let alice = w.attach(&name("alice")).unwrap();
    let bob = w.attach(&name("bob")).unwrap();
    std::fs::write(alice.path.join("a.txt"), "a\n").unwrap();
    point_record_at(&w, &bob.record.git_dir);
    let before = rev(&repo.path, "troupe/bob");

    let what = "is not git's admin folder";
    assert_refused(&w.commit(&name("alice"), "work").unwrap_err(), what);
    assert_refused(&w.merge(&name("alice")).unwrap_err(), what);
    assert_refused(&w.remove_if_done(&name("alice")).unwrap_err(), what);
    assert_refused(&w.attach(&name("alice")).unwrap_err(), what);
    let views = w.list().unwrap();
    assert_eq!(views[0].name, name("alice"));
    assert_eq!(views[0].dirty, None);
    assert!(
        views[0].problem.as_deref().unwrap().contains(what),
        "{views:?}"
    );
    // Nothing was committed anywhere, bob's branch included.
    assert_eq!(rev(&repo.path, "troupe/bob"), before);
    assert_eq!(rev(&repo.path, "troupe/alice"), repo.head());
}

#[test]
fn a_record_naming_the_lead_s_own_git_folder_is_refused() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let alice = w.attach(&name("alice")).unwrap();
    std::fs::write(alice.path.join("a.txt"), "a\n").unwrap();
    point_record_at(&w, &repo.path.join(".git"));
    let err = w.commit(&name("alice"), "work").unwrap_err();
    assert_refused(&err, "is not git's admin folder");
    assert_eq!(rev(&repo.path, "HEAD"), alice.record.base);
    assert_eq!(git(&repo.path, &["diff", "--cached", "--name-only"]), "");
}

#[test]
fn a_worktree_git_shows_on_another_branch_is_refused() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let alice = w.attach(&name("alice")).unwrap();
    git(&alice.path, &["switch", "--quiet", "-c", "elsewhere"]);
    let err = w.commit(&name("alice"), "work").unwrap_err();
    assert_refused(&err, "refs/heads/elsewhere");
}

#[test]
fn a_record_for_a_folder_git_does_not_know_is_refused() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    w.attach(&name("alice")).unwrap();
    let record = WorktreeRecord::read(w.layout(), &name("alice"))
        .unwrap()
        .unwrap();
    // git forgets the worktree; its folder and record stay.
    std::fs::remove_dir_all(&record.git_dir).unwrap();
    let err = w.commit(&name("alice"), "work").unwrap_err();
    assert_refused(&err, "git knows no worktree");
}

#[test]
fn a_nested_repository_in_a_worktree_never_runs_its_filter() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let alice = w.attach(&name("alice")).unwrap();
    let marks = tempfile::tempdir().unwrap();
    let pwned = marks.path().join("PWNED");
    // What a teammate can make in its worktree: a repository of its own with a filter.
    let sub = alice.path.join("sub");
    std::fs::create_dir(&sub).unwrap();
    git(&sub, &["init", "--quiet"]);
    std::fs::write(sub.join(".gitattributes"), "* filter=x\n").unwrap();
    std::fs::write(sub.join("f.txt"), "data\n").unwrap();
    git(&sub, &["add", "--all"]);
    git(&sub, &["commit", "--quiet", "-m", "sub"]);
    let filter = format!("touch {} && cat", pwned.display());
    git(&sub, &["config", "filter.x.clean", &filter]);
    // The first commit takes it in as a gitlink.
    w.commit(&name("alice"), "with a nested repository")
        .unwrap();
    let restat = || {
        let file = std::fs::File::options()
            .write(true)
            .open(sub.join("f.txt"))
            .unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
            .unwrap();
    };
    restat();
    // The test's own control: plain git's status looks inside and runs the filter.
    let control = git_command(&alice.path, &["status", "--porcelain"])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .unwrap();
    assert!(control.status.success(), "{control:?}");
    assert!(pwned.exists(), "the trap did not fire: {control:?}");
    std::fs::remove_file(&pwned).unwrap();
    restat();

    std::fs::write(alice.path.join("more.txt"), "more\n").unwrap();
    w.commit(&name("alice"), "more").unwrap();
    let views = w.list().unwrap();
    assert_eq!(views[0].dirty, Some(false), "{views:?}");
    assert!(!pwned.exists(), "the nested repository's filter ran");
}
