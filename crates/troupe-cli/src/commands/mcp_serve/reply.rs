//! The shapes of a tool's result: a failure as the client's model should read it, and a JSON
//! value as both the text and the structured content.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::error::CliError;

/// A tool's failure: the message and its stable code.
pub fn failed(error: &CliError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{} [{}]",
        error.cause(),
        error.code()
    ))])
}

/// A result whose text is `value` as JSON, with `value` as its structured content.
pub fn structured(value: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}
