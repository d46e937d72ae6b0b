//! What a run prints by default and a few short texts, through the binary: formatted lines
//! only, each once — its warnings as `troupe: …` notices, not log records with a time and a
//! module path, a retry once (as its event line), a telemetry failure without a debug dump —
//! and the log records back with `-v` or `RUST_LOG`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{command, ran, Ran};

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// A line the tracing formatter wrote: a level then a module path (`WARN troupe::agent::usage:`).
fn log_records(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|line| {
            ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"]
                .iter()
                .any(|level| line.contains(&format!(" {level} ")))
                || line.contains("troupe::")
        })
        .collect()
}

fn count(stderr: &str, needle: &str) -> usize {
    stderr.lines().filter(|line| line.contains(needle)).count()
}

const USAGE: &str = r#"{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}"#;

/// A workspace with a broken agent definition, and a script that reports token usage (so that
/// a cost budget meets a model without a price).
fn unpriced_workspace() -> (tempfile::TempDir, PathBuf) {
    let (dir, ws) = workspace();
    std::fs::create_dir(ws.join("agents")).unwrap();
    std::fs::write(
        ws.join("agents/broken.md"),
        "---\nname: broken\ndescription: x\ncolour: red\n---\n",
    )
    .unwrap();
    let usage: Value = serde_json::from_str(USAGE).unwrap();
    let script = json!({"responses": [
        {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*.json"}}], "usage": usage},
        {"text": "All done.", "usage": usage},
    ]});
    std::fs::write(ws.join("script.json"), script.to_string()).unwrap();
    (dir, ws)
}

fn scripted_run(ws: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = command(ws);
    c.args(args)
        .args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args(["--model-script", ws.join("script.json").to_str().unwrap()])
        .args(["--approval", "auto", "--max-cost", "5"])
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    ran(c.output().unwrap())
}

#[test]
fn a_run_prints_notices_not_log_records_and_each_once() {
    let (_dir, ws) = unpriced_workspace();
    let out = scripted_run(&ws, &[], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "All done.\n");
    assert_eq!(log_records(&out.stderr), Vec::<&str>::new(), "{out:#?}");
    assert_eq!(count(&out.stderr, "has no price"), 1, "{out:#?}");
    assert_eq!(count(&out.stderr, "agents/broken.md"), 1, "{out:#?}");
    for notice in out
        .stderr
        .lines()
        .filter(|l| l.contains("has no price") || l.contains("agents/broken.md"))
    {
        assert!(notice.starts_with("troupe: "), "{notice:?}");
    }
    assert!(
        out.stderr
            .contains("troupe: model \"scripted\" has no price: its tokens count 0"),
        "{out:#?}"
    );
    // The formatted lines of the run are all there.
    assert!(out.stderr.contains("lead     says: All done."), "{out:#?}");
}

#[test]
fn verbose_or_rust_log_bring_the_log_records_back() {
    let (_dir, ws) = unpriced_workspace();
    let verbose = scripted_run(&ws, &["-v"], &[]);
    assert_eq!(verbose.code, 0, "{verbose:#?}");
    let records = log_records(&verbose.stderr);
    assert!(
        records
            .iter()
            .any(|l| l.contains("WARN troupe::agent::usage") && l.contains("has no price")),
        "{verbose:#?}"
    );
    assert!(
        records.iter().any(|l| l.contains("agents/broken.md")),
        "{verbose:#?}"
    );

    let (_dir, ws) = unpriced_workspace();
    let logged = scripted_run(&ws, &[], &[("RUST_LOG", "warn")]);
    assert_eq!(logged.code, 0, "{logged:#?}");
    assert!(
        log_records(&logged.stderr)
            .iter()
            .any(|l| l.contains("WARN troupe::agent::usage")),
        "{logged:#?}"
    );
}

#[test]
fn a_telemetry_failure_is_one_plain_line_without_a_debug_dump() {
    // A loopback port nothing listens on: the collector refuses the connection.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_dir, ws) = unpriced_workspace();
    let endpoint = format!("http://127.0.0.1:{port}");
    let out = scripted_run(&ws, &[], &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    assert_eq!(out.code, 0, "{out:#?}");
    let said: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("telemetry"))
        .collect();
    assert_eq!(said.len(), 1, "{out:#?}");
    assert!(
        said[0].starts_with("troupe: telemetry: ")
            && said[0].contains("spans were not exported to")
            && said[0].ends_with("the request failed: Connection refused"),
        "{out:#?}"
    );
    for dump in ["reqwest::Error", "kind:", "{", "Os {"] {
        assert!(!said[0].contains(dump), "{dump}: {out:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_one_line() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string("boom"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Recovered."}}],
        })))
        .mount(&server)
        .await;
    let (_dir, ws) = workspace();
    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "hi"])
        .args(["--approval", "deny", "--no-memory"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_MODEL", "m")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "Recovered.\n");
    assert_eq!(count(&out.stderr, "retrying"), 1, "{out:#?}");
    assert_eq!(
        count(
            &out.stderr,
            "lead     model m failed (attempt 1), retrying in"
        ),
        1,
        "{out:#?}"
    );
    assert_eq!(log_records(&out.stderr), Vec::<&str>::new(), "{out:#?}");
}

// ---- Short texts ----

#[test]
fn a_start_without_model_configuration_names_the_ways_forward() {
    let (_dir, ws) = workspace();
    let out = ran(command(&ws)
        .args([
            "run",
            "--prompt",
            "hello",
            "--workspace",
            ws.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap());
    super::support::assert_fails(&out, 2, "missing model configuration: OPENAI_API_KEY");
    for needle in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_MODEL",
        "`troupe demo`",
        "--model-script FILE",
        "`troupe init`",
    ] {
        assert!(out.stderr.contains(needle), "{needle}: {out:#?}");
    }

    // Asked for Anthropic, it names Anthropic's variables once, and the ways forward.
    let out = ran(command(&ws)
        .args([
            "run",
            "--prompt",
            "hello",
            "--workspace",
            ws.to_str().unwrap(),
        ])
        .args(["--provider", "anthropic"])
        .stdin(Stdio::null())
        .output()
        .unwrap());
    super::support::assert_fails(&out, 2, "missing model configuration: ANTHROPIC_API_KEY");
    assert_eq!(
        out.stderr.matches("ANTHROPIC_API_KEY").count(),
        1,
        "{out:#?}"
    );
    assert!(out.stderr.contains("`troupe demo`"), "{out:#?}");
    assert!(out.stderr.contains("`troupe init`"), "{out:#?}");
}

#[test]
fn mailbox_lists_oldest_first_across_states_then_by_id() {
    let (_dir, ws) = workspace();
    let mailbox = ws.join(".troupe/mailboxes/writer");
    // (state, id, time): the file names' order and the states' order are not the times'.
    let messages = [
        (
            "ready",
            "00000000-0000-4000-8000-000000000001",
            "2026-01-01T10:00:03.000Z",
        ),
        (
            "done",
            "00000000-0000-4000-8000-000000000002",
            "2026-01-01T10:00:02.000Z",
        ),
        (
            "done",
            "00000000-0000-4000-8000-000000000009",
            "2026-01-01T10:00:01.000Z",
        ),
        (
            "done",
            "00000000-0000-4000-8000-000000000003",
            "2026-01-01T10:00:01.000Z",
        ),
    ];
    for (state, id, at) in messages {
        let folder = mailbox.join(state);
        std::fs::create_dir_all(&folder).unwrap();
        let message = json!({"id": id, "sender": "lead", "recipient": "writer",
            "kind": "task", "content": format!("sent at {at}"), "created_at_utc": at});
        std::fs::write(folder.join(format!("{id}.json")), message.to_string()).unwrap();
    }
    let out = super::support::troupe_in(&ws, &["mailbox", "writer", "--json"]);
    let listed: Vec<String> = super::support::json(&out)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        listed,
        [
            "00000000-0000-4000-8000-000000000003",
            "00000000-0000-4000-8000-000000000009",
            "00000000-0000-4000-8000-000000000002",
            "00000000-0000-4000-8000-000000000001",
        ],
        "{out:#?}"
    );
}

#[test]
fn an_mcp_server_whose_program_is_not_installed_is_said_not_found() {
    let (_dir, ws) = workspace();
    std::fs::write(
        ws.join("troupe.toml"),
        "[[mcp_servers]]\nname = \"gh\"\ncommand = \"troupe-test-no-such-mcp-program\"\n",
    )
    .unwrap();
    let out = super::support::troupe_in(&ws, &["mcp", "list", "--trust-workspace"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.stdout,
        "gh (stdio): failed — MCP server gh could not start: program \
         \"troupe-test-no-such-mcp-program\" not found on PATH\n",
        "{out:#?}"
    );
    assert!(!out.stdout.contains("confined"), "{out:#?}");
}

#[test]
fn the_readme_says_what_a_person_does_with_troupe_before_its_vocabulary() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let first = readme
        .split("\n\n")
        .nth(1)
        .expect("a paragraph after the title");
    assert!(
        first.starts_with("troupe runs a team of LLM agents on your repository."),
        "{first}"
    );
    for plain in [
        "lead",
        "teammates",
        "in parallel",
        "approve",
        "restart loses nothing",
    ] {
        assert!(first.contains(plain), "{plain}: {first}");
    }
    for vocabulary in ["mailbox", "protocol", "quarantine", "idempotent"] {
        assert!(!first.contains(vocabulary), "{vocabulary}: {first}");
    }
}
