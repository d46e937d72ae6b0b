//! A streamed Chat Completions answer, assembled from its chunks (`chat.completion.chunk`).
//!
//! Each event's data is one JSON chunk, or `[DONE]` at the end. A chunk's `choices[0].delta`
//! carries a piece of the text (`content`), of the shown reasoning (`reasoning_content`, or
//! `reasoning` on some servers) and of the tool calls (`tool_calls`, each with the `index` of
//! the call it continues: the id and name come in its first delta, the arguments in pieces to
//! concatenate). `finish_reason` comes with the last content chunk; with
//! `stream_options.include_usage` a last chunk with no choices carries `usage`.
//!
//! **Complete or nothing.** The answer is complete at `[DONE]`, or at the end of the stream if a
//! `finish_reason` was seen (some servers never send `[DONE]`). A stream that ends before either
//! is cut, and [`StreamAssembler::finish`] refuses it: the transport retries it rather than take
//! half an answer for a whole one. An `error` object in a chunk (servers report failures that
//! happen mid-generation that way) fails the answer.

use std::collections::BTreeMap;

use serde_json::Value;

use super::wire::{collapse, content_text, error_text, reasoning_from, usage};
use crate::model::types::{AssistantMessage, FinishReason, ModelResponse, ToolCall, Usage};
use crate::model::wire_format::StreamAssembler;

/// Tool calls one answer may make; more is a hostile or broken server.
const MAX_TOOL_CALLS: usize = 1024;

/// Builds one streamed answer.
#[derive(Debug, Default)]
pub struct ChunkAssembler {
    requested_model: String,
    model: Option<String>,
    content: String,
    /// Text not yet taken by [`StreamAssembler::take_text`].
    fresh: String,
    saw_content: bool,
    reasoning: String,
    /// By the index the server gives each call.
    tool_calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl ChunkAssembler {
    /// `requested_model` names the answer when the server does not.
    pub fn new(requested_model: &str) -> Self {
        Self {
            requested_model: requested_model.to_owned(),
            ..Self::default()
        }
    }

    fn chunk(&mut self, chunk: &Value) -> Result<(), String> {
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            let message = error_text(error).unwrap_or_else(|| error.to_string());
            return Err(format!(
                "the stream reported an error: {}",
                collapse(&message)
            ));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            if !model.is_empty() {
                self.model = Some(model.to_owned());
            }
        }
        if let Some(counts) = chunk.get("usage").filter(|usage| !usage.is_null()) {
            self.usage = usage(counts).or(self.usage);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| choices.first())
        else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta").filter(|delta| delta.is_object()) else {
            return Ok(());
        };
        if let Some(text) = delta.get("content").and_then(content_text) {
            self.saw_content = true;
            self.content.push_str(&text);
            self.fresh.push_str(&text);
        }
        for field in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta.get(field).and_then(Value::as_str) {
                self.reasoning.push_str(text);
            }
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, call) in calls.iter().enumerate() {
                self.tool_call_delta(position, call)?;
            }
        }
        Ok(())
    }

    fn tool_call_delta(&mut self, position: usize, delta: &Value) -> Result<(), String> {
        // Servers that leave out `index` send each call whole, in order.
        let index = match delta.get("index") {
            Some(index) => index
                .as_u64()
                .ok_or_else(|| format!("a tool call delta has index {index}"))?,
            None => (self.tool_calls.len() + position) as u64,
        };
        if !self.tool_calls.contains_key(&index) && self.tool_calls.len() >= MAX_TOOL_CALLS {
            return Err(format!(
                "more than {MAX_TOOL_CALLS} tool calls in one answer"
            ));
        }
        let call = self.tool_calls.entry(index).or_default();
        if let Some(id) = delta.get("id").and_then(Value::as_str) {
            if call.id.is_empty() {
                call.id = id.to_owned();
            }
        }
        let Some(function) = delta.get("function") else {
            return Ok(());
        };
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            if call.name.is_empty() {
                call.name = name.to_owned();
            }
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            // A few servers send the arguments whole, as an object.
            Some(other) => call.arguments.push_str(&other.to_string()),
        }
        Ok(())
    }
}

impl StreamAssembler for ChunkAssembler {
    fn take_text(&mut self) -> Option<String> {
        (!self.fresh.is_empty()).then(|| std::mem::take(&mut self.fresh))
    }

    fn push(&mut self, _event: Option<&str>, data: &str) -> Result<bool, String> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|err| format!("a stream chunk is not JSON ({err}): {}", collapse(data)))?;
        self.chunk(&chunk)?;
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ModelResponse, String> {
        if !self.done && self.finish_reason.is_none() {
            return Err("the stream ended before the answer was complete".to_owned());
        }
        let this = *self;
        let tool_calls = this
            .tool_calls
            .into_values()
            .enumerate()
            .map(|(position, call)| {
                if call.name.is_empty() {
                    return Err(format!("tool call #{position} has no function name"));
                }
                Ok(ToolCall {
                    id: if call.id.is_empty() {
                        format!("call_{position}")
                    } else {
                        call.id
                    },
                    name: call.name,
                    arguments: if call.arguments.is_empty() {
                        "{}".to_owned()
                    } else {
                        call.arguments
                    },
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let finish_reason = match this.finish_reason {
            Some(reason) => FinishReason::from(reason),
            None if !tool_calls.is_empty() => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        Ok(ModelResponse {
            message: AssistantMessage {
                content: this.saw_content.then_some(this.content),
                tool_calls,
                reasoning: reasoning_from(Some(this.reasoning)),
            },
            finish_reason,
            usage: this.usage,
            model: this.model.unwrap_or(this.requested_model),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assemble(events: &[&str]) -> Result<ModelResponse, String> {
        let mut assembler: Box<dyn StreamAssembler> = Box::new(ChunkAssembler::new("m"));
        for data in events {
            if assembler.push(None, data)? {
                break;
            }
        }
        assembler.finish()
    }

    #[test]
    fn tool_calls_are_joined_by_index_whatever_the_order_of_their_deltas() {
        let response = assemble(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"glob","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":1}"}},{"index":1,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            response.message.tool_calls,
            vec![
                ToolCall::new("a", "read_file", r#"{"path":1}"#),
                ToolCall::new("b", "glob", "{}")
            ]
        );
        assert_eq!(response.message.content, None);
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn a_stream_without_its_end_is_refused() {
        let error = assemble(&[r#"{"choices":[{"delta":{"content":"half"}}]}"#]).unwrap_err();
        assert!(error.contains("before the answer was complete"), "{error}");
    }

    #[test]
    fn an_error_chunk_fails_the_answer() {
        let error = assemble(&[r#"{"error":{"message":"upstream died"}}"#]).unwrap_err();
        assert!(error.contains("upstream died"), "{error}");
    }

    #[test]
    fn a_call_without_a_name_is_refused() {
        let error = assemble(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ])
        .unwrap_err();
        assert!(error.contains("no function name"), "{error}");
    }
}
