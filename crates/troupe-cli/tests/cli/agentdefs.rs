//! Agent definitions (`agents/<name>.md`) in a real `troupe run` against a Chat Completions
//! server on 127.0.0.1 (wiremock): the lead's prompt lists them, an invalid one is warned about
//! and skipped, an unknown `agent` is refused naming the known ones, and a teammate spawned from
//! a definition gets its instructions, only its tools, its plan rule — and runs on its model:
//! the lead's requests carry model A, the teammate's model B.

use serde_json::{json, Value};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{command, ran};

fn answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
    }))
}

fn tool_calls(calls: &[(&str, Value)]) -> ResponseTemplate {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c0", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}]
    }))
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_from_a_definition_runs_on_its_model_with_its_tools_and_instructions() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(ws.join("agents")).unwrap();
    std::fs::write(
        ws.join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews changes without editing\nmodel: model-b\n\
         tools: [read_file]\nplan_required: true\n---\nREVIEWER-INSTRUCTIONS: read, never write.\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("agents/broken.md"),
        "---\nname: broken\ndescription: x\ncolour: red\n---\n",
    )
    .unwrap();

    let server = MockServer::start().await;
    // The teammate (model B) answers at once.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({"model": "model-b"})))
        .respond_with(answer("Reviewed: fine."))
        .with_priority(1)
        .mount(&server)
        .await;
    // The lead (model A): first an unknown definition, a known one and no role, then answers.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({"model": "model-a"})))
        .respond_with(tool_calls(&[
            (
                "spawn_teammate",
                json!({"name": "ghost", "agent": "nope", "role": "r", "prompt": "x"}),
            ),
            (
                "spawn_teammate",
                json!({"name": "rev", "agent": "reviewer", "role": "Reviews changes without editing", "prompt": "review src/"}),
            ),
            ("spawn_teammate", json!({"name": "norole", "prompt": "x"})),
            (
                "spawn_teammate",
                json!({"name": "b2", "agent": "broken", "role": "r", "prompt": "x"}),
            ),
        ]))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({"model": "model-a"})))
        .respond_with(answer("All done."))
        .with_priority(3)
        .mount(&server)
        .await;

    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap()])
        .args(["--prompt", "review", "--no-memory", "--approval", "auto"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_MODEL", "model-a")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .stdin(std::process::Stdio::null());
    let out = tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "All done.\n", "{out:#?}");
    assert!(
        out.stderr.contains("agents/broken.md") && out.stderr.contains("unknown key"),
        "the invalid definition is reported by name: {out:#?}"
    );

    let bodies: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    let system = |b: &Value| b["messages"][0]["content"].as_str().unwrap().to_owned();
    let (lead, teammate): (Vec<&Value>, Vec<&Value>) = bodies
        .iter()
        .partition(|b| system(b).starts_with("You are lead"));
    assert!(lead.len() >= 2, "{bodies:#?}");
    assert!(!teammate.is_empty(), "{bodies:#?}");
    for body in &lead {
        assert_eq!(body["model"], "model-a", "the lead runs on model A");
        let prompt = system(body);
        assert!(
            prompt.contains("- reviewer — Reviews changes without editing"),
            "{prompt}"
        );
        assert!(!prompt.contains("broken"), "{prompt}");
    }
    for body in &teammate {
        assert_eq!(body["model"], "model-b", "the teammate runs on model B");
        let prompt = system(body);
        assert!(prompt.starts_with("You are rev"), "{prompt}");
        assert!(
            prompt.contains("REVIEWER-INSTRUCTIONS: read, never write."),
            "{prompt}"
        );
        assert!(
            prompt.contains("Your role: Reviews changes without editing"),
            "{prompt}"
        );
        assert!(
            prompt.contains("gated from your first tool call"),
            "{prompt}"
        );
        assert_eq!(
            tool_names(body),
            ["read_file", "send_message", "submit_plan"],
            "only the definition's tools and the always-granted ones"
        );
    }

    // The tool results the lead saw: the unknown agent refused naming the known ones; the
    // known one spawned gated from its first call.
    let results: Vec<String> = lead[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results.len(), 4, "{results:#?}");
    // A definition that was skipped says why.
    assert!(
        results[3].contains("unknown agent definition \"broken\" (agents/broken.md was skipped:")
            && results[3].contains("colour"),
        "{}",
        results[3]
    );
    assert!(
        results[2].contains("invalid_arguments") && results[2].contains("role"),
        "role is required (SPEC §4): {}",
        results[2]
    );
    assert!(
        results[0].contains("invalid_arguments")
            && results[0].contains("\"nope\"")
            && results[0].contains("known: reviewer"),
        "{}",
        results[0]
    );
    let spawned: Value = serde_json::from_str(&results[1]).unwrap();
    assert_eq!(spawned["agent"], "reviewer", "{spawned}");
    assert_eq!(spawned["plan_required"], true, "{spawned}");
    assert_eq!(
        spawned["gated"], "from its first call until you approve a plan of its",
        "{spawned}"
    );

    // The roster records the definition.
    let team: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join(".troupe/team.json")).unwrap())
            .unwrap();
    assert_eq!(team["teammates"][0]["definition"], "reviewer", "{team}");
}
