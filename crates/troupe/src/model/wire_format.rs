//! The port between the shared HTTP transport (retries, fallback, deadline, streaming with an
//! idle timeout, status handling) and one provider's wire format (OpenAI Chat Completions and its
//! Azure variant, Anthropic Messages): the format builds each attempt's request and reads the
//! answer — whole or as server-sent events — and says what kind of failure an error response is.
//! The transport never looks inside a body; a format never touches the network.

use serde_json::Value;

use super::types::{ModelRequest, ModelResponse};

/// One attempt's HTTP request, as a wire format builds it.
#[derive(Clone)]
pub struct WireRequest {
    /// The full URL, query included (Azure's `api-version`).
    pub url: String,
    /// Headers, the credential among them: the transport never logs or shows them.
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

impl std::fmt::Debug for WireRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireRequest")
            .field("url", &self.url)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// What an error response means, whatever the provider. The transport turns it into the
/// [`super::ModelError`] of the same meaning, so every provider's failures keep the same codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad or missing credentials (401, 403).
    Auth,
    /// Unknown model or endpoint (404).
    NotFound,
    /// Too many requests (429).
    RateLimited,
    /// The server is overloaded (Anthropic's 529, a 503 that says so).
    Overloaded,
    /// Any other server failure (5xx).
    Server,
    /// The request does not fit the model's context window.
    ContextTooLong,
    /// Any other refusal (4xx): never retried.
    Refused,
}

impl ErrorKind {
    /// The HTTP status an error of this kind is reported with when the server gave none (an
    /// error event inside a stream that began with 200).
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::Auth => 401,
            ErrorKind::NotFound => 404,
            ErrorKind::RateLimited => 429,
            ErrorKind::Overloaded => 529,
            ErrorKind::Server => 500,
            ErrorKind::ContextTooLong | ErrorKind::Refused => 400,
        }
    }
}

/// One provider's wire format.
pub trait WireFormat: Send + Sync + std::fmt::Debug + 'static {
    /// Names the provider in errors and logs (`openai`, `azure`, `anthropic`).
    fn name(&self) -> &'static str;

    /// The request of one attempt for `model`; `stream` asks for server-sent events.
    fn request(&self, model: &str, request: &ModelRequest, stream: bool) -> WireRequest;

    /// Reads a complete (non-streamed) success body.
    fn parse_response(&self, model: &str, body: &str) -> Result<ModelResponse, String>;

    /// A fresh assembler for one streamed answer to a request for `model`.
    fn stream_assembler(&self, model: &str) -> Box<dyn StreamAssembler>;

    /// What an error response with this status and body is, and the server's own message in
    /// it, if it has one.
    fn classify_error(&self, status: u16, body: &str) -> (ErrorKind, Option<String>);

    /// What a stream's error (an `Err` of [`StreamAssembler::push`]) means, when it is the
    /// server reporting a failure in the stream (Anthropic's `error` event: `overloaded_error`
    /// mid-answer is an overload, retried like a 529) rather than a malformed stream. `None`
    /// (the default): a malformed answer, `model_bad_response`.
    fn classify_stream_error(&self, _reason: &str) -> Option<ErrorKind> {
        None
    }
}

/// Builds one answer from the server-sent events of a stream, in order.
pub trait StreamAssembler: Send {
    /// One event: its `event:` field, if any, and its `data:` text. `Ok(true)` once the stream
    /// says it is complete (OpenAI's `[DONE]`, Anthropic's `message_stop`); an `Err` is a
    /// malformed stream (or an error event, described).
    fn push(&mut self, event: Option<&str>, data: &str) -> Result<bool, String>;

    /// The answer's text that arrived since the last call, if any (for a caller that shows
    /// it as it streams).
    fn take_text(&mut self) -> Option<String> {
        None
    }

    /// The answer, once the stream has ended. A stream that ended before it said it was
    /// complete is an error here: a truncated answer is never taken as a whole one.
    fn finish(self: Box<Self>) -> Result<ModelResponse, String>;
}
