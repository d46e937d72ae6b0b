//! The API key stays out of everything a model, a command or a file under `.troupe/` can see,
//! through the real binary: troupe's own `/proc/<pid>/environ` does not show it, and a key read
//! from `<workspace>/.env` by a tool (read_file, shell, a background job) reaches neither the
//! model server, nor the transcript, the audit, the job records or the terminal.

use std::path::Path;

use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{command, ran, Ran};

const KEY: &str = "sk-proj-Hv3kQ9wZ7rT2yU5iO8pA1sD4";
const ANTHROPIC_KEY: &str = "sk-ant-api03-Lm6nB9vC2xZ5aS8dF1gH";
const AZURE_KEY: &str = "azk-4f1d9c0b7e2a6d3c8b5e1f0a9d7c6b2e";

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// No piece of `key` longer than 8 characters (the `sk-proj-` / `sk-ant-` prefix is public).
fn assert_no_piece_of(key: &str, text: &str, place: &str) {
    for len in 9..=key.len() {
        for start in 0..=key.len() - len {
            let piece = &key[start..start + len];
            assert!(
                !text.contains(piece),
                "{place} leaks {piece:?} of the key:\n{text}"
            );
        }
    }
}

/// Runs `troupe run` off the async runtime so a mock server keeps serving.
async fn run(ws: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = command(ws);
    c.args([
        "run",
        "--workspace",
        ws.to_str().unwrap(),
        "--approval",
        "auto",
    ])
    .args(args)
    .stdin(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_read_the_key_from_troupes_own_environment() {
    // Unconfined, so that the command can read troupe's environment at all: what is checked
    // is that the key was taken out of it (confined, reading it is refused outright: below).
    let (_dir, ws) = workspace();
    // The shell's parent is troupe itself: its environment block, as the kernel shows it.
    let script = json!({"responses": [
        {"tool_calls": [{"name": "shell", "arguments": {
            "command": "tr '\\0' '\\n' < /proc/$PPID/environ > environ.txt; echo \"own=${OPENAI_API_KEY:-unset}\" >> environ.txt"}}]},
        {"text": "done"}
    ]});
    std::fs::write(ws.join("script.json"), script.to_string()).unwrap();
    let out = run(
        &ws,
        &[
            "--prompt",
            "look",
            "--model-script",
            "script.json",
            "--sandbox",
            "off",
        ],
        &[
            ("OPENAI_API_KEY", KEY),
            ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
            ("AZURE_OPENAI_API_KEY", AZURE_KEY),
            ("TROUPE_TEST_MARKER", "visible"),
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    let environ = std::fs::read_to_string(ws.join("environ.txt")).unwrap();
    // The command did read troupe's environment (the marker is there)...
    assert!(
        environ.lines().any(|l| l == "TROUPE_TEST_MARKER=visible"),
        "{environ}"
    );
    // ...and neither key is in it, nor in the command's own environment.
    assert!(environ.lines().any(|l| l == "own=unset"), "{environ}");
    assert!(!environ.contains("OPENAI_API_KEY="), "{environ}");
    assert!(!environ.contains("ANTHROPIC_API_KEY="), "{environ}");
    assert!(!environ.contains("AZURE_OPENAI_API_KEY="), "{environ}");
    assert_no_piece_of(KEY, &environ, "/proc/<troupe>/environ");
    assert_no_piece_of(ANTHROPIC_KEY, &environ, "/proc/<troupe>/environ");
    assert_no_piece_of(AZURE_KEY, &environ, "/proc/<troupe>/environ");
}

fn tool_calls(calls: &[(&str, Value)]) -> ResponseTemplate {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": calls}}]
    }))
}

fn answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}]
    }))
}

/// Every file under `dir`, with its bytes.
fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files.extend(files_under(&entry.path()));
        } else if kind.is_file() {
            files.push((entry.path(), std::fs::read(entry.path()).unwrap()));
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_a_tool_prints_reaches_neither_the_model_nor_any_file_of_troupe() {
    let server = MockServer::start().await;
    let mount = |response: ResponseTemplate, times: Option<u64>| {
        let mock = Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(response);
        match times {
            Some(n) => mock.up_to_n_times(n),
            None => mock,
        }
    };
    mount(
        tool_calls(&[
            ("read_file", json!({"path": ".env"})),
            ("shell", json!({"command": "cat .env"})),
            (
                "shell",
                json!({"command": "cat .env", "run_in_background": true}),
            ),
        ]),
        Some(1),
    )
    .mount(&server)
    .await;
    mount(answer("done"), Some(1)).mount(&server).await;
    // The job's completion comes back as an event: one more turn.
    mount(answer("ok"), None).mount(&server).await;

    let (_dir, ws) = workspace();
    std::fs::write(
        ws.join(".env"),
        format!(
            "OPENAI_API_KEY={KEY}\nOPENAI_MODEL=m\nOPENAI_BASE_URL={}/v1\n",
            server.uri()
        ),
    )
    .unwrap();
    // Unconfined: the sandbox would not let the command read .env at all (tested in
    // sandbox.rs); here the redaction of what a command prints is under test.
    let out = run(
        &ws,
        &[
            "--prompt",
            "show me the config",
            "--sandbox",
            "off",
            "--trust-workspace",
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_no_piece_of(KEY, &out.stdout, "stdout");
    assert_no_piece_of(KEY, &out.stderr, "stderr");

    // What the model server was sent: the key in the Authorization header only.
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests.len(),
        4,
        "tools, done, the job's event, the end-of-run memory extraction"
    );
    for request in &requests {
        assert_eq!(
            request.headers.get("authorization").unwrap(),
            &format!("Bearer {KEY}")
        );
        assert_no_piece_of(
            KEY,
            &String::from_utf8_lossy(&request.body),
            "a model request",
        );
    }
    let last = String::from_utf8_lossy(&requests[2].body).into_owned();
    // read_file, shell and the job's event each carried the redacted line.
    assert_eq!(
        last.matches("OPENAI_API_KEY=[redacted]").count(),
        3,
        "{last}"
    );

    // Nothing troupe wrote holds it: transcripts, audit, job records, everything.
    let files = files_under(&ws.join(".troupe"));
    let names: Vec<String> = files
        .iter()
        .map(|(path, _)| path.strip_prefix(&ws).unwrap().display().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with(".troupe/jobs/")),
        "{names:?}"
    );
    assert!(
        names.contains(&".troupe/transcripts/lead.jsonl".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&".troupe/audit.jsonl".to_owned()),
        "{names:?}"
    );
    for (path, bytes) in &files {
        assert_no_piece_of(
            KEY,
            &String::from_utf8_lossy(bytes),
            &path.display().to_string(),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_command_cannot_look_into_troupes_process_at_all() {
    let (_dir, ws) = workspace();
    // Its environment and its memory (where the key lives) are out of reach: the sandbox
    // scopes the command away from every process outside it.
    let script = json!({"responses": [
        {"tool_calls": [{"name": "shell", "arguments": {
            "command": "cat /proc/$PPID/environ > environ.txt 2> environ.err; \
                        head -c 16 /proc/$PPID/mem > mem.txt 2> mem.err; \
                        echo \"environ=$(wc -c < environ.txt) mem=$(wc -c < mem.txt)\" > sizes.txt"}}]},
        {"text": "done"}
    ]});
    std::fs::write(ws.join("script.json"), script.to_string()).unwrap();
    let out = run(
        &ws,
        &["--prompt", "look", "--model-script", "script.json"],
        &[("OPENAI_API_KEY", KEY), ("TROUPE_TEST_MARKER", "visible")],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    let sizes = std::fs::read_to_string(ws.join("sizes.txt")).unwrap();
    assert_eq!(sizes.trim(), "environ=0 mem=0", "{sizes}");
    let err = std::fs::read_to_string(ws.join("environ.err")).unwrap();
    assert!(err.contains("Permission denied"), "{err}");
}
