//! The runner (the tool-call loop) against a mock Chat Completions server on 127.0.0.1 that
//! records every request, with the real OpenAI client, the real dispatcher and the base tools.

mod compaction;
mod context;
mod hooks;
mod loop_;
mod micro_compaction;
mod recovery;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use troupe::agent::{NullObserver, Runner};
use troupe::clock::ManualClock;
use troupe::layout::Layout;
use troupe::model::config::ModelConfig;
use troupe::model::{OpenAiClient, RetryPolicy};
use troupe::permissions::hooks::Hooks;
use troupe::permissions::{ApprovalProvider, JsonlAuditSink, PermissionPolicy};
use troupe::tools::shell::ShellTool;
use troupe::tools::{base_tools, Dispatcher, ToolHandler, ToolRegistry};
use troupe::wire::AgentName;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers each request with the next scripted assistant message (then 500s).
pub struct Sequence {
    replies: Mutex<VecDeque<ResponseTemplate>>,
}

impl Respond for Sequence {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        self.replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(500).set_body_string("script exhausted"))
    }
}

pub fn completion(message: Value) -> ResponseTemplate {
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    }))
}

pub fn say(text: &str) -> ResponseTemplate {
    completion(json!({"role": "assistant", "content": text}))
}

pub fn call(id: &str, name: &str, arguments: Value) -> ResponseTemplate {
    call_raw(id, name, &arguments.to_string())
}

pub fn call_raw(id: &str, name: &str, arguments: &str) -> ResponseTemplate {
    completion(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
    ]}))
}

pub async fn server(replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Sequence {
            replies: Mutex::new(replies.into()),
        })
        .mount(&server)
        .await;
    server
}

pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

pub struct Lead {
    pub runner: Runner,
    pub workspace: tempfile::TempDir,
}

/// A lead runner with the five base tools, a real audit file and `approval`.
pub fn lead(
    server: &MockServer,
    approval: Arc<dyn ApprovalProvider>,
    extra: Vec<Arc<dyn ToolHandler>>,
) -> Lead {
    let workspace = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at_spec_epoch());
    let audit = Arc::new(JsonlAuditSink::open(&Layout::new(workspace.path()), clock).unwrap());
    let mut registry = ToolRegistry::new();
    for tool in base_tools(ShellTool::new().with_timeout(Duration::from_secs(10)))
        .into_iter()
        .chain(extra)
    {
        registry.register(tool).unwrap();
    }
    let dispatcher = Dispatcher::new(
        Arc::new(registry),
        PermissionPolicy::default_policy(approval, audit),
        Hooks::new(),
    );
    let config = ModelConfig {
        base_url: format!("{}/v1", server.uri()),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..ModelConfig::new("sk-test", "gpt-test")
    };
    let runner = Runner::new(
        AgentName::lead(),
        "You are lead.",
        Arc::new(OpenAiClient::new(&config).unwrap()),
        Arc::new(dispatcher),
        workspace.path(),
        Arc::new(NullObserver),
    );
    Lead { runner, workspace }
}
