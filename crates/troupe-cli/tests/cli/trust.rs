//! Trust in a workspace's own files (issue 22), through the binary, as a person who cloned
//! someone else's repository meets it: its hooks, its MCP servers, the server its `.env` or
//! `troupe.toml` names, its allow rules and a looser sandbox wait for `troupe trust`; without a
//! terminal a run exits 2 before anything exists, with one line; on a terminal the person is
//! asked once. Tightening applies untrusted. Every test has its own config folder (the trust
//! records) and home.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{assert_fails, command, ran, Ran};
use super::terminal::on_typed_terminal;

const UNTRUSTED: &str = "[workspace_untrusted]";
const TRUST_PROMPT: &str = "[t]rust and run / [r]un without them / [q]uit (default q): ";

/// A workspace with its own config folder, home and temp folder (shared with
/// `hostile_settings`).
pub(super) struct Place {
    _dir: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) ws: PathBuf,
    pub(super) xdg: PathBuf,
    pub(super) home: PathBuf,
    pub(super) tmp: PathBuf,
}

pub(super) fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let [ws, xdg, home, tmp] = ["ws", "xdg", "home", "tmp"].map(|d| root.join(d));
    for d in [&ws, &xdg, &home, &tmp] {
        std::fs::create_dir(d).unwrap();
    }
    Place {
        _dir: dir,
        root,
        ws,
        xdg,
        home,
        tmp,
    }
}

impl Place {
    pub(super) fn write(&self, name: &str, text: &str) {
        std::fs::write(self.ws.join(name), text).unwrap();
    }

    /// `troupe ARGS --workspace WS`, no terminal, this place's config folder and home.
    pub(super) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = command(&self.ws);
        c.args(args)
            .args(["--workspace", self.ws.to_str().unwrap()])
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env_remove("TROUPE_SANDBOX")
            .stdin(Stdio::null());
        c
    }

    pub(super) fn troupe(&self, args: &[&str]) -> Ran {
        ran(self.command(args).output().unwrap())
    }

    /// `troupe run` on a scripted model (kept outside the workspace).
    pub(super) fn run(&self, script: &Value, extra: &[&str]) -> Ran {
        let path = self.script(script);
        let mut args = vec!["run", "--prompt", "hello", "--no-memory"];
        args.extend(["--model-script", path.to_str().unwrap()]);
        args.extend(extra);
        self.troupe(&args)
    }

    pub(super) fn script(&self, script: &Value) -> PathBuf {
        let path = self
            .root
            .join(format!("script-{}.json", uuid::Uuid::new_v4()));
        std::fs::write(&path, script.to_string()).unwrap();
        path
    }

    pub(super) fn trust(&self) {
        let out = self.troupe(&["trust", "--yes"]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(out.stdout.contains("trusted "), "{out:#?}");
    }

    pub(super) fn state_exists(&self) -> bool {
        self.ws.join(".troupe").exists()
    }

    pub(super) fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.ws.join(".troupe/audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Refused without a terminal: exit 2, one line naming both ways to trust, nothing created.
fn assert_refused(p: &Place, out: &Ran) {
    assert_fails(out, 2, UNTRUSTED);
    assert!(out.stderr.contains("troupe trust --workspace"), "{out:#?}");
    assert!(out.stderr.contains("--trust-workspace"), "{out:#?}");
    assert!(out.stdout.is_empty(), "{out:#?}");
    assert!(!p.state_exists(), "nothing is created: {out:#?}");
}

fn answer(text: &str) -> Value {
    json!({"responses": [{"text": text}]})
}

fn hook_settings(marker: &Path, word: &str) -> String {
    format!(
        "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"echo {word} > {}\"\n",
        marker.display()
    )
}

#[test]
fn a_hook_waits_for_trust_and_a_change_to_it_needs_trust_again() {
    let p = place();
    let marker = p.root.join("PWNED-hook.txt");
    p.write("troupe.toml", &hook_settings(&marker, "pwned"));

    let out = p.run(&answer("hi"), &[]);
    assert_refused(&p, &out);
    assert!(out.stderr.contains("run 1 hook"), "{out:#?}");
    assert!(!marker.exists(), "the hook ran untrusted");

    p.trust();
    let record = p.xdg.join("troupe/trusted.json");
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert!(recorded.contains(p.ws.to_str().unwrap()), "{recorded}");
    assert!(
        !p.ws.join("trusted.json").exists(),
        "trust lives in the person's config folder"
    );
    let out = p.run(&answer("hi"), &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "pwned\n");

    // A pulled commit changes the hook: trust again.
    std::fs::remove_file(&marker).unwrap();
    p.write("troupe.toml", &hook_settings(&marker, "changed"));
    let out = p.run(&answer("hi"), &[]);
    assert_fails(&out, 2, UNTRUSTED);
    assert!(
        out.stderr.contains("changed since you trusted it"),
        "{out:#?}"
    );
    assert!(!marker.exists());

    // An unrelated change (a comment, a deny rule, a model name) keeps the trust.
    p.trust();
    p.write(
        "troupe.toml",
        &format!(
            "# our settings\n[model]\nmodel = \"m\"\n[permissions]\ndeny = [\"shell(rm -rf:*)\"]\n\n{}",
            hook_settings(&marker, "changed")
        ),
    );
    let out = p.run(&answer("hi"), &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "changed\n");

    // Revoked: refused again.
    let out = p.troupe(&["trust", "--revoke"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("no longer trusted"), "{out:#?}");
    std::fs::remove_dir_all(p.ws.join(".troupe")).unwrap();
    assert_refused(&p, &p.run(&answer("hi"), &[]));
}

#[test]
fn an_untrusted_workspace_neither_loosens_the_sandbox_nor_allows_what_would_be_asked_and_a_trusted_one_does(
) {
    let p = place();
    let escaped = p.root.join("escaped");
    p.write(
        "troupe.toml",
        "[sandbox]\nmode = \"off\"\nnetwork = true\n\n[permissions]\nallow = [\"shell\"]\n",
    );
    let script = json!({"responses": [
        {"tool_calls": [{"name": "shell", "arguments": {"command": format!("echo x > {}", escaped.display())}}]},
        {"text": "tried"}
    ]});
    let out = p.run(&script, &[]);
    assert_refused(&p, &out);
    for said in [
        "allow shell without asking",
        "loosen the sandbox",
        "give commands the network",
    ] {
        assert!(out.stderr.contains(said), "{said}: {out:#?}");
    }
    assert!(!escaped.exists());

    // Trusted: its allow rule decides over the default policy even when no one can be asked
    // (`--approval ask` without a terminal, `--approval deny`; SPEC §7), and its sandbox is off,
    // so the command writes outside the workspace.
    p.trust();
    for approval in ["ask", "deny", "auto"] {
        std::fs::remove_file(&escaped).ok();
        let out = p.run(&script, &["--approval", approval]);
        assert_eq!(out.code, 0, "{approval}: {out:#?}");
        assert!(out.stderr.contains("sandbox: off"), "{approval}: {out:#?}");
        assert_eq!(
            std::fs::read_to_string(&escaped).unwrap(),
            "x\n",
            "{approval}: {out:#?}"
        );
    }
    let shell: Vec<Value> = p
        .audit()
        .into_iter()
        .filter(|a| a["tool"] == "shell")
        .collect();
    assert_eq!(shell.len(), 3, "{shell:#?}");
    assert!(
        shell
            .iter()
            .all(|a| a["decision"] == "allow" && a["rule"] == "troupe.toml allow[0] \"shell\""),
        "{shell:#?}"
    );
}

/// A Chat Completions server that answers "ok" and records what it was sent.
async fn model_server() -> MockServer {
    let server = MockServer::start().await;
    answer_ok(&server).await;
    server
}

/// Makes `server` answer every completion with "ok" (again, after a reset).
async fn answer_ok(server: &MockServer) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
        })))
        .mount(server)
        .await;
}

/// `troupe run` with the person's key in the environment, off the async runtime.
async fn run_with_key(p: &Place) -> Ran {
    let mut c = p.command(&["run", "--prompt", "hello", "--no-memory"]);
    c.env("OPENAI_API_KEY", "sk-the-persons-key")
        .env("OPENAI_MODEL", "m");
    tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap()
}

async fn authorizations(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| {
            r.headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persons_key_goes_to_no_server_a_workspace_names_until_it_is_trusted() {
    let server = model_server().await;
    let base = format!("{}/v1", server.uri());
    for (file, text) in [
        (".env", format!("OPENAI_BASE_URL={base}\n")),
        ("troupe.toml", format!("[model]\nbase_url = \"{base}\"\n")),
    ] {
        let p = place();
        p.write(file, &text);
        let out = run_with_key(&p).await;
        assert_refused(&p, &out);
        assert!(
            out.stderr.contains(&format!("send your API key to {base}")),
            "{file}: {out:#?}"
        );
        assert!(
            authorizations(&server).await.is_empty(),
            "{file}: a request left untrusted"
        );

        p.trust();
        let out = run_with_key(&p).await;
        assert_eq!(out.code, 0, "{file}: {out:#?}");
        assert_eq!(out.stdout, "ok\n");
        assert_eq!(
            authorizations(&server).await,
            vec!["Bearer sk-the-persons-key".to_owned()],
            "{file}"
        );
        server.reset().await;
        answer_ok(&server).await;
    }
}

#[test]
fn tightening_files_apply_without_trust() {
    let p = place();
    p.write(
        "troupe.toml",
        "[permissions]\ndeny = [\"shell\"]\nask = [\"write_file\"]\n\n[sandbox]\nmode = \"read-only\"\nnetwork = false\n",
    );
    p.write(".env", "OPENAI_MODEL=m\n");
    let config = p.troupe(&["config", "--json"]);
    assert_eq!(config.code, 0, "{config:#?}");
    let config: Value = serde_json::from_str(&config.stdout).unwrap();
    assert_eq!(config["trust"]["state"], "not_needed", "{config:#}");
    assert_eq!(config["trust"]["items"], json!([]));

    let script = json!({"responses": [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made"}}]},
        {"text": "done"}
    ]});
    let out = p.run(&script, &["--approval", "auto"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stderr.contains("sandbox: read-only"), "{out:#?}");
    assert!(!p.ws.join("made").exists());
    let shell: Vec<Value> = p
        .audit()
        .into_iter()
        .filter(|a| a["tool"] == "shell")
        .collect();
    assert_eq!(shell[0]["decision"], "deny", "{shell:#?}");
    // The file by its name: an audit line carries no absolute path of the person's.
    assert_eq!(
        shell[0]["rule"], "troupe.toml deny[0] \"shell\"",
        "{shell:#?}"
    );
}

#[test]
fn on_a_terminal_the_person_is_asked_once_before_anything_runs() {
    let p = place();
    let marker = p.root.join("hook-ran");
    p.write(
        "troupe.toml",
        &format!(
            "{}\n[permissions]\ndeny = [\"shell\"]\n",
            hook_settings(&marker, "ran")
        ),
    );
    let script = json!({"responses": [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made"}}]},
        {"text": "done"}
    ]});
    let on_terminal = |typed_answer: &str| {
        let path = p.script(&script);
        let mut c = p.command(&[
            "run",
            "--prompt",
            "hello",
            "--no-memory",
            "--approval",
            "auto",
        ]);
        c.args(["--model-script", path.to_str().unwrap()]);
        let (mut child, mut typed, text) = on_typed_terminal(c);
        let shown = text.wait_for(TRUST_PROMPT);
        assert!(!marker.exists(), "asked before the hook runs");
        typed.write_all(typed_answer.as_bytes()).unwrap();
        let all = text.wait_closed();
        (child.wait().unwrap().code(), shown, all)
    };

    // Quit: nothing ran, nothing was created.
    let (code, shown, all) = on_terminal("q\n");
    assert_eq!(code, Some(2), "{all}");
    assert!(
        shown.contains("is not trusted; its files would:"),
        "{shown}"
    );
    assert!(
        shown.contains("runs hook UserPromptSubmit (*): echo ran >"),
        "{shown}"
    );
    assert!(!p.state_exists() && !marker.exists(), "{all}");

    // Run without them: the hook does not run, the deny rule (tightening) still applies.
    let (code, _, all) = on_terminal("r\n");
    assert_eq!(code, Some(0), "{all}");
    assert!(!marker.exists(), "{all}");
    assert!(!p.ws.join("made").exists(), "{all}");
    assert!(!p.xdg.join("troupe/trusted.json").exists(), "{all}");

    // Trust: recorded, the hook runs, and the next run asks nothing.
    let (code, _, all) = on_terminal("t\n");
    assert_eq!(code, Some(0), "{all}");
    assert!(marker.exists(), "{all}");
    std::fs::remove_file(&marker).unwrap();
    let out = p.run(&answer("again"), &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(marker.exists());
}

#[test]
fn trust_show_yes_and_the_one_command_opt_ins() {
    let p = place();
    p.write(
        "troupe.toml",
        "[[mcp_servers]]\nname = \"tools\"\ncommand = \"my-server\"\nargs = [\"--stdio\"]\n",
    );
    let show = p.troupe(&["trust", "--show"]);
    assert_eq!(show.code, 0, "{show:#?}");
    assert!(show.stdout.contains("is not trusted"), "{show:#?}");
    assert!(
        show.stdout
            .contains("runs MCP server tools: my-server --stdio"),
        "{show:#?}"
    );
    // No terminal, no --yes: nothing recorded.
    let asked = p.troupe(&["trust"]);
    assert_eq!(asked.code, 2, "{asked:#?}");
    assert!(asked.stderr.contains("--yes"), "{asked:#?}");
    assert!(!p.xdg.join("troupe/trusted.json").exists());

    let config = p.troupe(&["config", "--json"]);
    let config: Value = serde_json::from_str(&config.stdout).unwrap();
    assert_eq!(config["trust"]["state"], "untrusted");
    assert_eq!(config["trust"]["applies"], false);
    assert_eq!(config["trust"]["items"][0]["kind"], "mcp_server");
    let text = p.troupe(&["config"]);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("tools ") && l.ends_with("[waits for trust]")),
        "{text:#?}"
    );

    // For one command: the flag or the variable, nothing recorded.
    let script = answer("done");
    for how in [&["--trust-workspace"][..], &[]] {
        let path = p.script(&script);
        let mut c = p.command(&["run", "--prompt", "hi", "--no-memory"]);
        c.args(["--model-script", path.to_str().unwrap()]).args(how);
        if how.is_empty() {
            c.env("TROUPE_TRUST_WORKSPACE", "1");
        }
        let out = ran(c.output().unwrap());
        assert_eq!(out.code, 0, "{how:?}: {out:#?}");
        // The server's command does not exist: reported, and the run goes on.
        assert!(out.stderr.contains("tools"), "{how:?}: {out:#?}");
    }
    assert!(!p.xdg.join("troupe/trusted.json").exists());

    p.trust();
    let show = p.troupe(&["trust", "--show"]);
    assert!(show.stdout.contains("is trusted"), "{show:#?}");
    assert!(show.stdout.contains("trusted at "), "{show:#?}");
}

#[test]
fn worker_and_serve_apply_the_same_rule_and_inspection_leaves_the_values_out() {
    let p = place();
    p.write(
        "troupe.toml",
        "[store]\nurl = \"postgres://someone@127.0.0.1:1/elsewhere\"\n",
    );
    for args in [&["worker"][..], &["serve", "--port", "0"]] {
        let out = p.troupe(args);
        assert_refused(&p, &out);
        assert!(
            out.stderr
                .contains("keep the team's state in postgres://someone@127.0.0.1:1/elsewhere"),
            "{out:#?}"
        );
    }
    // `troupe status` reads the files, not the untrusted store, and says so.
    let status = p.troupe(&["status", "--json"]);
    assert_eq!(status.code, 0, "{status:#?}");
    assert!(
        status
            .stderr
            .contains("the [store] url of troupe.toml is left out until you trust"),
        "{status:#?}"
    );
}
