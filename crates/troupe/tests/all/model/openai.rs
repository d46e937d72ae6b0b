//! The OpenAI Chat Completions client against a real HTTP server on 127.0.0.1 (wiremock) that
//! records every request.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::error::ErrorCode;
use troupe::model::config::ModelConfig;
use troupe::model::{
    AssistantMessage, ChatMessage, FinishReason, ModelClient, ModelError, ModelRequest,
    OpenAiClient, RetryPolicy, ToolCall, ToolSpec, Usage,
};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

pub(super) const KEY: &str = "sk-test-0123456789abcdef";
pub(super) const ENDPOINT: &str = "/v1/chat/completions";

pub(super) fn config(server: &MockServer) -> ModelConfig {
    ModelConfig {
        base_url: format!("{}/v1", server.uri()),
        timeout: Duration::from_secs(10),
        retry: RetryPolicy::fixed(3, Duration::from_millis(1)),
        ..ModelConfig::new(KEY, "gpt-test")
    }
}

pub(super) fn client(config: &ModelConfig) -> OpenAiClient {
    OpenAiClient::new(config).unwrap()
}

pub(super) fn hello() -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::user("hello")],
        ..Default::default()
    }
}

/// A complete OpenAI success body around one assistant message.
pub(super) fn completion(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": "gpt-test-2026-01-01",
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        "system_fingerprint": "fp_1"
    })
}

pub(super) fn ok_text(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(completion(
        json!({"role": "assistant", "content": text}),
        "stop",
    ))
}

pub(super) fn openai_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}
    }))
}

pub(super) async fn mount(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(response)
        .mount(server)
        .await;
}

/// Mounted before a catch-all: answers the first `times` matching requests only.
async fn mount_first(server: &MockServer, times: u64, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(response)
        .up_to_n_times(times)
        .mount(server)
        .await;
}

pub(super) async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

pub(super) fn body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).unwrap()
}

pub(super) fn models_requested(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .map(|r| body(r)["model"].as_str().unwrap().to_owned())
        .collect()
}

pub(super) async fn fails(client: &OpenAiClient) -> ModelError {
    client.complete(&hello()).await.unwrap_err()
}

pub(super) fn assert_one_line_without_key(error: &ModelError) {
    let text = error.to_string();
    assert!(!text.contains('\n'), "not one line: {text}");
    assert!(!text.contains(KEY), "leaks the key: {text}");
}

#[tokio::test]
async fn request_is_posted_in_the_exact_openai_wire_shape() {
    let server = MockServer::start().await;
    mount(&server, ok_text("fine")).await;
    let write_schema = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": false
    });
    let request = ModelRequest {
        messages: vec![
            ChatMessage::system("You are lead."),
            ChatMessage::user("Write hello to a.txt"),
            ChatMessage::from(AssistantMessage {
                content: None,
                tool_calls: vec![
                    ToolCall::new(
                        "call_1",
                        "write_file",
                        r#"{"path":"a.txt","content":"hello"}"#,
                    ),
                    ToolCall::new("call_2", "glob", "{not json"),
                ],
                ..AssistantMessage::default()
            }),
            ChatMessage::tool_result("call_1", "wrote 5 bytes"),
            ChatMessage::tool_result("call_2", "Error [invalid_arguments]: bad JSON"),
            ChatMessage::from(AssistantMessage {
                content: Some("Let me check.".to_owned()),
                tool_calls: vec![ToolCall::new("call_3", "read_file", r#"{"path":"a.txt"}"#)],
                ..AssistantMessage::default()
            }),
            ChatMessage::tool_result("call_3", "hello"),
            ChatMessage::from(AssistantMessage::text("Done.")),
            ChatMessage::from(AssistantMessage::default()),
            ChatMessage::user("Thanks"),
        ],
        tools: vec![
            ToolSpec {
                name: "write_file".to_owned(),
                description: "Write a file.".to_owned(),
                parameters: write_schema.clone(),
            },
            ToolSpec {
                name: "list_tasks".to_owned(),
                description: "List tasks.".to_owned(),
                parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
            },
        ],
        ..Default::default()
    };

    client(&config(&server)).complete(&request).await.unwrap();

    let received = requests(&server).await;
    assert_eq!(received.len(), 1);
    let sent = &received[0];
    assert_eq!(sent.method.as_str(), "POST");
    assert_eq!(sent.url.path(), ENDPOINT);
    assert_eq!(
        sent.headers.get("authorization").unwrap().to_str().unwrap(),
        format!("Bearer {KEY}")
    );
    assert!(sent
        .headers
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(
        body(sent),
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are lead."},
                {"role": "user", "content": "Write hello to a.txt"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function":
                        {"name": "write_file", "arguments": "{\"path\":\"a.txt\",\"content\":\"hello\"}"}},
                    {"id": "call_2", "type": "function", "function":
                        {"name": "glob", "arguments": "{not json"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "wrote 5 bytes"},
                {"role": "tool", "tool_call_id": "call_2", "content": "Error [invalid_arguments]: bad JSON"},
                {"role": "assistant", "content": "Let me check.", "tool_calls": [
                    {"id": "call_3", "type": "function", "function":
                        {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_3", "content": "hello"},
                {"role": "assistant", "content": "Done."},
                {"role": "assistant", "content": ""},
                {"role": "user", "content": "Thanks"}
            ],
            "tools": [
                {"type": "function", "function": {
                    "name": "write_file", "description": "Write a file.", "parameters": write_schema}},
                {"type": "function", "function": {
                    "name": "list_tasks", "description": "List tasks.",
                    "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}
            ],
            // A first request asks for a stream; wiremock's whole JSON answer is accepted.
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
}

#[tokio::test]
async fn tools_are_left_out_when_none_are_offered() {
    let server = MockServer::start().await;
    mount(&server, ok_text("hi")).await;

    client(&config(&server)).complete(&hello()).await.unwrap();

    assert_eq!(
        body(&requests(&server).await[0]),
        json!({"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}],
               "stream": true, "stream_options": {"include_usage": true}})
    );
}

#[tokio::test]
async fn tool_calls_are_parsed_and_invalid_argument_json_passes_through() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_json(completion(
            json!({
                "role": "assistant",
                "content": null,
                "refusal": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "write_file", "arguments": "{\"path\":\"a.txt\",\"content\":\"x\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "shell", "arguments": "{\"command\": \"ls"}}
                ]
            }),
            "tool_calls",
        )),
    )
    .await;

    let response = client(&config(&server)).complete(&hello()).await.unwrap();

    assert_eq!(
        response.message,
        AssistantMessage {
            content: None,
            tool_calls: vec![
                ToolCall::new("call_a", "write_file", r#"{"path":"a.txt","content":"x"}"#),
                ToolCall::new("call_b", "shell", r#"{"command": "ls"#),
            ],
            ..AssistantMessage::default()
        }
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 5,
            total_tokens: 17,
            ..Usage::default()
        })
    );
    assert_eq!(response.model, "gpt-test-2026-01-01");
}

#[tokio::test]
async fn cached_prompt_tokens_are_read_as_cache_reads() {
    let server = MockServer::start().await;
    let mut body = completion(json!({"role": "assistant", "content": "ok"}), "stop");
    body["usage"] = json!({"prompt_tokens": 2000, "completion_tokens": 5, "total_tokens": 2005,
                           "prompt_tokens_details": {"cached_tokens": 1536, "audio_tokens": 0}});
    mount(&server, ResponseTemplate::new(200).set_body_json(body)).await;

    let usage = client(&config(&server))
        .complete(&hello())
        .await
        .unwrap()
        .usage
        .unwrap();

    assert_eq!((usage.prompt_tokens, usage.cache_read_tokens), (2000, 1536));
    assert_eq!(usage.cache_write_tokens, 0);
}

#[tokio::test]
async fn text_answer_keeps_finish_reason_and_usage() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "cut"}),
            "length",
        )),
    )
    .await;

    let response = client(&config(&server)).complete(&hello()).await.unwrap();

    assert_eq!(response.message, AssistantMessage::text("cut"));
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(response.usage.unwrap().total_tokens, 17);
}

#[tokio::test]
async fn optional_fields_may_be_missing_as_on_compatible_servers() {
    let server = MockServer::start().await;
    // No id, model, usage, finish_reason or tool-call ids; arguments as an object (seen on some
    // local servers); content absent.
    mount(
        &server,
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "tool_calls": [
                {"function": {"name": "glob", "arguments": {"pattern": "*.rs"}}},
                {"function": {"name": "list_tasks"}}
            ]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4}
        })),
    )
    .await;

    let response = client(&config(&server)).complete(&hello()).await.unwrap();

    assert_eq!(
        response.message,
        AssistantMessage::tool_calls(vec![
            ToolCall::new("call_0", "glob", r#"{"pattern":"*.rs"}"#),
            ToolCall::new("call_1", "list_tasks", "{}"),
        ])
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
            total_tokens: 7,
            ..Usage::default()
        })
    );
    assert_eq!(response.model, "gpt-test");
}

#[tokio::test]
async fn unknown_finish_reason_is_kept() {
    let server = MockServer::start().await;
    let mut body = completion(json!({"role": "assistant", "content": "x"}), "eos");
    body.as_object_mut().unwrap().remove("usage");
    mount(&server, ResponseTemplate::new(200).set_body_json(body)).await;

    let response = client(&config(&server)).complete(&hello()).await.unwrap();

    assert_eq!(
        response.finish_reason,
        FinishReason::Other("eos".to_owned())
    );
    // No usage from the server: estimated at 4 bytes a token, and marked so.
    let request = serde_json::to_vec(&hello().messages).unwrap().len()
        + serde_json::to_vec(&hello().tools).unwrap().len();
    let prompt = u64::try_from(request.div_ceil(4)).unwrap();
    assert_eq!(
        response.usage,
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: 1,
            total_tokens: prompt + 1,
            estimated: true,
            ..Usage::default()
        })
    );
}

#[tokio::test]
async fn base_url_works_with_and_without_trailing_slash() {
    for suffix in ["/v1", "/v1/", "/v1//"] {
        let server = MockServer::start().await;
        mount(&server, ok_text("hi")).await;
        let config = ModelConfig {
            base_url: format!("{}{suffix}", server.uri()),
            ..config(&server)
        };

        let response = client(&config).complete(&hello()).await;

        assert_eq!(
            response.unwrap().message,
            AssistantMessage::text("hi"),
            "{suffix}"
        );
        assert_eq!(requests(&server).await[0].url.path(), ENDPOINT, "{suffix}");
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_honoured_capped_then_succeeds() {
    let server = MockServer::start().await;
    mount_first(
        &server,
        1,
        openai_error(429, "Rate limit reached").insert_header("retry-after", "30"),
    )
    .await;
    mount(&server, ok_text("after the wait")).await;
    let config = ModelConfig {
        retry: RetryPolicy {
            max_retry_after: Duration::from_millis(150),
            ..RetryPolicy::fixed(3, Duration::from_millis(1))
        },
        ..config(&server)
    };

    let started = Instant::now();
    let response = client(&config).complete(&hello()).await.unwrap();
    let waited = started.elapsed();

    assert_eq!(response.message, AssistantMessage::text("after the wait"));
    assert_eq!(requests(&server).await.len(), 2);
    // Retry-After (30 s) replaced the 1 ms backoff, capped at 150 ms.
    assert!(
        waited >= Duration::from_millis(150),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "cap ignored: {waited:?}");
}

#[tokio::test]
async fn retry_after_ms_is_preferred_and_an_http_date_falls_back_to_the_backoff() {
    let server = MockServer::start().await;
    mount_first(
        &server,
        1,
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "120")
            .insert_header("retry-after", "0"),
    )
    .await;
    mount_first(
        &server,
        1,
        ResponseTemplate::new(503).insert_header("retry-after", "Wed, 21 Oct 2099 07:28:00 GMT"),
    )
    .await;
    mount(&server, ok_text("ok")).await;
    let config = ModelConfig {
        retry: RetryPolicy {
            max_retry_after: Duration::from_secs(5),
            ..RetryPolicy::fixed(3, Duration::from_millis(1))
        },
        ..config(&server)
    };

    let started = Instant::now();
    client(&config).complete(&hello()).await.unwrap();
    let waited = started.elapsed();

    assert_eq!(requests(&server).await.len(), 3);
    assert!(
        waited >= Duration::from_millis(120),
        "retry-after-ms ignored: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "the HTTP date was taken literally: {waited:?}"
    );
}

#[tokio::test]
async fn rate_limit_that_never_clears_fails_after_all_attempts() {
    let server = MockServer::start().await;
    mount(&server, openai_error(429, "Rate limit reached")).await;

    let error = fails(&client(&config(&server))).await;

    assert_eq!(error.code(), "model_rate_limited");
    assert_eq!(requests(&server).await.len(), 3);
    assert_eq!(
        error.to_string(),
        "model server rate-limited model `gpt-test` (HTTP 429) after 3 attempts: Rate limit reached"
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_fail() {
    let server = MockServer::start().await;
    mount(&server, openai_error(500, "The server had an error")).await;

    let error = fails(&client(&config(&server))).await;

    assert_eq!(error.code(), "model_server_error");
    assert_eq!(requests(&server).await.len(), 3);
    assert_eq!(
        error.to_string(),
        "model server failed for model `gpt-test` (HTTP 500) after 3 attempts: The server had an error"
    );
    assert_one_line_without_key(&error);
}

#[tokio::test]
async fn server_error_then_success_returns_the_success() {
    let server = MockServer::start().await;
    mount_first(
        &server,
        2,
        ResponseTemplate::new(502).set_body_string("<html>\n<b>Bad gateway</b>\n</html>"),
    )
    .await;
    mount(&server, ok_text("third time")).await;

    let response = client(&config(&server)).complete(&hello()).await.unwrap();

    assert_eq!(response.message, AssistantMessage::text("third time"));
    assert_eq!(requests(&server).await.len(), 3);
}

#[tokio::test]
async fn max_attempts_bounds_the_requests() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(503)).await;
    let config = ModelConfig {
        retry: RetryPolicy::fixed(5, Duration::from_millis(1)),
        ..config(&server)
    };

    let error = fails(&client(&config)).await;

    assert_eq!(requests(&server).await.len(), 5);
    assert_eq!(
        error.to_string(),
        "model server failed for model `gpt-test` (HTTP 503) after 5 attempts"
    );
}

#[tokio::test]
async fn bad_request_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        openai_error(400, "Invalid value for 'temperature': must be at most 2."),
    )
    .await;

    let error = fails(&client(&config(&server))).await;

    assert_eq!(error.code(), "model_request_refused");
    assert_eq!(requests(&server).await.len(), 1);
    assert_eq!(
        error.to_string(),
        "model server refused the request for model `gpt-test` (HTTP 400): Invalid value for 'temperature': must be at most 2."
    );
}

#[tokio::test]
async fn unauthorized_is_a_one_line_model_auth_error_without_the_key() {
    let server = MockServer::start().await;
    // A server that echoes the whole key back (OpenAI masks it; not every server does).
    mount(
        &server,
        openai_error(
            401,
            &format!("Incorrect API key provided:\n{KEY}. You can find your key at …"),
        ),
    )
    .await;
    let config = ModelConfig {
        fallback_model: Some("gpt-fallback".to_owned()),
        ..config(&server)
    };

    let error = fails(&client(&config)).await;

    assert_eq!(error.code(), "model_auth");
    // Neither retried nor handed to the fallback: the same key would be refused again.
    assert_eq!(requests(&server).await.len(), 1);
    assert_eq!(
        error.to_string(),
        "model server refused the credentials for model `gpt-test` (HTTP 401): Incorrect API key provided: [redacted]. You can find your key at …; check the API key (`troupe config` shows which one is used)"
    );
    assert_one_line_without_key(&error);
}

/// No part of the key longer than its `sk-test-` prefix.
fn assert_no_part_of_the_key(text: &str) {
    for len in 9..=KEY.len() {
        for start in 0..=KEY.len() - len {
            let part = &KEY[start..start + len];
            assert!(!text.contains(part), "leaks {part:?} of the key: {text}");
        }
    }
}

#[tokio::test]
async fn a_key_straddling_the_message_cut_is_redacted_whole() {
    // Wherever the key falls around the 300-character cut, not a piece of it is shown: the
    // server's text is redacted before it is cut.
    for before in [285, 290, 295, 299, 300] {
        for (status, body) in [
            (
                401,
                json!({"error": {"message": format!("{} {KEY} tail", "x".repeat(before))}}),
            ),
            (
                200,
                json!({"choices": [], "error": format!("{} {KEY} tail", "y".repeat(before))}),
            ),
        ] {
            let server = MockServer::start().await;
            mount(&server, ResponseTemplate::new(status).set_body_json(body)).await;
            let error = fails(&client(&config(&server))).await;
            let text = error.to_string();
            assert_one_line_without_key(&error);
            assert_no_part_of_the_key(&text);
            assert!(text.contains('…'), "{text}");
        }
        // A body that is not JSON at all is shown as a snippet, redacted the same way.
        let server = MockServer::start().await;
        mount(
            &server,
            ResponseTemplate::new(200).set_body_string(format!("<{}{KEY}>", "z".repeat(before))),
        )
        .await;
        let text = fails(&client(&config(&server))).await.to_string();
        assert_no_part_of_the_key(&text);
    }
}

#[tokio::test]
async fn forbidden_is_model_auth_too() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(403)).await;

    let error = fails(&client(&config(&server))).await;

    assert_eq!(error.code(), "model_auth");
    assert!(error.to_string().contains("(HTTP 403)"), "{error}");
}

#[tokio::test]
async fn unknown_model_falls_back_to_the_fallback_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .and(body_partial_json(json!({"model": "gpt-missing"})))
        .respond_with(openai_error(404, "The model `gpt-missing` does not exist"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .and(body_partial_json(json!({"model": "gpt-fallback"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "model": "gpt-fallback",
            "choices": [{"message": {"role": "assistant", "content": "from fallback"},
                         "finish_reason": "stop"}]
        })))
        .mount(&server)
        .await;
    let config = ModelConfig {
        model: "gpt-missing".to_owned(),
        fallback_model: Some("gpt-fallback".to_owned()),
        ..config(&server)
    };

    let response = client(&config).complete(&hello()).await.unwrap();

    assert_eq!(response.message, AssistantMessage::text("from fallback"));
    assert_eq!(response.model, "gpt-fallback");
    let received = requests(&server).await;
    // 404 is not retried on the primary; the fallback gets the same conversation.
    assert_eq!(
        models_requested(&received),
        vec!["gpt-missing", "gpt-fallback"]
    );
    assert_eq!(
        body(&received[1])["messages"],
        body(&received[0])["messages"]
    );
}

#[tokio::test]
async fn fallback_is_tried_after_the_primary_spends_its_retries() {
    let server = MockServer::start().await;
    // 500, not an overload: overloads hand over to the fallback sooner (see `recovery`).
    Mock::given(body_partial_json(json!({"model": "gpt-test"})))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    Mock::given(body_partial_json(json!({"model": "gpt-fallback"})))
        .respond_with(ok_text("fallback answer"))
        .mount(&server)
        .await;
    let config = ModelConfig {
        fallback_model: Some("gpt-fallback".to_owned()),
        ..config(&server)
    };

    let response = client(&config).complete(&hello()).await.unwrap();

    assert_eq!(response.message, AssistantMessage::text("fallback answer"));
    assert_eq!(
        models_requested(&requests(&server).await),
        vec!["gpt-test", "gpt-test", "gpt-test", "gpt-fallback"]
    );
}

#[tokio::test]
async fn fallback_failure_reports_both_and_carries_the_fallback_code() {
    let server = MockServer::start().await;
    Mock::given(body_partial_json(json!({"model": "gpt-test"})))
        .respond_with(openai_error(404, "no such model"))
        .mount(&server)
        .await;
    Mock::given(body_partial_json(json!({"model": "gpt-fallback"})))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let config = ModelConfig {
        fallback_model: Some("gpt-fallback".to_owned()),
        ..config(&server)
    };

    let error = fails(&client(&config)).await;

    assert_eq!(error.code(), "model_server_error");
    assert!(
        matches!(error, ModelError::FallbackFailed { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("model `gpt-test` not found") && text.contains("no such model"),
        "{text}"
    );
    assert!(
        text.contains("model `gpt-fallback` (HTTP 500) after 3 attempts"),
        "{text}"
    );
    assert_one_line_without_key(&error);
    assert_eq!(requests(&server).await.len(), 4);
}

#[tokio::test]
async fn other_client_errors_do_not_trigger_the_fallback() {
    let server = MockServer::start().await;
    mount(&server, openai_error(422, "tools[0] is invalid")).await;
    let config = ModelConfig {
        fallback_model: Some("gpt-fallback".to_owned()),
        ..config(&server)
    };

    let error = fails(&client(&config)).await;

    assert_eq!(error.code(), "model_request_refused");
    assert_eq!(models_requested(&requests(&server).await), vec!["gpt-test"]);
}

#[tokio::test]
async fn without_a_fallback_an_unknown_model_fails_at_once() {
    let server = MockServer::start().await;
    // Ollama's error shape.
    mount(
        &server,
        ResponseTemplate::new(404)
            .set_body_json(json!({"error": "model \"gpt-test\" not found, try pulling it first"})),
    )
    .await;

    let error = fails(&client(&config(&server))).await;

    assert_eq!(error.code(), "model_not_found");
    assert_eq!(requests(&server).await.len(), 1);
    assert_eq!(
        error.to_string(),
        format!(
            "model `gpt-test` not found at {}/v1/chat/completions (HTTP 404): model \"gpt-test\" not found, try pulling it first; check the model and the base URL (`troupe config` shows them)",
            server.uri()
        )
    );
}

#[tokio::test]
async fn malformed_success_bodies_are_model_bad_response() {
    let cases: Vec<(ResponseTemplate, &str)> = vec![
        (
            ResponseTemplate::new(200).set_body_string("<html>oops</html>"),
            "not JSON",
        ),
        (ResponseTemplate::new(200), "not JSON"),
        (
            ResponseTemplate::new(200)
                .set_body_json(json!({"id": "x", "object": "chat.completion"})),
            "no `choices`",
        ),
        (
            ResponseTemplate::new(200).set_body_json(json!({"choices": []})),
            "no `choices`",
        ),
        (
            ResponseTemplate::new(200)
                .set_body_json(json!({"error": {"message": "upstream died"}})),
            "upstream died",
        ),
        (
            ResponseTemplate::new(200)
                .set_body_json(json!({"choices": [{"finish_reason": "stop"}]})),
            "no `message`",
        ),
        (
            ResponseTemplate::new(200).set_body_json(json!({"choices": "nope"})),
            "not a chat completion",
        ),
        (
            ResponseTemplate::new(200)
                .set_body_json(json!({"choices": [{"message": {"tool_calls": [
                {"id": "c", "function": {"arguments": "{}"}}]}}]})),
            "no function name",
        ),
    ];
    for (response, expected) in cases {
        let server = MockServer::start().await;
        mount(&server, response).await;

        let error = fails(&client(&config(&server))).await;

        assert_eq!(error.code(), "model_bad_response", "{error}");
        assert!(
            error.to_string().contains(expected),
            "{error} lacks {expected}"
        );
        assert_one_line_without_key(&error);
        // Not retried: the server answered, and would answer the same way.
        assert_eq!(requests(&server).await.len(), 1);
    }
}

#[tokio::test]
async fn slow_server_is_model_timeout_after_each_attempt_times_out() {
    let server = MockServer::start().await;
    mount(
        &server,
        ok_text("too late").set_delay(Duration::from_secs(5)),
    )
    .await;
    let config = ModelConfig {
        timeout: Duration::from_millis(100),
        retry: RetryPolicy::fixed(2, Duration::from_millis(1)),
        ..config(&server)
    };

    let started = Instant::now();
    let error = fails(&client(&config)).await;

    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the timeout did not cut the wait"
    );
    assert_eq!(error.code(), "model_timeout");
    assert_eq!(
        error.to_string(),
        "model `gpt-test` did not answer within 100ms after 2 attempts"
    );
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn unreachable_server_is_model_transport_after_retries() {
    // A port that was just free: nothing listens on it.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = ModelConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        retry: RetryPolicy::fixed(2, Duration::from_millis(1)),
        ..ModelConfig::new(KEY, "gpt-test")
    };

    let error = fails(&client(&config)).await;

    assert_eq!(error.code(), "model_transport");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "could not reach the model server at http://127.0.0.1:{port}/v1/chat/completions after 2 attempts: "
        )),
        "{text}"
    );
    assert_one_line_without_key(&error);
}

#[tokio::test]
async fn debug_output_never_shows_the_key() {
    let server = MockServer::start().await;
    let config = config(&server);
    assert!(!format!("{config:?}").contains(KEY));
    assert!(!format!("{:?}", client(&config)).contains(KEY));
}
