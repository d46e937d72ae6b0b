//! The approval prompt's `[s]ave`: appends an allow entry to `[permissions] allow` in the
//! workspace's `troupe.toml`, keeping the rest of the file byte for byte (`toml_edit`), creating
//! the file (or the table, or the array) when missing, and writing it durably (a new file
//! renamed over the old one). An entry already in the list is not added twice.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toml_edit::{Array, DocumentMut, Item, Table, Value};
use troupe::permissions::SaveAllow;
use troupe::settings::trust::{TrustItem, TrustKind, TrustStore};
use troupe::settings::PROJECT_FILE_NAME;
use troupe::store::durable;
use troupe::store::read::{open_regular, Links};
use troupe::terminal_text::for_terminal;

use crate::error::CliError;

/// The project settings file of a workspace.
pub fn project_file(workspace: &Path) -> PathBuf {
    workspace.join("troupe.toml")
}

/// The saver the terminal prompt calls: saves into `workspace`'s `troupe.toml` and answers with
/// the file's name (or why it could not). The person saw this one entry and chose to keep it, so
/// it is recorded as trusted (an allow rule needs trust) and the next run does not ask about
/// it. Nothing else is: whatever else the workspace's files hold that the person has not trusted
/// — a hook a command wrote into `troupe.toml` during the run — stays untrusted, and the save
/// says so on stderr.
pub fn saver(workspace: &Path) -> SaveAllow {
    let file = project_file(workspace);
    let workspace = workspace.to_path_buf();
    Arc::new(move |entry: &str| {
        let before = crate::trust::review(&workspace, true).map(|review| review.items);
        append_allow(&file, entry).map_err(|e| e.to_string())?;
        match trust_saved(&workspace, before, entry) {
            Ok(left) if left.is_empty() => {}
            // The entry names what a model asked for, and an error may quote a file: shown,
            // never obeyed.
            Ok(left) => eprintln!(
                "troupe: saved allow {} and trusted that entry only; the workspace's files \
                 also hold what you have not trusted (they would {}): it stays untrusted until \
                 you review it with `troupe trust --workspace {}`",
                for_terminal(entry),
                crate::trust::summary(&left),
                for_terminal(&workspace.display().to_string())
            ),
            Err(e) => eprintln!(
                "troupe: saved, but the trust record was not updated ({}); the next run asks \
                 again",
                for_terminal(&e.to_string())
            ),
        }
        Ok(file.display().to_string())
    })
}

/// Records the saved `entry` as trusted, on top of what the person trusted before; the
/// workspace's items that stay untrusted.
fn trust_saved(
    workspace: &Path,
    before: Result<Vec<TrustItem>, CliError>,
    entry: &str,
) -> Result<Vec<TrustItem>, CliError> {
    let before = before?;
    let after = crate::trust::review(workspace, true)?.items;
    let seen = TrustItem::new(
        PROJECT_FILE_NAME,
        TrustKind::Allow,
        format!("allows {entry} without asking ([permissions] allow)"),
        entry.to_owned(),
    );
    let store = TrustStore::user().ok_or_else(crate::trust::no_config_folder)?;
    let now = troupe::wire::UtcTime::from_datetime(chrono::Utc::now()).to_string();
    store
        .record_seen(workspace, &before, &seen, &after, &now)
        .map_err(|e| CliError::coded(&e))
}

/// Why an entry could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error(transparent)]
    Io(#[from] troupe::store::IoError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {what} is not a {expected}")]
    Shape {
        path: String,
        what: &'static str,
        expected: &'static str,
    },
}

/// Appends `entry` to `[permissions] allow` in `file` (see the module doc).
pub fn append_allow(file: &Path, entry: &str) -> Result<(), SaveError> {
    let path = file.display().to_string();
    let text = match open_regular(file, Links::Refuse)? {
        None => String::new(),
        Some(mut f) => {
            let mut text = String::new();
            f.read_to_string(&mut text)
                .map_err(|source| SaveError::Read {
                    path: path.clone(),
                    source,
                })?;
            text
        }
    };
    let mut document: DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| SaveError::Parse {
                path: path.clone(),
                message: e.message().to_owned(),
            })?;
    let permissions = document
        .entry("permissions")
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| SaveError::Shape {
            path: path.clone(),
            what: "permissions",
            expected: "table",
        })?;
    let allow = permissions
        .entry("allow")
        .or_insert(Item::Value(Value::Array(Array::new())))
        .as_array_mut()
        .ok_or_else(|| SaveError::Shape {
            path: path.clone(),
            what: "permissions.allow",
            expected: "list",
        })?;
    if !allow.iter().any(|v| v.as_str() == Some(entry)) {
        allow.push(entry);
    }
    durable::replace(file, document.to_string().as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_keeping_the_rest_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("troupe.toml");
        let before = "# my settings\n[model]\nmodel = \"m\"  # the model\n\n[permissions]\n# allowed\nallow = [\"read_file\"]\ndeny = [\"shell(rm -rf:*)\"]\n";
        std::fs::write(&file, before).unwrap();
        append_allow(&file, "shell(cargo test:*)").unwrap();
        append_allow(&file, "shell(cargo test:*)").unwrap();
        let after = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            after,
            before.replace(
                "allow = [\"read_file\"]",
                "allow = [\"read_file\", \"shell(cargo test:*)\"]"
            )
        );
    }

    #[test]
    fn creates_the_file_or_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("troupe.toml");
        append_allow(&file, "write_file(docs/a.md)").unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "[permissions]\nallow = [\"write_file(docs/a.md)\"]\n"
        );
        let other = dir.path().join("other.toml");
        std::fs::write(&other, "[model]\nmodel = \"m\"\n").unwrap();
        append_allow(&other, "read_file").unwrap();
        assert_eq!(
            std::fs::read_to_string(&other).unwrap(),
            "[model]\nmodel = \"m\"\n\n[permissions]\nallow = [\"read_file\"]\n"
        );
    }

    #[test]
    fn refuses_a_file_it_cannot_read_as_toml() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("troupe.toml");
        std::fs::write(&file, "not = [toml").unwrap();
        assert!(matches!(
            append_allow(&file, "read_file"),
            Err(SaveError::Parse { .. })
        ));
        std::fs::write(&file, "permissions = 3\n").unwrap();
        assert!(matches!(
            append_allow(&file, "read_file"),
            Err(SaveError::Shape { .. })
        ));
    }
}
