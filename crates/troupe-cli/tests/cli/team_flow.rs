//! The demo's team flow, played by a mock model server of any provider: what each agent answers
//! (the demo's scripted scenario, the writer spawned with `plan_required`), and what must have
//! happened once the run is over, and running the binary against such a server. Shared by the
//! provider tests (streaming OpenAI, Anthropic, Azure).

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::model::{ModelRequest, ModelResponse};

use super::support::{command, ran, Ran};

/// `troupe run --workspace WS ARGS` with `env`, off the async runtime (so a mock server on it
/// keeps serving), stdin closed, bounded at two minutes.
pub async fn run(ws: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = command(ws);
    c.args(["run", "--workspace", ws.to_str().unwrap()])
        .args(args)
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::task::spawn_blocking(move || ran(c.output().unwrap())),
    )
    .await
    .unwrap()
    .unwrap()
}

/// What the agent whose system prompt is `system` answers to `conversation`.
pub fn answer(system: &str, conversation: &ModelRequest) -> ModelResponse {
    let mut response = if system.starts_with("You are lead,") {
        troupe::demo::lead_turn(conversation).unwrap()
    } else {
        troupe::demo::writer_turn(conversation).unwrap()
    };
    for call in &mut response.message.tool_calls {
        if call.name == "spawn_teammate" {
            let mut arguments: Value = serde_json::from_str(&call.arguments).unwrap();
            arguments["plan_required"] = json!(true);
            call.arguments = arguments.to_string();
        }
    }
    response
}

/// The run ended with the lead's answer, the note written, and the writer's audit: its plan,
/// the write denied while the plan was pending, then allowed.
pub fn assert_done(ws: &std::path::Path, out: &Ran) {
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.stdout,
        "writer wrote NOTES.md under an approved plan and has shut down.\n"
    );
    assert!(std::fs::read_to_string(ws.join("NOTES.md"))
        .unwrap()
        .starts_with("# Notes"));
    let audit: Vec<(String, String)> = std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["agent"] == "writer")
        .map(|l| {
            (
                l["tool"].as_str().unwrap().to_owned(),
                l["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("submit_plan", "allow"),
        ("write_file", "deny"),
        ("write_file", "allow"),
    ]
    .iter()
    .map(|(t, d)| ((*t).to_owned(), (*d).to_owned()))
    .collect();
    assert_eq!(audit, expected);
}
