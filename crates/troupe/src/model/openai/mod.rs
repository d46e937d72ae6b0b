//! The OpenAI Chat Completions client: one non-streaming `POST {base_url}/chat/completions` per
//! attempt, over reqwest with rustls. Works with any compatible server (OpenAI, Ollama, vLLM,
//! llama.cpp server, DeepSeek, …).
//!
//! What happens to one [`ModelClient::complete`] call:
//!
//! 1. The primary model is tried up to `retry.max_attempts` times. Rate limits (429), server
//!    errors (5xx), timeouts and connection failures are retried after a backoff with jitter, or
//!    after the server's `Retry-After` (capped); any other failure ends the attempts at once.
//! 2. If the primary's final error is retryable or an unknown model (404) and a fallback model is
//!    configured, the fallback gets the same treatment. Auth failures, other 4xx and malformed
//!    responses never trigger the fallback: they would fail the same way, or point at a bug.
//!
//! The JSON shape lives in [`wire`]; this module is transport, status mapping and retries.

pub mod wire;

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::retry::{jitter_sample, RetryPolicy};
use super::types::{ModelRequest, ModelResponse};
use super::{ModelClient, ModelError};
use crate::model::config::{ApiKey, ModelConfig};
use crate::secrets::Redactor;

/// A [`ModelClient`] for the OpenAI Chat Completions API.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    /// `{base_url}/chat/completions`, built once with exactly one slash in between.
    endpoint: String,
    api_key: ApiKey,
    /// Removes the key from every text the server sends back before it is cut or shown.
    redactor: Redactor,
    model: String,
    fallback_model: Option<String>,
    /// Kept to name it in timeout errors; the HTTP client enforces it.
    timeout: Duration,
    retry: RetryPolicy,
}

/// One failed attempt, with what the server asked about retrying.
struct Failure {
    error: ModelError,
    retry_after: Option<Duration>,
}

impl OpenAiClient {
    pub fn new(config: &ModelConfig) -> Result<Self, ModelError> {
        let endpoint = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .user_agent(concat!("troupe/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| ModelError::Transport {
                endpoint: endpoint.clone(),
                attempts: 0,
                reason: error_chain(&err),
            })?;
        Ok(Self {
            http,
            endpoint,
            api_key: config.api_key.clone(),
            redactor: config.redactor(),
            model: config.model.clone(),
            fallback_model: config
                .fallback_model
                .clone()
                .filter(|fallback| *fallback != config.model),
            timeout: config.timeout,
            retry: config.retry.clone(),
        })
    }

    /// The URL every request is posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn complete_with(
        &self,
        model: &str,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        let body = wire::request_body(model, request);
        let attempts = self.retry.attempts();
        let mut attempt = 1;
        loop {
            let failure = match self.attempt(model, &body).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if attempt >= attempts || !failure.error.is_retryable() {
                return Err(failure.error.with_attempts(attempt));
            }
            let delay = self
                .retry
                .delay_after(attempt, failure.retry_after, jitter_sample());
            tracing::warn!(
                model,
                attempt,
                delay_ms = delay.as_millis() as u64,
                error = %failure.error,
                "model call failed; retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, model: &str, body: &Value) -> Result<ModelResponse, Failure> {
        let sent = self
            .http
            .post(&self.endpoint)
            .bearer_auth(self.api_key.expose())
            .json(body)
            .send()
            .await;
        let response = sent.map_err(|err| self.request_failure(model, &err))?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let bytes = response
            .bytes()
            .await
            .map_err(|err| self.request_failure(model, &err))?;
        if status.is_success() {
            return wire::parse_response(&bytes, model).map_err(|reason| Failure {
                error: ModelError::BadResponse {
                    model: model.to_owned(),
                    reason: self.server_text(&reason),
                },
                retry_after: None,
            });
        }
        let message = wire::server_message(&bytes).map(|message| self.server_text(&message));
        Err(Failure {
            error: ModelError::from_status(status.as_u16(), model, &self.endpoint, message),
            retry_after,
        })
    }

    fn request_failure(&self, model: &str, err: &reqwest::Error) -> Failure {
        let error = if err.is_timeout() {
            ModelError::Timeout {
                model: model.to_owned(),
                timeout: self.timeout,
                attempts: 1,
            }
        } else {
            ModelError::Transport {
                endpoint: self.endpoint.clone(),
                attempts: 1,
                reason: self.server_text(&error_chain(err)),
            }
        };
        Failure {
            error,
            retry_after: None,
        }
    }

    /// Text from the server (or about the connection) as it may be shown: servers sometimes
    /// echo what they were sent, so the key is redacted first, and only then is the text cut
    /// to one short line.
    fn server_text(&self, text: &str) -> String {
        wire::cut(&self.redactor.redact(text))
    }
}

#[async_trait::async_trait]
impl ModelClient for OpenAiClient {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let primary = match self.complete_with(&self.model, request).await {
            Ok(response) => return Ok(response),
            Err(error) => error,
        };
        let fallback_model = match &self.fallback_model {
            Some(fallback) if primary.triggers_fallback() => fallback,
            _ => return Err(primary),
        };
        tracing::warn!(
            model = %self.model,
            fallback = %fallback_model,
            error = %primary,
            "primary model failed; trying the fallback model"
        );
        self.complete_with(fallback_model, request)
            .await
            .map_err(|fallback| ModelError::FallbackFailed {
                primary: Box::new(primary),
                fallback: Box::new(fallback),
            })
    }
}

/// `retry-after-ms` (OpenAI's, more precise) or `Retry-After` in seconds. The HTTP-date form is
/// ignored: the backoff applies instead.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite() && *value >= 0.0)
    };
    if let Some(millis) = number("retry-after-ms") {
        return Duration::try_from_secs_f64(millis / 1000.0).ok();
    }
    number("retry-after").and_then(|secs| Duration::try_from_secs_f64(secs).ok())
}

/// An error and its sources on one line ("error sending request: … : connection refused").
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    wire::collapse(&parts.join(": "))
}
