//! `troupe timeline --html FILE`: the web view's timeline as one self-contained HTML file — the
//! events embedded as JSON, the page's script and style inlined; no token, no requests, works
//! from `file://`. Written durably (atomic replace); never into `.troupe/`. With a store URL:
//! a shared team's whole stream (every process's events, in the team's order), from its
//! database. The stream is copied a batch at a time into a staged file, never held whole.

use std::path::{Path, PathBuf};

use troupe::layout::Layout;
use troupe::store::durable::StagedFile;
use troupe::wire::Event;

use crate::args::StoreFlags;
use crate::error::CliError;
use crate::render;
use crate::serve::page;

pub async fn timeline_html(
    workspace: &Path,
    file: &Path,
    store: &StoreFlags,
) -> Result<(), CliError> {
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
    let storage = |e: troupe::store::IoError| CliError::failed(e).with_code("storage_error");
    let mut out = Out {
        file: StagedFile::create(&dest).map_err(storage)?,
        written: 0,
    };
    let (before, after) = page::standalone_around();
    out.file.write_all(before.as_bytes()).map_err(storage)?;
    out.file.write_all(b"[").map_err(storage)?;
    let choice = crate::store_choice::store_choice(store, &settings, false)?;
    let stream = crate::store_choice::team_view(workspace, &choice)
        .await?
        .events();
    let mut reader = stream.reader(0).await.map_err(|e| CliError::coded(&e))?;
    loop {
        let batch = reader
            .next_batch(BATCH_BYTES)
            .await
            .map_err(|e| CliError::coded(&e))?;
        if batch.is_empty() {
            break;
        }
        out.add(&batch).map_err(storage)?;
    }
    out.file.write_all(b"]").map_err(storage)?;
    out.file.write_all(after.as_bytes()).map_err(storage)?;
    out.file.place(&dest).map_err(storage)?;
    render::print_text(&format!(
        "wrote {} events to {}\n",
        out.written,
        dest.display()
    ))
}

/// How much of a file is read and copied at a time (a database's reader reads a bounded
/// number of rows).
const BATCH_BYTES: usize = 1024 * 1024;

/// The page being written, and how many events it holds so far.
struct Out {
    file: StagedFile,
    written: usize,
}

impl Out {
    /// Appends a batch of events to the embedded JSON array.
    fn add(&mut self, batch: &[Event]) -> Result<(), troupe::store::IoError> {
        let mut text = String::new();
        for event in batch {
            if self.written > 0 {
                text.push(',');
            }
            text.push_str(&page::json_script_safe(&event.to_json().to_string()));
            self.written += 1;
        }
        self.file.write_all(text.as_bytes())
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
