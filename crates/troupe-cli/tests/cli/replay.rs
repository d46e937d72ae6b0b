//! `troupe replay` through the real binary (issue 44): a scripted team recorded in a git
//! repository with uncommitted changes replays identically with no key; a changed agent
//! definition stops the replay at that teammate's first call with the changed line in the
//! diff; a changed MCP tool description stops it at the first call that carries the tool;
//! `--live-after-divergence` goes on with a model server on loopback; `--until` leaves a
//! workspace that `run --continue` finishes; broken recordings and folders are refused.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{assert_fails, command, git, ran, troupe_in, Ran};

/// A git repository with one commit (a README and the `alpha` definition) and an uncommitted
/// change to the README.
fn repository() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, home) = (root.join("ws"), root.join("home"));
    std::fs::create_dir_all(ws.join("agents")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(ws.join("README.md"), "hello\n").unwrap();
    std::fs::write(ws.join(".gitignore"), ".troupe/\n").unwrap();
    write_definition(
        &ws,
        "ALPHA-INSTRUCTIONS: write what you are asked, nothing else.",
    );
    git(&ws, &home, &["init", "-q"]);
    git(&ws, &home, &["add", "."]);
    git(&ws, &home, &["commit", "-qm", "start"]);
    std::fs::write(ws.join("README.md"), "hello\nuncommitted\n").unwrap();
    (dir, ws, root)
}

fn write_definition(ws: &Path, body: &str) {
    std::fs::write(
        ws.join("agents/alpha.md"),
        format!("---\nname: alpha\ndescription: Writes files\n---\n{body}\n"),
    )
    .unwrap();
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// The lead spawns `alpha` from its definition and `beta`; each writes its file and reports.
fn team_script(root: &Path) -> PathBuf {
    let script = root.join("team.json");
    let done = || json!({"text": "Noted."});
    std::fs::write(
        &script,
        json!({"agents": {
            "lead": [
                {"tool_calls": [
                    tool("spawn_teammate", json!({"name": "alpha", "agent": "alpha", "role": "writer", "prompt": "Write a.txt."})),
                    tool("spawn_teammate", json!({"name": "beta", "role": "writer", "prompt": "Write b.txt."}))]},
                {"text": "Waiting."}, done(), done(), done(), done()],
            "alpha": [
                {"tool_calls": [tool("write_file", json!({"path": "a.txt", "content": "from alpha\n"}))]},
                {"text": "Wrote a.txt."}],
            "beta": [
                {"tool_calls": [tool("write_file", json!({"path": "b.txt", "content": "from beta\n"}))]},
                {"text": "Wrote b.txt."}]
        }})
        .to_string(),
    )
    .unwrap();
    script
}

fn record(ws: &Path, script: &Path, extra: &[&str]) {
    let mut args = vec![
        "run",
        "--prompt",
        "Have alpha and beta write their files.",
        "--model-script",
        script.to_str().unwrap(),
        "--approval",
        "auto",
    ];
    args.extend(extra);
    let out = troupe_in(ws, &args);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(ws.join("a.txt").exists() && ws.join("b.txt").exists());
}

fn replay(ws: &Path, args: &[&str]) -> Ran {
    let mut all = vec!["replay"];
    all.extend(args);
    troupe_in(ws, &all)
}

#[test]
fn a_team_run_replays_identically_from_its_git_starting_point_with_no_key() {
    let (_dir, ws, root) = repository();
    record(&ws, &team_script(&root), &[]);
    let recordings: Vec<_> = std::fs::read_dir(ws.join(".troupe/recordings"))
        .unwrap()
        .collect();
    assert_eq!(recordings.len(), 1);
    for _ in 0..3 {
        let out = replay(&ws, &["last"]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(
            out.stdout
                .contains("model calls identical; the final tree matches"),
            "{out:#?}"
        );
    }
    let out = replay(&ws, &["last", "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "identical");
    assert_eq!(report["served"], report["calls"]);
    assert_eq!(report["tree"]["recorded"], report["tree"]["replayed"]);
    // The person's repository is left as it was: no worktree, the change still uncommitted.
    let home = root.join("home");
    let worktrees = git(&ws, &home, &["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees.matches("worktree ").count(), 1, "{worktrees}");
    let status = git(&ws, &home, &["status", "--porcelain"]);
    assert!(status.contains(" M README.md"), "{status}");
}

#[test]
fn a_changed_definition_stops_the_replay_at_that_teammates_first_call() {
    let (_dir, ws, root) = repository();
    record(&ws, &team_script(&root), &[]);
    write_definition(
        &ws,
        "ALPHA-INSTRUCTIONS: write what you are asked, in capitals.",
    );
    let out = replay(&ws, &["last"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stdout
            .contains("(alpha's call 1) differs from the recorded request"),
        "{out:#?}"
    );
    assert!(
        out.stdout
            .contains("-ALPHA-INSTRUCTIONS: write what you are asked, nothing else."),
        "{out:#?}"
    );
    assert!(
        out.stdout
            .contains("+ALPHA-INSTRUCTIONS: write what you are asked, in capitals."),
        "{out:#?}"
    );
    assert!(
        out.stdout.contains("what the recorded model answered"),
        "{out:#?}"
    );
    assert!(out.stderr.contains("[replay_diverged]"), "{out:#?}");
}

#[test]
fn a_changed_tool_description_stops_the_replay_at_the_first_call_that_carries_it() {
    let (_dir, ws, root) = repository();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe/tests/fixtures/mcp_fixture.py");
    let settings = |description: &str| {
        std::fs::write(
            ws.join("troupe.toml"),
            format!(
                "[[mcp_servers]]\nname = \"fixture\"\ncommand = \"python3\"\nargs = [{:?}, \
                 \"ok\"]\nstartup_timeout = 20\nenv = {{ FIXTURE_ECHO_DESCRIPTION = {:?} }}\n",
                fixture.display().to_string(),
                description
            ),
        )
        .unwrap();
    };
    settings("Echoes its text.");
    record(&ws, &team_script(&root), &["--trust-workspace"]);
    settings("Echoes its text, twice.");
    let out = replay(&ws, &["last", "--trust-workspace"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stdout.contains("call 1 (lead's call 1) differs"),
        "{out:#?}"
    );
    assert!(
        out.stdout.contains(
            "== tool mcp__fixture__echo\n-Echoes its text. (tool echo of MCP server fixture)\n\
             +Echoes its text, twice. (tool echo"
        ),
        "{out:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_after_divergence_goes_on_with_the_configured_model() {
    let (_dir, ws, root) = repository();
    record(&ws, &team_script(&root), &[]);
    write_definition(&ws, "ALPHA-INSTRUCTIONS: changed.");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "model": "live-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "live answer"},
                         "finish_reason": "stop"}]
        })))
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let ws2 = ws.clone();
    let out = tokio::task::spawn_blocking(move || {
        ran(command(&ws2)
            .args(["replay", "last", "--live-after-divergence", "--workspace"])
            .arg(&ws2)
            .env("OPENAI_API_KEY", "sk-live-test")
            .env("OPENAI_BASE_URL", base)
            .env("OPENAI_MODEL", "live-model")
            .output()
            .unwrap())
    })
    .await
    .unwrap();
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(out.stdout.contains("(alpha's call 1) differs"), "{out:#?}");
    assert!(
        out.stdout
            .contains("the run went on with the configured model"),
        "{out:#?}"
    );
    let asked = server.received_requests().await.unwrap();
    assert!(
        !asked.is_empty(),
        "the live model answered after the divergence"
    );
    assert!(asked
        .iter()
        .all(|r| !String::from_utf8_lossy(&r.body).contains("sk-live-test")));
}

#[test]
fn until_leaves_a_workspace_from_which_run_continue_finishes_the_work() {
    let (_dir, ws, root) = repository();
    let script = root.join("solo.json");
    std::fs::write(
        &script,
        json!({"agents": {
            "lead": [
                {"tool_calls": [tool("spawn_teammate", json!({"name": "beta", "role": "writer", "prompt": "Write a.txt then b.txt."}))]},
                {"text": "Waiting."}, {"text": "All done."}, {"text": "All done."}],
            "beta": [
                {"tool_calls": [tool("write_file", json!({"path": "a.txt", "content": "a\n"}))]},
                {"tool_calls": [tool("write_file", json!({"path": "b.txt", "content": "b\n"}))]},
                {"text": "Wrote both."}]
        }})
        .to_string(),
    )
    .unwrap();
    record(&ws, &script, &[]);
    let into = root.join("fork");
    let out = replay(
        &ws,
        &["last", "--until", "3", "--into", into.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("stopped after call 3 of"), "{out:#?}");
    assert!(out.stdout.contains("--continue"), "{out:#?}");
    assert!(into.join("a.txt").exists(), "beta's first call ran");
    assert!(!into.join("b.txt").exists(), "its second did not");
    // The rest of the work, from a script that knows only what is left.
    let rest = root.join("rest.json");
    std::fs::write(
        &rest,
        json!({"agents": {
            "beta": [
                {"tool_calls": [tool("write_file", json!({"path": "b.txt", "content": "b\n"}))]},
                {"text": "Wrote both."}],
            "lead": [{"text": "All done."}, {"text": "All done."}]
        }})
        .to_string(),
    )
    .unwrap();
    let out = troupe_in(
        &into,
        &[
            "run",
            "--continue",
            "--model-script",
            rest.to_str().unwrap(),
            "--approval",
            "auto",
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(std::fs::read_to_string(into.join("b.txt")).unwrap(), "b\n");
}

#[test]
fn broken_recordings_and_folders_are_refused_clearly() {
    let (_dir, ws, root) = repository();
    assert_fails(&replay(&ws, &["last"]), 2, "no recorded runs");
    record(&ws, &team_script(&root), &[]);
    assert_fails(&replay(&ws, &["abc"]), 2, "too short");
    assert_fails(&replay(&ws, &["ffffffff-none"]), 2, "no recorded run");
    let busy = root.join("busy");
    std::fs::create_dir_all(&busy).unwrap();
    std::fs::write(busy.join("x"), "x").unwrap();
    assert_fails(
        &replay(&ws, &["last", "--into", busy.to_str().unwrap()]),
        2,
        "is not empty",
    );
    let recording = std::fs::read_dir(ws.join(".troupe/recordings"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&recording).unwrap();
    let torn = root.join("torn.jsonl");
    std::fs::write(&torn, &text[..text.len() - 3]).unwrap();
    assert_fails(&replay(&ws, &[torn.to_str().unwrap()]), 2, "is torn");
}

#[test]
fn a_shared_teams_run_is_replayed_from_its_database() {
    let Some(db) = troupe::store::postgres::testing::TestDb::create() else {
        return;
    };
    let url = db.url();
    let (_dir, ws, root) = repository();
    record(&ws, &team_script(&root), &["--store", &url]);
    // The lead's own file goes; the team's database keeps the recording.
    std::fs::remove_dir_all(ws.join(".troupe/recordings")).unwrap();
    assert_fails(&replay(&ws, &["last"]), 2, "no recorded runs");
    let out = replay(&ws, &["last", "--store", &url, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "identical", "{report:#}");
    assert!(report["calls"].as_u64().unwrap() >= 5, "{report:#}");
}

#[test]
fn a_run_that_went_on_with_an_earlier_conversation_says_its_first_call_will_differ() {
    let (_dir, ws, root) = repository();
    record(&ws, &team_script(&root), &[]);
    let again = root.join("again.json");
    std::fs::write(
        &again,
        json!({"responses": [{"text": "Still done."}]}).to_string(),
    )
    .unwrap();
    let out = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "Anything left?",
            "--model-script",
            again.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let out = replay(&ws, &["last"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stderr
            .contains("went on with an earlier conversation of the lead"),
        "{out:#?}"
    );
    assert!(
        out.stdout.contains("call 1 (lead's call 1) differs"),
        "{out:#?}"
    );
}
