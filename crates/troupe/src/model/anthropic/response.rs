//! A whole Messages response body as a [`ModelResponse`], and the pieces the stream assembler
//! shares with it: content blocks → message, stop reason → finish reason, usage.
//!
//! Reading is strict about what troupe needs (a `content` array; a `tool_use` block's id and
//! name) and lenient about the rest: unknown block types (server tools, citations) are skipped,
//! a missing `model` is the requested one, a missing `stop_reason` is inferred.

use serde::Deserialize;
use serde_json::Value;

use super::error::{collapse, error_event_text};
use crate::model::types::{
    AssistantMessage, FinishReason, ModelResponse, Reasoning, ToolCall, Usage,
};

/// One content block of an answer, as troupe keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The arguments' JSON text, kept raw (a truncated stream may leave it invalid).
        arguments: String,
    },
    Thinking {
        text: String,
        signature: String,
    },
    RedactedThinking(String),
}

/// The message the blocks make, in their order: texts concatenated, tool calls, reasoning.
pub fn message(blocks: Vec<Block>) -> AssistantMessage {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut reasoning = Vec::new();
    for block in blocks {
        match block {
            Block::Text(part) => text.push_str(&part),
            Block::ToolUse {
                id,
                name,
                arguments,
            } => tool_calls.push(ToolCall {
                id,
                name,
                arguments,
            }),
            Block::Thinking { text, signature } => reasoning.push(Reasoning::Text {
                text,
                signature: (!signature.is_empty()).then_some(signature),
            }),
            Block::RedactedThinking(data) => reasoning.push(Reasoning::Redacted { data }),
        }
    }
    AssistantMessage {
        content: (!text.is_empty()).then_some(text),
        tool_calls,
        reasoning,
    }
}

/// Anthropic's `stop_reason` in troupe's terms. `max_tokens` is [`FinishReason::Length`], so the
/// runner continues a cut answer as it does OpenAI's `length`. Unknown reasons (`pause_turn`,
/// `refusal`, …) are kept as they are. No reason at all: tool calls if there are any, else stop.
pub fn finish_reason(stop_reason: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match stop_reason {
        Some("end_turn") | Some("stop_sequence") => FinishReason::Stop,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens") => FinishReason::Length,
        Some(other) => FinishReason::Other(other.to_owned()),
        None if has_tool_calls => FinishReason::ToolCalls,
        None => FinishReason::Stop,
    }
}

/// Anthropic's usage counts, each optional as sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct WireUsage {
    /// Input tokens neither read from nor written to the cache.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Reads a `usage` object leniently: a count that is not a whole number is taken as absent.
    pub fn from_value(value: &Value) -> Self {
        let field = |name: &str| value.get(name).and_then(Value::as_u64);
        Self {
            input_tokens: field("input_tokens"),
            output_tokens: field("output_tokens"),
            cache_creation_input_tokens: field("cache_creation_input_tokens"),
            cache_read_input_tokens: field("cache_read_input_tokens"),
        }
    }

    /// Each count that `later` has replaces this one's (a stream's `message_delta` carries the
    /// final, cumulative counts).
    pub fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }

    /// Troupe's usage: the prompt counts every input token (uncached, read from the cache and
    /// written to it), so context accounting sees the whole prompt. `None` if nothing was sent.
    pub fn usage(&self) -> Option<Usage> {
        if *self == Self::default() {
            return None;
        }
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        let prompt_tokens = self
            .input_tokens
            .unwrap_or(0)
            .saturating_add(read)
            .saturating_add(written);
        let completion_tokens = self.output_tokens.unwrap_or(0);
        Some(Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            cache_read_tokens: read,
            cache_write_tokens: written,
            estimated: false,
        })
    }
}

/// Reads a complete success body. The error is why the body is unusable.
pub fn parse(requested_model: &str, body: &str) -> Result<ModelResponse, String> {
    let value: Value = serde_json::from_str(body)
        .map_err(|err| format!("the body is not JSON ({err}): {}", snippet(body)))?;
    if value.get("type").and_then(Value::as_str) == Some("error") {
        let message = error_event_text(&value);
        return Err(format!("the body is an error: {message}"));
    }
    let content = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| "the body has no `content` array".to_owned())?;
    let blocks = content
        .iter()
        .enumerate()
        .filter_map(|(index, block)| response_block(index, block).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let message = message(blocks);
    let stop_reason = value.get("stop_reason").and_then(Value::as_str);
    Ok(ModelResponse {
        finish_reason: finish_reason(stop_reason, !message.tool_calls.is_empty()),
        message,
        usage: value
            .get("usage")
            .and_then(|usage| WireUsage::from_value(usage).usage()),
        model: model_name(&value, requested_model),
    })
}

/// The model the server named, else the requested one.
pub fn model_name(message: &Value, requested_model: &str) -> String {
    message
        .get("model")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .unwrap_or(requested_model)
        .to_owned()
}

/// One block of a whole response; `None` for a type troupe does not use.
fn response_block(index: usize, block: &Value) -> Result<Option<Block>, String> {
    let text = |name: &str| block.get(name).and_then(Value::as_str).map(str::to_owned);
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("content block #{index} has no `type`"))?;
    Ok(Some(match kind {
        "text" => Block::Text(text("text").unwrap_or_default()),
        "tool_use" => {
            let (id, name) = tool_identity(index, block)?;
            let arguments = match block.get("input") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(input) => input.to_string(),
            };
            Block::ToolUse {
                id,
                name,
                arguments,
            }
        }
        "thinking" => Block::Thinking {
            text: text("thinking").unwrap_or_default(),
            signature: text("signature").unwrap_or_default(),
        },
        "redacted_thinking" => Block::RedactedThinking(text("data").unwrap_or_default()),
        _ => return Ok(None),
    }))
}

/// A `tool_use` block's id and name, both required and non-empty: a tool result must answer the
/// id, and the dispatcher needs the name.
pub fn tool_identity(index: usize, block: &Value) -> Result<(String, String), String> {
    let field = |name: &str| {
        block
            .get(name)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| format!("tool_use block #{index} has no `{name}`"))
    };
    Ok((field("id")?, field("name")?))
}

/// The start of an unusable body, for an error message.
fn snippet(body: &str) -> String {
    let line = collapse(body);
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None if line.is_empty() => "(empty body)".to_owned(),
        None => line,
    }
}
