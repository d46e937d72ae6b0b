//! `troupe run` before it runs anything: missing model configuration (exit 2, nothing created)
//! and a workspace another run holds (exit 1, naming the holder).

use std::sync::Arc;
use std::time::Duration;

use troupe::agent::NullObserver;
use troupe::bootstrap::{build_team, SameModel, TeamSettings};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::model::ScriptedModel;
use troupe::permissions::DenyApproval;
use troupe::team::NoTeamObserver;

use super::support::{assert_fails, command, json, ran, troupe_in};

fn empty_workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

#[test]
fn run_without_model_configuration_exits_2_and_creates_nothing() {
    let (_dir, ws) = empty_workspace();
    let ws_arg = ws.to_str().unwrap();
    let run = |extra: &[(&str, &str)]| {
        let mut c = command(&ws);
        c.args(["run", "--prompt", "hello", "--workspace", ws_arg]);
        for (k, v) in extra {
            c.env(k, v);
        }
        ran(c.output().unwrap())
    };
    assert_fails(&run(&[]), 2, "OPENAI_API_KEY");
    assert_fails(
        &run(&[("OPENAI_API_KEY", "sk-test-1234")]),
        2,
        "OPENAI_MODEL",
    );
    assert_fails(&run(&[("OPENAI_MODEL", "gpt-test")]), 2, "OPENAI_API_KEY");
    assert!(!ws.join(".troupe").exists(), "no state was created");
    assert_eq!(std::fs::read_dir(&ws).unwrap().count(), 0);
}

#[test]
fn a_second_run_fails_at_start_naming_the_holder() {
    let (_dir, ws) = empty_workspace();
    // The team's cron timer and job supervisor live on a tokio runtime.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _entered = runtime.enter();
    let team = runtime
        .block_on(build_team(TeamSettings {
            workspace: ws.clone(),
            clock: Arc::new(SystemClock),
            ids: Arc::new(RandomIds),
            models: Arc::new(SameModel(Arc::new(ScriptedModel::new()))),
            approval: Arc::new(DenyApproval),
            run_observer: Arc::new(NullObserver),
            team_observer: Arc::new(NoTeamObserver),
            max_turns: 1,
            request_ttl: Duration::from_secs(300),
            shell_timeout: Duration::from_secs(1),
            watch: false,
            require_plans: false,
            redactor: troupe::secrets::Redactor::default(),
            long_lived: Default::default(),
            events: Default::default(),
            settings: Default::default(),
            sandbox: troupe::bootstrap::SandboxOptions::off(&ws),
            mcp: Default::default(),
            store: Default::default(),
        }))
        .unwrap();
    let script = ws.join("script.json");
    std::fs::write(&script, r#"{"responses": [{"text": "hi"}]}"#).unwrap();
    let holder = format!("pid {}", std::process::id());
    let second = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "hello",
            "--model-script",
            script.to_str().unwrap(),
        ],
    );
    assert_fails(&second, 1, "another troupe run holds this workspace");
    assert!(second.stderr.contains(&holder), "{second:#?}");
    assert!(second.stderr.contains("[workspace_busy]"), "{second:#?}");
    // Inspection still works while the run holds the workspace, and names it.
    let status = json(&troupe_in(&ws, &["status", "--json"]));
    assert_eq!(status["run"]["active"], true);
    assert!(
        status["run"]["holder"]
            .as_str()
            .unwrap()
            .starts_with(&holder),
        "{status}"
    );
    // Once the first run is gone, the same command runs.
    drop(team);
    let third = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "hello",
            "--model-script",
            script.to_str().unwrap(),
        ],
    );
    assert_eq!(third.code, 0, "{third:#?}");
    assert_eq!(third.stdout, "hi\n");
}

/// Runs `troupe ARGS --workspace WS` with `input` on standard input.
fn piped(ws: &std::path::Path, args: &[&str], input: &[u8]) -> super::support::Ran {
    use std::io::Write;
    let mut child = command(ws)
        .args(args)
        .args(["--workspace", ws.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    ran(child.wait_with_output().unwrap())
}

/// Every file under `dir` whose text contains `needle`.
fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if std::fs::read_to_string(&path).is_ok_and(|t| t.contains(needle)) {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_prompt_and_a_message_can_be_piped_with_a_dash() {
    let (_dir, ws) = empty_workspace();
    let script = ws.join("script.json");
    std::fs::write(&script, r#"{"responses": [{"text": "done"}]}"#).unwrap();
    let run_args = [
        "run",
        "--prompt",
        "-",
        "--no-memory",
        "--model-script",
        script.to_str().unwrap(),
    ];
    let out = piped(
        &ws,
        &run_args,
        "a task from a pipe\nwith two lines\n".as_bytes(),
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let lead = std::fs::read_to_string(ws.join(".troupe/transcripts/lead.jsonl")).unwrap();
    assert!(
        lead.contains("a task from a pipe\\nwith two lines"),
        "{lead}"
    );

    let sent = piped(&ws, &["send", "lead", "-", "--json"], b"steer from a pipe");
    assert_eq!(sent.code, 0, "{sent:#?}");
    assert_eq!(
        files_containing(&ws.join(".troupe"), "steer from a pipe").len(),
        1,
        "the message is in the lead's mailbox"
    );

    // A blank or non-UTF-8 prompt is refused before anything else.
    assert_fails(
        &piped(&ws, &run_args, b"  \n"),
        2,
        "--prompt must not be blank",
    );
    assert_fails(&piped(&ws, &run_args, &[0xff, 0xfe]), 2, "not valid UTF-8");
}
