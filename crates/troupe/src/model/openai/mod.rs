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
//!    A request too long for the context window (a 400 that says so) is neither retried nor
//!    handed on: the caller compacts the conversation instead.
//! 3. Overloads (429, 503, 529) of the primary are not waited out forever: after
//!    `overload_fallback_after` of them in a row, the primary's remaining attempts are skipped
//!    and the fallback is asked at once (without a fallback, the attempts go on).
//! 4. The whole call has one deadline (`ModelConfig::deadline`): an attempt still running when it
//!    passes is abandoned, and a retry whose backoff would end past it is not started; either
//!    way the call fails with `model_deadline_exceeded`.
//!
//! The JSON shape lives in [`wire`]; this module is transport, status mapping and retries.

pub mod wire;

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::time::Instant;

use super::progress::{self, CallProgress};
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
    /// Overloads of the primary in a row before the fallback is asked (at least 1).
    overload_fallback_after: u32,
    /// The total time of one `complete` call.
    deadline: Duration,
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
            overload_fallback_after: config.overload_fallback_after.max(1),
            deadline: config.deadline,
        })
    }

    /// The URL every request is posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Tries `model` until it answers, its attempts are spent, the failure is not worth retrying,
    /// the time is `until`, or (given `overload_limit`) the server said it is overloaded that many
    /// times in a row.
    async fn complete_with(
        &self,
        model: &str,
        request: &ModelRequest,
        until: Instant,
        overload_limit: Option<u32>,
    ) -> Result<ModelResponse, ModelError> {
        let body = wire::request_body(model, request);
        let attempts = self.retry.attempts();
        let mut attempt = 1;
        let mut overloads = 0;
        loop {
            let failure = match tokio::time::timeout_at(until, self.attempt(model, &body)).await {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(failure)) => failure,
                Err(_) => return Err(self.deadline_exceeded(model, attempt)),
            };
            overloads = if failure.error.is_overload() {
                overloads + 1
            } else {
                0
            };
            if attempt >= attempts || !failure.error.is_retryable() {
                return Err(failure.error.with_attempts(attempt));
            }
            if overload_limit.is_some_and(|limit| overloads >= limit) {
                tracing::warn!(
                    model,
                    attempt,
                    error = %failure.error,
                    "model overloaded; skipping its remaining attempts for the fallback model"
                );
                return Err(failure.error.with_attempts(attempt));
            }
            let delay = self
                .retry
                .delay_after(attempt, failure.retry_after, jitter_sample());
            if Instant::now()
                .checked_add(delay)
                .is_none_or(|at| at >= until)
            {
                tracing::warn!(
                    model,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    error = %failure.error,
                    "model call failed; no retry, its backoff would pass the call's deadline"
                );
                return Err(self.deadline_exceeded(model, attempt));
            }
            tracing::warn!(
                model,
                attempt,
                delay_ms = delay.as_millis() as u64,
                error = %failure.error,
                "model call failed; retrying"
            );
            progress::report(CallProgress::Retrying {
                model: model.to_owned(),
                attempt,
                error: failure.error.to_string(),
                delay,
            });
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    fn deadline_exceeded(&self, model: &str, attempts: u32) -> ModelError {
        ModelError::DeadlineExceeded {
            model: model.to_owned(),
            deadline: self.deadline,
            attempts,
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
        // The whole text and the codes are read for "context too long"; only the cut text is kept.
        let reply = wire::server_error(&bytes);
        let says_too_long = reply.says_context_too_long();
        let message = reply.message.map(|message| self.server_text(&message));
        Err(Failure {
            error: ModelError::from_reply(
                status.as_u16(),
                model,
                &self.endpoint,
                message,
                says_too_long,
            ),
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
        let until = Instant::now()
            .checked_add(self.deadline)
            .unwrap_or_else(far_future);
        let overload_limit = self
            .fallback_model
            .as_ref()
            .map(|_| self.overload_fallback_after);
        let primary = match self
            .complete_with(&self.model, request, until, overload_limit)
            .await
        {
            Ok(response) => return Ok(response),
            Err(error) => error,
        };
        let fallback_model = match &self.fallback_model {
            // With no time left the fallback is not started: the primary's failure is the one
            // that happened.
            Some(fallback) if primary.triggers_fallback() && Instant::now() < until => fallback,
            _ => return Err(primary),
        };
        tracing::warn!(
            model = %self.model,
            fallback = %fallback_model,
            error = %primary,
            "primary model failed; trying the fallback model"
        );
        progress::report(CallProgress::FallingBack {
            from: self.model.clone(),
            to: fallback_model.clone(),
            error: primary.to_string(),
        });
        self.complete_with(fallback_model, request, until, None)
            .await
            .map_err(|fallback| ModelError::FallbackFailed {
                primary: Box::new(primary),
                fallback: Box::new(fallback),
            })
    }
}

/// About thirty years from now: a deadline too large to add to the clock is no deadline.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
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
