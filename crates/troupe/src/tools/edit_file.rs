//! `edit_file`: replace one exact occurrence of a text in a workspace file.
//!
//! The old text must occur exactly once: with zero matches the model's picture of the file is
//! wrong, with several the edit would be ambiguous; both are refused, naming the count, and the
//! file is left untouched.
//!
//! The file is opened with `open_regular` (a FIFO, socket or device is refused at once rather
//! than blocking the agent), and one larger than [`MAX_EDIT_BYTES`] is refused before it is
//! read: the edit holds the whole file in memory, twice.

use std::io::Read;
use std::path::Path;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::read_file::open_workspace_file;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

/// A file larger than this is not edited (use shell tools on it).
pub const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

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

    /// The edit's own lines: the file is not read (the handler checks the match).
    fn written_paths<'a>(&self, args: &'a Value) -> Vec<&'a str> {
        str_arg(args, "path").into_iter().collect()
    }

    fn preview(&self, _ctx: &ToolContext, args: &Value) -> Option<String> {
        let raw = str_arg(args, "path").ok()?;
        let old_text = str_arg(args, "old_text").ok()?;
        let new_text = str_arg(args, "new_text").ok()?;
        Some(super::preview::diff(raw, old_text, new_text))
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let raw = str_arg(&args, "path")?;
        let old_text = str_arg(&args, "old_text")?;
        let new_text = str_arg(&args, "new_text")?;
        let workspace = Workspace::new(&ctx.workspace)?;
        let path = workspace.resolve_write(raw)?;
        let (file_path, shown) = (path.clone(), raw.to_owned());
        let bytes = crate::sync::offload("edit_file", move || read_whole(&file_path, &shown))
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))??;
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
        let target = path.clone();
        crate::sync::offload("edit_file", move || {
            std::fs::write(&target, updated.as_bytes())
        })
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?
        .map_err(|e| ToolError::io("cannot write", raw, &e))?;
        Ok(format!(
            "Edited {}: replaced 1 occurrence",
            workspace.display(&path)
        ))
    }
}

/// The whole of a regular file of at most [`MAX_EDIT_BYTES`].
fn read_whole(path: &Path, shown: &str) -> Result<Vec<u8>, ToolError> {
    let file = open_workspace_file(path, shown)?;
    let len = file
        .metadata()
        .map_err(|e| ToolError::io("cannot inspect", shown, &e))?
        .len();
    let too_large = |len: u64| {
        ToolError::Failed(format!(
            "{shown} is {len} bytes, more than the {MAX_EDIT_BYTES} bytes edit_file handles; \
             use shell tools to change it"
        ))
    };
    if len > MAX_EDIT_BYTES {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::io("cannot read", shown, &e))?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        // It grew after the size check.
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}
