//! What an ACP session is in troupe: a workspace (the session's `cwd`) and its lead's
//! conversation. troupe keeps one lead conversation per workspace, so a workspace has one
//! current session: `session/new` starts the lead on a fresh conversation (the earlier one is
//! kept, as `troupe run --new-session` keeps it) and records the session in
//! `.troupe/acp_session.json`; `session/load` and `session/list` read that record, so a session
//! is found again by a later `troupe acp` process.
//!
//! Also here: the editor's MCP servers as troupe's (`[[mcp_servers]]` entries the person named
//! in the editor, so no trust prompt), and a prompt's content blocks as the lead's user message.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResourceResource, McpServer, SessionInfo,
};
use serde::{Deserialize, Serialize};
use troupe::layout::Layout;
use troupe::settings::{
    McpServerSpec, McpTransport, Source, DEFAULT_MCP_CALL_TIMEOUT, DEFAULT_MCP_STARTUP_TIMEOUT,
};

/// The record's file, in the workspace's state folder.
const FILE: &str = "acp_session.json";
/// A record larger than this is not one troupe wrote: no session.
const MAX_RECORD: u64 = 64 * 1024;
/// A session's title: the first line of its first prompt, at most this many characters.
const TITLE_CHARS: usize = 80;

/// The workspace's current ACP session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub session_id: String,
    pub cwd: PathBuf,
    #[serde(default)]
    pub title: Option<String>,
    /// RFC 3339, UTC.
    pub updated_at: String,
}

impl Record {
    pub fn new(session_id: String, cwd: &Path) -> Self {
        Self {
            session_id,
            cwd: cwd.to_owned(),
            title: None,
            updated_at: now(),
        }
    }

    /// Touched by a prompt: the first prompt's first line is the title.
    pub fn prompted(&mut self, text: &str) {
        if self.title.is_none() {
            let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let title: String = line.trim().chars().take(TITLE_CHARS).collect();
            self.title = (!title.is_empty()).then_some(title);
        }
        self.updated_at = now();
    }

    pub fn info(&self) -> SessionInfo {
        SessionInfo::new(self.session_id.clone(), self.cwd.clone())
            .title(self.title.clone())
            .updated_at(Some(self.updated_at.clone()))
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn file(workspace: &Path) -> PathBuf {
    Layout::new(workspace).state_dir().join(FILE)
}

/// The workspace's current session, if it has one (a missing, unreadable or foreign file — a
/// link, a FIFO, not JSON — is none).
pub fn load(workspace: &Path) -> Option<Record> {
    let bytes = troupe::store::read::read_regular(
        &file(workspace),
        troupe::store::read::Links::Refuse,
        MAX_RECORD,
    )
    .ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// Saves `record` as the workspace's current session (replacing the file, never writing
/// through a link).
pub fn save(workspace: &Path, record: &Record) -> Result<(), String> {
    let dir = Layout::new(workspace).state_dir();
    troupe::store::durable::ensure_real_dir(&dir).map_err(|e| e.to_string())?;
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| e.to_string())?;
    troupe::store::durable::replace_view(&file(workspace), &bytes).map_err(|e| e.to_string())
}

/// The editor's MCP servers as troupe's entries, named `editor_<name>` in `[a-z0-9_]` (so
/// never the name of one of the workspace's own) and unique. SSE servers are refused: troupe
/// speaks stdio and streamable HTTP (the capabilities say so).
pub fn mcp_servers(servers: &[McpServer]) -> Result<Vec<McpServerSpec>, String> {
    let mut names: Vec<String> = Vec::new();
    let mut specs = Vec::new();
    for server in servers {
        let (name, transport) = match server {
            McpServer::Stdio(stdio) => (
                &stdio.name,
                McpTransport::Stdio {
                    command: stdio.command.to_string_lossy().into_owned(),
                    args: stdio.args.clone(),
                    env: stdio
                        .env
                        .iter()
                        .map(|v| (v.name.clone(), v.value.clone()))
                        .collect(),
                },
            ),
            McpServer::Http(http) => (
                &http.name,
                McpTransport::Http {
                    url: http.url.clone(),
                },
            ),
            McpServer::Sse(sse) => {
                return Err(format!(
                    "MCP server `{}` uses SSE, which troupe does not speak; use stdio or HTTP",
                    sse.name
                ))
            }
            _ => return Err("an MCP server of a kind troupe does not speak".into()),
        };
        let name = unique(format!("editor_{}", slug(name)), &names);
        names.push(name.clone());
        specs.push(McpServerSpec {
            name,
            transport,
            sandbox: None,
            network: None,
            startup_timeout: DEFAULT_MCP_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_MCP_CALL_TIMEOUT,
            source: Source::Flag("the editor's session/new".into()),
        });
    }
    Ok(specs)
}

/// `name` as troupe's server names are written, and as its tools' names show it: lowercase
/// `[a-z0-9_]`, never empty.
fn slug(name: &str) -> String {
    let slug: String = name
        .trim()
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect();
    if slug.is_empty() {
        "server".into()
    } else {
        slug
    }
}

fn unique(name: String, taken: &[String]) -> String {
    if !taken.contains(&name) {
        return name;
    }
    (2..)
        .map(|n| format!("{name}_{n}"))
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or(name)
}

/// A prompt's content as the lead's user message: text as is, a linked resource named with
/// its URI (the lead reads it with its tools), an embedded text resource inside a `<file>`
/// block. Images, audio and binary resources are refused (the capabilities do not offer them).
pub fn prompt_text(blocks: &[ContentBlock]) -> Result<String, String> {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => {
                parts.push(format!("[resource: {} <{}>]", link.name, link.uri));
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(resource) => parts.push(format!(
                    "<file uri=\"{}\">\n{}\n</file>",
                    resource.uri, resource.text
                )),
                _ => return Err("binary resources are not taken in a prompt".into()),
            },
            ContentBlock::Image(_) => return Err("images are not taken in a prompt".into()),
            ContentBlock::Audio(_) => return Err("audio is not taken in a prompt".into()),
            _ => return Err("a content block of a kind troupe does not take".into()),
        }
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() {
        return Err("the prompt is empty".into());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_record_survives_a_save_and_foreign_files_are_no_record() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), None);
        let mut record = Record::new("s-1".into(), dir.path());
        record.prompted("\n  fix the parser  \nand more");
        record.prompted("second");
        save(dir.path(), &record).unwrap();
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded.title.as_deref(), Some("fix the parser"));
        assert_eq!(loaded, record);
        std::fs::write(file(dir.path()), "not json").unwrap();
        assert_eq!(load(dir.path()), None);
    }

    #[test]
    fn editor_servers_get_troupe_names_of_their_own() {
        let servers: Vec<McpServer> = serde_json::from_value(serde_json::json!([
            {"name": "Docs Server", "command": "/bin/docs", "args": ["-v"], "env": [{"name": "A", "value": "1"}]},
            {"type": "http", "name": "docs-server", "url": "http://127.0.0.1:9/mcp", "headers": []},
        ]))
        .unwrap();
        let specs = mcp_servers(&servers).unwrap();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["editor_docs_server", "editor_docs_server_2"]);
        assert_eq!(
            specs[0].transport,
            McpTransport::Stdio {
                command: "/bin/docs".into(),
                args: vec!["-v".into()],
                env: vec![("A".into(), "1".into())],
            }
        );
        let sse: Vec<McpServer> = serde_json::from_value(serde_json::json!([
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []},
        ]))
        .unwrap();
        assert!(mcp_servers(&sse).unwrap_err().contains("SSE"));
    }

    #[test]
    fn prompt_blocks_become_one_user_message() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(serde_json::json!([
            {"type": "text", "text": "explain"},
            {"type": "resource_link", "name": "a.rs", "uri": "file:///w/a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}},
        ]))
        .unwrap();
        assert_eq!(
            prompt_text(&blocks).unwrap(),
            "explain\n\n[resource: a.rs <file:///w/a.rs>]\n\n<file uri=\"file:///w/b.rs\">\nfn b() {}\n</file>"
        );
        let image: Vec<ContentBlock> = serde_json::from_value(serde_json::json!([
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]))
        .unwrap();
        assert!(prompt_text(&image).is_err());
        assert!(prompt_text(&[]).is_err());
    }
}
