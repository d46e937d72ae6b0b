//! The OpenAI Chat Completions JSON shape: building request bodies and reading responses.
//!
//! Kept apart from the HTTP transport (`model::transport`) so the shape can be read and tested on
//! its own. Streamed answers are read by [`super::stream`].
//!
//! **Reasoning.** Servers that show a model's reasoning put it in `reasoning_content`
//! (DeepSeek, vLLM, SGLang) or `reasoning` (Ollama, OpenRouter, llama.cpp); it is kept in the
//! history as [`Reasoning::Text`] and sent back as `reasoning_content` on the assistant messages
//! that have it, to every server: DeepSeek's thinking mode refuses a second turn without it,
//! and the servers that do not know the field ignore it (OpenAI's own models never produce it,
//! so the field never reaches OpenAI).
//! Reading is lenient about what troupe does not need (compatible servers omit `usage`, `model`,
//! `finish_reason`, tool-call ids, …) and strict about what it does (`choices[0].message`, each
//! tool call's function name).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::schema_dialect::{self, SchemaDialect};
use crate::model::types::{
    AssistantMessage, ChatMessage, FinishReason, ModelRequest, ModelResponse, Reasoning, ToolCall,
    Usage,
};

/// Server error messages are cut to this many characters: enough to say what is wrong, short
/// enough for one terminal line. The text from the server is returned here whole (whitespace
/// collapsed): the transport redacts the key from it *before* cutting it ([`cut`]), so a key
/// straddling the cut cannot leave a piece of itself behind.
const MAX_SERVER_MESSAGE_CHARS: usize = 300;

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    // Some compatible servers reject an empty `tools` array, so it is left out instead.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

/// Asks for the token counts in a last chunk of the stream.
#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        // OpenAI requires `content` unless `tool_calls` is present; then it may be null.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
        /// The model's shown reasoning, sent back (see the module docs); left out when empty.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction,
}

#[derive(Serialize)]
struct WireFunction {
    name: String,
    description: String,
    parameters: Value,
}

/// The JSON body of a non-streaming chat completion request for `model`, tool schemas as given.
pub fn request_body(model: &str, request: &ModelRequest) -> Value {
    request_body_for(model, request, false, SchemaDialect::OpenAi)
}

/// The JSON body of a chat completion request for `model`: streamed (with the usage asked for
/// in the last chunk) or not, tool schemas adapted to `dialect`.
pub fn request_body_for(
    model: &str,
    request: &ModelRequest,
    stream: bool,
    dialect: SchemaDialect,
) -> Value {
    let body = WireRequest {
        model,
        messages: request.messages.iter().map(wire_message).collect(),
        tools: request
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: schema_dialect::adapt(&tool.parameters, dialect),
                },
            })
            .collect(),
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
    };
    // Serialising these plain structs cannot fail (string keys, no custom serialisers).
    serde_json::to_value(body).unwrap_or(Value::Null)
}

fn wire_message(message: &ChatMessage) -> WireMessage<'_> {
    match message {
        ChatMessage::System { content } => WireMessage::System { content },
        ChatMessage::User { content } => WireMessage::User { content },
        ChatMessage::Assistant(assistant) => {
            let content = match (&assistant.content, assistant.tool_calls.is_empty()) {
                (Some(text), _) => Some(text.as_str()),
                (None, false) => None,
                (None, true) => Some(""),
            };
            WireMessage::Assistant {
                content,
                reasoning_content: reasoning_text(&assistant.reasoning),
                tool_calls: assistant
                    .tool_calls
                    .iter()
                    .map(|call| WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunctionCall {
                            name: &call.name,
                            arguments: &call.arguments,
                        },
                    })
                    .collect(),
            }
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => WireMessage::Tool {
            tool_call_id,
            content,
        },
    }
}

/// The readable reasoning of a message as one text, if there is any.
fn reasoning_text(reasoning: &[Reasoning]) -> Option<String> {
    let text: String = reasoning
        .iter()
        .filter_map(|piece| match piece {
            Reasoning::Text { text, .. } => Some(text.as_str()),
            Reasoning::Redacted { .. } => None,
        })
        .collect();
    (!text.is_empty()).then_some(text)
}

/// Reasoning as kept in the history: one readable piece, none when empty.
pub(crate) fn reasoning_from(text: Option<String>) -> Vec<Reasoning> {
    match text {
        Some(text) if !text.is_empty() => vec![Reasoning::Text {
            text,
            signature: None,
        }],
        _ => Vec::new(),
    }
}

#[derive(Deserialize)]
struct WireResponse {
    choices: Option<Vec<WireChoice>>,
    model: Option<Value>,
    usage: Option<Value>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: Option<WireResponseMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireResponseMessage {
    content: Option<Value>,
    refusal: Option<String>,
    tool_calls: Option<Vec<WireResponseToolCall>>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
}

#[derive(Deserialize)]
struct WireResponseToolCall {
    id: Option<String>,
    function: Option<WireResponseFunction>,
}

#[derive(Deserialize)]
struct WireResponseFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

/// Reads a success body. `requested_model` names the response when the server does not.
/// The error is the reason the body is unusable, for `ModelError::BadResponse`.
pub fn parse_response(body: &[u8], requested_model: &str) -> Result<ModelResponse, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|err| format!("the body is not JSON ({err}): {}", snippet(body)))?;
    let wire: WireResponse = serde_json::from_value(value)
        .map_err(|err| format!("the body is not a chat completion: {err}"))?;
    let choice = match wire.choices.and_then(|choices| choices.into_iter().next()) {
        Some(choice) => choice,
        None => {
            return Err(match wire.error.as_ref().and_then(error_text) {
                Some(message) => format!("no `choices`, and an error: {}", collapse(&message)),
                None => "the body has no `choices`".to_owned(),
            })
        }
    };
    let message = choice
        .message
        .ok_or_else(|| "`choices[0]` has no `message`".to_owned())?;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, call)| tool_call(index, call))
        .collect::<Result<Vec<_>, _>>()?;
    let content = message
        .content
        .as_ref()
        .and_then(content_text)
        .or(message.refusal);
    let reasoning = [&message.reasoning_content, &message.reasoning]
        .into_iter()
        .find_map(|field| field.as_ref().and_then(Value::as_str).map(str::to_owned));
    // Some servers omit the finish reason; the presence of tool calls is what it would have said.
    let finish_reason = match choice.finish_reason {
        Some(reason) => FinishReason::from(reason),
        None if !tool_calls.is_empty() => FinishReason::ToolCalls,
        None => FinishReason::Stop,
    };
    Ok(ModelResponse {
        message: AssistantMessage {
            content,
            tool_calls,
            reasoning: reasoning_from(reasoning),
        },
        finish_reason,
        usage: wire.usage.as_ref().and_then(usage),
        model: wire
            .model
            .as_ref()
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .unwrap_or(requested_model)
            .to_owned(),
    })
}

fn tool_call(index: usize, call: WireResponseToolCall) -> Result<ToolCall, String> {
    let function = call
        .function
        .ok_or_else(|| format!("tool call #{index} has no `function`"))?;
    let name = function
        .name
        .filter(|name| !name.is_empty())
        .ok_or_else(|| format!("tool call #{index} has no function name"))?;
    // Arguments stay raw text, valid JSON or not. A few servers send an object instead of a
    // string; its JSON text is what the model meant.
    let arguments = match function.arguments {
        Some(Value::String(text)) => text,
        Some(Value::Null) | None => "{}".to_owned(),
        Some(other) => other.to_string(),
    };
    // A server that sends no id never checks the tool result's id either; one is made up so the
    // history stays well-formed.
    let id = call
        .id
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("call_{index}"));
    Ok(ToolCall {
        id,
        name,
        arguments,
    })
}

/// Message content is a string, null, or (some servers) an array of `{type: "text", text}` parts.
pub(crate) fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.concat())
        }
        _ => None,
    }
}

pub(crate) fn usage(usage: &Value) -> Option<Usage> {
    let field = |name: &str| usage.get(name).and_then(Value::as_u64);
    let prompt = field("prompt_tokens");
    let completion = field("completion_tokens");
    let total = field("total_tokens");
    if prompt.is_none() && completion.is_none() && total.is_none() {
        return None;
    }
    let prompt_tokens = prompt.unwrap_or(0);
    let completion_tokens = completion.unwrap_or(0);
    // Of the prompt, what the server's prompt cache served (OpenAI, and compatible servers that
    // report it the same way).
    let cached = usage
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Some(Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: total.unwrap_or(prompt_tokens.saturating_add(completion_tokens)),
        cache_read_tokens: cached.min(prompt_tokens),
        ..Usage::default()
    })
}

/// The server's explanation in an error body, as one line, not yet cut: OpenAI's `{"error":{"message"}}`,
/// Ollama's `{"error":"…"}`, vLLM's `{"message"}`, FastAPI's `{"detail"}`, or plain text.
pub fn server_message(body: &[u8]) -> Option<String> {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(value) => value
            .get("error")
            .and_then(error_text)
            .or_else(|| error_text(&value)),
        Err(_) => Some(String::from_utf8_lossy(body).into_owned()),
    }?;
    let line = collapse(&text);
    (!line.is_empty()).then_some(line)
}

/// What a server's error body says: its explanation ([`server_message`]) and the machine-readable
/// `code` and `type` beside it (`{"error": {"code": "context_length_exceeded", "type": …}}`, or
/// at the top level as vLLM sends them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerError {
    pub message: Option<String>,
    pub codes: Vec<String>,
}

impl ServerError {
    /// Whether the code, type or message says the server is overloaded (a 503 that means what
    /// Anthropic's 529 does).
    pub fn says_overloaded(&self) -> bool {
        self.codes
            .iter()
            .chain(self.message.as_ref())
            .any(|text| text.to_lowercase().contains("overload"))
    }

    /// Whether the code, type or message says the request exceeded the model's context window.
    pub fn says_context_too_long(&self) -> bool {
        self.codes
            .iter()
            .chain(self.message.as_ref())
            .any(|text| crate::model::overflow::says_context_too_long(text))
    }
}

/// Reads an error body: [`server_message`] and every string `code` / `type` of its error.
pub fn server_error(body: &[u8]) -> ServerError {
    let codes = match serde_json::from_slice::<Value>(body) {
        Ok(value) => {
            let nested = value.get("error").filter(|error| error.is_object());
            [nested, Some(&value)]
                .into_iter()
                .flatten()
                .flat_map(|object| ["code", "type"].map(|key| object.get(key)))
                .flatten()
                .filter_map(Value::as_str)
                .map(collapse)
                .filter(|code| !code.is_empty())
                .collect()
        }
        Err(_) => Vec::new(),
    };
    ServerError {
        message: server_message(body),
        codes,
    }
}

pub(crate) fn error_text(error: &Value) -> Option<String> {
    match error {
        Value::String(text) => Some(text.clone()),
        Value::Object(fields) => ["message", "detail", "error"]
            .iter()
            .find_map(|key| fields.get(*key).and_then(Value::as_str))
            .map(str::to_owned),
        _ => None,
    }
}

/// Whitespace collapsed to single spaces.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Cut to [`MAX_SERVER_MESSAGE_CHARS`] characters, marked with `…` when cut.
pub fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_SERVER_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn snippet(body: &[u8]) -> String {
    let line = collapse(&String::from_utf8_lossy(body));
    if line.is_empty() {
        "(empty body)".to_owned()
    } else {
        line
    }
}
