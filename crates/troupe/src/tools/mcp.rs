//! The tools of MCP servers, as troupe tools: `mcp__<server>__<tool>`.
//!
//! - **Names**: `mcp__`, the server's name, `__`, the tool's name; each part lowercased with
//!   every character outside `[a-z0-9_]` replaced by `_` (so `my-server`'s `Get.Time` is
//!   `mcp__my_server__get_time`), and the whole cut to [`MAX_TOOL_NAME`] characters — what
//!   model APIs accept and what a permission rule (`mcp__my_server__get_time`) can name. Two
//!   tools of one server that end up with the same name: the first is kept, the other left out
//!   with a warning.
//! - **Effect** `External`; the default policy asks for every MCP tool (SPEC §7), the plan
//!   gate denies them while a teammate's plan is pending, like any tool that is not a read.
//! - **Schemas**: a server's `inputSchema` that fits the subset [`super::schema`] checks is
//!   validated in full; any other (most servers leave out `additionalProperties: false`, use
//!   `anyOf`, `default`, `format`…) is offered to the model as sent and checked only loosely
//!   (an object with the top-level `required` keys): the server validates its own arguments.
//! - **Results**: text blocks joined, other blocks described (`crate::mcp::content`); a result
//!   the server flags `isError` is a tool error `mcp_tool_error`; output capped at
//!   [`OUTPUT_CAP`] bytes like `shell`'s (head and tail kept, no secret cut in two), and
//!   redacted by the dispatcher like every result.
//! - **Availability**: a tool of a server that is down is [`ToolHandler::unavailable`]
//!   (`mcp_server_down`), so it leaves the tools offered at the next model call.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{schema, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};
use crate::mcp::{McpError, McpServer, McpServers, McpToolInfo};
use crate::permissions::rules::MCP_TOOL_PREFIX;
use crate::process::{CappedOutput, OUTPUT_CAP};

/// The longest tool name model APIs take.
pub const MAX_TOOL_NAME: usize = 64;

/// `name` in the tool-name charset: lowercase, `[a-z0-9_]`, anything else `_`.
pub fn sanitise(name: &str) -> String {
    name.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The troupe name of `server`'s tool `tool`.
pub fn tool_name(server: &str, tool: &str) -> String {
    let mut name = format!("{MCP_TOOL_PREFIX}{}__{}", sanitise(server), sanitise(tool));
    name.truncate(MAX_TOOL_NAME);
    name
}

/// One tool of one server.
pub struct McpTool {
    server: Arc<McpServer>,
    tool: McpToolInfo,
    name: String,
    checked: bool,
}

impl McpTool {
    pub fn new(server: Arc<McpServer>, tool: McpToolInfo) -> Self {
        let name = tool_name(server.name(), &tool.name);
        let checked = schema::check_schema(&tool.input_schema).is_ok();
        Self {
            server,
            tool,
            name,
            checked,
        }
    }

    /// The server it belongs to.
    pub fn server(&self) -> &str {
        self.server.name()
    }
}

/// Every tool of every up server, servers in settings order, tools in the server's order.
pub fn mcp_tools(servers: &McpServers) -> Vec<Arc<McpTool>> {
    let mut tools: Vec<Arc<McpTool>> = Vec::new();
    for server in servers.servers() {
        for info in server.tools() {
            let tool = McpTool::new(server.clone(), info.clone());
            if tools.iter().any(|t| t.name == tool.name) {
                tracing::warn!(
                    "MCP server {}: tool {:?} is left out: its name {} is taken by another of \
                     its tools",
                    server.name(),
                    info.name,
                    tool.name
                );
                continue;
            }
            tools.push(Arc::new(tool));
        }
    }
    tools
}

/// Registers `tools` at the end of `registry`. A tool the registry refuses (a schema that does
/// not describe an object) is left out with a warning: a server's tool never stops a run.
pub fn register_all(
    registry: &mut super::ToolRegistry,
    tools: impl IntoIterator<Item = Arc<McpTool>>,
) {
    for tool in tools {
        let server = tool.server().to_owned();
        if let Err(e) = registry.register(tool) {
            tracing::warn!("MCP server {server}: a tool is left out: {e}");
        }
    }
}

#[async_trait]
impl ToolHandler for McpTool {
    fn definition(&self) -> ToolDefinition {
        let mut parameters = self.tool.input_schema.clone();
        if let Some(object) = parameters.as_object_mut() {
            object
                .entry("type")
                .or_insert_with(|| Value::String("object".into()));
            // A meta-schema URI says nothing a model needs.
            object.remove("$schema");
        } else {
            parameters = json!({"type": "object"});
        }
        let description = if self.tool.description.trim().is_empty() {
            format!(
                "Tool {} of MCP server {}.",
                self.tool.name,
                self.server.name()
            )
        } else {
            format!(
                "{} (tool {} of MCP server {})",
                self.tool.description.trim(),
                self.tool.name,
                self.server.name()
            )
        };
        ToolDefinition {
            name: self.name.clone(),
            description,
            parameters,
            effect: Effect::External,
        }
    }

    fn checked_schema(&self) -> bool {
        self.checked
    }

    fn unavailable(&self) -> Option<ToolError> {
        (!self.server.is_up()).then(|| {
            ToolError::coded(&McpError::ServerDown {
                server: self.server.name().to_owned(),
                reason: self.server.reason(),
            })
        })
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let arguments = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let (text, is_error) = self
            .server
            .call(&self.tool.name, arguments)
            .await
            .map_err(|e| ToolError::coded(&e))?;
        let mut capped = CappedOutput::head_and_tail(OUTPUT_CAP).redacting(ctx.redactor.clone());
        capped.push(text.as_bytes());
        let text = capped.render();
        let text = text.strip_suffix('\n').unwrap_or(&text).to_owned();
        if is_error {
            return Err(ToolError::Coded {
                code: MCP_TOOL_ERROR,
                message: format!("{} answered with an error: {text}", self.name),
            });
        }
        Ok(text)
    }
}

/// The code of a result the server flagged `isError`.
pub const MCP_TOOL_ERROR: &str = "mcp_tool_error";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_and_capped() {
        assert_eq!(
            tool_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(
            tool_name("my-server", "Get.Time"),
            "mcp__my_server__get_time"
        );
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), MAX_TOOL_NAME);
        assert!(crate::settings::load::check_rule(&tool_name("a-b", "C/d")).is_ok());
    }
}
