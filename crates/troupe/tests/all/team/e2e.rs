//! The whole scenario through a real HTTP model server (wiremock on 127.0.0.1) speaking Chat
//! Completions: the server answers each agent from its own conversation (it tells them apart by
//! the system prompt, which names the agent) and records every request.
//!
//! spawn → submit_plan → write denied while pending (handler never ran) → approve → write →
//! result → request_shutdown → the teammate shuts down without a model call → the run ends.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::bootstrap::{SameModel, LEAD_TOOLS, TEAMMATE_TOOLS};
use troupe::model::config::ModelConfig;
use troupe::model::{OpenAiClient, RetryPolicy};
use troupe::store::mailbox::MailboxState;
use troupe::wire::{RequestKind, RequestStatus, TeammateStatus};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::support::{
    call, drive, is_gate_denial, plan_request_events, say, Convo, Fixture, Reply,
};

const DRAFT: &str = "draft written before approval\n";
const NOTES: &str = "# Notes\n\nApproved content.\n";

fn lead(c: &Convo<'_>) -> Reply {
    if c.last_is_tool_result() {
        return say("Waiting for the team.");
    }
    if c.calls_named("spawn_teammate").is_empty() {
        return call(
            "spawn_teammate",
            json!({"name": "writer", "role": "documentation writer",
                   "prompt": "Add a usage note to NOTES.md. Submit a plan first."}),
        );
    }
    let reviewed: Vec<Value> = c
        .calls_named("review_plan")
        .into_iter()
        .map(|a| a["request_id"].clone())
        .collect();
    if let Some(plan) = plan_request_events(c)
        .into_iter()
        .find(|e| !reviewed.contains(&e["request_id"]))
    {
        return call(
            "review_plan",
            json!({"request_id": plan["request_id"], "approve": true, "feedback": "Go ahead."}),
        );
    }
    let events = c.events();
    if events
        .iter()
        .any(|e| e["protocol_kind"] == "shutdown_response")
    {
        return say("writer is done and shut down.");
    }
    let wrote = events
        .iter()
        .any(|e| e["kind"] == "result" && e["content"] == "Wrote NOTES.md.");
    if wrote && c.calls_named("request_shutdown").is_empty() {
        return call("request_shutdown", json!({"teammate": "writer"}));
    }
    say("Waiting for the writer.")
}

fn writer(c: &Convo<'_>) -> Reply {
    let approved = c
        .user_texts()
        .iter()
        .any(|t| t.starts_with("Plan approved"));
    let writes = c.calls_named("write_file").len();
    if c.last_is_tool_result() {
        return match (approved, writes) {
            (false, 0) => call("write_file", json!({"path": "NOTES.md", "content": DRAFT})),
            (false, _) => say("Plan submitted; waiting for approval."),
            (true, _) => say("Wrote NOTES.md."),
        };
    }
    if approved {
        call("write_file", json!({"path": "NOTES.md", "content": NOTES}))
    } else {
        call(
            "submit_plan",
            json!({"plan": "1. Write NOTES.md. 2. Report."}),
        )
    }
}

/// Answers per agent, and notes whether NOTES.md existed right after the denied write.
struct PerAgent {
    workspace: PathBuf,
    notes_existed_after_denial: Mutex<Vec<bool>>,
}

fn completion(reply: Reply, call_id: String) -> ResponseTemplate {
    let message = match reply {
        Reply::Text(text) => json!({"role": "assistant", "content": text}),
        Reply::Call(tool, args) => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": tool, "arguments": args.to_string()}}]}),
    };
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_785_398_400,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }))
}

impl Respond for PerAgent {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let messages = body["messages"].as_array().unwrap();
        let c = Convo(messages);
        let reply = if c.system().starts_with("You are lead") {
            lead(&c)
        } else if c.system().starts_with("You are writer") {
            if c.last_tool_result().is_some_and(is_gate_denial) {
                self.notes_existed_after_denial
                    .lock()
                    .unwrap()
                    .push(self.workspace.join("NOTES.md").exists());
            }
            writer(&c)
        } else {
            return ResponseTemplate::new(400).set_body_string("unknown agent");
        };
        completion(reply, c.next_call_id())
    }
}

/// Lets the test keep a handle on the responder wiremock owns.
struct SharedResponder(Arc<PerAgent>);

impl Respond for SharedResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

fn agent_of(body: &Value) -> String {
    let system = body["messages"][0]["content"].as_str().unwrap();
    system
        .strip_prefix("You are ")
        .unwrap()
        .split([',', ' '])
        .next()
        .unwrap()
        .to_owned()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_scenario_through_a_chat_completions_server() {
    let f = Fixture::new();
    let server = MockServer::start().await;
    let responder = Arc::new(PerAgent {
        workspace: f.workspace.clone(),
        notes_existed_after_denial: Mutex::new(Vec::new()),
    });
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(SharedResponder(responder.clone()))
        .mount(&server)
        .await;
    let config = ModelConfig {
        base_url: format!("{}/v1", server.uri()),
        timeout: Duration::from_secs(10),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..ModelConfig::new("sk-test-0123456789abcdef", "gpt-test")
    };
    let client = Arc::new(OpenAiClient::new(&config).unwrap());
    let mut team = f.build(Arc::new(SameModel(client))).await;

    let outcome = drive(
        &mut team,
        "Have a teammate write NOTES.md, then shut it down.",
    )
    .await;
    assert_eq!(outcome.answer, "writer is done and shut down.");
    team.close().await;

    // What the server saw, per agent.
    let received = server.received_requests().await.unwrap();
    let bodies: Vec<Value> = received
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    let of =
        |agent: &str| -> Vec<&Value> { bodies.iter().filter(|b| agent_of(b) == agent).collect() };
    assert_eq!(of("lead").len() + of("writer").len(), bodies.len());
    for body in of("lead") {
        assert_eq!(tool_names(body), LEAD_TOOLS);
    }
    for body in of("writer") {
        assert_eq!(tool_names(body), TEAMMATE_TOOLS);
    }
    // First message: submit_plan, denied write, answer. After approval: write, answer. The
    // shutdown request took no model call at all.
    assert_eq!(of("writer").len(), 5);
    let last_writer = Convo(of("writer")[4]["messages"].as_array().unwrap());
    assert!(!last_writer
        .user_texts()
        .iter()
        .any(|t| t.contains("shut down")));

    // The denied write: its handler never ran (no file at that moment), the model was told why.
    assert_eq!(
        *responder.notes_existed_after_denial.lock().unwrap(),
        [false]
    );
    let third = Convo(of("writer")[2]["messages"].as_array().unwrap());
    let denial = third.last_tool_result().unwrap();
    let requests = f.requests().await;
    let plan = requests
        .iter()
        .find(|r| r.kind() == RequestKind::PlanApproval)
        .unwrap();
    assert!(denial.contains(&plan.id().to_string()), "{denial}");
    assert!(denial.contains("is pending"), "{denial}");
    let audit = f.audit();
    let gate_denials: Vec<&Value> = audit.iter().filter(|l| l["rule"] == "plan_gate").collect();
    assert_eq!(gate_denials.len(), 1, "{audit:#?}");
    assert_eq!(gate_denials[0]["agent"], "writer");
    assert_eq!(gate_denials[0]["tool"], "write_file");
    assert_eq!(gate_denials[0]["decision"], "deny");

    // The approved write happened, once.
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("NOTES.md")).unwrap(),
        NOTES
    );
    let approved_prompt = format!("Plan approved ({}). Feedback: Go ahead.", plan.id());
    let fourth = Convo(of("writer")[3]["messages"].as_array().unwrap());
    assert!(
        fourth.last_user().starts_with(&approved_prompt),
        "{}",
        fourth.last_user()
    );

    // Both requests resolved approved; the teammate is shut down; every message is done.
    assert_eq!(
        requests
            .iter()
            .map(|r| (r.kind(), r.stored_status()))
            .collect::<Vec<_>>(),
        [
            (RequestKind::PlanApproval, RequestStatus::Approved),
            (RequestKind::Shutdown, RequestStatus::Approved)
        ]
    );
    let roster = troupe::inspect::read_roster(&f.layout.team_file()).unwrap();
    assert_eq!(roster.teammates.len(), 1);
    assert_eq!(roster.teammates[0].status, TeammateStatus::Shutdown);
    for agent in ["lead", "writer"] {
        for state in [
            MailboxState::Ready,
            MailboxState::Processing,
            MailboxState::Quarantine,
        ] {
            assert_eq!(f.count(agent, state).await, 0, "{agent} {state}");
        }
    }
    // lead: plan request, two results, shutdown response. writer: task, plan response, shutdown.
    assert_eq!(f.count("lead", MailboxState::Done).await, 4);
    assert_eq!(f.count("writer", MailboxState::Done).await, 3);
}
