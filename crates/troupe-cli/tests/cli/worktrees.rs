//! `troupe run --isolation worktree` on a real git repository the test makes, with a scripted
//! model (a queue per agent): the teammate writes in its own worktree, its work is committed on
//! `troupe/<name>` by it, the lead merges the branch with `merge_teammate`; then `troupe
//! worktrees` (text and `--json`) shows the kept worktree, merged and clean, and `troupe log`
//! the merge.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::{json, troupe_in};

/// `git <args>` in `dir` with a test identity, nothing taken from the environment's `GIT_*`.
fn git(dir: &Path, args: &[&str]) -> String {
    super::support::git(dir, dir, args)
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

#[test]
fn a_run_with_worktree_isolation_merges_the_teammate_s_branch_and_lists_its_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    git(&ws, &["init", "--quiet"]);
    std::fs::write(ws.join("README.md"), "# project\n").unwrap();
    git(&ws, &["add", "README.md"]);
    git(&ws, &["commit", "--quiet", "-m", "first"]);
    let base = git(&ws, &["rev-parse", "HEAD"]).trim().to_owned();

    // The script lives outside the repository, so the lead's checkout stays clean.
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("script.json");
    let script_text = json!({"agents": {
        "lead": [
            tool("spawn_teammate", json!({"name": "alice", "role": "writer",
                                          "prompt": "Add a greeting\nWrite hello.txt."})),
            {"text": "alice is on it"},
            tool("merge_teammate", json!({"name": "alice"})),
            {"text": "merged alice's work"},
        ],
        "alice": [
            tool("write_file", json!({"path": "hello.txt", "content": "hello\n"})),
            {"text": "wrote hello.txt"},
        ],
    }});
    std::fs::write(&script, script_text.to_string()).unwrap();

    let out = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "Have a teammate add a greeting.",
            "--model-script",
            script.to_str().unwrap(),
            "--approval",
            "auto",
            "--isolation",
            "worktree",
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "merged alice's work\n");

    // alice's work: committed on its branch by alice, then fast-forwarded into the lead's.
    assert_eq!(
        git(&ws, &["log", "-1", "--format=%an <%ae>|%s", "troupe/alice"]).trim(),
        "alice <alice@troupe.invalid>|Add a greeting"
    );
    assert_eq!(
        git(&ws, &["rev-parse", "HEAD"]),
        git(&ws, &["rev-parse", "troupe/alice"])
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        git(&ws, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );

    let listed = json(&troupe_in(&ws, &["worktrees", "--json"]));
    assert_eq!(
        listed,
        json!({"worktrees": [{
            "name": "alice",
            "branch": "troupe/alice",
            "base": base,
            "path": ".troupe/worktrees/alice",
            "ahead": 0,
            "behind": 0,
            "dirty": false,
            "merged": true,
        }]})
    );
    let text = troupe_in(&ws, &["worktrees"]);
    assert_eq!(text.code, 0, "{text:#?}");
    assert!(text.stdout.starts_with("name "), "{}", text.stdout);
    assert!(text.stdout.contains("alice"), "{}", text.stdout);
    assert!(text.stdout.contains("troupe/alice"), "{}", text.stdout);

    let log = troupe_in(&ws, &["log", "--json"]);
    assert_eq!(log.code, 0, "{log:#?}");
    let merged: Vec<Value> = log
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "teammate_merged")
        .collect();
    assert_eq!(merged.len(), 1, "{}", log.stdout);
    assert_eq!(merged[0]["agent"], "alice");
    assert_eq!(merged[0]["fast_forward"], true);
}

#[test]
fn worktrees_of_a_plain_folder_are_none_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        json(&troupe_in(&ws, &["worktrees", "--json"])),
        json!({"worktrees": []})
    );
    let text = troupe_in(&ws, &["worktrees"]);
    assert_eq!(text.stdout, "no worktrees\n");
    assert!(!ws.join(".troupe").exists());
}

#[test]
fn the_team_isolation_setting_is_shown_with_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let shown = json(&troupe_in(&ws, &["config", "--json"]));
    assert_eq!(
        shown["team"],
        json!({
            "isolation": {"value": "none", "source": "default"},
            "remote": {"value": null, "source": "default"},
        })
    );
    std::fs::write(ws.join("troupe.toml"), "[team]\nisolation = \"worktree\"\n").unwrap();
    let shown = json(&troupe_in(&ws, &["config", "--json"]));
    assert_eq!(shown["team"]["isolation"]["value"], "worktree");
    assert!(
        shown["team"]["isolation"]["source"]
            .as_str()
            .unwrap()
            .ends_with("troupe.toml"),
        "{shown}"
    );
    // A workspace's own remote decides where code is pushed: it waits for trust.
    std::fs::write(
        ws.join("troupe.toml"),
        "[team]\nisolation = \"worktree\"\nremote = \"origin\"\n",
    )
    .unwrap();
    let shown = json(&troupe_in(&ws, &["config", "--json"]));
    assert_eq!(shown["team"]["remote"]["value"], "origin", "{shown}");
    let waiting: Vec<&Value> = shown["trust"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "git_remote")
        .collect();
    assert_eq!(waiting.len(), 1, "{shown}");
    let text = troupe_in(&ws, &["config"]);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("remote") && l.ends_with("[waits for trust]")),
        "{text:#?}"
    );
    std::fs::write(ws.join("troupe.toml"), "[team]\nisolation = \"vm\"\n").unwrap();
    let refused = troupe_in(&ws, &["config"]);
    assert_eq!(refused.code, 2, "{refused:#?}");
    assert!(refused.stderr.contains("isolation must be"), "{refused:#?}");
}

/// A team shared through PostgreSQL, each process in its own clone of one bare repository
/// (the remote): the lead in `troupe run --no-local-workers`, the teammate in a `troupe worker`.
/// With `[team] remote = "origin"` (the person's own config, which needs no trust) the lead
/// publishes the teammate's base, the worker makes the worktree from it in its clone and
/// pushes the teammate's commit, and the lead's `merge_teammate` fetches and merges it.
#[test]
fn a_teammate_in_a_worker_s_clone_is_merged_into_the_lead_s_through_the_remote() {
    use super::shared_team::WorkerProcess;
    use troupe::store::postgres::testing::TestDb;

    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let remote = root.join("remote.git");
    std::fs::create_dir(&remote).unwrap();
    git(&remote, &["init", "--quiet", "--bare"]);
    let lead_ws = root.join("lead");
    std::fs::create_dir(&lead_ws).unwrap();
    git(&lead_ws, &["init", "--quiet"]);
    std::fs::write(lead_ws.join("README.md"), "# project\n").unwrap();
    git(&lead_ws, &["add", "README.md"]);
    git(&lead_ws, &["commit", "--quiet", "-m", "first"]);
    git(
        &lead_ws,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(&lead_ws, &["push", "--quiet", "origin", "main"]);
    let worker_ws = root.join("worker");
    git(
        &root,
        &[
            "clone",
            "--quiet",
            remote.to_str().unwrap(),
            worker_ws.to_str().unwrap(),
        ],
    );
    // The lead goes on before it spawns: its teammate starts from this commit, which only the
    // lead's clone has.
    std::fs::write(lead_ws.join("PLAN.md"), "greet\n").unwrap();
    git(&lead_ws, &["add", "PLAN.md"]);
    git(&lead_ws, &["commit", "--quiet", "-m", "plan"]);

    // The person's own config (both processes): worktrees, branches through origin.
    let config = root.join("config");
    std::fs::create_dir_all(config.join("troupe")).unwrap();
    std::fs::write(
        config.join("troupe/config.toml"),
        "[team]\nisolation = \"worktree\"\nremote = \"origin\"\n",
    )
    .unwrap();
    let scripts = root.join("scripts");
    std::fs::create_dir(&scripts).unwrap();
    let lead_script = scripts.join("lead.json");
    std::fs::write(
        &lead_script,
        json!({"agents": {"lead": [
            tool("spawn_teammate", json!({"name": "alice", "role": "writer",
                                          "prompt": "Add a greeting\nWrite hello.txt."})),
            {"text": "alice is on it"},
            tool("merge_teammate", json!({"name": "alice"})),
            {"text": "merged alice's work"},
        ]}})
        .to_string(),
    )
    .unwrap();
    let worker_script = scripts.join("worker.json");
    std::fs::write(
        &worker_script,
        json!({"agents": {"alice": [
            tool("write_file", json!({"path": "hello.txt", "content": "hello\n"})),
            {"text": "wrote hello.txt"},
        ]}})
        .to_string(),
    )
    .unwrap();

    let mut c = super::support::command(&worker_ws);
    c.env("XDG_CONFIG_HOME", &config).args([
        "worker",
        "--workspace",
        worker_ws.to_str().unwrap(),
        "--store",
        &url,
        "--approval",
        "auto",
        "--no-memory",
        "--model-script",
        worker_script.to_str().unwrap(),
    ]);
    let worker = WorkerProcess::from_command(c);
    let out = super::support::ran(
        super::support::command(&lead_ws)
            .env("XDG_CONFIG_HOME", &config)
            .args([
                "run",
                "--prompt",
                "Have a teammate add a greeting.",
                "--approval",
                "auto",
                "--no-memory",
                "--store",
                &url,
                "--no-local-workers",
                "--model-script",
                lead_script.to_str().unwrap(),
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap(),
    );
    assert_eq!(out.code, 0, "{out:#?}\nworker: {}", worker.log());
    assert_eq!(out.stdout, "merged alice's work\n");

    // alice worked in the worker's clone, on a worktree made from the lead's HEAD at spawn.
    let alice_tree = worker_ws.join(".troupe/worktrees/alice");
    assert_eq!(
        std::fs::read_to_string(alice_tree.join("PLAN.md")).unwrap(),
        "greet\n"
    );
    assert!(
        !lead_ws.join(".troupe/worktrees/alice").exists(),
        "{out:#?}\nworker: {}\n{}",
        worker.log(),
        git(&lead_ws, &["worktree", "list"])
    );
    // Its commit — by alice, with its task's subject — went through the remote to the lead.
    let pushed = git(&remote, &["rev-parse", "refs/heads/troupe/alice"]);
    assert_eq!(git(&lead_ws, &["rev-parse", "HEAD"]), pushed);
    assert_eq!(
        git(&lead_ws, &["log", "-1", "--format=%an <%ae>|%s", "HEAD"]).trim(),
        "alice <alice@troupe.invalid>|Add a greeting"
    );
    assert_eq!(
        std::fs::read_to_string(lead_ws.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        git(
            &lead_ws,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
    let merged: Vec<Value> = troupe_in(&lead_ws, &["log", "--json", "--store", &url])
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "teammate_merged")
        .collect();
    assert_eq!(merged.len(), 1, "{merged:?}");
    assert_eq!(merged[0]["fast_forward"], true);
    assert_eq!(worker.stop(), 0);
}
