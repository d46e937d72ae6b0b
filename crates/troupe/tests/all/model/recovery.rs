//! The OpenAI client's recovery rules against a real HTTP server on 127.0.0.1 (wiremock):
//! a prompt too long for the context window is its own error (never retried, never handed to the
//! fallback), overloads hand over to the fallback after a threshold, and every call has a total
//! deadline.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::error::ErrorCode;
use troupe::model::config::ModelConfig;
use troupe::model::{AssistantMessage, ModelClient, ModelError, RetryPolicy, ScriptedModel};
use wiremock::matchers::body_partial_json;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::openai::{
    assert_one_line_without_key, client, config, fails, hello, models_requested, mount, ok_text,
    openai_error, requests,
};

fn with_fallback(server: &MockServer) -> ModelConfig {
    ModelConfig {
        fallback_model: Some("gpt-fallback".to_owned()),
        ..config(server)
    }
}

async fn mount_for(server: &MockServer, model: &str, response: ResponseTemplate) {
    Mock::given(body_partial_json(json!({"model": model})))
        .respond_with(response)
        .mount(server)
        .await;
}

// ---- prompt too long ----------------------------------------------------------------------

/// Each way a server says the prompt is too long, as the body it sends.
fn too_long_bodies() -> Vec<(u16, ResponseTemplate)> {
    let openai = |status: u16, message: &str, code: serde_json::Value| {
        ResponseTemplate::new(status).set_body_json(json!({
            "error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": code}
        }))
    };
    let mut bodies = vec![
        // OpenAI: the code says it, and so does the message.
        (
            400,
            openai(
                400,
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.",
                json!("context_length_exceeded"),
            ),
        ),
        // The code alone says it: the message is about something else.
        (400, openai(400, "Bad request.", json!("context_length_exceeded"))),
        // The type alone says it.
        (
            400,
            ResponseTemplate::new(400).set_body_json(
                json!({"error": {"message": "Bad request.", "type": "context_window_exceeded"}}),
            ),
        ),
        // Ollama: a plain string.
        (
            400,
            ResponseTemplate::new(400).set_body_json(json!({"error": "prompt is too long"})),
        ),
        // llama.cpp server.
        (
            400,
            ResponseTemplate::new(400).set_body_json(json!({"error": {"code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error"}})),
        ),
        // vLLM: top-level message, numeric code.
        (
            400,
            ResponseTemplate::new(400).set_body_json(json!({"object": "error",
                "message": "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens. Please reduce the length of the messages.",
                "type": "BadRequestError", "param": null, "code": 400})),
        ),
        (
            400,
            ResponseTemplate::new(400).set_body_json(json!({"object": "error",
                "message": "The prompt (total length 40000) is longer than the model's context length (32768)",
                "type": "BadRequestError", "code": 400})),
        ),
        // A gateway that answers 413, in plain text and upper case.
        (
            413,
            ResponseTemplate::new(413).set_body_string("INPUT IS TOO LONG for this model"),
        ),
        // FastAPI-style detail.
        (
            400,
            ResponseTemplate::new(400)
                .set_body_json(json!({"detail": "Too many tokens: 9000 > 8192"})),
        ),
    ];
    for phrase in [
        "context length exceeded",
        "prompt_too_long",
        "Your input exceeds the context window of this model",
    ] {
        bodies.push((400, openai(400, phrase, serde_json::Value::Null)));
    }
    bodies
}

#[tokio::test]
async fn every_known_form_of_prompt_too_long_is_model_context_too_long() {
    for (index, (status, body)) in too_long_bodies().into_iter().enumerate() {
        let server = MockServer::start().await;
        mount(&server, body).await;

        let error = fails(&client(&with_fallback(&server))).await;

        assert_eq!(error.code(), "model_context_too_long", "#{index}: {error}");
        assert!(error.is_context_too_long(), "#{index}");
        assert!(
            matches!(error, ModelError::ContextTooLong { status: s, .. } if s == status),
            "#{index}: {error:?}"
        );
        assert!(
            error.to_string().starts_with(&format!(
                "the request exceeded the context window of model `gpt-test` (HTTP {status})"
            )),
            "#{index}: {error}"
        );
        assert_one_line_without_key(&error);
        // Neither retried nor handed to the fallback: only compaction helps.
        assert_eq!(
            models_requested(&requests(&server).await),
            vec!["gpt-test"],
            "#{index}"
        );
    }
}

#[tokio::test]
async fn the_marker_is_found_past_the_cut_of_a_long_message() {
    let server = MockServer::start().await;
    let message = format!("{} maximum context length is 8192 tokens", "x ".repeat(400));
    mount(&server, openai_error(400, &message)).await;

    let error = fails(&client(&config(&server))).await;

    assert_eq!(error.code(), "model_context_too_long", "{error}");
}

#[tokio::test]
async fn a_bad_request_about_something_else_stays_model_request_refused() {
    for body in [
        openai_error(400, "tools[0].function.name is invalid"),
        ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "bad",
            "type": "invalid_request_error", "code": "invalid_value"}})),
        ResponseTemplate::new(413).set_body_string("payload rejected"),
    ] {
        let server = MockServer::start().await;
        mount(&server, body).await;

        let error = fails(&client(&with_fallback(&server))).await;

        assert_eq!(error.code(), "model_request_refused", "{error}");
        assert!(!error.is_context_too_long());
        assert_eq!(requests(&server).await.len(), 1);
    }
}

#[tokio::test]
async fn a_server_error_that_mentions_tokens_is_not_context_too_long() {
    // Only a 400 or 413 can be "too long": a 500 saying it is still a server error, retried.
    let server = MockServer::start().await;
    mount(
        &server,
        openai_error(500, "too many tokens in flight, try again"),
    )
    .await;

    let error = fails(&client(&config(&server))).await;

    assert_eq!(error.code(), "model_server_error");
    assert_eq!(requests(&server).await.len(), 3);
}

#[tokio::test]
async fn a_fallback_that_finds_the_prompt_too_long_is_context_too_long() {
    let server = MockServer::start().await;
    mount_for(&server, "gpt-test", ResponseTemplate::new(500)).await;
    mount_for(
        &server,
        "gpt-fallback",
        openai_error(400, "This model's maximum context length is 4096 tokens."),
    )
    .await;

    let error = fails(&client(&with_fallback(&server))).await;

    assert!(
        matches!(error, ModelError::FallbackFailed { .. }),
        "{error:?}"
    );
    assert!(error.is_context_too_long());
    assert_eq!(error.code(), "model_context_too_long");
}

#[tokio::test]
async fn the_scripted_models_context_error_maps_to_context_too_long() {
    let model = ScriptedModel::from_json_str(
        r#"{"responses": [{"error": {"status": 400, "message": "context_length_exceeded"}},
                          {"error": {"status": 400, "message": "max_tokens is too large"}}]}"#,
    )
    .unwrap();

    let first = model.complete(&hello()).await.unwrap_err();
    let second = model.complete(&hello()).await.unwrap_err();

    assert_eq!(first.code(), "model_context_too_long");
    assert!(first.is_context_too_long());
    assert_eq!(second.code(), "model_request_refused");
}

// ---- overloads hand over to the fallback --------------------------------------------------

#[tokio::test]
async fn two_overloads_in_a_row_hand_the_call_to_the_fallback() {
    for status in [529, 503, 429] {
        let server = MockServer::start().await;
        mount_for(&server, "gpt-test", ResponseTemplate::new(status)).await;
        mount_for(&server, "gpt-fallback", ok_text("from fallback")).await;
        let config = ModelConfig {
            retry: RetryPolicy::fixed(5, Duration::from_millis(1)),
            ..with_fallback(&server)
        };
        assert_eq!(config.overload_fallback_after, 2, "the default");

        let response = client(&config).complete(&hello()).await.unwrap();

        assert_eq!(response.message, AssistantMessage::text("from fallback"));
        assert_eq!(
            models_requested(&requests(&server).await),
            vec!["gpt-test", "gpt-test", "gpt-fallback"],
            "HTTP {status}"
        );
    }
}

#[tokio::test]
async fn the_overload_threshold_is_configurable() {
    let server = MockServer::start().await;
    mount_for(&server, "gpt-test", ResponseTemplate::new(529)).await;
    mount_for(&server, "gpt-fallback", ok_text("from fallback")).await;
    let config = ModelConfig {
        retry: RetryPolicy::fixed(5, Duration::from_millis(1)),
        overload_fallback_after: 3,
        ..with_fallback(&server)
    };

    client(&config).complete(&hello()).await.unwrap();

    assert_eq!(
        models_requested(&requests(&server).await),
        vec!["gpt-test", "gpt-test", "gpt-test", "gpt-fallback"]
    );
}

#[tokio::test]
async fn overloads_count_only_in_a_row() {
    // 529, 500, 529: never two overloads in a row, so the primary spends all its attempts.
    let server = MockServer::start().await;
    for status in [529, 500, 529] {
        Mock::given(body_partial_json(json!({"model": "gpt-test"})))
            .respond_with(ResponseTemplate::new(status))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
    }
    mount_for(&server, "gpt-fallback", ok_text("from fallback")).await;
    let config = ModelConfig {
        retry: RetryPolicy::fixed(3, Duration::from_millis(1)),
        ..with_fallback(&server)
    };

    client(&config).complete(&hello()).await.unwrap();

    assert_eq!(
        models_requested(&requests(&server).await),
        vec!["gpt-test", "gpt-test", "gpt-test", "gpt-fallback"]
    );
}

#[tokio::test]
async fn without_a_fallback_every_attempt_is_made_on_overloads() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(529)).await;
    let config = ModelConfig {
        retry: RetryPolicy::fixed(4, Duration::from_millis(1)),
        ..config(&server)
    };

    let error = fails(&client(&config)).await;

    assert_eq!(error.code(), "model_overloaded");
    assert_eq!(requests(&server).await.len(), 4);
}

// ---- one deadline for the whole call --------------------------------------------------------

#[tokio::test]
async fn a_slow_answer_is_cut_at_the_calls_deadline() {
    let server = MockServer::start().await;
    mount(
        &server,
        ok_text("too late").set_delay(Duration::from_secs(5)),
    )
    .await;
    let config = ModelConfig {
        deadline: Duration::from_millis(200),
        ..with_fallback(&server)
    };

    let started = Instant::now();
    let error = fails(&client(&config)).await;

    assert!(started.elapsed() < Duration::from_secs(4), "not cut");
    assert_eq!(error.code(), "model_deadline_exceeded");
    assert!(!error.is_retryable());
    assert_eq!(
        error.to_string(),
        "model `gpt-test` gave no answer within the call's deadline of 200ms"
    );
    assert!(
        matches!(error, ModelError::DeadlineExceeded { attempts: 1, .. }),
        "{error:?}"
    );
    // The deadline covers the fallback too: it is not started once time is up.
    assert_eq!(models_requested(&requests(&server).await), vec!["gpt-test"]);
}

#[tokio::test]
async fn a_retry_whose_backoff_would_pass_the_deadline_is_not_started() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(500)).await;
    let config = ModelConfig {
        retry: RetryPolicy::fixed(3, Duration::from_secs(5)),
        deadline: Duration::from_millis(300),
        ..config(&server)
    };

    let started = Instant::now();
    let error = fails(&client(&config)).await;

    assert!(started.elapsed() < Duration::from_secs(4), "slept past it");
    assert_eq!(error.code(), "model_deadline_exceeded");
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn the_deadline_spans_attempts_and_backoffs_together() {
    // Each attempt takes 100ms and each backoff 10ms: 20 attempts would take over 2s, each one
    // well within the per-attempt timeout. The 600ms deadline ends the call after a few.
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(500).set_delay(Duration::from_millis(100)),
    )
    .await;
    let config = ModelConfig {
        retry: RetryPolicy::fixed(20, Duration::from_millis(10)),
        deadline: Duration::from_millis(600),
        ..config(&server)
    };

    let started = Instant::now();
    let error = fails(&client(&config)).await;
    let elapsed = started.elapsed();

    assert_eq!(error.code(), "model_deadline_exceeded", "{error}");
    let ModelError::DeadlineExceeded { attempts, .. } = error else {
        panic!("{error:?}");
    };
    assert!((2..20).contains(&attempts), "{attempts}");
    assert_eq!(requests(&server).await.len(), attempts as usize);
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
    assert_eq!(
        error.to_string(),
        format!("model `gpt-test` gave no answer within the call's deadline of 600ms after {attempts} attempts")
    );
}

#[tokio::test]
async fn a_fallback_cut_by_the_deadline_reports_both() {
    let server = MockServer::start().await;
    mount_for(&server, "gpt-test", ResponseTemplate::new(404)).await;
    mount_for(
        &server,
        "gpt-fallback",
        ok_text("too late").set_delay(Duration::from_secs(5)),
    )
    .await;
    let config = ModelConfig {
        deadline: Duration::from_millis(200),
        ..with_fallback(&server)
    };

    let error = fails(&client(&config)).await;

    assert!(
        matches!(error, ModelError::FallbackFailed { .. }),
        "{error:?}"
    );
    assert_eq!(error.code(), "model_deadline_exceeded");
    assert!(!error.is_context_too_long());
}
