//! Anthropic Messages, native: the [`WireFormat`] of `POST {base}/v1/messages`.
//!
//! - [`request`]: troupe's conversation as a Messages request body — system blocks, alternating
//!   user/assistant turns, `tool_use`/`tool_result` blocks, thinking blocks sent back, and the
//!   prompt-caching breakpoints.
//! - [`response`]: a whole response body as a [`ModelResponse`] (content blocks, stop reason,
//!   usage with the cache counts).
//! - [`stream`]: the same answer assembled from the server-sent events of a streamed response.
//! - [`error`]: what an error response (or an `error` event) means, and the server's message.
//!
//! The format never touches the network: the shared transport sends what [`AnthropicWire::request`]
//! builds and hands back what it receives. The API key travels only in the `x-api-key` header of
//! the [`WireRequest`], whose `Debug` does not show header values.

pub mod error;
pub mod request;
pub mod response;
pub mod stream;

use crate::model::config::{ApiKey, ModelConfig};
use crate::model::types::{ModelRequest, ModelResponse};
use crate::model::wire_format::{ErrorKind, StreamAssembler, WireFormat, WireRequest};

/// The API root when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header value this format is written against.
pub const API_VERSION: &str = "2023-06-01";
/// The answer's token limit (`max_tokens`, required by Anthropic) when none is configured.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
/// Anthropic's smallest thinking budget; a smaller configured budget is raised to it.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// The Anthropic Messages wire format: everything a request needs besides the conversation.
#[derive(Clone)]
pub struct AnthropicWire {
    /// The API root without a trailing `/` (and without `/v1`, which [`Self::url`] adds).
    base_url: String,
    api_key: ApiKey,
    /// `max_tokens` of every request: Anthropic has no default and requires it.
    max_tokens: u32,
    /// Extended thinking's `budget_tokens`, when thinking is on.
    thinking_budget: Option<u32>,
}

impl std::fmt::Debug for AnthropicWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicWire")
            .field("base_url", &self.base_url)
            .field("max_tokens", &self.max_tokens)
            .field("thinking_budget", &self.thinking_budget)
            .finish_non_exhaustive()
    }
}

impl AnthropicWire {
    /// A format for the API at `base_url` (e.g. [`DEFAULT_BASE_URL`]; a trailing `/` or `/v1` is
    /// accepted) with `api_key`, [`DEFAULT_MAX_TOKENS`] and no thinking.
    pub fn new(base_url: &str, api_key: ApiKey) -> Self {
        let trimmed = base_url.trim_end_matches('/');
        let base_url = trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_owned();
        Self {
            base_url,
            api_key,
            max_tokens: DEFAULT_MAX_TOKENS,
            thinking_budget: None,
        }
    }

    /// The format a [`ModelConfig`] describes: its base URL, key, `max_tokens` and thinking
    /// budget.
    pub fn from_config(config: &ModelConfig) -> Self {
        let mut wire = Self::new(&config.base_url, config.api_key.clone());
        if let Some(max_tokens) = config.max_tokens {
            wire = wire.with_max_tokens(max_tokens);
        }
        if let Some(budget) = config.thinking_budget {
            wire = wire.with_thinking(budget);
        }
        wire
    }

    /// Sets the answer's token limit (at least 1).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens.max(1);
        self
    }

    /// Turns extended thinking on with this budget (at least [`MIN_THINKING_BUDGET`]).
    pub fn with_thinking(mut self, budget_tokens: u32) -> Self {
        self.thinking_budget = Some(budget_tokens.max(MIN_THINKING_BUDGET));
        self
    }

    /// `{base}/v1/messages`.
    pub fn url(&self) -> String {
        format!("{}/v1/messages", self.base_url)
    }

    /// The `max_tokens` sent: the configured limit, raised when thinking is on so that it stays
    /// above the thinking budget (Anthropic refuses `budget_tokens >= max_tokens`) with room for
    /// the answer itself.
    pub fn effective_max_tokens(&self) -> u32 {
        match self.thinking_budget {
            Some(budget) if self.max_tokens <= budget => budget.saturating_add(DEFAULT_MAX_TOKENS),
            _ => self.max_tokens,
        }
    }
}

impl WireFormat for AnthropicWire {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn request(&self, model: &str, request: &ModelRequest, stream: bool) -> WireRequest {
        let options = request::Options {
            max_tokens: self.effective_max_tokens(),
            thinking_budget: self.thinking_budget,
            stream,
        };
        WireRequest {
            url: self.url(),
            headers: vec![
                ("x-api-key", self.api_key.expose().to_owned()),
                ("anthropic-version", API_VERSION.to_owned()),
                ("content-type", "application/json".to_owned()),
            ],
            body: request::body(model, request, &options),
        }
    }

    fn parse_response(&self, model: &str, body: &str) -> Result<ModelResponse, String> {
        response::parse(model, body)
    }

    fn stream_assembler(&self, model: &str) -> Box<dyn StreamAssembler> {
        Box::new(stream::Assembler::new(model))
    }

    fn classify_error(&self, status: u16, body: &str) -> (ErrorKind, Option<String>) {
        error::classify(status, body)
    }

    fn classify_stream_error(&self, reason: &str) -> Option<ErrorKind> {
        error::stream_error_kind(reason)
    }
}
