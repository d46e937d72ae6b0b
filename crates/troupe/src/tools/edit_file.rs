//! `edit_file`: replace one exact occurrence of a text in a workspace file.
//!
//! The old text must occur exactly once: with zero matches the model's picture of the file is
//! wrong, with several the edit would be ambiguous; both are refused, naming the count, and the
//! file is left untouched.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

#[derive(Debug, Clone, Copy, Default)]
pub struct EditFileTool;

#[async_trait]
impl ToolHandler for EditFileTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "edit_file".to_owned(),
            description: "Replace one exact piece of text in an existing workspace file. \
                 `old_text` must appear in the file exactly once, character for character \
                 (whitespace and indentation included); include enough surrounding lines to \
                 make it unique. If it appears zero times or more than once, nothing is \
                 changed and the error says how many times it was found. Read the file first."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1,
                             "description": "File path relative to the workspace root."},
                    "old_text": {"type": "string", "minLength": 1,
                                 "description": "The exact text to replace; must occur once."},
                    "new_text": {"type": "string",
                                 "description": "The text to put in its place."}
                },
                "required": ["path", "old_text", "new_text"],
                "additionalProperties": false
            }),
            effect: Effect::Write,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let raw = str_arg(&args, "path")?;
        let old_text = str_arg(&args, "old_text")?;
        let new_text = str_arg(&args, "new_text")?;
        let workspace = Workspace::new(&ctx.workspace)?;
        let path = workspace.resolve_write(raw)?;
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| ToolError::io("cannot read", raw, &e))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::Failed(format!("{raw} is not UTF-8 text")))?;
        let count = text.matches(old_text).count();
        if count != 1 {
            let hint = if count == 0 {
                "read the file again and copy the text exactly"
            } else {
                "include more surrounding text so it matches once"
            };
            return Err(ToolError::InvalidArguments(format!(
                "old_text was found {count} times in {raw}; it must match exactly once ({hint}). \
                 The file was not changed."
            )));
        }
        let updated = text.replacen(old_text, new_text, 1);
        tokio::fs::write(&path, updated.as_bytes())
            .await
            .map_err(|e| ToolError::io("cannot write", raw, &e))?;
        Ok(format!(
            "Edited {}: replaced 1 occurrence",
            workspace.display(&path)
        ))
    }
}
