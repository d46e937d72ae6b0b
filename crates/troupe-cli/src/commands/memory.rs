//! `troupe memory [list|show NAME|forget NAME]`: the durable memory records of a workspace.
//!
//! Read-only except `forget`, which takes only the memory lock (never the run lock), so a person
//! can remove a record while a run is going. Nothing is created where there is no memory folder.
//! With a store URL (`--store`, `TROUPE_STORE_URL`, `[store] url`): a shared team's records, in
//! its database.

use std::path::Path;

use serde::Serialize;
use troupe::store::memory::{
    is_valid_name, MemoryCatalog, MemoryError, MemoryProblem, MemoryStore, MemoryType,
};

use crate::args::{MemoryAction, StoreFlags};
use crate::error::CliError;
use crate::render;

pub async fn memory(
    workspace: &Path,
    action: Option<MemoryAction>,
    json: bool,
    flags: &StoreFlags,
) -> Result<(), CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let choice = crate::store_choice::store_choice(flags, &settings, false)?;
    let store = troupe::bootstrap::open_memory(workspace, &choice)
        .await
        .map_err(|e| CliError::coded(&e))?;
    match action.unwrap_or(MemoryAction::List) {
        MemoryAction::List => list(&store, json).await,
        MemoryAction::Show { name } => show(&store, &name, json).await,
        MemoryAction::Forget { name } => forget(&store, &name, json).await,
    }
}

fn failed(error: MemoryError) -> CliError {
    CliError::coded(&error)
}

/// A name that is not a slug is bad input (exit 2), refused before the store is asked.
fn checked_name(name: &str) -> Result<&str, CliError> {
    if is_valid_name(name) {
        Ok(name)
    } else {
        Err(CliError::usage(format!(
            "invalid memory name {name:?}: expected a lowercase slug of at most 64 bytes, e.g. prefers-tabs"
        ))
        .with_code("memory_invalid"))
    }
}

/// One line of the JSON listing: the record without its body.
#[derive(Serialize)]
struct Entry<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    kind: MemoryType,
    description: &'a str,
}

#[derive(Serialize)]
struct Listing<'a> {
    records: Vec<Entry<'a>>,
    problems: &'a [MemoryProblem],
}

/// JSON: `{"records":[{name, type, description}],"problems":[{file, reason}]}`.
async fn list(store: &MemoryStore, json: bool) -> Result<(), CliError> {
    let catalog = store.list().await.map_err(failed)?;
    if json {
        let records = catalog
            .records
            .iter()
            .map(|r| Entry {
                name: &r.name,
                kind: r.kind,
                description: &r.description,
            })
            .collect();
        render::print_json(&Listing {
            records,
            problems: &catalog.problems,
        })
    } else {
        render::print_text(&list_text(&catalog))
    }
}

fn list_text(catalog: &MemoryCatalog) -> String {
    let mut out = String::new();
    if catalog.records.is_empty() {
        out.push_str("no memory records\n");
    } else {
        let width = catalog
            .records
            .iter()
            .map(|r| r.name.len())
            .chain(std::iter::once("name".len()))
            .max()
            .unwrap_or(0);
        // The column names, like every other listing.
        out.push_str(&format!(
            "{:<width$}  {:<9}  {}\n",
            "name", "type", "description"
        ));
        for r in &catalog.records {
            out.push_str(&format!(
                "{:<width$}  {:<9}  {}\n",
                r.name,
                r.kind.as_str(),
                r.description
            ));
        }
    }
    for p in &catalog.problems {
        out.push_str(&format!("problem: {}: {}\n", p.file, p.reason));
    }
    out
}

/// JSON: the record `{name, type, description, body}`.
async fn show(store: &MemoryStore, name: &str, json: bool) -> Result<(), CliError> {
    let name = checked_name(name)?;
    let record = store.get(name).await.map_err(failed)?.ok_or_else(|| {
        failed(MemoryError::NotFound {
            name: name.to_owned(),
        })
    })?;
    if json {
        render::print_json(&record)
    } else {
        let mut text = format!(
            "name:        {}\ntype:        {}\ndescription: {}\n\n{}",
            record.name, record.kind, record.description, record.body
        );
        if !text.ends_with('\n') {
            text.push('\n');
        }
        render::print_text(&text)
    }
}

/// JSON: `{"forgotten": true|false}`; forgetting a record that does not exist is not an error.
async fn forget(store: &MemoryStore, name: &str, json: bool) -> Result<(), CliError> {
    let name = checked_name(name)?;
    let forgotten = store.forget(name).await.map_err(failed)?;
    if json {
        render::print_json(&serde_json::json!({ "forgotten": forgotten }))
    } else if forgotten {
        render::print_text(&format!("forgot {name}\n"))
    } else {
        render::print_text(&format!(
            "no memory record named {name}; nothing to forget\n"
        ))
    }
}
