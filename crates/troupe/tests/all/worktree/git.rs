//! The `Worktrees` port on real repositories: made from the lead's `HEAD`, reattached, commits
//! by the teammate, merges (fast-forward, conflict aborted, a dirty lead refused), removal only
//! when merged and clean, a hostile repository's hooks never run, a non-repository refused.

use std::os::unix::fs::PermissionsExt;

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::worktree::{Merged, Removal, WorktreeError, WorktreeRecord, Worktrees};

use super::support::{commit_line, git, git_command, rev, status, Repo, NOTES};
use crate::team::support::name;

fn worktrees(repo: &Repo) -> Worktrees {
    Worktrees::new(Layout::new(&repo.path))
}

/// Writes `text` to `file` in `name`'s worktree.
fn write_in(w: &Worktrees, who: &str, file: &str, text: &str) {
    std::fs::write(w.path_of(&name(who)).join(file), text).unwrap();
}

#[test]
fn a_worktree_is_made_from_the_lead_head_on_its_own_branch() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let attached = w.attach(&name("alice")).unwrap();
    assert!(attached.created);
    assert_eq!(attached.path, repo.path.join(".troupe/worktrees/alice"));
    assert_eq!(
        git(&attached.path, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "troupe/alice"
    );
    assert_eq!(rev(&attached.path, "HEAD"), repo.head());
    assert_eq!(attached.record.base, repo.head());
    assert_eq!(
        WorktreeRecord::read(w.layout(), &name("alice")).unwrap(),
        Some(attached.record.clone())
    );
    assert_eq!(
        std::fs::read_to_string(attached.path.join("notes.txt")).unwrap(),
        NOTES
    );
    // troupe's state and the nested worktree never show in the lead's checkout.
    assert_eq!(status(&repo.path), "");
    let exclude = std::fs::read_to_string(repo.path.join(".git/info/exclude")).unwrap();
    assert!(exclude.lines().any(|l| l == "/.troupe/"), "{exclude}");
}

#[test]
fn a_worktree_a_run_left_is_reattached_with_its_work_and_base() {
    let repo = Repo::new();
    let base = repo.head();
    let first = worktrees(&repo).attach(&name("alice")).unwrap();
    std::fs::write(first.path.join("draft.txt"), "half done\n").unwrap();
    // The lead goes on meanwhile.
    std::fs::write(repo.path.join("lead.txt"), "lead\n").unwrap();
    git(&repo.path, &["add", "lead.txt"]);
    git(&repo.path, &["commit", "--quiet", "-m", "lead work"]);

    // The next run (a new port on the same workspace) reattaches: nothing made twice.
    let again = worktrees(&repo).attach(&name("alice")).unwrap();
    assert!(!again.created);
    assert_eq!(again.record.base, base);
    assert_eq!(
        std::fs::read_to_string(again.path.join("draft.txt")).unwrap(),
        "half done\n"
    );

    // Its folder deleted by hand, its committed work kept on the branch: made again from it.
    let w = worktrees(&repo);
    w.commit(&name("alice"), "draft").unwrap().unwrap();
    std::fs::remove_dir_all(&again.path).unwrap();
    let remade = w.attach(&name("alice")).unwrap();
    assert!(remade.created);
    assert_eq!(remade.record.base, base);
    assert_eq!(
        std::fs::read_to_string(remade.path.join("draft.txt")).unwrap(),
        "half done\n"
    );
}

#[test]
fn a_commit_is_the_teammate_s_and_nothing_changed_makes_none() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let path = w.attach(&name("alice")).unwrap().path;
    write_in(&w, "alice", "hello.txt", "hi\n");
    let commit = w
        .commit(&name("alice"), "\nWrite the greeting\nwith details")
        .unwrap()
        .unwrap();
    assert_eq!(rev(&path, "troupe/alice"), commit);
    assert_eq!(
        commit_line(&path, "troupe/alice"),
        "alice <alice@troupe.invalid>|alice|Write the greeting"
    );
    assert_eq!(w.commit(&name("alice"), "again").unwrap(), None);
    assert_eq!(rev(&path, "troupe/alice"), commit);
    // The lead's branch did not move.
    assert_eq!(
        git(&repo.path, &["log", "--format=%s", "main"]).trim(),
        "first"
    );
}

#[test]
fn a_branch_ahead_of_the_lead_merges_fast_forward() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    w.attach(&name("alice")).unwrap();
    write_in(&w, "alice", "hello.txt", "hi\n");
    // Pending work is committed by the merge itself.
    let merged = w.merge(&name("alice")).unwrap();
    let Merged::Done {
        fast_forward,
        commit,
        committed,
        branch,
    } = merged
    else {
        panic!("not merged: {merged:?}");
    };
    assert!(fast_forward);
    assert_eq!(branch, "troupe/alice");
    assert_eq!(Some(commit.clone()), committed);
    assert_eq!(repo.head(), commit);
    assert_eq!(
        std::fs::read_to_string(repo.path.join("hello.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(status(&repo.path), "");
    assert_eq!(
        w.merge(&name("alice")).unwrap(),
        Merged::AlreadyMerged {
            branch: "troupe/alice".into()
        }
    );
}

#[test]
fn two_teammates_on_the_same_lines_one_merges_the_other_conflicts_and_nothing_is_lost() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    w.attach(&name("alice")).unwrap();
    w.attach(&name("bob")).unwrap();
    let alice_notes = NOTES.replace("two", "two (alice)");
    let bob_notes = NOTES.replace("two", "two (bob)");
    write_in(&w, "alice", "notes.txt", &alice_notes);
    write_in(&w, "bob", "notes.txt", &bob_notes);
    w.commit(&name("bob"), "bob's line").unwrap().unwrap();
    let bob_tip = rev(&repo.path, "troupe/bob");

    assert!(matches!(
        w.merge(&name("alice")).unwrap(),
        Merged::Done { .. }
    ));
    let head = repo.head();
    let conflict = w.merge(&name("bob")).unwrap();
    assert_eq!(
        conflict,
        Merged::Conflict {
            branch: "troupe/bob".into(),
            files: vec!["notes.txt".into()],
            committed: None,
        }
    );
    // The lead's checkout is as it was: alice's lines, no merge in progress, nothing staged.
    assert_eq!(repo.head(), head);
    assert_eq!(
        std::fs::read_to_string(repo.path.join("notes.txt")).unwrap(),
        alice_notes
    );
    assert_eq!(status(&repo.path), "");
    assert!(!repo.path.join(".git/MERGE_HEAD").exists());
    // bob's branch and worktree keep bob's work.
    assert_eq!(rev(&repo.path, "troupe/bob"), bob_tip);
    assert_eq!(
        git(&repo.path, &["show", "troupe/bob:notes.txt"]),
        bob_notes
    );
    assert_eq!(
        std::fs::read_to_string(w.path_of(&name("bob")).join("notes.txt")).unwrap(),
        bob_notes
    );
}

#[test]
fn a_lead_checkout_with_changes_the_merge_would_touch_is_left_alone() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    w.attach(&name("alice")).unwrap();
    write_in(
        &w,
        "alice",
        "notes.txt",
        &NOTES.replace("five", "five (alice)"),
    );
    let lead_edit = NOTES.replace("one", "one (lead, uncommitted)");
    std::fs::write(repo.path.join("notes.txt"), &lead_edit).unwrap();
    let head = repo.head();

    let err = w.merge(&name("alice")).unwrap_err();
    assert_eq!(err.code(), "merge_blocked");
    assert!(
        matches!(&err, WorktreeError::LeadDirty { files, .. } if files == &["notes.txt"]),
        "{err}"
    );
    assert_eq!(repo.head(), head);
    assert_eq!(
        std::fs::read_to_string(repo.path.join("notes.txt")).unwrap(),
        lead_edit
    );
    // alice's work was committed on its branch, not lost.
    assert_eq!(
        git(&repo.path, &["show", "troupe/alice:notes.txt"]),
        NOTES.replace("five", "five (alice)")
    );
}

#[test]
fn a_worktree_is_removed_only_when_merged_and_clean() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let path = w.attach(&name("alice")).unwrap().path;
    write_in(&w, "alice", "hello.txt", "hi\n");
    w.commit(&name("alice"), "hello").unwrap().unwrap();
    assert!(matches!(
        w.remove_if_done(&name("alice")).unwrap(),
        Removal::Kept(why) if why.contains("not merged")
    ));
    assert!(path.is_dir());

    w.merge(&name("alice")).unwrap();
    write_in(&w, "alice", "scratch.txt", "not committed\n");
    assert!(matches!(
        w.remove_if_done(&name("alice")).unwrap(),
        Removal::Kept(why) if why.contains("uncommitted")
    ));
    assert!(path.join("scratch.txt").is_file());

    std::fs::remove_file(path.join("scratch.txt")).unwrap();
    assert_eq!(w.remove_if_done(&name("alice")).unwrap(), Removal::Removed);
    assert!(!path.exists());
    assert!(!git(&repo.path, &["branch", "--list", "troupe/alice"]).contains("alice"));
    assert_eq!(
        WorktreeRecord::read(w.layout(), &name("alice")).unwrap(),
        None
    );
    assert!(w.list().unwrap().is_empty());
    assert_eq!(status(&repo.path), "");
}

#[test]
fn the_list_says_ahead_behind_dirty_and_merged() {
    let repo = Repo::new();
    let w = worktrees(&repo);
    let base = repo.head();
    w.attach(&name("alice")).unwrap();
    write_in(&w, "alice", "a.txt", "a\n");
    w.commit(&name("alice"), "a").unwrap().unwrap();
    write_in(&w, "alice", "b.txt", "b\n");
    std::fs::write(repo.path.join("lead.txt"), "lead\n").unwrap();
    git(&repo.path, &["add", "lead.txt"]);
    git(&repo.path, &["commit", "--quiet", "-m", "lead"]);
    let views = w.list().unwrap();
    assert_eq!(views.len(), 1);
    let view = &views[0];
    assert_eq!(
        (
            view.name.as_str(),
            view.branch.as_str(),
            view.base.as_str(),
            view.path.as_str()
        ),
        (
            "alice",
            "troupe/alice",
            base.as_str(),
            ".troupe/worktrees/alice"
        )
    );
    assert_eq!(
        (view.ahead, view.behind, view.dirty, view.merged),
        (Some(1), Some(1), Some(true), Some(false))
    );
    assert_eq!(view.problem, None);
}

/// A hook (and an fsmonitor) that would leave `marker` behind if git ran it.
fn plant_hooks(repo: &Repo, marker: &std::path::Path) {
    let hooks = repo.path.join(".git/hooks");
    let script = format!("#!/bin/sh\necho \"$0\" >> '{}'\n", marker.display());
    for hook in [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "pre-merge-commit",
        "post-merge",
        "reference-transaction",
        "post-index-change",
    ] {
        let path = hooks.join(hook);
        std::fs::write(&path, &script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let monitor = repo.path.join("monitor.sh");
    std::fs::write(&monitor, &script).unwrap();
    std::fs::set_permissions(&monitor, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(
        &repo.path,
        &["config", "core.fsmonitor", monitor.to_str().unwrap()],
    );
    git(&repo.path, &["add", "monitor.sh"]);
    git(&repo.path, &["commit", "--quiet", "-m", "monitor"]);
}

#[test]
fn a_hostile_repository_s_hooks_never_run() {
    let repo = Repo::new();
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran");
    plant_hooks(&repo, &marker);
    // The hooks work: an ordinary git command runs them (so this test can fail).
    std::fs::write(repo.path.join("x.txt"), "x\n").unwrap();
    git(&repo.path, &["add", "x.txt"]);
    git(&repo.path, &["commit", "--quiet", "-m", "x"]);
    assert!(marker.exists(), "the planted hooks do not run at all");
    std::fs::remove_file(&marker).unwrap();

    let w = worktrees(&repo);
    w.attach(&name("alice")).unwrap();
    w.attach(&name("bob")).unwrap();
    write_in(&w, "alice", "a.txt", "a\n");
    write_in(&w, "bob", "b.txt", "b\n");
    w.commit(&name("alice"), "a").unwrap().unwrap();
    w.merge(&name("alice")).unwrap();
    // bob's merge is a merge commit (HEAD moved on): pre-merge-commit and post-merge.
    assert!(matches!(
        w.merge(&name("bob")).unwrap(),
        Merged::Done {
            fast_forward: false,
            ..
        }
    ));
    w.list().unwrap();
    assert_eq!(w.remove_if_done(&name("alice")).unwrap(), Removal::Removed);
    assert!(
        !marker.exists(),
        "a hook ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

#[test]
fn a_workspace_that_is_not_a_repository_or_has_no_commit_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let plain = std::fs::canonicalize(dir.path()).unwrap();
    let w = Worktrees::new(Layout::new(&plain));
    let err = w.attach(&name("alice")).unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    assert!(err.to_string().contains("to be a git repository"), "{err}");
    assert!(!plain.join(".troupe").exists());

    let empty = tempfile::tempdir().unwrap();
    let empty = std::fs::canonicalize(empty.path()).unwrap();
    git(&empty, &["init", "--quiet"]);
    let err = Worktrees::new(Layout::new(&empty))
        .check_available()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    assert!(err.to_string().contains("has none yet"), "{err}");

    let repo = Repo::new();
    std::fs::create_dir(repo.path.join("sub")).unwrap();
    let err = Worktrees::new(Layout::new(repo.path.join("sub")))
        .check_available()
        .unwrap_err();
    assert!(err.to_string().contains("top level"), "{err}");
    // A person's own git still sees a clean repository.
    assert!(git_command(&repo.path, &["status"])
        .output()
        .unwrap()
        .status
        .success());
}

#[tokio::test]
async fn a_worktree_teammate_reads_its_own_artifacts_kept_in_the_lead_s_state() {
    use std::sync::Arc;
    use troupe::ids::SequentialIds;
    use troupe::store::artifacts::ArtifactStore;
    use troupe::tools::read_file::ReadFileTool;
    use troupe::tools::{ToolContext, ToolHandler};

    let repo = Repo::new();
    let worktree = worktrees(&repo).attach(&name("alice")).unwrap().path;
    let store = ArtifactStore::new(
        &Layout::new(&repo.path),
        &name("alice"),
        Arc::new(SequentialIds::new()),
    );
    let kept = store.write("a long output\n").await.unwrap();
    let ctx = ToolContext::new(name("alice"), &worktree).with_artifacts(Some(store.clone()));
    let text = ReadFileTool
        .call(&ctx, serde_json::json!({"path": kept.relative_path}))
        .await
        .unwrap();
    assert_eq!(text, "a long output\n");
    // Someone else's artifact is not reached through it.
    let bob = ArtifactStore::new(
        &Layout::new(&repo.path),
        &name("bob"),
        Arc::new(SequentialIds::new()),
    )
    .write("bob's\n")
    .await
    .unwrap();
    let err = ReadFileTool
        .call(&ctx, serde_json::json!({"path": bob.relative_path}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found", "{err}");
}
