//! The repository is hostile too (issue 39): what a workspace's own `troupe.toml` and `.env`
//! try beyond what the trust gate of `trust` covers, through the binary. Saving an allow rule at
//! an approval prompt trusts that entry only, not a hook written into the file meanwhile; a
//! `.env` that links out of the workspace, or does not parse, is refused without a word of its
//! content; an untrusted `.env` never switches the provider or key the person's own
//! environment chose; a workspace's cost limit and prices never loosen the person's own.
//! Every test has its own config folder (the trust records) and home.

use std::io::Write;

use serde_json::{json, Value};
use troupe::settings::trust::{digests, TrustItem, TrustKind};

use super::support::{assert_fails, ran, Ran};
use super::terminal::on_typed_terminal;
use super::trust::{place, Place};

const UNTRUSTED: &str = "[workspace_untrusted]";
const APPROVAL_PROMPT_END: &str = "/N] ";

impl Place {
    fn config_json(&self) -> Value {
        let out = self.troupe(&["config", "--json"]);
        assert_eq!(out.code, 0, "{out:#?}");
        serde_json::from_str(&out.stdout).unwrap()
    }
}

fn answer(text: &str) -> Value {
    json!({"responses": [{"text": text}]})
}

// Item 4: trust records only what the person saw.

#[test]
fn saving_an_allow_rule_trusts_that_entry_and_not_a_hook_written_meanwhile() {
    let p = place();
    let marker = p.root.join("PWNED-hook.txt");
    let hook = format!(
        "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"echo pwned > {}\"\n",
        marker.display()
    );
    let script = json!({"responses": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "hi\n"}}]},
        {"text": "done"}
    ]});
    let path = p.script(&script);
    let mut c = p.command(&["run", "--prompt", "go", "--no-memory", "--approval", "ask"]);
    c.args(["--model-script", path.to_str().unwrap()]);
    let (mut child, mut typed, text) = on_typed_terminal(c);
    let shown = text.wait_for(APPROVAL_PROMPT_END);
    assert!(shown.contains("[s]ave write_file"), "{shown}");
    // While the person reads the prompt, something (a command they allowed earlier) writes a
    // hook into the workspace's troupe.toml. They answer the prompt they see: save.
    p.write("troupe.toml", &hook);
    typed.write_all(b"s\n").unwrap();
    let all = text.wait_closed();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{all}");
    assert!(all.contains("saved allow write_file"), "{all}");
    assert!(!marker.exists(), "{all}");
    let saved = std::fs::read_to_string(p.ws.join("troupe.toml")).unwrap();
    assert!(saved.contains("[permissions]"), "{saved}");

    // The next run, with no one to ask: the hook was never trusted, so nothing runs.
    let out = p.run(&answer("hi"), &["--approval", "deny"]);
    assert_fails(&out, 2, UNTRUSTED);
    assert!(out.stderr.contains("run 1 hook"), "{out:#?}");
    assert!(!marker.exists(), "the hook ran: {out:#?}");
    let show = p.troupe(&["trust", "--show"]);
    let hook_line = show
        .stdout
        .lines()
        .find(|l| l.contains("runs hook UserPromptSubmit"));
    assert!(
        hook_line.is_some_and(|l| l.ends_with("(not trusted yet)")),
        "{show:#?}"
    );
    let allow_line = show
        .stdout
        .lines()
        .find(|l| l.contains("allows write_file"));
    assert!(
        allow_line.is_some_and(|l| !l.contains("not trusted yet")),
        "{show:#?}"
    );
    // And the save said so at the time.
    assert!(
        all.contains("trusted that entry only") && all.contains("run 1 hook"),
        "the save says what stays untrusted: {all}"
    );

    // The saved entry itself is trusted: without the hook, the workspace is.
    p.write(
        "troupe.toml",
        &saved.replace(&hook, "").replace("[[hooks]]", ""),
    );
    let config = p.config_json();
    assert_eq!(config["trust"]["state"], "trusted", "{config:#}");
    let out = p.run(&answer("hi"), &["--approval", "deny"]);
    assert_eq!(out.code, 0, "{out:#?}");
}

#[test]
fn a_trust_record_of_the_earlier_format_keeps_working() {
    let p = place();
    p.write("troupe.toml", "[permissions]\nallow = [\"glob\"]\n");
    // What troupe wrote before per-item records: one digest of the file's trust-requiring
    // content (the allow rule "glob").
    let items = [TrustItem::new(
        "troupe.toml",
        TrustKind::Allow,
        "allows glob".into(),
        "glob".into(),
    )];
    let digest = digests(&items)["troupe.toml"].clone();
    let folder = p.xdg.join("troupe");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("trusted.json"),
        json!({"version": 1, "workspaces": {p.ws.to_str().unwrap(): {
            "trusted_at_utc": "2026-12-01T00:00:00.000Z",
            "digests": {"troupe.toml": digest},
        }}})
        .to_string(),
    )
    .unwrap();
    assert_eq!(p.config_json()["trust"]["state"], "trusted");
    p.write(
        "troupe.toml",
        "[permissions]\nallow = [\"glob\", \"shell\"]\n",
    );
    assert_eq!(p.config_json()["trust"]["state"], "changed");
}

// Item 5: a `.env` out of the workspace, or one that does not parse.

/// The commands that read `.env`: a run and `troupe config`.
fn env_readers(p: &Place) -> Vec<Ran> {
    vec![
        p.run(&answer("hi"), &[]),
        p.troupe(&["config"]),
        p.troupe(&["trust", "--show"]),
    ]
}

#[test]
fn a_dotenv_linked_to_the_process_environment_is_refused_without_quoting_it() {
    let p = place();
    std::os::unix::fs::symlink("/proc/self/environ", p.ws.join(".env")).unwrap();
    for out in env_readers(&p) {
        assert_eq!(out.code, 2, "{out:#?}");
        assert!(
            out.stderr.contains(".env")
                && out.stderr.contains("symbolic link out of the workspace"),
            "{out:#?}"
        );
        for leaked in ["PATH=", "HOME=", "XDG_CONFIG_HOME", "Error parsing line"] {
            assert!(!out.stderr.contains(leaked), "{leaked}: {out:#?}");
        }
    }
    // A link to a file of the person's, out of the workspace: the same.
    let outside = p.root.join("my.env");
    std::fs::write(&outside, "OPENAI_MODEL=m\n").unwrap();
    std::fs::remove_file(p.ws.join(".env")).unwrap();
    std::os::unix::fs::symlink(&outside, p.ws.join(".env")).unwrap();
    let out = p.troupe(&["config"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("symbolic link out of the workspace"),
        "{out:#?}"
    );
    // A link inside the workspace is read.
    std::fs::write(p.ws.join("env.local"), "OPENAI_MODEL=m-linked\n").unwrap();
    std::fs::remove_file(p.ws.join(".env")).unwrap();
    std::os::unix::fs::symlink("env.local", p.ws.join(".env")).unwrap();
    let config = p.config_json();
    assert_eq!(config["model"]["model"]["value"], "m-linked", "{config:#}");
    // So is troupe.toml linked out of the workspace refused, naming it.
    std::os::unix::fs::symlink(&outside, p.ws.join("troupe.toml")).unwrap();
    let out = p.troupe(&["config"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("troupe.toml") && out.stderr.contains("symbolic link"),
        "{out:#?}"
    );
}

#[test]
fn a_dotenv_line_that_does_not_parse_is_named_by_number_never_quoted() {
    let p = place();
    p.write(
        ".env",
        "# keys\nOPENAI_MODEL=m\n\nOPENAI_API_KEY sk-secret-value-1234567890\n",
    );
    for out in env_readers(&p) {
        assert_eq!(out.code, 2, "{out:#?}");
        assert!(out.stderr.contains(".env"), "{out:#?}");
        assert!(out.stderr.contains("line 4"), "{out:#?}");
        for leaked in ["sk-secret", "OPENAI_API_KEY", "Error parsing line"] {
            assert!(!out.stderr.contains(leaked), "{leaked}: {out:#?}");
        }
    }
    // A FIFO in its place is refused at once, not waited on.
    std::fs::remove_file(p.ws.join(".env")).unwrap();
    let fifo = std::ffi::CString::new(p.ws.join(".env").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let out = p.troupe(&["config"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains(".env") && out.stderr.contains("FIFO"),
        "{out:#?}"
    );
}

// Item 6: an untrusted `.env` never switches the provider or key the person chose.

/// A loopback server that answers both an OpenAI Chat Completions call and an Anthropic
/// Messages call with "ok", and records what it was sent.
async fn both_providers() -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "model": "gpt-x",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}
        })))
        .mount(&server)
        .await;
    server
}

/// (path, credential header) of each request `server` received, all along.
async fn sent(server: &wiremock::MockServer) -> Vec<(String, String)> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| {
            let header = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
            let credential = header("authorization")
                .or_else(|| header("x-api-key"))
                .unwrap_or_default();
            (r.url.path().to_owned(), credential)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_dotenv_does_not_switch_the_persons_provider_and_key() {
    let server = both_providers().await;
    let p = place();
    // The person's own: Anthropic, by their key and model (and, for any OpenAI call, their own
    // config.toml's server, so that nothing leaves this machine).
    let folder = p.xdg.join("troupe");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("config.toml"),
        format!("[model]\nbase_url = \"{}/v1\"\n", server.uri()),
    )
    .unwrap();
    p.write(
        ".env",
        "OPENAI_MODEL=gpt-x\nOPENAI_API_KEY=sk-attacker-0123456789\n",
    );
    let persons = |args: &[&str]| {
        let mut c = p.command(args);
        c.env("ANTHROPIC_API_KEY", "sk-ant-the-persons-key")
            .env("ANTHROPIC_MODEL", "claude-x")
            .env("ANTHROPIC_BASE_URL", server.uri());
        c
    };
    let run = |extra: &'static [&'static str]| {
        let mut c = persons(&["run", "--prompt", "hello", "--no-memory"]);
        c.args(extra);
        c
    };
    let output = |mut c: std::process::Command| async move {
        tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
            .await
            .unwrap()
    };

    // Untrusted, no terminal: refused before any request, naming what the .env would do.
    let out = output(run(&[])).await;
    assert_fails(&out, 2, UNTRUSTED);
    assert!(
        out.stderr
            .contains("choose the provider openai instead of your anthropic"),
        "{out:#?}"
    );
    assert!(!out.stderr.contains("sk-attacker"), "{out:#?}");
    assert_eq!(sent(&server).await, []);
    // The review lists it (with the person's environment, which decides it).
    let show = ran(persons(&["trust", "--show"]).output().unwrap());
    assert!(
        show.stdout.contains(".env")
            && show
                .stdout
                .contains("chooses the provider openai instead of your anthropic (OPENAI_API_KEY)"),
        "{show:#?}"
    );

    // On a terminal, run without the workspace's trust-requiring values: the person's
    // Anthropic with the person's key.
    let (mut child, mut typed, text) = on_typed_terminal(run(&[]));
    text.wait_for("[q]uit (default q): ");
    typed.write_all(b"r\n").unwrap();
    let all = text.wait_closed();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{all}");
    assert_eq!(
        sent(&server).await[..],
        [(
            "/v1/messages".to_owned(),
            "sk-ant-the-persons-key".to_owned()
        )]
    );

    // Trusted (for this command): the workspace's .env applies as written.
    let out = output(run(&["--trust-workspace"])).await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        sent(&server).await[1..],
        [(
            "/v1/chat/completions".to_owned(),
            "Bearer sk-attacker-0123456789".to_owned()
        )]
    );

    // A person whose environment names no provider and holds no key: the key in .env is
    // theirs, and applies untrusted.
    let out = output(p.command(&["run", "--prompt", "hello", "--no-memory"])).await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        sent(&server).await[2..],
        [(
            "/v1/chat/completions".to_owned(),
            "Bearer sk-attacker-0123456789".to_owned()
        )]
    );
}

// Item 8: a workspace's cost limit and prices never loosen the person's own.

#[test]
fn a_workspace_neither_raises_the_persons_max_cost_nor_prices_below_the_persons_own() {
    let p = place();
    // The person's own: a budget, and prices for a local model and above the table's gpt-4.1.
    let folder = p.xdg.join("troupe");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("config.toml"),
        "[run]\nmax_cost = 0.5\n\n[prices.local]\ninput = 1\noutput = 1\n\n\
         [prices.\"gpt-4.1\"]\ninput = 10\noutput = 40\n",
    )
    .unwrap();
    // The workspace's: a budget two million times looser, and prices below the person's (the
    // gpt-4.1 one above troupe's table, which alone would not need trust).
    p.write(
        "troupe.toml",
        "[run]\nmax_cost = 1000000\n\n[prices.local]\ninput = 0\noutput = 0\n\n\
         [prices.\"gpt-4.1\"]\ninput = 3\noutput = 9\n",
    );

    let config = p.config_json();
    assert_eq!(config["trust"]["state"], "untrusted", "{config:#}");
    let mut kinds: Vec<&str> = config["trust"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["cost_limit", "prices", "prices"], "{config:#}");
    let text = p.troupe(&["config"]);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("max_cost ") && l.ends_with("[waits for trust]")),
        "{text:#?}"
    );

    // A run with no one to ask is refused: it would have run under the workspace's budget.
    let out = p.run(&answer("hi"), &[]);
    assert_fails(&out, 2, UNTRUSTED);
    assert!(out.stderr.contains("raise your [run] max_cost"), "{out:#?}");
    assert!(
        out.stderr
            .contains("lower the prices --max-cost counts with"),
        "{out:#?}"
    );

    // What reads the files without trust counts with the person's prices: 1M tokens in and
    // out of `local` at $1 + $1, and of gpt-4.1 at $10 + $40.
    std::fs::create_dir_all(p.ws.join(".troupe")).unwrap();
    let record = |model: &str| {
        json!({"at": "2026-12-01T08:00:00.000Z", "run_id": "run-1", "agent": "lead",
               "model": model, "purpose": "turn", "prompt_tokens": 1_000_000,
               "completion_tokens": 1_000_000, "total_tokens": 2_000_000})
        .to_string()
    };
    std::fs::write(
        p.ws.join(".troupe/usage.jsonl"),
        format!("{}\n{}\n", record("local"), record("gpt-4.1")),
    )
    .unwrap();
    let usage = p.troupe(&["usage", "--json"]);
    assert_eq!(usage.code, 0, "{usage:#?}");
    let usage: Value = serde_json::from_str(&usage.stdout).unwrap();
    assert_eq!(usage["total"]["cost_usd"], json!(52.0), "{usage:#}");

    // Once trusted, the workspace's values apply as written.
    let trusted = p.troupe(&["usage", "--json", "--trust-workspace"]);
    let trusted: Value = serde_json::from_str(&trusted.stdout).unwrap();
    assert_eq!(trusted["total"]["cost_usd"], json!(12.0), "{trusted:#}");
}
