//! `troupe mcp list [--json]`: the configured MCP servers, each started briefly (within its
//! startup timeout) to list its tools, then stopped. Reads the settings only: creates no state
//! (no `.troupe/`). `troupe mcp serve` (troupe as an MCP server) is [`super::mcp_serve`].
//!
//! JSON shape (stable): `{"servers": [{"name", "transport": "stdio"|"http", "state":
//! "up"|"failed"|"down", "reason"?: string, "tools": [{"name": <troupe's name>, "server_name":
//! <the server's>, "description"}]}]}`.

use std::path::Path;

use serde_json::{json, Value};
use troupe::mcp::{McpServers, ServerState};
use troupe::tools::mcp::tool_name;

use crate::args::McpAction;
use crate::error::CliError;
use crate::render;

pub async fn mcp(workspace: &Path, action: McpAction, json: bool) -> Result<(), CliError> {
    match action {
        McpAction::List => list(workspace, json).await,
        McpAction::Serve(args) => super::mcp_serve::serve(workspace, *args).await,
    }
}

async fn list(workspace: &Path, json: bool) -> Result<(), CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Run)?.settings;
    // Started as a run would start them: under the run's sandbox and their own settings.
    let (sandbox, _) =
        crate::sandboxing::options(workspace, None, &settings, crate::args::ApprovalMode::Deny)?;
    let servers = McpServers::start(&settings.mcp_servers, workspace, &sandbox.sandbox).await;
    let statuses = servers.statuses();
    servers.stop().await;
    let servers: Vec<Value> = statuses
        .iter()
        .map(|status| {
            let (state, reason) = match &status.state {
                ServerState::Up => ("up", None),
                ServerState::Failed(r) => ("failed", Some(r.clone())),
                ServerState::Down(r) => ("down", Some(r.clone())),
            };
            let tools: Vec<Value> = status
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": tool_name(&status.name, &t.name),
                        "server_name": t.name,
                        "description": t.description,
                    })
                })
                .collect();
            let mut entry = json!({
                "name": status.name,
                "transport": status.transport,
                "state": state,
                "tools": tools,
            });
            if let Some(reason) = reason {
                entry["reason"] = Value::String(reason);
            }
            entry
        })
        .collect();
    if json {
        return render::print_json(&json!({ "servers": servers }));
    }
    if servers.is_empty() {
        return render::print_text(
            "no MCP servers are configured ([[mcp_servers]] in troupe.toml)\n",
        );
    }
    let mut text = String::new();
    for server in &servers {
        text.push_str(&format!(
            "{} ({}): {}",
            server["name"].as_str().unwrap_or_default(),
            server["transport"].as_str().unwrap_or_default(),
            server["state"].as_str().unwrap_or_default()
        ));
        if let Some(reason) = server["reason"].as_str() {
            text.push_str(&format!(" — {reason}"));
        }
        text.push('\n');
        for tool in server["tools"].as_array().into_iter().flatten() {
            let description = tool["description"].as_str().unwrap_or_default();
            let first_line = description.lines().next().unwrap_or_default();
            text.push_str(&format!(
                "  {}  {first_line}\n",
                tool["name"].as_str().unwrap_or_default()
            ));
        }
    }
    render::print_text(&text)
}
