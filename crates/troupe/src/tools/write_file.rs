//! `write_file`: create or overwrite a workspace file, creating its folders.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFileTool;

#[async_trait]
impl ToolHandler for WriteFileTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "write_file".to_owned(),
            description: "Create a file in the workspace, or replace an existing file's whole \
                 content, with `content` exactly as given. Missing parent folders are created. \
                 `path` is relative to the workspace root; paths outside the workspace and the \
                 `.troupe/` folder are refused. To change part of a file, prefer edit_file."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1,
                             "description": "File path relative to the workspace root."},
                    "content": {"type": "string",
                                "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            effect: Effect::Write,
        }
    }

    fn written_paths<'a>(&self, args: &'a Value) -> Vec<&'a str> {
        str_arg(args, "path").into_iter().collect()
    }

    fn preview(&self, ctx: &ToolContext, args: &Value) -> Option<String> {
        let raw = str_arg(args, "path").ok()?;
        let content = str_arg(args, "content").ok()?;
        let workspace = Workspace::new(&ctx.workspace).ok()?;
        let path = workspace.resolve_write(raw).ok()?;
        super::preview::write_preview(&path, &workspace.display(&path), content)
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let raw = str_arg(&args, "path")?;
        let content = str_arg(&args, "content")?;
        let workspace = Workspace::new(&ctx.workspace)?;
        let path = workspace.resolve_write(raw)?;
        // A plain write (not temp + rename) keeps the file's mode, e.g. an executable script.
        let (target, bytes) = (path.clone(), content.as_bytes().to_vec());
        crate::sync::offload("write_file", move || {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| ("cannot create the folders of", e))?;
            }
            std::fs::write(&target, bytes).map_err(|e| ("cannot write", e))
        })
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?
        .map_err(|(what, e)| ToolError::io(what, raw, &e))?;
        Ok(format!(
            "Wrote {} bytes to {}",
            content.len(),
            workspace.display(&path)
        ))
    }
}
