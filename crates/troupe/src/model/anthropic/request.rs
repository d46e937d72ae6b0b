//! Troupe's conversation as an Anthropic Messages request body.
//!
//! - `system`: every system message of the conversation, in order, one text block each.
//! - `messages`: strictly alternating `user`/`assistant` turns. Consecutive messages of the same
//!   role are merged into one turn; troupe's tool results are `user` turns of `tool_result`
//!   blocks, placed before any text of the same turn (Anthropic requires the results first).
//! - An assistant turn is its reasoning (thinking blocks, exactly as received, first — Anthropic
//!   requires them unchanged before the `tool_use` they led to), then its text, then one
//!   `tool_use` block per call. Reasoning without a signature did not come from Anthropic (a
//!   history started with another provider) and is left out: Anthropic would refuse it.
//! - A tool call's arguments are troupe's raw text. Text that parses as a JSON object is sent as
//!   `input`; anything else (invalid JSON from a truncated stream, a non-object) is sent as
//!   `{"_invalid_arguments": "<the raw text>"}`, so the model sees what it actually sent next to
//!   the dispatcher's `invalid_arguments` result, and nothing crashes or is lost.
//! - Anthropic refuses empty text blocks, so an empty message becomes the text [`EMPTY_TEXT`].
//! - Anthropic accepts tool-use ids of `[a-zA-Z0-9_-]` only; ids from another provider's history
//!   are sent with every other character replaced by `_` ([`tool_use_id`]), the same way in the
//!   `tool_use` and its `tool_result`, so the pair still matches.
//!
//! **Prompt caching.** Anthropic caches the prefix of a request up to each block marked with
//! `cache_control: {"type": "ephemeral"}` (in the order tools → system → messages), at most
//! [`MAX_CACHE_BREAKPOINTS`] marks per request. Troupe places them on the stable prefix:
//! 1. the last tool definition (the tool list rarely changes within a run);
//! 2. the last system block;
//! 3. the last block of the second-to-last user turn: the older history, which the previous
//!    request marked as its last user turn, so it is read from the cache;
//! 4. the last block of the last user turn: written now, read by the next request (where it has
//!    become the second-to-last).
//!
//! A long team run thus pays the full price for each prefix once and the cache-read price after.
//! Marks that have no block to go on (no tools, no system, a single user turn) are left out.

use serde_json::{json, Map, Value};

use crate::model::types::{AssistantMessage, ChatMessage, ModelRequest, Reasoning};

/// Anthropic's limit on `cache_control` marks in one request.
pub const MAX_CACHE_BREAKPOINTS: usize = 4;
/// The text sent in place of an empty message (Anthropic refuses empty text blocks).
pub const EMPTY_TEXT: &str = "(empty)";
/// The `input` key under which arguments that are not a JSON object are sent back.
pub const INVALID_ARGUMENTS_KEY: &str = "_invalid_arguments";

/// What the request needs besides the model and the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub max_tokens: u32,
    /// `budget_tokens` of extended thinking, when on.
    pub thinking_budget: Option<u32>,
    /// Whether to ask for server-sent events.
    pub stream: bool,
}

/// The JSON body of a Messages request for `model`.
pub fn body(model: &str, request: &ModelRequest, options: &Options) -> Value {
    let mut system: Vec<Value> = request
        .messages
        .iter()
        .filter_map(|message| match message {
            ChatMessage::System { content } if !content.trim().is_empty() => {
                Some(text_block(content))
            }
            _ => None,
        })
        .collect();
    let mut messages = turns(&request.messages);
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            })
        })
        .collect();
    place_cache_breakpoints(&mut tools, &mut system, &mut messages);

    let mut body = Map::new();
    body.insert("model".to_owned(), json!(model));
    body.insert("max_tokens".to_owned(), json!(options.max_tokens));
    if !system.is_empty() {
        body.insert("system".to_owned(), Value::Array(system));
    }
    body.insert(
        "messages".to_owned(),
        Value::Array(messages.into_iter().map(Turn::into_value).collect()),
    );
    if !tools.is_empty() {
        body.insert("tools".to_owned(), Value::Array(tools));
    }
    if let Some(budget) = options.thinking_budget {
        body.insert(
            "thinking".to_owned(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    if options.stream {
        body.insert("stream".to_owned(), Value::Bool(true));
    }
    Value::Object(body)
}

/// One `messages` entry being built.
struct Turn {
    role: Role,
    content: Vec<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

impl Turn {
    fn into_value(self) -> Value {
        let role = match self.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        json!({"role": role, "content": self.content})
    }
}

/// The non-system messages as alternating turns.
fn turns(messages: &[ChatMessage]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            ChatMessage::System { .. } => continue,
            ChatMessage::User { content } => (Role::User, vec![text_block(non_empty(content))]),
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => (
                Role::User,
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": tool_use_id(tool_call_id),
                    "content": content,
                })],
            ),
            ChatMessage::Assistant(assistant) => (Role::Assistant, assistant_blocks(assistant)),
        };
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    for turn in &mut turns {
        if turn.role == Role::User {
            // Stable: results keep their order, texts keep theirs, results come first.
            turn.content.sort_by_key(|block| {
                block.get("type").and_then(Value::as_str) != Some("tool_result")
            });
        }
    }
    turns
}

fn assistant_blocks(message: &AssistantMessage) -> Vec<Value> {
    let mut blocks: Vec<Value> = message
        .reasoning
        .iter()
        .filter_map(|reasoning| match reasoning {
            Reasoning::Text {
                text,
                signature: Some(signature),
            } => Some(json!({"type": "thinking", "thinking": text, "signature": signature})),
            Reasoning::Text {
                signature: None, ..
            } => None,
            Reasoning::Redacted { data } => {
                Some(json!({"type": "redacted_thinking", "data": data}))
            }
        })
        .collect();
    if let Some(text) = message
        .content
        .as_deref()
        .filter(|text| !text.trim().is_empty())
    {
        blocks.push(text_block(text));
    }
    for call in &message.tool_calls {
        blocks.push(json!({
            "type": "tool_use",
            "id": tool_use_id(&call.id),
            "name": call.name,
            "input": tool_input(&call.arguments),
        }));
    }
    if blocks.is_empty() {
        blocks.push(text_block(EMPTY_TEXT));
    }
    blocks
}

/// A tool call's `input`: the arguments object, `{}` for no arguments, or the raw text wrapped
/// (see the module docs).
pub fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({ INVALID_ARGUMENTS_KEY: arguments }),
    }
}

/// A tool call id as Anthropic accepts it: characters outside `[a-zA-Z0-9_-]` become `_`, and
/// an empty id is `_`.
pub fn tool_use_id(id: &str) -> String {
    if id.is_empty() {
        return "_".to_owned();
    }
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn non_empty(text: &str) -> &str {
    if text.trim().is_empty() {
        EMPTY_TEXT
    } else {
        text
    }
}

/// Marks the stable prefix (see the module docs). Never more than [`MAX_CACHE_BREAKPOINTS`].
fn place_cache_breakpoints(tools: &mut [Value], system: &mut [Value], turns: &mut [Turn]) {
    let user_turns: Vec<usize> = turns
        .iter()
        .enumerate()
        .filter(|(_, turn)| turn.role == Role::User)
        .map(|(index, _)| index)
        .collect();
    let mut targets: Vec<&mut Value> = Vec::with_capacity(MAX_CACHE_BREAKPOINTS);
    targets.extend(tools.last_mut());
    targets.extend(system.last_mut());
    let older = user_turns.len().checked_sub(2).map(|i| user_turns[i]);
    let newest = user_turns.last().copied();
    for (index, turn) in turns.iter_mut().enumerate() {
        if Some(index) == older || Some(index) == newest {
            targets.extend(turn.content.last_mut());
        }
    }
    for block in targets.into_iter().take(MAX_CACHE_BREAKPOINTS) {
        if let Value::Object(fields) = block {
            fields.insert("cache_control".to_owned(), json!({"type": "ephemeral"}));
        }
    }
}
