//! `read_file`: the text of a workspace file, optionally only its first lines.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

/// Files larger than this are cut (the model's context is the limit, not the disk).
pub const MAX_READ_BYTES: usize = 200_000;

#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFileTool;

#[async_trait]
impl ToolHandler for ReadFileTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read_file".to_owned(),
            description: format!(
                "Read a UTF-8 text file in the workspace and return its content exactly as \
                 stored. `path` is relative to the workspace root (paths outside the workspace \
                 are refused). Use `limit` to read only the first N lines of a long file. \
                 Files over {MAX_READ_BYTES} bytes are cut, and the result says so."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1,
                             "description": "File path relative to the workspace root."},
                    "limit": {"type": "integer", "exclusiveMinimum": 0,
                              "description": "Return at most this many lines from the start."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            effect: Effect::Read,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let raw = str_arg(&args, "path")?;
        let limit = args.get("limit").and_then(Value::as_u64);
        let workspace = Workspace::new(&ctx.workspace)?;
        let path = workspace.resolve_read(raw)?;
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| ToolError::io("cannot read", raw, &e))?;
        let total_bytes = bytes.len();
        let mut text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => {
                return Err(ToolError::Failed(format!(
                    "{raw} is not UTF-8 text ({total_bytes} bytes); use shell tools to inspect binary files"
                )))
            }
        };
        let mut notes = Vec::new();
        if let Some(limit) = limit {
            let total_lines = text.lines().count();
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            if total_lines > limit {
                let end = text
                    .match_indices('\n')
                    .nth(limit.saturating_sub(1))
                    .map_or(text.len(), |(i, _)| i + 1);
                text.truncate(end);
                notes.push(format!(
                    "[showing the first {limit} of {total_lines} lines]"
                ));
            }
        }
        if text.len() > MAX_READ_BYTES {
            let mut cut = MAX_READ_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            notes.push(format!(
                "[cut at {MAX_READ_BYTES} of {total_bytes} bytes; use `limit` or shell tools for the rest]"
            ));
        }
        if text.is_empty() && notes.is_empty() {
            return Ok(format!("[{raw} is empty]"));
        }
        for note in notes {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&note);
        }
        Ok(text)
    }
}
