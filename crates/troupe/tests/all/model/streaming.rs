//! The streaming OpenAI-compatible client against a hand-rolled chunked server on 127.0.0.1
//! ([`super::sse_server`]) whose chunk boundaries fall where real networks put them.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::error::ErrorCode;
use troupe::model::config::ModelConfig;
use troupe::model::types::Reasoning;
use troupe::model::{
    AssistantMessage, ChatMessage, FinishReason, ModelClient, ModelRequest, OpenAiClient,
    RetryPolicy, ToolCall, ToolSpec, Usage,
};

use super::sse_server::{sse, Recorded, Reply, SseServer, Step, DONE};

const KEY: &str = "sk-stream-0123456789abcdef";

fn config(server: &SseServer) -> ModelConfig {
    ModelConfig {
        base_url: server.base_url.clone(),
        timeout: Duration::from_secs(10),
        retry: RetryPolicy::fixed(3, Duration::from_millis(1)),
        ..ModelConfig::new(KEY, "gpt-stream")
    }
}

/// The client of `server` (its default test configuration), asked [`hello`].
async fn ask(
    server: &SseServer,
) -> Result<troupe::model::ModelResponse, troupe::model::ModelError> {
    OpenAiClient::new(&config(server))
        .unwrap()
        .complete(&hello())
        .await
}

fn hello() -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::user("hello")],
        ..Default::default()
    }
}

fn delta(delta: Value) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-stream-2026",
           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-stream-2026",
           "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage_chunk() -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-stream-2026",
           "choices": [],
           "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}})
}

/// A whole streamed text answer as one string of events.
fn text_stream(text: &str) -> String {
    sse(&[
        delta(json!({"role": "assistant", "content": text})),
        finish("stop"),
        usage_chunk(),
    ]) + DONE
}

/// Splits `bytes` at the given offsets.
fn split_at(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        pieces.push(bytes[start..cut].to_vec());
        start = cut;
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}

fn assert_streaming_request(request: &Recorded) {
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/v1/chat/completions");
    assert_eq!(request.body["stream"], json!(true));
    assert_eq!(
        request.body["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(
        request.header("authorization").map(str::to_owned),
        Some(format!("Bearer {KEY}"))
    );
}

#[tokio::test]
async fn awkward_chunk_boundaries_assemble_the_exact_answer() {
    let server = SseServer::start().await;
    // `é` and `✓` are multi-byte: the cuts below fall inside them.
    let body = sse(&[
        delta(json!({"role": "assistant", "reasoning_content": "Think "})),
        delta(json!({"reasoning_content": "first."})),
        delta(json!({"content": "héllo "})),
        delta(json!({"content": "wörld ✓"})),
        finish("stop"),
        usage_chunk(),
    ]) + DONE;
    let bytes = body.as_bytes();
    let accent = body.find('é').unwrap() + 1; // between the two bytes of `é`
    let check = body.find('✓').unwrap() + 2; // inside the three bytes of `✓`
    let data_prefix = body.find("data: ").unwrap() + 3; // mid `data:`
    let second_event = body[1..].find("data: ").unwrap() + 1;
    let third = body[second_event + 1..].find("data: ").unwrap() + second_event + 1;
    let mut cuts = vec![
        data_prefix,
        second_event + 10, // the second event split over three chunks…
        second_event + 25,
        third - 1, // … the last of them ends mid blank line
        accent,
        check,
        // The finish, usage and [DONE] events arrive together, in one chunk.
        body.find("\"finish_reason\":\"stop\"").unwrap() - 60,
    ];
    cuts.sort_unstable();
    cuts.dedup();
    server.push(Reply::events(&split_at(bytes, &cuts)));

    let response = ask(&server).await.unwrap();

    assert_eq!(response.message.content.as_deref(), Some("héllo wörld ✓"));
    assert_eq!(
        response.message.reasoning,
        vec![Reasoning::Text {
            text: "Think first.".to_owned(),
            signature: None
        }]
    );
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Some(Usage {
            prompt_tokens: 9,
            completion_tokens: 4,
            total_tokens: 13,
            ..Usage::default()
        })
    );
    assert_eq!(response.model, "gpt-stream-2026");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_streaming_request(&requests[0]);
}

#[tokio::test]
async fn tool_call_deltas_split_across_chunks_become_whole_calls() {
    let server = SseServer::start().await;
    let body = sse(&[
        delta(json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function",
             "function": {"name": "write_file", "arguments": ""}}]})),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": \"a"}}]})),
        delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": ".txt\", \"content\": \"hi\"}"}}]}),
        ),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "list_tasks", "arguments": "{}"}}]}),
        ),
        finish("tool_calls"),
        usage_chunk(),
    ]) + DONE;
    // Every chunk boundary mid-event: 37-byte pieces.
    let cuts: Vec<usize> = (1..body.len() / 37).map(|i| i * 37).collect();
    server.push(Reply::events(&split_at(body.as_bytes(), &cuts)));

    let response = ask(&server).await.unwrap();

    assert_eq!(
        response.message.tool_calls,
        vec![
            ToolCall::new(
                "call_a",
                "write_file",
                r#"{"path": "a.txt", "content": "hi"}"#
            ),
            ToolCall::new("call_b", "list_tasks", "{}"),
        ]
    );
    assert_eq!(response.message.content, None);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn a_length_stop_is_reported_as_length() {
    let server = SseServer::start().await;
    server.push(Reply::events(&[sse(&[
        delta(json!({"content": "cut sh"})),
        finish("length"),
        usage_chunk(),
    ]) + DONE]));

    let response = ask(&server).await.unwrap();

    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(response.message.content.as_deref(), Some("cut sh"));
}

#[tokio::test]
async fn a_stream_cut_before_its_end_is_retried_never_taken_as_the_answer() {
    let server = SseServer::start().await;
    // Ends properly at the HTTP level, but without finish_reason or [DONE].
    server.push(Reply::events(&[sse(&[delta(
        json!({"content": "half an ans"}),
    )])]));
    // Dropped mid-body.
    server.push(Reply {
        cut: true,
        ..Reply::events(&[sse(&[delta(json!({"content": "half"}))])])
    });
    server.push(Reply::events(&[text_stream("the whole answer")]));

    let response = ask(&server).await.unwrap();

    assert_eq!(
        response.message.content.as_deref(),
        Some("the whole answer")
    );
    assert_eq!(server.requests().len(), 3);

    // With one attempt only, the cut is a retryable transport error, one line, no key.
    let server = SseServer::start().await;
    server.push(Reply::events(&[sse(&[delta(json!({"content": "half"}))])]));
    let config = ModelConfig {
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..config(&server)
    };
    let error = OpenAiClient::new(&config)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap_err();
    assert_eq!(error.code(), "model_transport");
    assert!(error.is_retryable());
    assert!(error.to_string().contains("stream was cut"), "{error}");
}

#[tokio::test]
async fn a_stall_longer_than_the_idle_timeout_is_model_timeout() {
    let server = SseServer::start().await;
    server.push(Reply {
        steps: vec![
            Step::Chunk(sse(&[delta(json!({"content": "start"}))]).into_bytes()),
            Step::Pause(Duration::from_secs(30)),
            Step::Chunk(text_stream("never seen").into_bytes()),
        ],
        ..Reply::events::<&str>(&[])
    });
    let config = ModelConfig {
        timeout: Duration::from_millis(200),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..config(&server)
    };

    let started = Instant::now();
    let error = OpenAiClient::new(&config)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap_err();

    assert_eq!(error.code(), "model_timeout");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn a_slow_but_steady_stream_outlives_the_idle_timeout() {
    let server = SseServer::start().await;
    let idle = Duration::from_millis(200);
    let mut steps = vec![Step::Chunk(
        sse(&[delta(json!({"role": "assistant", "content": ""}))]).into_bytes(),
    )];
    for _ in 0..25 {
        steps.push(Step::Pause(Duration::from_millis(20)));
        steps.push(Step::Chunk(
            sse(&[delta(json!({"content": "x"}))]).into_bytes(),
        ));
    }
    steps.push(Step::Chunk(
        (sse(&[finish("stop"), usage_chunk()]) + DONE).into_bytes(),
    ));
    server.push(Reply {
        steps,
        ..Reply::events::<&str>(&[])
    });
    let config = ModelConfig {
        timeout: idle,
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..config(&server)
    };

    let started = Instant::now();
    let response = OpenAiClient::new(&config)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap();

    assert_eq!(response.message.content.as_deref(), Some(&*"x".repeat(25)));
    // 25 pauses of 20 ms: longer in total than the idle timeout, which never fired.
    assert!(started.elapsed() >= Duration::from_millis(500));
}

#[tokio::test]
async fn a_server_refusing_to_stream_is_asked_whole_answers_from_then_on() {
    let server = SseServer::start().await;
    server.push(Reply::json(
        400,
        &json!({"error": {"message": "Streaming is not supported by this server",
                          "type": "invalid_request_error"}}),
    ));
    let whole = json!({"model": "gpt-stream", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}]});
    server.always(Reply::json(200, &whole));
    let client = OpenAiClient::new(&config(&server)).unwrap();

    let first = client.complete(&hello()).await.unwrap();
    let second = client.complete(&hello()).await.unwrap();

    assert_eq!(first.message.content.as_deref(), Some("whole"));
    assert_eq!(second.message.content.as_deref(), Some("whole"));
    let requests = server.requests();
    let streamed: Vec<bool> = requests
        .iter()
        .map(|r| r.body.get("stream").is_some())
        .collect();
    // Refused once, then never asked to stream again.
    assert_eq!(streamed, [true, false, false]);
    assert!(requests[1].body.get("stream_options").is_none());
    assert!(!client.streams());
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_accepted_and_remembered() {
    let server = SseServer::start().await;
    let whole = json!({"choices": [{"message": {"content": "plain"}, "finish_reason": "stop"}]});
    server.always(Reply::json(200, &whole));
    let client = OpenAiClient::new(&config(&server)).unwrap();

    assert_eq!(
        client
            .complete(&hello())
            .await
            .unwrap()
            .message
            .content
            .as_deref(),
        Some("plain")
    );
    client.complete(&hello()).await.unwrap();

    let streamed: Vec<bool> = server
        .requests()
        .iter()
        .map(|r| r.body.get("stream").is_some())
        .collect();
    assert_eq!(streamed, [true, false]);
}

#[tokio::test]
async fn overloaded_529_is_model_overloaded_and_retried() {
    let server = SseServer::start().await;
    let overloaded = json!({"error": {"message": "Overloaded", "type": "overloaded_error"}});
    server.push(Reply::json(529, &overloaded));
    server.push(Reply::events(&[text_stream("after the overload")]));

    let response = ask(&server).await.unwrap();
    assert_eq!(
        response.message.content.as_deref(),
        Some("after the overload")
    );
    assert_eq!(server.requests().len(), 2);

    // Never clearing: the code after the last attempt, and a 503 that says so counts too.
    for status in [529, 503] {
        let server = SseServer::start().await;
        server.always(Reply::json(status, &overloaded));
        let error = ask(&server).await.unwrap_err();
        assert_eq!(error.code(), "model_overloaded", "{status}");
        assert!(error.is_overload());
        assert_eq!(
            error.to_string(),
            format!("model server is overloaded for model `gpt-stream` (HTTP {status}) after 3 attempts: Overloaded")
        );
        assert_eq!(server.requests().len(), 3);
    }
}

#[tokio::test]
async fn overloads_hand_over_to_the_fallback_model() {
    let server = SseServer::start().await;
    server.respond_with(|request| match request.body["model"].as_str() {
        Some("gpt-small") => Reply::events(&[text_stream("from the fallback")]),
        _ => Reply::json(529, &json!({"error": {"message": "Overloaded"}})),
    });
    let config = ModelConfig {
        fallback_model: Some("gpt-small".to_owned()),
        overload_fallback_after: 2,
        retry: RetryPolicy::fixed(5, Duration::from_millis(1)),
        ..config(&server)
    };

    let response = OpenAiClient::new(&config)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap();

    assert_eq!(
        response.message.content.as_deref(),
        Some("from the fallback")
    );
    let models: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(
        models,
        [json!("gpt-stream"), json!("gpt-stream"), json!("gpt-small")]
    );
}

#[tokio::test]
async fn a_prompt_too_long_400_is_still_context_too_long() {
    let server = SseServer::start().await;
    server.always(Reply::json(
        400,
        &json!({"error": {"message": "This model's maximum context length is 8192 tokens.",
                          "code": "context_length_exceeded"}}),
    ));

    let error = ask(&server).await.unwrap_err();

    assert_eq!(error.code(), "model_context_too_long");
    // Not retried, and not mistaken for a refusal to stream.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn reasoning_is_sent_back_as_reasoning_content() {
    let server = SseServer::start().await;
    server.always(Reply::events(&[text_stream("ok")]));
    let request = ModelRequest {
        messages: vec![
            ChatMessage::user("2+2?"),
            ChatMessage::from(AssistantMessage {
                content: None,
                tool_calls: vec![ToolCall::new("call_1", "calc", r#"{"e":"2+2"}"#)],
                reasoning: vec![Reasoning::Text {
                    text: "Use the calculator.".to_owned(),
                    signature: None,
                }],
            }),
            ChatMessage::tool_result("call_1", "4"),
            ChatMessage::from(AssistantMessage::text("4")),
            ChatMessage::user("and 3+3?"),
        ],
        tools: vec![ToolSpec {
            name: "calc".to_owned(),
            description: "Calculate.".to_owned(),
            parameters: json!({"type": "object", "properties": {"e": {"type": "string"}},
                               "additionalProperties": false}),
        }],
        ..Default::default()
    };

    OpenAiClient::new(&config(&server))
        .unwrap()
        .complete(&request)
        .await
        .unwrap();

    let sent = &server.requests()[0].body;
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": null, "reasoning_content": "Use the calculator.",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "calc", "arguments": "{\"e\":\"2+2\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "4"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "and 3+3?"}
        ])
    );
    // Not Gemini: the schema goes as the tool declared it.
    assert_eq!(
        sent["tools"][0]["function"]["parameters"]["additionalProperties"],
        json!(false)
    );
}

#[tokio::test]
async fn reasoning_named_reasoning_is_read_too_streamed_or_not() {
    let server = SseServer::start().await;
    server.push(Reply::events(&[sse(&[
        delta(json!({"reasoning": "Hmm."})),
        delta(json!({"content": "Yes."})),
        finish("stop"),
    ]) + DONE]));
    let client = OpenAiClient::new(&config(&server)).unwrap();
    let streamed = client.complete(&hello()).await.unwrap();
    assert_eq!(
        streamed.message.reasoning,
        vec![Reasoning::Text {
            text: "Hmm.".to_owned(),
            signature: None
        }]
    );

    server.push(Reply::json(
        200,
        &json!({"choices": [{"message": {"content": "No.", "reasoning_content": "Let me see."},
                             "finish_reason": "stop"}]}),
    ));
    let whole = client.complete(&hello()).await.unwrap();
    assert_eq!(
        whole.message.reasoning,
        vec![Reasoning::Text {
            text: "Let me see.".to_owned(),
            signature: None
        }]
    );
}

#[tokio::test]
async fn the_key_echoed_by_the_server_never_reaches_an_error() {
    // In an error body…
    let server = SseServer::start().await;
    server.always(Reply::json(
        401,
        &json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}),
    ));
    let error = ask(&server).await.unwrap_err();
    assert_eq!(error.code(), "model_auth");
    assert!(!error.to_string().contains(KEY), "{error}");

    // …and in an error event mid-stream.
    let server = SseServer::start().await;
    server.always(Reply::events(&[sse(&[
        delta(json!({"content": "a"})),
        json!({"error": {"message": format!("upstream saw Bearer {KEY}")}}),
    ])]));
    let error = ask(&server).await.unwrap_err();
    assert_eq!(error.code(), "model_bad_response");
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(error.to_string().contains("upstream saw"), "{error}");
}

#[tokio::test]
async fn malformed_events_are_a_bad_response() {
    let server = SseServer::start().await;
    server.always(Reply::events(&["data: {not json\n\n"]));
    let error = ask(&server).await.unwrap_err();
    assert_eq!(error.code(), "model_bad_response");
    assert_eq!(
        server.requests().len(),
        1,
        "a malformed answer is not retried"
    );
}

#[tokio::test]
async fn no_key_on_loopback_sends_no_authorization() {
    let server = SseServer::start().await;
    server.always(Reply::events(&[text_stream("local")]));
    let config = ModelConfig {
        base_url: server.base_url.clone(),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..ModelConfig::new("", "llama")
    };

    let response = OpenAiClient::new(&config)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap();

    assert_eq!(response.message.content.as_deref(), Some("local"));
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn an_endless_event_is_refused_at_the_size_cap() {
    let server = SseServer::start().await;
    // One `data:` line that never ends, past the cap, in 1 MiB chunks.
    let mib = vec![b'x'; 1024 * 1024];
    let mut steps = vec![Step::Chunk(b"data: ".to_vec())];
    for _ in 0..=(troupe::model::transport::MAX_BODY_BYTES / mib.len()) {
        steps.push(Step::Chunk(mib.clone()));
    }
    server.always(Reply {
        steps,
        ..Reply::events::<&str>(&[])
    });
    let config = ModelConfig {
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..config(&server)
    };

    let error = OpenAiClient::new(&config)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap_err();

    assert_eq!(error.code(), "model_bad_response");
    assert!(error.to_string().contains("bytes"), "{error}");
}

/// Keeps the text pieces a call reports.
#[derive(Default)]
struct Pieces(std::sync::Mutex<Vec<String>>);

impl troupe::model::progress::ProgressSink for Pieces {
    fn progress(&self, progress: &troupe::model::progress::CallProgress) {
        if let troupe::model::progress::CallProgress::Text(piece) = progress {
            self.0.lock().unwrap().push(piece.clone());
        }
    }
}

#[tokio::test]
async fn a_turns_text_is_reported_as_it_streams_and_a_summarys_is_not() {
    let server = SseServer::start().await;
    let body = sse(&[
        delta(json!({"role": "assistant", "content": "héllo "})),
        delta(json!({"content": "wörld"})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "glob", "arguments": "{}"}}]}),
        ),
        finish("tool_calls"),
        usage_chunk(),
    ]) + DONE;
    server.push(Reply::events(&[body.clone().into_bytes()]));
    server.push(Reply::events(&[body.into_bytes()]));
    let client = OpenAiClient::new(&config(&server)).unwrap();

    let seen = std::sync::Arc::new(Pieces::default());
    let response = troupe::model::progress::observed(seen.clone(), client.complete(&hello()))
        .await
        .unwrap();
    assert_eq!(response.message.content.as_deref(), Some("héllo wörld"));
    assert_eq!(*seen.0.lock().unwrap(), ["héllo ", "wörld"]);

    let quiet = std::sync::Arc::new(Pieces::default());
    let summary = ModelRequest {
        purpose: troupe::model::types::Purpose::Summary,
        ..hello()
    };
    troupe::model::progress::observed(quiet.clone(), client.complete(&summary))
        .await
        .unwrap();
    assert!(
        quiet.0.lock().unwrap().is_empty(),
        "a summary's text is not an agent's answer"
    );
}
