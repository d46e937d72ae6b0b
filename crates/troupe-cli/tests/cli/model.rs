//! `troupe run` against a Chat Completions server on 127.0.0.1 (wiremock): configuration
//! precedence (flag > environment > `<workspace>/.env`), the answer on stdout, model failures as
//! one-line errors with exit 1, and the approval modes with a scripted model.

use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{assert_fails, command, ran, Ran};

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

async fn server(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
    }))
}

/// Runs `troupe run` in a blocking task so the mock server keeps serving.
async fn run(ws: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = command(ws);
    c.args(["run", "--workspace", ws.to_str().unwrap()])
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap()
}

async fn bodies(server: &MockServer) -> Vec<(Value, String)> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let auth = r
                .headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            (serde_json::from_slice(&r.body).unwrap(), auth)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dotenv_fills_in_the_environment_wins_and_the_answer_is_on_stdout() {
    let server = server(answer("All done.")).await;
    let (_dir, ws) = workspace();
    std::fs::write(
        ws.join(".env"),
        format!(
            "OPENAI_API_KEY=sk-from-dotenv\nOPENAI_MODEL=model-from-dotenv\nOPENAI_BASE_URL={}/v1\n",
            server.uri()
        ),
    )
    .unwrap();
    // No memory extraction at the end: one request to count.
    // The base URL comes from the workspace's .env: the workspace must be trusted.
    let out = run(
        &ws,
        &["--prompt", "hi", "--no-memory", "--trust-workspace"],
        &[("OPENAI_MODEL", "model-from-env")],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "All done.\n");
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0["model"], "model-from-env");
    assert_eq!(sent[0].1, "Bearer sk-from-dotenv");
    assert!(sent[0].0["messages"][0]["content"]
        .as_str()
        .unwrap()
        .starts_with("You are lead"));

    // A flag beats both.
    let out = run(
        &ws,
        &[
            "--prompt",
            "hi",
            "--model",
            "model-from-flag",
            "--trust-workspace",
        ],
        &[("OPENAI_MODEL", "model-from-env")],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(bodies(&server).await[1].0["model"], "model-from-flag");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_exit_1_with_one_line_and_no_key() {
    let server = server(ResponseTemplate::new(401).set_body_json(json!({
        "error": {"message": "Incorrect API key provided: sk-secret-123", "type": "invalid_request_error"}
    })))
    .await;
    let (_dir, ws) = workspace();
    let base = format!("{}/v1", server.uri());
    // `--approval deny`: without a terminal, `ask` would add its notice to stderr.
    let out = run(
        &ws,
        &["--prompt", "hi", "--approval", "deny"],
        &[
            ("OPENAI_API_KEY", "sk-secret-123"),
            ("OPENAI_MODEL", "m"),
            ("OPENAI_BASE_URL", &base),
        ],
    )
    .await;
    // The run's view shows the failed call as it happens; the error is the last line.
    assert_eq!(out.code, 1, "{out:#?}");
    assert_eq!(out.stdout, "", "{out:#?}");
    assert!(
        out.stderr
            .contains("lead     model call failed [model_auth]"),
        "{out:#?}"
    );
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("troupe: ") && last.ends_with("[model_auth]"),
        "{out:#?}"
    );
    assert!(!out.stderr.contains("panicked"), "{out:#?}");
    assert!(!out.stderr.contains("sk-secret-123"), "{out:#?}");
    // The server echoed the key; the event stream has the failure, never the key.
    let events = std::fs::read_to_string(ws.join(".troupe/events.jsonl")).unwrap();
    assert!(
        events.contains("\"kind\":\"model_call_failed\""),
        "{events}"
    );
    assert!(!events.contains("sk-secret-123"), "{events}");
    assert_eq!(bodies(&server).await.len(), 1, "401 is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_modes_decide_a_scripted_write() {
    let (_dir, ws) = workspace();
    let script = ws.join("script.json");
    let write = json!({"responses": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hi"}}]},
        {"text": "finished"}
    ]});
    std::fs::write(&script, write.to_string()).unwrap();
    let script_arg = script.to_str().unwrap();

    // ask, with no terminal: denied, with guidance on how to allow.
    let out = run(
        &ws,
        &["--prompt", "write", "--model-script", script_arg],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "finished\n");
    assert!(!ws.join("out.txt").exists());
    assert!(out.stderr.contains("--approval auto"), "{out:#?}");

    // deny: denied.
    let out = run(
        &ws,
        &[
            "--prompt",
            "write",
            "--model-script",
            script_arg,
            "--approval",
            "deny",
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!ws.join("out.txt").exists());

    // auto: written, and every decision is audited.
    let out = run(
        &ws,
        &[
            "--prompt",
            "write",
            "--model-script",
            script_arg,
            "--approval",
            "auto",
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "hi");
    let audit = std::fs::read_to_string(ws.join(".troupe/audit.jsonl")).unwrap();
    let decisions: Vec<String> = audit
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["decision"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(decisions, ["deny", "deny", "allow"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_run_arguments_are_exit_2() {
    let (_dir, ws) = workspace();
    let out = run(
        &ws,
        &[
            "--prompt",
            "hi",
            "--request-ttl",
            "soon",
            "--model-script",
            "x.json",
        ],
        &[],
    )
    .await;
    assert_fails(&out, 2, "duration");
    let out = run(
        &ws,
        &[
            "--prompt",
            "hi",
            "--model-script",
            "/nonexistent/script.json",
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        !ws.join(".troupe").exists(),
        "nothing created before the run could start"
    );
}
