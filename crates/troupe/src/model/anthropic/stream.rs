//! One streamed Messages answer, assembled from its server-sent events.
//!
//! The events, in the order Anthropic sends them: `message_start` (model, input usage), then per
//! content block `content_block_start` (its type; a tool's id and name), `content_block_delta`s
//! (`text_delta`, `input_json_delta` whose `partial_json` pieces are concatenated in order,
//! `thinking_delta`, `signature_delta`) and `content_block_stop`; then `message_delta` (stop
//! reason, final usage) and `message_stop`, after which the answer is complete. `ping`s and
//! unknown events are ignored; an `error` event is an error (see [`super::error`]).
//!
//! **Invariants.** Blocks are keyed by their `index` and put in index order; a delta for a
//! block that was not started, or of a type that does not fit the block, a second start of the
//! same index and any event after `message_stop` are malformed streams. An answer is only handed
//! out after `message_stop`: a stream that ends before it is an error, never a short answer.
//! A tool's arguments are the concatenated JSON text as sent, not parsed (a stream cut by
//! `max_tokens` may leave it invalid; the dispatcher answers that with `invalid_arguments`).
//! A stream whose event data passes [`MAX_STREAM_BYTES`] in total is refused, whatever the
//! transport's own limits: a hostile or broken server cannot make troupe hold an unbounded answer.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::error_event_text;
use super::response::{finish_reason, message, model_name, tool_identity, Block, WireUsage};
use crate::model::types::ModelResponse;
use crate::model::wire_format::StreamAssembler;

/// The most event data one answer may total (64 MiB: far beyond any real answer).
pub const MAX_STREAM_BYTES: usize = 64 * 1024 * 1024;

/// The state of one streamed answer.
#[derive(Debug)]
pub struct Assembler {
    /// The model named by `message_start`, else the requested one.
    model: String,
    /// Content blocks by index, as far as their deltas went; `None` for a type troupe skips.
    blocks: BTreeMap<u64, Option<Partial>>,
    stop_reason: Option<String>,
    usage: WireUsage,
    complete: bool,
    /// Event data received so far, against [`MAX_STREAM_BYTES`].
    received: usize,
    /// Text not yet taken by [`StreamAssembler::take_text`].
    fresh: String,
}

/// A content block being streamed.
#[derive(Debug)]
enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The `input` of the start event, used when no `input_json_delta` follows.
        initial: Option<Value>,
        json: String,
    },
    Thinking {
        text: String,
        signature: String,
    },
    RedactedThinking(String),
}

impl Assembler {
    /// An assembler for an answer to a request for `model`.
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            blocks: BTreeMap::new(),
            stop_reason: None,
            usage: WireUsage::default(),
            complete: false,
            received: 0,
            fresh: String::new(),
        }
    }

    fn start_block(&mut self, data: &Value) -> Result<(), String> {
        let index = index(data)?;
        let block = data
            .get("content_block")
            .ok_or_else(|| format!("content_block_start #{index} has no `content_block`"))?;
        let text = |name: &str| {
            block
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let partial = match block.get("type").and_then(Value::as_str) {
            Some("text") => Some(Partial::Text(text("text"))),
            Some("tool_use") => {
                let (id, name) =
                    tool_identity(usize::try_from(index).unwrap_or(usize::MAX), block)?;
                Some(Partial::ToolUse {
                    id,
                    name,
                    initial: block
                        .get("input")
                        .filter(|input| input.as_object().is_some_and(|o| !o.is_empty()))
                        .cloned(),
                    json: String::new(),
                })
            }
            Some("thinking") => Some(Partial::Thinking {
                text: text("thinking"),
                signature: text("signature"),
            }),
            Some("redacted_thinking") => Some(Partial::RedactedThinking(text("data"))),
            Some(_) => None,
            None => return Err(format!("content block #{index} has no `type`")),
        };
        if self.blocks.insert(index, partial).is_some() {
            return Err(format!("content block #{index} was started twice"));
        }
        Ok(())
    }

    fn delta(&mut self, data: &Value) -> Result<(), String> {
        let index = index(data)?;
        let delta = data
            .get("delta")
            .ok_or_else(|| format!("content_block_delta #{index} has no `delta`"))?;
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let piece = |name: &str| -> Result<&str, String> {
            delta
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{kind} for block #{index} has no `{name}`"))
        };
        let block = self.blocks.get_mut(&index).ok_or_else(|| {
            format!("a delta for content block #{index}, which was never started")
        })?;
        let Some(block) = block else {
            // A block of a type troupe skips: its deltas are skipped too.
            return Ok(());
        };
        match (kind, block) {
            ("text_delta", Partial::Text(text)) => {
                let piece = piece("text")?;
                text.push_str(piece);
                self.fresh.push_str(piece);
            }
            ("input_json_delta", Partial::ToolUse { json, .. }) => {
                json.push_str(piece("partial_json")?)
            }
            ("thinking_delta", Partial::Thinking { text, .. }) => text.push_str(piece("thinking")?),
            ("signature_delta", Partial::Thinking { signature, .. }) => {
                signature.push_str(piece("signature")?)
            }
            // Citations and other additions troupe does not keep.
            ("citations_delta", _) => {}
            (kind, _) => {
                return Err(format!(
                    "a `{kind}` delta does not fit content block #{index}"
                ))
            }
        }
        Ok(())
    }
}

fn index(data: &Value) -> Result<u64, String> {
    data.get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| "a content block event has no `index`".to_owned())
}

impl StreamAssembler for Assembler {
    fn take_text(&mut self) -> Option<String> {
        (!self.fresh.is_empty()).then(|| std::mem::take(&mut self.fresh))
    }

    fn push(&mut self, event: Option<&str>, data: &str) -> Result<bool, String> {
        if self.complete {
            return Err("an event after `message_stop`".to_owned());
        }
        self.received = self.received.saturating_add(data.len());
        if self.received > MAX_STREAM_BYTES {
            return Err(format!(
                "the streamed answer passed {} MiB",
                MAX_STREAM_BYTES / (1024 * 1024)
            ));
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|err| format!("an event's data is not JSON ({err})"))?;
        // The `event:` field and the data's `type` say the same; the field wins when present.
        let kind = event
            .filter(|name| !name.is_empty())
            .or_else(|| value.get("type").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "message_start" => {
                let message = value
                    .get("message")
                    .ok_or_else(|| "message_start has no `message`".to_owned())?;
                self.model = model_name(message, &self.model);
                if let Some(usage) = message.get("usage") {
                    self.usage.update(WireUsage::from_value(usage));
                }
            }
            "content_block_start" => self.start_block(&value)?,
            "content_block_delta" => self.delta(&value)?,
            "content_block_stop" => {
                let index = index(&value)?;
                if !self.blocks.contains_key(&index) {
                    return Err(format!(
                        "content block #{index} was stopped but never started"
                    ));
                }
            }
            "message_delta" => {
                if let Some(reason) = value
                    .get("delta")
                    .and_then(|delta| delta.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = value.get("usage") {
                    self.usage.update(WireUsage::from_value(usage));
                }
            }
            "message_stop" => {
                self.complete = true;
                return Ok(true);
            }
            "error" => return Err(error_event_text(&value)),
            // `ping`, and events added after this was written.
            _ => {}
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ModelResponse, String> {
        if !self.complete {
            return Err("the stream ended before `message_stop`".to_owned());
        }
        let blocks = self
            .blocks
            .into_values()
            .flatten()
            .map(|partial| match partial {
                Partial::Text(text) => Block::Text(text),
                Partial::ToolUse {
                    id,
                    name,
                    initial,
                    json,
                } => Block::ToolUse {
                    id,
                    name,
                    arguments: match (json.is_empty(), initial) {
                        (false, _) => json,
                        (true, Some(input)) => input.to_string(),
                        (true, None) => "{}".to_owned(),
                    },
                },
                Partial::Thinking { text, signature } => Block::Thinking { text, signature },
                Partial::RedactedThinking(data) => Block::RedactedThinking(data),
            })
            .collect();
        let message = message(blocks);
        Ok(ModelResponse {
            finish_reason: finish_reason(
                self.stop_reason.as_deref(),
                !message.tool_calls.is_empty(),
            ),
            message,
            usage: self.usage.usage(),
            model: self.model,
        })
    }
}
