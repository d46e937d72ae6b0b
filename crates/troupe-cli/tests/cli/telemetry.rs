//! OpenTelemetry traces of real runs, read back from a real receiver (Arize Phoenix, see
//! `otel_receiver`): a team's run on files is one trace with turn, model-call, tool-call and
//! message spans carrying the GenAI attributes and troupe's own; a shared team's run (lead and
//! `troupe worker`) is one trace too, the worker's turns in it under the run's span; contents
//! are exported only when asked, redacted; a receiver that is down or silent neither fails nor
//! holds up a run, and what was dropped is said once.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::otel_receiver::{named, project, receiver};
use super::sse_server::SseServer;
use super::support::{command, ran, Ran};

const KEY: &str = "sk-telemetry-team-0123456789";

fn env_pairs(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The demo's team flow on files against the streaming mock, with `env` added.
async fn team_run(ws: &std::path::Path, base_url: &str, env: &[(&str, &str)]) -> Ran {
    let mut all = vec![
        ("OPENAI_API_KEY", KEY),
        ("OPENAI_MODEL", "gpt-stream"),
        ("OPENAI_BASE_URL", base_url),
    ];
    all.extend_from_slice(env);
    super::team_flow::run(
        ws,
        &[
            "--prompt",
            troupe::demo::PROMPT,
            "--approval",
            "auto",
            "--sandbox",
            "off",
            "--no-memory",
            "--max-turns",
            "10",
        ],
        &all,
    )
    .await
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn trace_ids(spans: &[Value]) -> std::collections::BTreeSet<String> {
    spans
        .iter()
        .map(|s| s["context"]["trace_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_run_is_one_trace_with_turn_model_tool_and_message_spans() {
    let Some(receiver) = receiver() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let server = SseServer::start().await;
    server.respond_with(super::streaming::team);
    let project = project("team-run");
    let otel = receiver.env(&project);
    let out = team_run(&ws, &server.base_url, &env_pairs(&otel)).await;
    super::team_flow::assert_done(&ws, &out);
    assert!(!out.stderr.contains("telemetry"), "{}", out.stderr);

    // The run's own span is the last one exported.
    let spans = receiver.spans_when(&project, |s| !named(s, "invoke_agent troupe").is_empty());
    assert_eq!(trace_ids(&spans).len(), 1, "one trace: {spans:#?}");
    let root = named(&spans, "invoke_agent troupe")[0];
    let root_id = root["context"]["span_id"].clone();
    assert_eq!(root["parent_id"], Value::Null);
    assert_eq!(root["status_code"], "OK");
    // Every turn hangs under the run; every call under a turn.
    let turns: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("invoke_agent ") && s != &root)
        .collect();
    assert!(
        turns.iter().all(|t| t["parent_id"] == root_id),
        "{turns:#?}"
    );
    let turn_ids: Vec<&Value> = turns.iter().map(|t| &t["context"]["span_id"]).collect();
    for span in &spans {
        let name = span["name"].as_str().unwrap();
        if name.starts_with("chat ") || name.starts_with("execute_tool ") {
            assert!(turn_ids.contains(&&span["parent_id"]), "{span:#}");
        }
    }
    let agents: std::collections::BTreeSet<&str> = turns
        .iter()
        .map(|t| attr(t, "gen_ai.agent.name").as_str().unwrap())
        .collect();
    assert_eq!(agents, ["lead", "writer"].into());
    let turn = named(&spans, "invoke_agent writer")[0];
    assert_eq!(attr(turn, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(
        attr(turn, "gen_ai.agent.id").as_str().unwrap(),
        format!("{}/writer", ws.file_name().unwrap().to_str().unwrap())
    );

    // A model call: the GenAI attributes.
    let chat = named(&spans, "chat gpt-stream");
    assert!(chat.len() >= 6, "{chat:#?}");
    let call = chat[0];
    assert_eq!(attr(call, "gen_ai.operation.name"), "chat");
    assert_eq!(attr(call, "gen_ai.provider.name"), "openai");
    assert_eq!(attr(call, "gen_ai.request.model"), "gpt-stream");
    assert_eq!(attr(call, "gen_ai.response.model"), "gpt-stream");
    assert_eq!(attr(call, "gen_ai.usage.input_tokens"), 10);
    assert_eq!(attr(call, "gen_ai.usage.output_tokens"), 5);
    assert!(
        attr(call, "gen_ai.response.finish_reasons").is_array(),
        "{call:#}"
    );

    // Tool calls: the decision and its source, the plan gate, the sandbox.
    let writes = named(&spans, "execute_tool write_file");
    let mut decided: Vec<(String, String, String)> = writes
        .iter()
        .map(|w| {
            assert_eq!(attr(w, "gen_ai.tool.name"), "write_file");
            assert!(attr(w, "gen_ai.tool.call.id").is_string());
            assert_eq!(attr(w, "troupe.sandbox.mode"), "off");
            (
                attr(w, "troupe.permission.decision")
                    .as_str()
                    .unwrap()
                    .to_owned(),
                attr(w, "troupe.permission.source")
                    .as_str()
                    .unwrap()
                    .to_owned(),
                attr(w, "troupe.plan_gate.outcome")
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    decided.sort();
    assert_eq!(decided[0].0, "allow");
    assert_eq!(decided[0].2, "passed");
    assert_eq!(
        (
            decided[1].0.as_str(),
            decided[1].1.as_str(),
            decided[1].2.as_str()
        ),
        ("deny", "plan_gate", "denied")
    );
    let denied = writes
        .iter()
        .find(|w| attr(w, "troupe.permission.decision") == "deny")
        .unwrap();
    assert_eq!(denied["status_code"], "ERROR");
    assert_eq!(attr(denied, "error.type"), "permission_denied");

    // A message: its span under the sender's tool call, its id derived from the message id; the
    // turn that handles it links to it.
    let sends = named(&spans, "send_message writer");
    assert!(!sends.is_empty(), "{spans:#?}");
    let task = sends
        .iter()
        .find(|s| attr(s, "troupe.message.kind") == "task")
        .unwrap();
    assert_eq!(attr(task, "troupe.message.sender"), "lead");
    let spawn = named(&spans, "execute_tool spawn_teammate")[0];
    assert_eq!(task["parent_id"], spawn["context"]["span_id"]);
    let message_id = attr(task, "troupe.message.id").as_str().unwrap();
    let handler = spans
        .iter()
        .find(|s| {
            s["name"] == "invoke_agent writer"
                && attr(s, "troupe.message.ids")
                    .as_array()
                    .is_some_and(|ids| ids.iter().any(|id| id == message_id))
        })
        .unwrap_or_else(|| panic!("no writer turn handles {message_id}: {spans:#?}"));
    // Phoenix keeps no links (its OTLP view gives `links: null`), so the link's target is
    // checked through the id it is derived from: the handler names the message, and the
    // message's span id is the one derived from its id (the library's tests check the link).
    let derived =
        troupe::telemetry::message_span_id(troupe_wire::MessageId::parse(message_id).unwrap());
    assert_eq!(task["context"]["span_id"], derived.to_string());
    assert!(handler["links"].is_null() || handler["links"].is_array());

    // Contents are not exported unless asked; the key never is.
    let all = serde_json::to_string(&spans).unwrap();
    assert!(!all.contains(KEY));
    for key in [
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.output.messages",
        "troupe.message.content",
    ] {
        assert!(
            spans.iter().all(|s| attr(s, key).is_null()),
            "{key} exported without being asked"
        );
    }
}

/// A script whose lead reads a file that holds the key, then answers.
fn key_reading_workspace() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("notes.txt"), format!("the key is {KEY}\n")).unwrap();
    let script = json!({"agents": {"lead": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "Read the notes."}
    ]}});
    let script_path = ws.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    (dir, ws, script_path)
}

fn scripted_run(ws: &std::path::Path, script: &std::path::Path, env: &[(&str, &str)]) -> Ran {
    let mut c = command(ws);
    c.args([
        "run",
        "--prompt",
        "Read notes.txt.",
        "--approval",
        "auto",
        "--sandbox",
        "off",
        "--no-memory",
        "--model-script",
        script.to_str().unwrap(),
    ])
    .env("OPENAI_API_KEY", KEY)
    .stdin(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    ran(c.output().unwrap())
}

#[test]
fn contents_go_only_when_asked_and_redacted() {
    let Some(receiver) = receiver() else { return };
    let (_dir, ws, script) = key_reading_workspace();
    let project = project("contents");
    let mut otel = receiver.env(&project);
    otel.push((
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT".into(),
        "true".into(),
    ));
    let out = scripted_run(&ws, &script, &env_pairs(&otel));
    assert_eq!(out.code, 0, "{out:#?}");
    let spans = receiver.spans_when(&project, |s| !named(s, "invoke_agent troupe").is_empty());
    let read = named(&spans, "execute_tool read_file")[0];
    assert_eq!(
        attr(read, "gen_ai.tool.call.arguments"),
        r#"{"path":"notes.txt"}"#
    );
    assert_eq!(
        attr(read, "gen_ai.tool.call.result"),
        "the key is [redacted]\n"
    );
    let answer = spans
        .iter()
        .find(|s| !attr(s, "gen_ai.output.messages").is_null())
        .unwrap();
    assert!(attr(answer, "gen_ai.output.messages")
        .as_str()
        .unwrap()
        .contains("Read the notes."));
    assert_eq!(attr(answer, "gen_ai.provider.name"), "troupe.scripted");
    assert!(!serde_json::to_string(&spans).unwrap().contains(KEY));
}

/// A port where nothing listens.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn timed(f: impl FnOnce() -> Ran) -> (Ran, Duration) {
    let started = Instant::now();
    let out = f();
    (out, started.elapsed())
}

#[test]
fn a_receiver_that_is_down_or_silent_neither_fails_nor_holds_up_a_run() {
    let (_dir, ws, script) = key_reading_workspace();
    let (off, off_took) = timed(|| scripted_run(&ws, &script, &[]));
    assert_eq!(off.code, 0, "{off:#?}");
    assert!(!off.stderr.contains("telemetry"), "{}", off.stderr);

    // Down: every export is refused at once.
    let down = format!("http://127.0.0.1:{}", closed_port());
    let (out, took) =
        timed(|| scripted_run(&ws, &script, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &down)]));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, off.stdout);
    let said: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("telemetry"))
        .collect();
    assert_eq!(said.len(), 1, "{}", out.stderr);
    assert!(
        said[0].contains("spans were not exported to"),
        "{}",
        said[0]
    );
    assert!(
        said[0].contains("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "{}",
        said[0]
    );
    assert!(
        took < off_took + Duration::from_secs(2),
        "{took:?} vs {off_took:?}"
    );

    // Silent: it takes the connection and never answers; the run's end waits at most the
    // close bound (2 s) for it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept() {
            open.push(stream);
            if open.len() > 8 {
                break;
            }
        }
    });
    let (out, took) = timed(|| {
        scripted_run(
            &ws,
            &script,
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", &silent_url)],
        )
    });
    assert_eq!(out.code, 0, "{out:#?}");
    let said: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("telemetry"))
        .collect();
    assert_eq!(said.len(), 1, "{}", out.stderr);
    assert!(
        took < off_took + troupe::telemetry::CLOSE_BOUND + Duration::from_secs(1),
        "{took:?} vs {off_took:?}"
    );
    drop(held);
}

#[test]
fn an_unusable_setting_is_said_once_and_the_run_goes_on_without_traces() {
    let (_dir, ws, script) = key_reading_workspace();
    let out = scripted_run(
        &ws,
        &script,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let said: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("telemetry") || l.contains("OTEL_"))
        .collect();
    assert_eq!(said.len(), 1, "{}", out.stderr);
    assert!(
        said[0].contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\""),
        "{}",
        said[0]
    );
    assert!(
        said[0].contains("this run exports no traces"),
        "{}",
        said[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_team_s_run_is_one_trace_with_the_worker_s_spans_in_it() {
    let Some(db) = troupe::store::postgres::testing::TestDb::create() else {
        return;
    };
    let Some(receiver) = receiver() else { return };
    let url = db.url();
    let lead_dir = tempfile::tempdir().unwrap();
    let worker_dir = tempfile::tempdir().unwrap();
    let lead_ws = std::fs::canonicalize(lead_dir.path()).unwrap();
    let worker_ws = std::fs::canonicalize(worker_dir.path()).unwrap();
    let server = SseServer::start().await;
    server.respond_with(super::streaming::team);
    let project = project("shared-team");
    let otel = receiver.env(&project);
    let worker = {
        let (ws, url, base, otel) = (
            worker_ws.clone(),
            url.clone(),
            server.base_url.clone(),
            otel.clone(),
        );
        tokio::task::spawn_blocking(move || {
            super::shared_team::WorkerProcess::start_with(&ws, &url, &base, &env_pairs(&otel))
        })
        .await
        .unwrap()
    };
    let out =
        super::shared_team::lead_run(&lead_ws, &url, &server.base_url, &env_pairs(&otel)).await;
    assert_eq!(out.code, 0, "{out:#?}\nworker: {}", worker.log());

    // The worker's spans are exported as it goes: the writer's turns are there while it runs.
    let spans = receiver.spans_when(&project, |s| {
        !named(s, "invoke_agent troupe").is_empty()
            && named(s, "invoke_agent writer").len() >= 2
            && !named(s, "send_message lead").is_empty()
    });
    assert_eq!(trace_ids(&spans).len(), 1, "one trace: {spans:#?}");
    let root = named(&spans, "invoke_agent troupe")[0];
    for turn in named(&spans, "invoke_agent writer") {
        assert_eq!(turn["parent_id"], root["context"]["span_id"], "{turn:#}");
        assert_eq!(attr(turn, "troupe.team"), attr(root, "troupe.team"));
    }
    // The writer's model and tool calls ran in the worker; they are in the trace, and so is
    // the writer's result to the lead, whose span the lead's handling turn names.
    let writer_calls: Vec<&Value> = spans
        .iter()
        .filter(|s| attr(s, "gen_ai.agent.name") == "writer" && s["name"] != "invoke_agent writer")
        .collect();
    assert!(
        writer_calls
            .iter()
            .any(|s| s["name"] == "execute_tool write_file"),
        "{writer_calls:#?}"
    );
    let result = named(&spans, "send_message lead")
        .into_iter()
        .find(|s| attr(s, "troupe.message.kind") == "result")
        .unwrap_or_else(|| panic!("no result message: {spans:#?}"));
    let result_id = attr(result, "troupe.message.id").as_str().unwrap();
    assert!(
        named(&spans, "invoke_agent lead").iter().any(|t| {
            attr(t, "troupe.message.ids")
                .as_array()
                .is_some_and(|ids| ids.iter().any(|id| id == result_id))
        }),
        "no lead turn handles {result_id}"
    );
    assert!(!serde_json::to_string(&spans)
        .unwrap()
        .contains(super::shared_team::MODEL_ENV[0].1));
    let code = tokio::task::spawn_blocking(move || worker.stop())
        .await
        .unwrap();
    assert_eq!(code, 0);
}
