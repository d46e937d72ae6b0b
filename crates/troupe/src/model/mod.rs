//! The model layer: the [`ModelClient`] port and its two implementations.
//!
//! - [`config`]: model configuration from the environment, `<workspace>/.env` and flags.
//! - [`types`]: the conversation types (history, requests, responses), troupe's own shapes.
//! - [`transport`]: the shared HTTP client of every provider ([`HttpModelClient`]): retries,
//!   fallback model, deadline, streaming with an idle timeout, falling back to whole answers.
//! - [`openai`]: the OpenAI Chat Completions wire format (any compatible server, Azure OpenAI),
//!   streamed or not; [`OpenAiClient`] is the transport speaking it.
//! - [`schema_dialect`]: tool schemas adapted to what each provider accepts.
//! - [`anthropic`]: the Anthropic Messages wire format (native, with prompt caching and
//!   extended thinking), driven by the shared transport through [`wire_format`].
//! - [`estimate`]: token counts estimated from sizes when a server reports none.
//! - [`retry`]: the backoff policy the client retries with.
//! - [`overflow`]: recognising a server's "prompt too long" among its HTTP 400s.
//! - [`scripted`]: a scripted model for tests and the offline demo; it records what it was sent.
//! - [`wire_format`]: the port between the shared HTTP transport and a provider's wire format.
//!
//! **API Boundary:** the runner only sees [`ModelClient`]; which implementation runs is chosen at
//! the composition root.

pub mod anthropic;
pub mod by_name;
mod client;
pub mod config;
pub mod estimate;
pub mod openai;
pub mod overflow;
pub mod progress;
pub mod retry;
pub mod schema_dialect;
pub mod scripted;
pub mod transport;
pub mod types;
pub mod wire_format;

use std::time::Duration;

pub use anthropic::AnthropicWire;
pub use openai::{OpenAiClient, OpenAiWire};
pub use retry::RetryPolicy;
pub use schema_dialect::SchemaDialect;
pub use scripted::{ScriptError, ScriptExhausted, ScriptedModel};
pub use transport::HttpModelClient;
pub use types::{
    AssistantMessage, ChatMessage, FinishReason, ModelRequest, ModelResponse, Purpose, ToolCall,
    ToolSpec, Usage,
};

use crate::error::ErrorCode;

/// A language model that answers a conversation, possibly with tool calls.
#[async_trait::async_trait]
pub trait ModelClient: Send + Sync {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;
}

/// Why a model call failed. Every message is one line a CLI can print as-is; none contains the API
/// key (server messages are scrubbed of it).
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// HTTP 401 or 403.
    #[error("model server refused the credentials for model `{model}` (HTTP {status}){}; check the API key (`troupe config` shows which one is used)", detail(.message))]
    Auth {
        model: String,
        status: u16,
        message: Option<String>,
    },
    /// HTTP 404: usually an unknown model, sometimes a base URL without its `/v1`.
    #[error("model `{model}` not found at {endpoint} (HTTP 404){}; check the model and the base URL (`troupe config` shows them)", detail(.message))]
    NotFound {
        model: String,
        endpoint: String,
        message: Option<String>,
    },
    /// HTTP 429, after the last attempt.
    #[error("model server rate-limited model `{model}` (HTTP 429){}{}", after_attempts(*.attempts), detail(.message))]
    RateLimited {
        model: String,
        attempts: u32,
        message: Option<String>,
    },
    /// The server said it is overloaded (HTTP 529, or a 503 whose error says so), after the last
    /// attempt. Retried like a rate limit, and counted towards `overload_fallback_after`.
    #[error("model server is overloaded for model `{model}` (HTTP {status}){}{}", after_attempts(*.attempts), detail(.message))]
    Overloaded {
        model: String,
        status: u16,
        attempts: u32,
        message: Option<String>,
    },
    /// HTTP 5xx, after the last attempt.
    #[error("model server failed for model `{model}` (HTTP {status}){}{}", after_attempts(*.attempts), detail(.message))]
    ServerError {
        model: String,
        status: u16,
        attempts: u32,
        message: Option<String>,
    },
    /// A success status with a body that is not a usable completion.
    #[error("model server sent a malformed response for model `{model}`: {reason}")]
    BadResponse { model: String, reason: String },
    /// The server sent nothing for the client's idle timeout (no response headers, or no chunk
    /// of the body), after the last attempt.
    #[error("model `{model}` did not answer within {}{}", human_duration(*.timeout), after_attempts(*.attempts))]
    Timeout {
        model: String,
        timeout: Duration,
        attempts: u32,
    },
    /// The server could not be reached or the connection broke, after the last attempt.
    #[error("could not reach the model server at {endpoint}{}: {reason}", after_attempts(*.attempts))]
    Transport {
        endpoint: String,
        attempts: u32,
        reason: String,
    },
    /// HTTP 400 or 413 whose error says the request does not fit the model's context window
    /// ([`overflow`]). Never retried and never handed to the fallback: the caller compacts the
    /// conversation and asks again.
    #[error("the request exceeded the context window of model `{model}` (HTTP {status}){}", detail(.message))]
    ContextTooLong {
        model: String,
        status: u16,
        message: Option<String>,
    },
    /// The whole call (every attempt, the backoffs between them and the fallback) ran past its
    /// total deadline, or a retry was not started because its backoff would have.
    #[error("model `{model}` gave no answer within the call's deadline of {}{}", human_duration(*.deadline), after_attempts(*.attempts))]
    DeadlineExceeded {
        model: String,
        deadline: Duration,
        attempts: u32,
    },
    /// Any other 4xx (bad request, invalid tools, …): never retried.
    #[error("model server refused the request for model `{model}` (HTTP {status}){}", detail(.message))]
    RequestRefused {
        model: String,
        status: u16,
        message: Option<String>,
    },
    /// The primary model failed in a way that triggers the fallback, and the fallback failed too.
    /// Its code is the fallback's code: that is the failure the caller is left with.
    #[error("{primary}; the fallback also failed: {fallback}")]
    FallbackFailed {
        primary: Box<ModelError>,
        fallback: Box<ModelError>,
    },
    /// A failure that belongs to one implementation of the port (e.g. the scripted model's
    /// [`scripted::ScriptExhausted`]): its own type, its own code, carried as is.
    #[error("{0}")]
    Implementation(Box<dyn ImplementationError>),
}

/// An error of one [`ModelClient`] implementation that the shared [`ModelError`] does not name.
pub trait ImplementationError: std::error::Error + ErrorCode + Send + Sync + 'static {
    /// The error as `Any`, so that its owner can recognise it
    /// ([`ModelError::implementation_error`]).
    fn as_any(&self) -> &dyn std::any::Any;
}

impl ModelError {
    /// The implementation's own error, if this is one of type `T`.
    pub fn implementation_error<T: ImplementationError>(&self) -> Option<&T> {
        match self {
            Self::Implementation(e) => e.as_any().downcast_ref::<T>(),
            _ => None,
        }
    }
}

impl ErrorCode for ModelError {
    fn code(&self) -> &'static str {
        match self {
            Self::Auth { .. } => "model_auth",
            Self::NotFound { .. } => "model_not_found",
            Self::RateLimited { .. } => "model_rate_limited",
            Self::Overloaded { .. } => "model_overloaded",
            Self::ServerError { .. } => "model_server_error",
            Self::BadResponse { .. } => "model_bad_response",
            Self::Timeout { .. } => "model_timeout",
            Self::Transport { .. } => "model_transport",
            Self::ContextTooLong { .. } => "model_context_too_long",
            Self::DeadlineExceeded { .. } => "model_deadline_exceeded",
            Self::RequestRefused { .. } => "model_request_refused",
            Self::FallbackFailed { fallback, .. } => fallback.code(),
            Self::Implementation(e) => e.code(),
        }
    }
}

impl ModelError {
    /// Whether trying the same request again may succeed: rate limits, server errors, timeouts
    /// and connection failures.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Overloaded { .. }
                | Self::ServerError { .. }
                | Self::Timeout { .. }
                | Self::Transport { .. }
        )
    }

    /// Whether the request did not fit the model's context window: what a caller answers by
    /// compacting the conversation. Also when the fallback model is the one that said so.
    pub fn is_context_too_long(&self) -> bool {
        match self {
            Self::ContextTooLong { .. } => true,
            Self::FallbackFailed { fallback, .. } => fallback.is_context_too_long(),
            _ => false,
        }
    }

    /// Whether the server said it is overloaded (HTTP 429, 503 or 529, [`Self::Overloaded`]): after a few of these in a
    /// row the client stops waiting for the primary and asks the fallback.
    pub fn is_overload(&self) -> bool {
        match self {
            Self::RateLimited { .. } | Self::Overloaded { .. } => true,
            Self::ServerError { status, .. } => matches!(status, 503 | 529),
            _ => false,
        }
    }

    /// Whether the fallback model is tried after the primary failed with this error: every
    /// retryable error (the primary's retries are spent by then) and an unknown model. Not auth
    /// (the same key would be refused), not other 4xx (the request itself is at fault), not a
    /// malformed response.
    pub fn triggers_fallback(&self) -> bool {
        self.is_retryable() || matches!(self, Self::NotFound { .. })
    }

    /// The error for an HTTP failure status: 401/403 auth, 404 not found, 429 rate limited,
    /// 5xx server error, 400/413 whose message says so context too long, anything else refused.
    /// `message` is the server's, already one line.
    pub(crate) fn from_status(
        status: u16,
        model: &str,
        endpoint: &str,
        message: Option<String>,
    ) -> Self {
        let says_too_long = message
            .as_deref()
            .is_some_and(overflow::says_context_too_long);
        Self::from_reply(status, model, endpoint, message, says_too_long)
    }

    /// [`from_status`](Self::from_status), with whether the server's error (its code, type or
    /// whole message, before any cut) said the request exceeded the context window.
    pub(crate) fn from_reply(
        status: u16,
        model: &str,
        endpoint: &str,
        message: Option<String>,
        says_too_long: bool,
    ) -> Self {
        let model = model.to_owned();
        match status {
            status if says_too_long && overflow::is_overflow_status(status) => {
                Self::ContextTooLong {
                    model,
                    status,
                    message,
                }
            }
            401 | 403 => Self::Auth {
                model,
                status,
                message,
            },
            404 => Self::NotFound {
                model,
                endpoint: endpoint.to_owned(),
                message,
            },
            429 => Self::RateLimited {
                model,
                attempts: 1,
                message,
            },
            500..=599 => Self::ServerError {
                model,
                status,
                attempts: 1,
                message,
            },
            _ => Self::RequestRefused {
                model,
                status,
                message,
            },
        }
    }

    /// The error of the same meaning as a wire format's [`ErrorKind`](wire_format::ErrorKind):
    /// how every provider's failures keep the same codes.
    pub(crate) fn from_kind(
        kind: wire_format::ErrorKind,
        status: u16,
        model: &str,
        endpoint: &str,
        message: Option<String>,
    ) -> Self {
        use wire_format::ErrorKind;
        let model = model.to_owned();
        match kind {
            ErrorKind::Auth => Self::Auth {
                model,
                status,
                message,
            },
            ErrorKind::NotFound => Self::NotFound {
                model,
                endpoint: endpoint.to_owned(),
                message,
            },
            ErrorKind::RateLimited => Self::RateLimited {
                model,
                attempts: 1,
                message,
            },
            ErrorKind::Overloaded => Self::Overloaded {
                model,
                status,
                attempts: 1,
                message,
            },
            ErrorKind::Server => Self::ServerError {
                model,
                status,
                attempts: 1,
                message,
            },
            ErrorKind::ContextTooLong => Self::ContextTooLong {
                model,
                status,
                message,
            },
            ErrorKind::Refused => Self::RequestRefused {
                model,
                status,
                message,
            },
        }
    }

    /// Records how many attempts were made before giving up.
    pub(crate) fn with_attempts(mut self, made: u32) -> Self {
        match &mut self {
            Self::RateLimited { attempts, .. }
            | Self::Overloaded { attempts, .. }
            | Self::ServerError { attempts, .. }
            | Self::Timeout { attempts, .. }
            | Self::Transport { attempts, .. }
            | Self::DeadlineExceeded { attempts, .. } => *attempts = made,
            _ => {}
        }
        self
    }
}

fn detail(message: &Option<String>) -> String {
    match message {
        Some(message) => format!(": {message}"),
        None => String::new(),
    }
}

fn after_attempts(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} attempts")
    } else {
        String::new()
    }
}

fn human_duration(duration: Duration) -> String {
    if duration >= Duration::from_secs(1) && duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}
