//! `read_file`: the text of a workspace file, or of some of its lines (`offset` lines skipped,
//! then at most `limit` lines) — so a file or an artifact larger than what one result shows is
//! read page by page.
//!
//! The file is opened with [`open_regular`] (a FIFO, socket or device is refused at once rather
//! than blocking the agent) and read *streaming*: at most [`MAX_READ_BYTES`] bytes are shown,
//! and only a few more are read (to know whether the file goes on, and to see whole any secret
//! that crosses the cut), whatever the file's size, so a sparse terabyte costs no more than a
//! small file; skipping `offset` lines streams past them without keeping them. Only what is
//! shown must be UTF-8; a cut that falls inside a character keeps the
//! whole characters before it, and a cut that falls inside a secret (the API key in a file)
//! keeps nothing of it.
//!
//! On a shared team, an artifact another workspace wrote (a teammate taken over by a worker
//! here: its history names the first host's artifacts) is made here from the team's copy when
//! the file is missing ([`ArtifactStore::recover`]), then read as any file; only a path that
//! resolves to `.troupe/artifacts/<agent>/<uuid>.txt` qualifies.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};
use crate::layout::Layout;
use crate::secrets::Redactor;
use crate::store::artifacts::{ArtifactKey, ArtifactStore, Recovered, SHARED_ARTIFACT_BYTES};
use crate::store::read::{open_regular, Links};

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
                 are refused). Use `limit` to read only N lines of a long file, and `offset` to \
                 skip the first N lines (page through a file with both). At most \
                 {MAX_READ_BYTES} bytes are shown at once; the result says when it is cut."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1,
                             "description": "File path relative to the workspace root."},
                    "limit": {"type": "integer", "exclusiveMinimum": 0,
                              "description": "Return at most this many lines."},
                    "offset": {"type": "integer", "minimum": 0,
                               "description": "Skip this many lines first (0: from the start)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            effect: Effect::Read,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let raw = str_arg(&args, "path")?.to_owned();
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .map(|limit| usize::try_from(limit).unwrap_or(usize::MAX));
        let offset = args
            .get("offset")
            .and_then(Value::as_u64)
            .map_or(0, |offset| usize::try_from(offset).unwrap_or(usize::MAX));
        let workspace = Workspace::new(&ctx.workspace)?;
        let (path, recovered) = match workspace.resolve_read(&raw) {
            Ok(path) => (path, None),
            Err(ToolError::NotFound(message)) => {
                let key = artifact_named(&workspace, &raw);
                match (key, ctx.artifacts.clone()) {
                    (Some(key), Some(store)) => match kept_apart(&ctx.agent, &key, &store) {
                        Some(path) => (path, None),
                        None => recover(&workspace, &raw, key, store, message).await?,
                    },
                    _ => return Err(ToolError::NotFound(message)),
                }
            }
            Err(e) => return Err(e),
        };
        // Reading a file is blocking work, however small the part read.
        let redactor = ctx.redactor.clone();
        let lines = Lines { offset, limit };
        let text = crate::sync::offload("read_file", move || read(&path, &raw, lines, &redactor))
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))??;
        Ok(match recovered {
            Some(recovered) => with_recovery_note(text, &recovered),
            None => text,
        })
    }
}

/// The artifact `raw` names, if it resolves to `.troupe/artifacts/<agent>/<name>` of this
/// workspace with an agent's name and an artifact's file name (nothing else is fetched).
fn artifact_named(workspace: &Workspace, raw: &str) -> Option<ArtifactKey> {
    let path = workspace.resolve_maybe_missing(raw).ok()?;
    let rest = path
        .strip_prefix(workspace.root().join(Layout::STATE_DIR).join("artifacts"))
        .ok()?;
    let mut parts = rest.components();
    let (Some(std::path::Component::Normal(agent)), Some(std::path::Component::Normal(name)), None) =
        (parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    ArtifactKey::parse(agent.to_str()?, name.to_str()?)
}

/// The caller's own artifact `key` where its store keeps it, when that is not under the
/// workspace: a teammate working in its git worktree reads the artifacts the team keeps in
/// the lead's `.troupe/` by the path its results name. Only a regular file, never a symlink.
fn kept_apart(
    agent: &troupe_wire::AgentName,
    key: &ArtifactKey,
    store: &ArtifactStore,
) -> Option<std::path::PathBuf> {
    let path = store.dir().join(key.name());
    let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
    (key.agent() == agent && regular).then_some(path)
}

/// Makes the missing artifact `key` from the team's copy and resolves it again; the file's own
/// "no such file" when there is no copy.
async fn recover(
    workspace: &Workspace,
    raw: &str,
    key: ArtifactKey,
    store: ArtifactStore,
    not_found: String,
) -> Result<(std::path::PathBuf, Option<Recovered>), ToolError> {
    let recovered = store
        .recover(&key)
        .await
        .map_err(|e| ToolError::coded(&e))?;
    let Some(recovered) = recovered else {
        return Err(ToolError::NotFound(not_found));
    };
    Ok((workspace.resolve_read(raw)?, Some(recovered)))
}

/// `text` with a last line saying where it came from, and whether the copy is cut.
fn with_recovery_note(mut text: String, recovered: &Recovered) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    if recovered.is_cut() {
        text.push_str(&format!(
            "[this workspace had no copy of this artifact; it was made from the team's store, \
             which keeps the first {SHARED_ARTIFACT_BYTES} bytes of each: {} of its {} bytes]",
            recovered.kept, recovered.bytes
        ));
    } else {
        text.push_str(
            "[this workspace had no copy of this artifact; it was made from the team's store]",
        );
    }
    text
}

/// Opens `path` (confinement already resolved it, so a link is followed) as a regular file.
pub(crate) fn open_workspace_file(path: &Path, shown: &str) -> Result<File, ToolError> {
    match open_regular(path, Links::Follow) {
        Ok(Some(file)) => Ok(file),
        Ok(None) => Err(ToolError::NotFound(format!("{shown}: no such file"))),
        Err(e) => Err(ToolError::io("cannot read", shown, &e.source)),
    }
}

/// Which lines to show: `offset` skipped, then at most `limit`.
#[derive(Debug, Clone, Copy)]
struct Lines {
    offset: usize,
    limit: Option<usize>,
}

/// Reads past the first `offset` lines of `reader`: how many lines there were when it ended
/// first (the file has fewer), else `None`. A last line without `\n` counts as a line.
fn skip_lines(reader: &mut impl BufRead, offset: usize) -> std::io::Result<Option<usize>> {
    let mut skipped = 0;
    let mut partial = false;
    while skipped < offset {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(Some(skipped + usize::from(partial)));
        }
        let (used, ended_line) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        reader.consume(used);
        if ended_line {
            skipped += 1;
            partial = false;
        } else {
            partial = true;
        }
    }
    Ok(None)
}

fn read(path: &Path, raw: &str, lines: Lines, redactor: &Redactor) -> Result<String, ToolError> {
    let Lines { offset, limit } = lines;
    let file = open_workspace_file(path, raw)?;
    let total_bytes = file
        .metadata()
        .map_err(|e| ToolError::io("cannot inspect", raw, &e))?
        .len();
    let mut reader = BufReader::new(file);
    if let Some(total_lines) =
        skip_lines(&mut reader, offset).map_err(|e| ToolError::io("cannot read", raw, &e))?
    {
        return Ok(format!(
            "[{raw} has {total_lines} lines; offset {offset} is past its end]"
        ));
    }
    let mut bytes = Vec::new();
    // Past the cap: one byte to know the file goes on, the margin to see a secret crossing it.
    reader
        .take((MAX_READ_BYTES + redactor.margin().max(1)) as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::io("cannot read", raw, &e))?;
    if offset > 0 && bytes.is_empty() {
        return Ok(format!(
            "[{raw} has {offset} lines; offset {offset} is past its end]"
        ));
    }
    // Everything there is fits under the cap (the size on record may be stale: trust the read).
    let complete = bytes.len() <= MAX_READ_BYTES;
    let mut notes = Vec::new();
    let mut end = redactor.cut_end(&bytes, MAX_READ_BYTES);
    let mut cut_by_lines = false;
    if let Some(limit) = limit {
        if let Some(line_end) = end_of_line(&bytes[..end], limit) {
            if line_end < bytes.len() {
                end = line_end;
                cut_by_lines = true;
                let shown = match offset {
                    0 => format!("the first {limit} lines"),
                    _ => format!("lines {}-{}", offset + 1, offset + limit),
                };
                notes.push(if complete {
                    let total_lines = offset + count_lines(&bytes);
                    match offset {
                        0 => format!("[showing the first {limit} of {total_lines} lines]"),
                        _ => format!("[showing {shown} of {total_lines} lines]"),
                    }
                } else {
                    format!("[showing {shown} of a file of {total_bytes} bytes]")
                });
            }
        }
    }
    let text = shown_text(&bytes[..end], end < bytes.len()).ok_or_else(|| {
        ToolError::Failed(format!(
            "{raw} is not UTF-8 text ({total_bytes} bytes); use shell tools to inspect binary files"
        ))
    })?;
    if !complete && !cut_by_lines {
        let cut = match offset {
            0 => format!("{MAX_READ_BYTES} of {total_bytes} bytes"),
            _ => format!(
                "{MAX_READ_BYTES} bytes from line {} of a file of {total_bytes} bytes",
                offset + 1
            ),
        };
        notes.push(format!(
            "[cut at {cut}; page on with `offset` and `limit` (lines), or use shell tools]"
        ));
    } else if offset > 0 && !cut_by_lines {
        notes.push(format!(
            "[showing lines {}-{} of {} lines]",
            offset + 1,
            offset + count_lines(&bytes[..end]),
            offset + count_lines(&bytes[..end])
        ));
    }
    let mut text = text.to_owned();
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

/// The end (just past its `\n`) of line number `limit`, if the bytes hold that many lines.
fn end_of_line(bytes: &[u8], limit: usize) -> Option<usize> {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, byte)| **byte == b'\n')
        .nth(limit.checked_sub(1)?)
        .map(|(at, _)| at + 1)
}

/// Lines as `str::lines` counts them: a last line without `\n` counts too.
fn count_lines(bytes: &[u8]) -> usize {
    let newlines = bytes.iter().filter(|byte| **byte == b'\n').count();
    newlines + usize::from(!bytes.is_empty() && !bytes.ends_with(b"\n"))
}

/// `bytes` as text. When they were `cut` from a longer read, a character the cut split is left
/// out; any other invalid byte means the file is not text.
fn shown_text(bytes: &[u8], cut: bool) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        // `error_len() == None`: the bytes end inside a character.
        Err(e) if cut && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    }
}
