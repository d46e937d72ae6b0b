//! The conversation types: what the runner keeps as history, sends to a model and gets back.
//!
//! These are troupe's own types, serialised for persisted history. They are deliberately not the
//! shape of any provider: the conversions live in `openai/wire.rs` and `anthropic/`, so a change
//! of provider format never changes what is on disk.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant(AssistantMessage),
    /// The result of one tool call, answering the call with the same id.
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self::System {
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
        }
    }

    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

impl From<AssistantMessage> for ChatMessage {
    fn from(message: AssistantMessage) -> Self {
        Self::Assistant(message)
    }
}

/// What the model said: optional text and the tool calls it wants run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// `None` when the model sent no text (typical when it only calls tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The reasoning the model showed before answering, kept in the history and sent back to
    /// the providers that need it (DeepSeek's `reasoning_content`, Anthropic's thinking blocks
    /// with their signatures). Empty for most models.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
}

/// One piece of a model's shown reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reasoning {
    /// Readable reasoning; `signature` is the provider's proof of it (Anthropic), sent back
    /// unchanged.
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted (Anthropic's `redacted_thinking`): sent back as is.
    Redacted { data: String },
}

impl AssistantMessage {
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: Some(content.into()),
            ..Self::default()
        }
    }

    pub fn tool_calls(tool_calls: Vec<ToolCall>) -> Self {
        Self {
            content: None,
            tool_calls,
            ..Self::default()
        }
    }
}

/// One function call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the tool result must echo in `tool_call_id`.
    pub id: String,
    pub name: String,
    /// The raw JSON text the model sent. Not parsed here: a model may send invalid JSON, and the
    /// dispatcher answers that with `invalid_arguments` so the model can correct itself.
    pub arguments: String,
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A function tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the tool's arguments object.
    pub parameters: serde_json::Value,
}

/// One model call: the conversation so far and the tools on offer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Why the call is made. Servers never see it; the scripted model answers the runtime's own
    /// tool-less calls (summaries, memory) apart from an agent's turns.
    #[serde(default, skip_serializing_if = "Purpose::is_turn")]
    pub purpose: Purpose,
}

impl ModelRequest {
    /// A call of an agent's turn: its conversation and its tools.
    pub fn turn(messages: Vec<ChatMessage>, tools: Vec<ToolSpec>) -> Self {
        Self {
            messages,
            tools,
            purpose: Purpose::Turn,
        }
    }

    /// One of the runtime's own tool-less calls (a summary, a memory query).
    pub fn side(purpose: Purpose, messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            tools: Vec::new(),
            purpose,
        }
    }
}

/// Why a model call is made: an agent's turn, or one of the runtime's own tool-less calls whose
/// answer must be strict JSON.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// An agent's turn (the default).
    #[default]
    Turn,
    /// Summary compaction: older history into the summary JSON object.
    Summary,
    /// Memory: new records from a conversation (a JSON array).
    MemoryExtract,
    /// Memory: the names of the records relevant to a prompt (a JSON array).
    MemorySelect,
    /// Memory: duplicates merged when the catalog passes its budget (a JSON array).
    MemoryConsolidate,
}

impl Purpose {
    pub fn is_turn(&self) -> bool {
        matches!(self, Self::Turn)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Summary => "summary",
            Self::MemoryExtract => "memory_extract",
            Self::MemorySelect => "memory_select",
            Self::MemoryConsolidate => "memory_consolidate",
        }
    }
}

/// The model's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelResponse {
    pub message: AssistantMessage,
    pub finish_reason: FinishReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The model that answered, as the server named it (it may differ from the configured name,
    /// e.g. a dated snapshot, or the fallback model).
    pub model: String,
}

impl ModelResponse {
    /// A plain text answer (finish reason `stop`), e.g. for scripted models.
    pub fn text(content: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            message: AssistantMessage::text(content),
            finish_reason: FinishReason::Stop,
            usage: None,
            model: model.into(),
        }
    }

    /// An answer that only calls tools (finish reason `tool_calls`).
    pub fn tool_calls(tool_calls: Vec<ToolCall>, model: impl Into<String>) -> Self {
        Self {
            message: AssistantMessage::tool_calls(tool_calls),
            finish_reason: FinishReason::ToolCalls,
            usage: None,
            model: model.into(),
        }
    }
}

/// Why the model stopped. Unknown values are kept, not rejected: compatible servers invent their
/// own (`eos`, `end_turn`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::Other(other) => other,
        }
    }
}

impl From<&str> for FinishReason {
    fn from(raw: &str) -> Self {
        match raw {
            "stop" => Self::Stop,
            "tool_calls" => Self::ToolCalls,
            "length" => Self::Length,
            "content_filter" => Self::ContentFilter,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl From<String> for FinishReason {
    fn from(raw: String) -> Self {
        Self::from(raw.as_str())
    }
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> Self {
        reason.as_str().to_owned()
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token counts, when the server reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token, those read from or written to a prompt cache included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Of `prompt_tokens`, those read from the provider's prompt cache (Anthropic's
    /// `cache_read_input_tokens`). Absent in older transcripts and for other providers: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `prompt_tokens`, those written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`). Absent in older transcripts: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// The server reported no usage, so troupe estimated these counts from the sizes of the
    /// request and the answer ([`crate::model::estimate`]); for a sum, some of it was. Absent
    /// (false) when the server counted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub estimated: bool,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

fn is_false(flag: &bool) -> bool {
    !*flag
}
