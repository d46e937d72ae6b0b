//! The HTTP transport every provider shares: [`HttpModelClient`] posts what a
//! [`WireFormat`] builds, over reqwest with rustls, and hands back what it reads. It knows
//! nothing of any provider's JSON; the format never touches the network.
//!
//! What happens to one [`ModelClient::complete`] call:
//!
//! 1. The primary model is tried up to `retry.max_attempts` times. Rate limits (429), overloads
//!    (529, a 503 that says so), server errors (5xx), timeouts, connection failures and streams
//!    cut before their end are retried after a backoff with jitter, or after the server's
//!    `Retry-After` (capped); any other failure ends the attempts at once.
//! 2. If the primary's final error is retryable or an unknown model (404) and a fallback model is
//!    configured, the fallback gets the same treatment. Auth failures, other 4xx and malformed
//!    responses never trigger the fallback: they would fail the same way, or point at a bug.
//!    A request too long for the context window is neither retried nor handed on: the caller
//!    compacts the conversation instead.
//! 3. Overloads (429, 503, 529) of the primary are not waited out forever: after
//!    `overload_fallback_after` of them in a row, the primary's remaining attempts are skipped
//!    and the fallback is asked at once (without a fallback, the attempts go on).
//! 4. The whole call has one deadline (`ModelConfig::deadline`): an attempt still running when it
//!    passes is abandoned, and a retry whose backoff would end past it is not started; either
//!    way the call fails with `model_deadline_exceeded`.
//!
//! **Streaming.** Answers are asked for as server-sent events. `ModelConfig::timeout` is an
//! *idle* timeout: for the response headers, then between any two chunks of the body, so a long
//! generation that keeps sending is never cut, and a server that stalls is. An answer only
//! counts once the stream says it is complete; a stream that ends before is a retryable
//! `model_transport` failure, never a truncated answer. Servers that do not stream are
//! recognised (a success that is not `text/event-stream` is read as a whole answer; a 400/422
//! whose error mentions streaming is asked again at once without streaming) and remembered per
//! client, so the refusal costs one request at most.
//!
//! **Usage.** An answer whose server reported no token usage gets an estimate of it
//! ([`estimate`]), marked as such, so that budgets and `usage.jsonl` still count the call.
//!
//! **Secrets.** The credential travels only in headers the format builds, marked sensitive;
//! every text from the server (or about the connection) is redacted before it is cut and shown.

mod body;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use tokio::time::Instant;

use body::ReadError;
pub use body::MAX_BODY_BYTES;

use super::estimate;
use super::progress::{self, CallProgress};
use super::retry::{jitter_sample, RetryPolicy};
use super::types::{ModelRequest, ModelResponse};
use super::wire_format::{ErrorKind, WireFormat, WireRequest};
use super::{ModelClient, ModelError};
use crate::model::config::ModelConfig;
use crate::model::openai::wire::{collapse, cut};
use crate::secrets::Redactor;

/// A [`ModelClient`] over HTTP, speaking one [`WireFormat`].
#[derive(Debug, Clone)]
pub struct HttpModelClient {
    http: reqwest::Client,
    wire: Arc<dyn WireFormat>,
    /// Removes the key from every text the server sends back before it is cut or shown.
    redactor: Redactor,
    model: String,
    fallback_model: Option<String>,
    /// The idle timeout: for the response headers, then between chunks of the body.
    timeout: Duration,
    retry: RetryPolicy,
    /// Overloads of the primary in a row before the fallback is asked (at least 1).
    overload_fallback_after: u32,
    /// The total time of one `complete` call.
    deadline: Duration,
    /// Whether answers are still asked for as streams: cleared, for good, by the first sign
    /// that the server does not stream. Shared by the clones of this client.
    streams: Arc<AtomicBool>,
}

/// One failed attempt, with what the server asked about retrying.
struct Failure {
    error: ModelError,
    retry_after: Option<Duration>,
}

impl Failure {
    fn new(error: ModelError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

impl HttpModelClient {
    /// A client for `config` speaking `wire`.
    pub fn with_wire(config: &ModelConfig, wire: Arc<dyn WireFormat>) -> Result<Self, ModelError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("troupe/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| ModelError::Transport {
                endpoint: config.base_url.clone(),
                attempts: 0,
                reason: error_chain(&err),
            })?;
        Ok(Self {
            http,
            wire,
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
            streams: Arc::new(AtomicBool::new(true)),
        })
    }

    /// The URL requests for the configured model are posted to.
    pub fn endpoint(&self) -> String {
        self.wire
            .request(&self.model, &ModelRequest::default(), false)
            .url
    }

    /// Whether answers are still asked for as streams (false once the server showed it does not
    /// stream).
    pub fn streams(&self) -> bool {
        self.streams.load(Ordering::Relaxed)
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
        let attempts = self.retry.attempts();
        let mut attempt = 1;
        let mut overloads = 0;
        loop {
            let failure = match tokio::time::timeout_at(until, self.attempt(model, request)).await {
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

    /// One attempt: streamed if the server still seems to stream, asked again at once without
    /// streaming if it refuses (that second request is part of the same attempt).
    async fn attempt(&self, model: &str, request: &ModelRequest) -> Result<ModelResponse, Failure> {
        let stream = self.streams();
        match self.exchange(model, request, stream).await {
            Err(Exchange::RefusedStreaming(message)) => {
                tracing::info!(
                    model,
                    reason = %message,
                    "the model server refused to stream; asking for whole answers from now on"
                );
                self.streams.store(false, Ordering::Relaxed);
                match self.exchange(model, request, false).await {
                    Ok(response) => Ok(response),
                    Err(Exchange::Failed(failure)) => Err(failure),
                    // Not asked for a stream: this cannot be a refusal to stream.
                    Err(Exchange::RefusedStreaming(message)) => {
                        Err(Failure::new(ModelError::RequestRefused {
                            model: model.to_owned(),
                            status: 400,
                            message: Some(message),
                        }))
                    }
                }
            }
            Err(Exchange::Failed(failure)) => Err(failure),
            Ok(response) => Ok(response),
        }
    }

    async fn exchange(
        &self,
        model: &str,
        request: &ModelRequest,
        stream: bool,
    ) -> Result<ModelResponse, Exchange> {
        let wire = self.wire.request(model, request, stream);
        let endpoint = wire.url.clone();
        let response = self.send(model, wire).await?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let bytes = body::whole(response, self.timeout)
                .await
                .map_err(|err| self.read_failure(model, &endpoint, err))?;
            let body = String::from_utf8_lossy(&bytes);
            let (kind, message) = self.wire.classify_error(status.as_u16(), &body);
            let message = message.map(|message| self.server_text(&message));
            if stream
                && kind == ErrorKind::Refused
                && matches!(status.as_u16(), 400 | 422)
                && message
                    .as_deref()
                    .is_some_and(|text| text.to_lowercase().contains("stream"))
            {
                return Err(Exchange::RefusedStreaming(message.unwrap_or_default()));
            }
            return Err(Exchange::Failed(Failure {
                error: ModelError::from_kind(kind, status.as_u16(), model, &endpoint, message),
                retry_after,
            }));
        }
        let is_event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim().to_lowercase().starts_with("text/event-stream"));
        if is_event_stream {
            let text = request.purpose.is_turn();
            return self.read_stream(model, &endpoint, response, text).await;
        }
        if stream {
            tracing::info!(
                model,
                "the model server answered a streaming request whole; asking for whole answers from now on"
            );
            self.streams.store(false, Ordering::Relaxed);
        }
        let bytes = body::whole(response, self.timeout)
            .await
            .map_err(|err| self.read_failure(model, &endpoint, err))?;
        let body = String::from_utf8_lossy(&bytes);
        self.wire
            .parse_response(model, &body)
            .map_err(|reason| self.bad_response(model, &reason))
    }

    /// Posts the request; waits for the response headers no longer than the idle timeout.
    async fn send(&self, model: &str, wire: WireRequest) -> Result<reqwest::Response, Exchange> {
        let mut headers = HeaderMap::new();
        for (name, value) in &wire.headers {
            // Keys were checked when the config was built; a header that still is not valid is
            // named without its value being shown.
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                Exchange::Failed(Failure::new(ModelError::Transport {
                    endpoint: wire.url.clone(),
                    attempts: 1,
                    reason: format!("`{name}` is not a valid HTTP header name"),
                }))
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                Exchange::Failed(Failure::new(ModelError::Transport {
                    endpoint: wire.url.clone(),
                    attempts: 1,
                    reason: format!("the {name} header is not a valid HTTP header value"),
                }))
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let sent = self
            .http
            .post(&wire.url)
            .headers(headers)
            .json(&wire.body)
            .send();
        match tokio::time::timeout(self.timeout, sent).await {
            Err(_) => Err(Exchange::Failed(Failure::new(self.timed_out(model)))),
            Ok(Err(err)) => Err(Exchange::Failed(
                self.request_failure(model, &wire.url, &err),
            )),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// Feeds the server-sent events to the format's assembler until it says the answer is
    /// complete; the end of the body before that is a cut stream. With `text` (an agent's
    /// turn), the answer's text is reported as it arrives ([`CallProgress::Text`]).
    async fn read_stream(
        &self,
        model: &str,
        endpoint: &str,
        response: reqwest::Response,
        text: bool,
    ) -> Result<ModelResponse, Exchange> {
        let mut assembler = self.wire.stream_assembler(model);
        let mut events =
            sse_stream::SseStream::from_bytes_stream(body::chunks(response, self.timeout));
        let mut complete = false;
        while let Some(event) = events.next().await {
            let event = event
                .map_err(|err| self.read_failure(model, endpoint, ReadError::from_sse(err)))?;
            let Some(data) = event.data.as_deref() else {
                // A comment, a keep-alive or a bare `retry:`: nothing of the answer.
                continue;
            };
            let pushed = assembler.push(event.event.as_deref(), data);
            if text {
                if let Some(piece) = assembler.take_text() {
                    progress::report(CallProgress::Text(piece));
                }
            }
            match pushed {
                Ok(true) => {
                    complete = true;
                    break;
                }
                Ok(false) => {}
                Err(reason) => {
                    return Err(match self.wire.classify_stream_error(&reason) {
                        Some(kind) => Exchange::Failed(Failure::new(ModelError::from_kind(
                            kind,
                            kind.status(),
                            model,
                            endpoint,
                            Some(self.server_text(&reason)),
                        ))),
                        None => self.bad_response(model, &reason),
                    })
                }
            }
        }
        match assembler.finish() {
            Ok(response) => Ok(response),
            Err(reason) if complete => Err(self.bad_response(model, &reason)),
            Err(reason) => Err(Exchange::Failed(Failure::new(ModelError::Transport {
                endpoint: endpoint.to_owned(),
                attempts: 1,
                reason: self.server_text(&format!("the answer stream was cut: {reason}")),
            }))),
        }
    }

    fn bad_response(&self, model: &str, reason: &str) -> Exchange {
        Exchange::Failed(Failure::new(ModelError::BadResponse {
            model: model.to_owned(),
            reason: self.server_text(reason),
        }))
    }

    fn timed_out(&self, model: &str) -> ModelError {
        ModelError::Timeout {
            model: model.to_owned(),
            timeout: self.timeout,
            attempts: 1,
        }
    }

    fn read_failure(&self, model: &str, endpoint: &str, err: ReadError) -> Exchange {
        Exchange::Failed(match err {
            ReadError::Idle(_) => Failure::new(self.timed_out(model)),
            ReadError::Http(err) => self.request_failure(model, endpoint, &err),
            ReadError::TooLarge => Failure::new(ModelError::BadResponse {
                model: model.to_owned(),
                reason: format!("the response passed {MAX_BODY_BYTES} bytes"),
            }),
            ReadError::Malformed(reason) => Failure::new(ModelError::BadResponse {
                model: model.to_owned(),
                reason: self.server_text(&reason),
            }),
        })
    }

    fn request_failure(&self, model: &str, endpoint: &str, err: &reqwest::Error) -> Failure {
        Failure::new(if err.is_timeout() {
            self.timed_out(model)
        } else {
            ModelError::Transport {
                endpoint: endpoint.to_owned(),
                attempts: 1,
                reason: self.server_text(&error_chain(err)),
            }
        })
    }

    /// Text from the server (or about the connection) as it may be shown: servers sometimes
    /// echo what they were sent, so the key is redacted first, and only then is the text cut
    /// to one short line.
    fn server_text(&self, text: &str) -> String {
        cut(&collapse(&self.redactor.redact(text)))
    }
}

/// How one request went, short of an answer.
enum Exchange {
    Failed(Failure),
    /// The server refused a streaming request because of the streaming (its message).
    RefusedStreaming(String),
}

impl From<Failure> for Exchange {
    fn from(failure: Failure) -> Self {
        Self::Failed(failure)
    }
}

#[async_trait::async_trait]
impl ModelClient for HttpModelClient {
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
            Ok(response) => return Ok(estimate::when_unreported(request, response)),
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
            .map(|response| estimate::when_unreported(request, response))
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
    collapse(&parts.join(": "))
}
