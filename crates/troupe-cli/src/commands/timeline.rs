//! `troupe timeline --html FILE`: the web view's timeline as one self-contained HTML file — the
//! events embedded as JSON, the page's script and style inlined; no token, no requests, works
//! from `file://`. Written durably (atomic replace); never into `.troupe/`.

use std::path::{Path, PathBuf};

use troupe::layout::Layout;
use troupe::store::durable;
use troupe::store::events::read::read_all;

use super::CliError;
use crate::render;
use crate::serve::page;

pub fn timeline_html(workspace: &Path, file: &Path) -> Result<(), CliError> {
    let layout = Layout::new(workspace);
    let dest = resolve_destination(file)?;
    let state_dir =
        std::fs::canonicalize(layout.state_dir()).unwrap_or_else(|_| layout.state_dir());
    if dest.starts_with(&state_dir) || dest.starts_with(layout.state_dir()) {
        return Err(CliError::Usage(format!(
            "refusing to write {} inside troupe's state folder {}",
            dest.display(),
            state_dir.display()
        )));
    }
    let events = read_all(&layout.events_log())
        .map_err(|e| CliError::failed(format_args!("{e} [storage_error]")))?;
    let json = serde_json::Value::Array(events.iter().map(troupe::wire::Event::to_json).collect());
    let html = page::standalone(&json.to_string());
    durable::replace(&dest, html.as_bytes())
        .map_err(|e| CliError::failed(format_args!("{e} [storage_error]")))?;
    render::print_text(&format!(
        "wrote {} events to {}\n",
        events.len(),
        dest.display()
    ))
}

/// The file's absolute path, with its folder resolved (symlinks included), so that the
/// `.troupe/` check sees where it really goes.
fn resolve_destination(file: &Path) -> Result<PathBuf, CliError> {
    let name = file
        .file_name()
        .ok_or_else(|| CliError::Usage(format!("{} does not name a file", file.display())))?;
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let parent = std::fs::canonicalize(&parent)
        .map_err(|e| CliError::Usage(format!("cannot write into {}: {e}", parent.display())))?;
    let dest = parent.join(name);
    if dest.is_dir() {
        return Err(CliError::Usage(format!("{} is a folder", dest.display())));
    }
    Ok(dest)
}
