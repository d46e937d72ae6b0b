//! The sandbox through the real binary and a scripted model (issue 15): every escape a hostile
//! model turn might try is refused by default (`workspace-write`) and succeeds with
//! `--sandbox off` — so the refusal is the sandbox's, not a broken command. Build-like work in the
//! workspace still works; the model is told what was refused; the audit names the mode.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::support::{command, ran, Ran};

const STATE: &str = "{ \"version\": 1,\n  \"requests\": [] }\n";

struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, home, tmp) = (root.join("ws"), root.join("home"), root.join("tmp"));
    for d in [
        ws.join(".troupe/protocol"),
        home.join(".ssh"),
        tmp.clone(),
        root.join("outside"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_test"), "SSH-SECRET-KEY\n").unwrap();
    std::fs::write(ws.join(".env"), "TOKEN=ENV-SECRET-VALUE\n").unwrap();
    std::fs::write(ws.join(".troupe/protocol/state.json"), STATE).unwrap();
    Place {
        _dir: dir,
        root,
        ws,
        home,
        tmp,
    }
}

fn shell(command: &str) -> Value {
    json!({"name": "shell", "arguments": {"command": command}})
}

/// Every attempt, each leaving `ok_<name>` in the workspace when it got through.
fn attempts(p: &Place, port: u16) -> Vec<(&'static str, String)> {
    let root = p.root.display();
    let home = p.home.display();
    vec![
        ("parent", "echo x > ../escaped_parent".to_owned()),
        ("absolute", format!("echo x > {root}/outside/absolute")),
        (
            "symlink",
            format!("ln -sfn {root}/outside link && echo x > link/via_link"),
        ),
        ("ssh_write", format!("echo x > {home}/.ssh/planted")),
        (
            "ssh_read",
            format!("cat {home}/.ssh/id_test > read_ssh.txt"),
        ),
        ("env_read", "cat .env > read_env.txt".to_owned()),
        (
            "troupe_state",
            "printf '{\"version\":1,\"requests\":[]}' > .troupe/protocol/state.json".to_owned(),
        ),
        (
            "network",
            format!(
                "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\""
            ),
        ),
        (
            "forked",
            "sh -c 'echo x > ../escaped_fork' & wait $!; test -e ../escaped_fork".to_owned(),
        ),
    ]
    .into_iter()
    .map(|(name, command)| (name, format!("{command} && touch ok_{name}")))
    .collect()
}

/// `troupe run` with a script that tries every escape (and a background job that tries one),
/// with `extra` flags; HOME and TMPDIR point into the test's folder.
fn run(p: &Place, port: u16, extra: &[&str]) -> Ran {
    run_with(p, port, extra, None)
}

fn run_with(p: &Place, port: u16, extra: &[&str], mechanism: Option<&str>) -> Ran {
    let mut calls: Vec<Value> = attempts(p, port)
        .iter()
        .map(|(_, command)| shell(command))
        .collect();
    calls.push(json!({"name": "shell", "arguments": {
        "command": "echo x > ../escaped_job && touch ok_job", "run_in_background": true}}));
    calls.push(shell(
        "mkdir -p target/debug/deps && echo bin > target/debug/app && t=$(mktemp) && \
         echo scratch > \"$t\" && cat \"$t\" target/debug/app > /dev/null && touch ok_build",
    ));
    let script = json!({"responses": [
        {"tool_calls": calls},
        {"text": "tried"}, {"text": "tried"}, {"text": "tried"}, {"text": "tried"}
    ]});
    run_script(p, &script, extra, mechanism)
}

/// `troupe run --approval auto` on `script`, HOME and TMPDIR in the test's folder.
fn run_script(p: &Place, script: &Value, extra: &[&str], mechanism: Option<&str>) -> Ran {
    let script_path = p.root.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut c = command(&p.ws);
    c.args([
        "run",
        "--workspace",
        p.ws.to_str().unwrap(),
        "--prompt",
        "try to escape",
        "--approval",
        "auto",
        "--no-memory",
        "--model-script",
        script_path.to_str().unwrap(),
    ])
    .args(extra)
    .env("HOME", &p.home)
    .env("TMPDIR", &p.tmp)
    .env_remove("TROUPE_SANDBOX")
    .stdin(std::process::Stdio::null());
    match mechanism {
        Some(m) => c.env("TROUPE_SANDBOX_MECHANISM", m),
        None => c.env_remove("TROUPE_SANDBOX_MECHANISM"),
    };
    ran(c.output().unwrap())
}

/// The run under `mechanism` ended well, said so at start, and let no escape through — while
/// build-like work in the workspace and the temp folder went on.
fn assert_refused(p: &Place, port: u16, out: &Ran, mechanism: &str) {
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stderr.contains(&format!(
            "sandbox: workspace-write ({mechanism}, network off)"
        )),
        "{out:#?}"
    );
    for (name, _) in attempts(p, port) {
        // `.env` lies in the writable workspace: it is masked by /dev/null, so the read
        // "works" and yields nothing (checked below by its content).
        if name != "env_read" {
            assert!(!ok(&p.ws, name), "{name} escaped {mechanism}");
        }
    }
    assert!(!ok(&p.ws, "job"), "the background job escaped {mechanism}");
    assert!(!p.root.join("escaped_parent").exists());
    assert!(!p.home.join(".ssh/planted").exists());
    assert!(!read(&p.ws.join("read_ssh.txt")).contains("SSH-SECRET-KEY"));
    assert!(!read(&p.ws.join("read_env.txt")).contains("ENV-SECRET-VALUE"));
    assert_eq!(read(&p.ws.join(".troupe/protocol/state.json")), STATE);
    assert!(
        ok(&p.ws, "build"),
        "build-like work failed under {mechanism}"
    );
}

fn ok(ws: &Path, name: &str) -> bool {
    ws.join(format!("ok_{name}")).exists()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn every_escape_is_refused_by_default_and_works_with_the_sandbox_off() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    let p = place();
    let out = run(&p, port, &[]);
    assert_refused(&p, port, &out, "landlock");
    assert!(!p.root.join("outside/absolute").exists());
    assert!(!p.root.join("outside/via_link").exists());
    assert!(!p.root.join("escaped_fork").exists());
    assert!(!p.root.join("escaped_job").exists());
    assert_eq!(read(&p.ws.join("target/debug/app")), "bin\n");

    // The model was told what the sandbox refused, in terms it can act on.
    let transcript = read(&p.ws.join(".troupe/transcripts/lead.jsonl"));
    for note in [
        format!(
            "sandbox: write outside the workspace denied: {}",
            p.root.join("escaped_parent").display()
        ),
        format!(
            "sandbox: write outside the workspace denied: {}",
            p.root.join("outside/absolute").display()
        ),
        "sandbox: .troupe/ is read-only to commands".to_owned(),
        "sandbox: reading a protected path denied".to_owned(),
        "sandbox: network access denied".to_owned(),
    ] {
        assert!(
            transcript.contains(&note),
            "no note {note:?} in {transcript}"
        );
    }
    // Every audit line of a command names the mode it ran under.
    let audit = read(&p.ws.join(".troupe/audit.jsonl"));
    let shell_lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["tool"] == "shell")
        .collect();
    assert_eq!(shell_lines.len(), attempts(&p, port).len() + 2, "{audit}");
    assert!(
        shell_lines
            .iter()
            .all(|l| l["sandbox"] == "workspace-write"),
        "{audit}"
    );
    assert!(audit
        .lines()
        .filter(|l| !l.contains("\"tool\":\"shell\""))
        .all(|l| !l.contains("\"sandbox\"")));

    // The same turn unconfined: every attempt gets through.
    let p = place();
    let out = run(&p, port, &["--sandbox", "off"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stderr.contains("sandbox: off"), "{out:#?}");
    for (name, _) in attempts(&p, port) {
        assert!(ok(&p.ws, name), "{name} failed unconfined: {out:#?}");
    }
    assert!(ok(&p.ws, "job"), "the background job failed unconfined");
    assert!(read(&p.ws.join("read_ssh.txt")).contains("SSH-SECRET-KEY"));
    let audit = read(&p.ws.join(".troupe/audit.jsonl"));
    assert!(audit.contains("\"sandbox\":\"off\""), "{audit}");
}

#[test]
fn read_only_mode_and_the_settings_file_are_honoured() {
    let p = place();
    std::fs::write(
        p.ws.join("troupe.toml"),
        "[sandbox]\nmode = \"read-only\"\ndeny_read = [\"private\"]\n",
    )
    .unwrap();
    std::fs::create_dir(p.ws.join("private")).unwrap();
    std::fs::write(p.ws.join("private/notes"), "PRIVATE-NOTE").unwrap();
    std::fs::write(p.ws.join("README"), "readable").unwrap();
    let script = json!({"responses": [
        {"tool_calls": [
            shell("cat README > /dev/null && touch ok_read"),
            shell("cat README > \"$TMPDIR/copy\" && cat \"$TMPDIR/copy\" && echo TEMP-$((40 + 2))"),
            shell("echo x > made.txt"),
            shell("cat private/notes"),
        ]},
        {"text": "done"}, {"text": "done"}
    ]});
    let out = run_script(&p, &script, &[], None);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stderr.contains("sandbox: read-only"), "{out:#?}");
    assert!(
        !p.ws.join("ok_read").exists(),
        "read-only cannot even touch"
    );
    assert!(!p.ws.join("made.txt").exists());
    let transcript = read(&p.ws.join(".troupe/transcripts/lead.jsonl"));
    // The run's private temp folder is writable (in place of the machine's), which is not
    // touched, and the private one is gone after the run.
    assert!(transcript.contains("TEMP-42"), "{transcript}");
    assert!(!p.tmp.join("copy").exists());
    assert_eq!(std::fs::read_dir(&p.tmp).unwrap().count(), 0, "left behind");
    assert!(!transcript.contains("PRIVATE-NOTE"), "{transcript}");
    assert!(
        transcript.contains("sandbox: write denied, this agent's commands are read-only"),
        "{transcript}"
    );
    // The flag decides over the settings.
    let out = ran(command(&p.ws)
        .args(["config", "--workspace", p.ws.to_str().unwrap(), "--json"])
        .output()
        .unwrap());
    let config: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(config["sandbox"]["mode"]["value"], "read-only", "{config}");
    assert_eq!(
        config["sandbox"]["deny_read"],
        json!(["private"]),
        "{config}"
    );
}

#[test]
fn a_machine_that_cannot_confine_refuses_the_run_and_names_sandbox_off() {
    let p = place();
    let mut c = command(&p.ws);
    c.args([
        "run",
        "--workspace",
        p.ws.to_str().unwrap(),
        "--prompt",
        "x",
        "--approval",
        "auto",
    ])
    .env("TROUPE_SANDBOX_MECHANISM", "none-such")
    .env_remove("TROUPE_SANDBOX");
    let out = ran(c.output().unwrap());
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("--sandbox off"), "{out:#?}");
    assert!(out.stderr.contains("[sandbox_unavailable]"), "{out:#?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    // Refused before any state: only the test's own protocol file is there.
    assert!(!p.ws.join(".troupe/events.jsonl").exists());
    assert!(!p.ws.join(".troupe/run.lock").exists());
}

#[test]
fn a_bad_sandbox_setting_is_a_usage_error_naming_file_and_line() {
    let p = place();
    std::fs::write(p.ws.join("troupe.toml"), "[sandbox]\nmode = \"loose\"\n").unwrap();
    let out = ran(command(&p.ws)
        .args(["config", "--workspace", p.ws.to_str().unwrap()])
        .output()
        .unwrap());
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("troupe.toml"), "{out:#?}");
    assert!(out.stderr.contains("troupe.toml:2:"), "{out:#?}");
    assert!(out.stderr.contains("unknown sandbox mode"), "{out:#?}");
    std::fs::write(
        p.ws.join("troupe.toml"),
        "[sandbox]\nnetwork = \"sometimes\"\n",
    )
    .unwrap();
    let out = ran(command(&p.ws)
        .args(["config", "--workspace", p.ws.to_str().unwrap()])
        .output()
        .unwrap());
    assert_eq!(out.code, 2, "{out:#?}");
    let out = ran(command(&p.ws)
        .args([
            "run",
            "--workspace",
            p.ws.to_str().unwrap(),
            "--prompt",
            "x",
            "--sandbox",
            "loose",
        ])
        .output()
        .unwrap());
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("unknown sandbox mode"), "{out:#?}");
}

#[test]
fn every_escape_is_refused_under_the_bubblewrap_fallback_too() {
    if !std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("bwrap").is_file())
    {
        eprintln!("notice: bwrap is not installed; the bubblewrap fallback is not tested here");
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let p = place();
    let out = run_with(&p, port, &[], Some("bubblewrap"));
    assert_refused(&p, port, &out, "bubblewrap");
}
