//! `troupe timeline --html FILE`: the web view's timeline as one self-contained HTML file — the
//! events embedded as JSON, the page's script and style inlined; no token, no requests, works
//! from `file://`. Written durably (atomic replace); never into `.troupe/`. With a store URL:
//! a shared team's whole stream (every process's events, in the team's order), from its
//! database.

use std::path::{Path, PathBuf};

use troupe::bootstrap::StoreChoice;
use troupe::bootstrap::TeamView;
use troupe::layout::Layout;
use troupe::store::durable;
use troupe::store::events::read::read_all;

use crate::args::StoreFlags;
use crate::error::CliError;
use crate::render;
use crate::serve::page;

pub fn timeline_html(workspace: &Path, file: &Path, store: &StoreFlags) -> Result<(), CliError> {
    let layout = Layout::new(workspace);
    let dest = resolve_destination(file)?;
    let state_dir =
        std::fs::canonicalize(layout.state_dir()).unwrap_or_else(|_| layout.state_dir());
    if dest.starts_with(&state_dir) || dest.starts_with(layout.state_dir()) {
        return Err(CliError::usage(format!(
            "refusing to write {} inside troupe's state folder {}",
            dest.display(),
            state_dir.display()
        )));
    }
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let events = match crate::store_choice::store_choice(store, &settings, false)? {
        StoreChoice::Files => read_all(&layout.events_log())
            .map_err(|e| CliError::failed(e).with_code("storage_error"))?,
        StoreChoice::Postgres(options) => {
            shared_events(&options.url, &options.team).map_err(|e| CliError::coded(&e))?
        }
    };
    let json = serde_json::Value::Array(events.iter().map(troupe::wire::Event::to_json).collect());
    let html = page::standalone(&json.to_string());
    durable::replace(&dest, html.as_bytes())
        .map_err(|e| CliError::failed(e).with_code("storage_error"))?;
    render::print_text(&format!(
        "wrote {} events to {}\n",
        events.len(),
        dest.display()
    ))
}

/// Every event of a shared team's stream, in its order.
fn shared_events(
    url: &str,
    team: &str,
) -> Result<Vec<troupe::wire::Event>, troupe::store::BackendError> {
    let view = TeamView::open_url(url, team)?;
    let mut all = Vec::new();
    loop {
        let after = all.last().map_or(0, |e: &troupe::wire::Event| e.seq);
        let batch = view.events_after(after, 1000)?;
        if batch.is_empty() {
            return Ok(all);
        }
        all.extend(batch);
    }
}

/// The file's absolute path, with its folder resolved (symlinks included), so that the
/// `.troupe/` check sees where it really goes.
fn resolve_destination(file: &Path) -> Result<PathBuf, CliError> {
    let name = file
        .file_name()
        .ok_or_else(|| CliError::usage(format!("{} does not name a file", file.display())))?;
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let parent = std::fs::canonicalize(&parent)
        .map_err(|e| CliError::usage(format!("cannot write into {}: {e}", parent.display())))?;
    let dest = parent.join(name);
    if dest.is_dir() {
        return Err(CliError::usage(format!("{} is a folder", dest.display())));
    }
    Ok(dest)
}
