//! Worktrees through a running team: `spawn_teammate` with `isolation: "worktree"`, the
//! teammate's file tools and confined commands rooted in its worktree, its result committed on
//! its branch, the lead's `merge_teammate` (and its events), two teammates on the same lines,
//! the settings' default, a workspace that is not a repository left as it was.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::bootstrap::{build_team, SandboxOptions};
use troupe::sandbox::{Mode, Network, Policy, Sandbox};
use troupe::settings::{Source, Sourced};
use troupe::store::events::kinds;
use troupe::wire::Isolation;

use super::support::{commit_line, git, init_repo, rev, status, NOTES};
use crate::team::support::{call, drive, name, say, Convo, Fixture, Models, Reply, TestModel};

/// The results the lead got from `who`, as events.
fn results_from(c: &Convo<'_>, who: &str) -> usize {
    c.events()
        .iter()
        .filter(|e| e["kind"] == "result" && e["sender"] == who)
        .count()
}

/// The lead's `spawn_teammate` of `name` (role writer) with `prompt`, in a worktree of its own.
fn spawn_in_worktree(name: &str, prompt: &str) -> Reply {
    call(
        "spawn_teammate",
        json!({"name": name, "role": "writer", "prompt": prompt, "isolation": "worktree"}),
    )
}

/// The lead's tool results so far.
fn tool_results(model: &TestModel) -> Vec<String> {
    let n = model.calls();
    model
        .wire_messages(n)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// A confined sandbox (Landlock) rooted at the fixture's workspace.
fn confined(fx: &Fixture) -> SandboxOptions {
    let policy = Policy {
        mode: Mode::WorkspaceWrite,
        network: Network::Off,
        deny_read: Vec::new(),
        deny_write: Vec::new(),
    };
    let mut options = SandboxOptions::off(&fx.workspace);
    options.sandbox = Arc::new(Sandbox::new(&policy, &fx.workspace).unwrap());
    options.policy = policy;
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_teammate_works_in_its_worktree_and_the_lead_merges_its_branch() {
    let fx = Fixture::new();
    init_repo(&fx.workspace);
    let base = rev(&fx.workspace, "HEAD");
    let lead_notes = fx.workspace.join("notes.txt");
    let lead = TestModel::new(&fx.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return spawn_in_worktree("alice", "Write the greeting\nhello.txt, then say done");
        }
        if results_from(c, "alice") == 1 && c.calls_named("merge_teammate").is_empty() {
            return call("merge_teammate", json!({"name": "alice"}));
        }
        say("ok")
    });
    let outside = lead_notes.display().to_string();
    let alice = TestModel::new(&fx.signal, move |c| {
        match c.calls_named("write_file").len() + c.calls_named("shell").len() {
            0 => call(
                "write_file",
                json!({"path": "hello.txt", "content": "hi\n"}),
            ),
            1 => call(
                "write_file",
                json!({"path": "../../../notes.txt", "content": "x\n"}),
            ),
            2 => call(
                "shell",
                json!({"command": format!("pwd; echo made > shell.txt; echo hacked > {outside}")}),
            ),
            _ => say("done"),
        }
    });
    let models = Models::new(&fx.signal, &[("lead", &lead), ("alice", &alice)]);
    let mut settings = fx.settings(models);
    settings.sandbox = confined(&fx);
    let mut team = build_team(settings).await.unwrap();
    drive(&mut team, "greet").await;

    let worktree = fx.workspace.join(".troupe/worktrees/alice");
    // Its tools and commands were rooted in the worktree; the lead's checkout was not writable.
    let alice_results: Vec<String> = alice
        .wire_messages(alice.calls())
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        alice_results[1].starts_with("Error [permission_denied]"),
        "{}",
        alice_results[1]
    );
    assert!(
        alice_results[2].contains(worktree.to_str().unwrap()),
        "{}",
        alice_results[2]
    );
    assert_eq!(std::fs::read_to_string(&lead_notes).unwrap(), NOTES);
    let system = alice.wire_messages(1)[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("your own git worktree"), "{system}");

    // Its result was committed on its branch, by alice, with its task's first line.
    assert_eq!(
        commit_line(&fx.workspace, "troupe/alice"),
        "alice <alice@troupe.invalid>|alice|Write the greeting"
    );
    assert_eq!(
        git(
            &fx.workspace,
            &["show", "--format=", "--name-only", "troupe/alice"]
        )
        .trim(),
        "hello.txt\nshell.txt"
    );
    let record = troupe::worktree::WorktreeRecord::read(&fx.layout, &name("alice"))
        .unwrap()
        .unwrap();
    assert_eq!(
        (record.branch.as_str(), record.base.as_str()),
        ("troupe/alice", base.as_str())
    );
    assert_eq!(rev(&fx.workspace, "troupe/alice~1"), base);

    // The lead merged it: fast-forward, recorded, the lead's tree clean.
    let merge_result = tool_results(&lead).pop().unwrap();
    let merge_result: Value = serde_json::from_str(&merge_result).unwrap();
    assert_eq!(merge_result["merged"], true, "{merge_result}");
    assert_eq!(merge_result["fast_forward"], true);
    assert_eq!(
        rev(&fx.workspace, "HEAD"),
        rev(&fx.workspace, "troupe/alice")
    );
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("hello.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(status(&fx.workspace), "");
    let merged = fx.events_of(kinds::TEAMMATE_MERGED);
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].agent, "alice");
    assert_eq!(merged[0].str("branch"), Some("troupe/alice"));
    // The team's state stayed the lead's: alice's transcript and mailbox are there, not in
    // its worktree.
    assert!(fx
        .workspace
        .join(".troupe/transcripts/alice.jsonl")
        .is_file());
    assert!(!worktree.join(".troupe").exists());
    assert_eq!(
        team.runtime
            .record_of(&name("alice"))
            .await
            .unwrap()
            .isolation,
        Isolation::Worktree
    );
    team.close().await;
    // alice did not shut down: its worktree is kept.
    assert!(worktree.is_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_teammates_on_the_same_lines_one_merges_and_the_other_is_a_conflict() {
    let fx = Fixture::new();
    init_repo(&fx.workspace);
    let lead = TestModel::new(&fx.signal, |c| {
        let spawned = c.calls_named("spawn_teammate").len();
        if spawned < 2 {
            let who = ["alice", "bob"][spawned];
            return call(
                "spawn_teammate",
                json!({"name": who, "role": "editor", "prompt": "Edit line two"}),
            );
        }
        let merges = c.calls_named("merge_teammate").len();
        if results_from(c, "alice") == 1 && results_from(c, "bob") == 1 && merges < 2 {
            let who = ["alice", "bob"][merges];
            return call("merge_teammate", json!({ "name": who }));
        }
        say("ok")
    });
    let editor = |who: &'static str| {
        move |c: &Convo<'_>| {
            if c.calls_named("write_file").is_empty() {
                call(
                    "write_file",
                    json!({"path": "notes.txt", "content": NOTES.replace("two", &format!("two ({who})"))}),
                )
            } else {
                say("done")
            }
        }
    };
    let alice = TestModel::new(&fx.signal, editor("alice"));
    let bob = TestModel::new(&fx.signal, editor("bob"));
    let models = Models::new(
        &fx.signal,
        &[("lead", &lead), ("alice", &alice), ("bob", &bob)],
    );
    // Worktrees are the run's default here (`[team] isolation = "worktree"`).
    let mut settings = fx.settings(models);
    settings.settings.team.isolation = Some(Sourced {
        value: Isolation::Worktree,
        source: Source::Default,
    });
    let mut team = build_team(settings).await.unwrap();
    drive(&mut team, "edit").await;

    let results = tool_results(&lead);
    let second: Value = serde_json::from_str(results.last().unwrap()).unwrap();
    assert_eq!(second["merged"], false, "{second}");
    assert_eq!(second["conflicts"], json!(["notes.txt"]));
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("notes.txt")).unwrap(),
        NOTES.replace("two", "two (alice)")
    );
    assert_eq!(status(&fx.workspace), "");
    assert_eq!(
        git(&fx.workspace, &["show", "troupe/bob:notes.txt"]),
        NOTES.replace("two", "two (bob)")
    );
    let conflicts = fx.events_of(kinds::MERGE_CONFLICT);
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].agent, "bob");
    assert_eq!(conflicts[0].fields["files"], json!(["notes.txt"]));
    assert_eq!(fx.events_of(kinds::TEAMMATE_MERGED).len(), 1);
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_teammate_s_merged_clean_worktree_goes_at_close() {
    let fx = Fixture::new();
    init_repo(&fx.workspace);
    let lead = TestModel::new(&fx.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return spawn_in_worktree("alice", "Write it");
        }
        if results_from(c, "alice") == 1 && c.calls_named("merge_teammate").is_empty() {
            return call("merge_teammate", json!({"name": "alice"}));
        }
        if !c.calls_named("merge_teammate").is_empty()
            && c.calls_named("request_shutdown").is_empty()
        {
            return call("request_shutdown", json!({"teammate": "alice"}));
        }
        say("ok")
    });
    let alice = TestModel::new(&fx.signal, |c| {
        if c.calls_named("write_file").is_empty() {
            call("write_file", json!({"path": "it.txt", "content": "it\n"}))
        } else {
            say("done")
        }
    });
    let models = Models::new(&fx.signal, &[("lead", &lead), ("alice", &alice)]);
    let mut team = fx.build(models).await;
    drive(&mut team, "go").await;
    let worktree = fx.workspace.join(".troupe/worktrees/alice");
    assert!(worktree.is_dir());
    team.close().await;
    assert!(!worktree.exists());
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("it.txt")).unwrap(),
        "it\n"
    );
    assert_eq!(status(&fx.workspace), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_that_is_not_a_repository_refuses_worktrees_and_works_as_before() {
    let fx = Fixture::new();
    let lead = TestModel::new(&fx.signal, |c| {
        match c.calls_named("spawn_teammate").len() {
            0 => spawn_in_worktree("alice", "Write it"),
            1 => call(
                "spawn_teammate",
                json!({"name": "alice", "role": "writer", "prompt": "Write it"}),
            ),
            _ => say("ok"),
        }
    });
    let alice = TestModel::new(&fx.signal, |c| {
        if c.calls_named("write_file").is_empty() {
            call("write_file", json!({"path": "it.txt", "content": "it\n"}))
        } else {
            say("done")
        }
    });
    let models = Models::new(&fx.signal, &[("lead", &lead), ("alice", &alice)]);
    let mut team = fx.build(models).await;
    drive(&mut team, "go").await;
    let results = tool_results(&lead);
    assert!(
        results[0].starts_with("Error [invalid_arguments]: isolation \"worktree\" needs the workspace to be a git repository"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("\"spawned\":\"alice\""),
        "{}",
        results[1]
    );
    assert!(!results[1].contains("isolation"), "{}", results[1]);
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("it.txt")).unwrap(),
        "it\n"
    );
    assert!(!fx.workspace.join(".troupe/worktrees").exists());
    assert!(!fx.workspace.join(".git").exists());
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_taken_from_the_board_is_committed_on_the_teammate_s_branch_with_its_subject() {
    let fx = Fixture::new();
    init_repo(&fx.workspace);
    let lead = TestModel::new(&fx.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return spawn_in_worktree("bob", "Say ready.");
        }
        if c.calls_named("create_task").is_empty() {
            return call("create_task", json!({"subject": "Add the changelog"}));
        }
        say("ok")
    });
    let bob = TestModel::new(&fx.signal, |c| {
        if !c.last_user().starts_with("[task]") && !c.last_is_tool_result() {
            return say("ready");
        }
        if c.calls_named("write_file").is_empty() {
            return call(
                "write_file",
                json!({"path": "CHANGELOG.md", "content": "# Changes\n"}),
            );
        }
        say("added")
    });
    let models = Models::new(&fx.signal, &[("lead", &lead), ("bob", &bob)]);
    let mut team = build_team(fx.settings(models)).await.unwrap();
    drive(&mut team, "go").await;
    assert_eq!(
        commit_line(&fx.workspace, "troupe/bob"),
        "bob <bob@troupe.invalid>|bob|Add the changelog"
    );
    assert_eq!(
        git(
            &fx.workspace,
            &["show", "--format=", "--name-only", "troupe/bob"]
        )
        .trim(),
        "CHANGELOG.md"
    );
    assert_eq!(fx.events_of(kinds::TASK_COMPLETED).len(), 1);
    // The lead's checkout is untouched until it merges.
    assert!(!fx.workspace.join("CHANGELOG.md").exists());
    team.close().await;
}
