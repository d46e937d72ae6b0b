//! What every section of a settings file shares: an error at a value's place in the file (file
//! and line), the walk over the files of a merge (highest precedence first), and the trust item
//! a project value that needs trust becomes. No section knows another's keys.

use std::path::Path;

use toml::Spanned;

use super::error::{SettingsError, SettingsErrorKind as Kind};
use super::files::PROJECT_FILE_NAME;
use super::trust::{TrustItem, TrustKind};
use super::{Source, Sourced};

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .unwrap_or(text)
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The settings file being validated: its path and text, so an error names file and line.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spans<'a> {
    pub path: &'a Path,
    pub text: &'a str,
}

impl Spans<'_> {
    /// A `kind` error at byte `offset` of the file.
    pub fn error(&self, kind: Kind, offset: usize, message: impl Into<String>) -> SettingsError {
        SettingsError::new(kind, self.path, Some(line_of(self.text, offset)), message)
    }

    /// A known key with a refused value, at byte `offset`.
    pub fn invalid(&self, offset: usize, message: impl Into<String>) -> SettingsError {
        self.error(Kind::Invalid, offset, message)
    }

    /// A string that must not be blank, trimmed; `key` names it in the error.
    pub fn non_blank(
        &self,
        key: &str,
        value: Option<Spanned<String>>,
    ) -> Result<Option<String>, SettingsError> {
        match value {
            Some(v) if v.get_ref().trim().is_empty() => {
                Err(self.invalid(v.span().start, format!("`{key}` must not be blank")))
            }
            Some(v) => Ok(Some(v.into_inner().trim().to_owned())),
            None => Ok(None),
        }
    }
}

/// One section of every file read, with the file's source, highest precedence (the project)
/// first.
pub(super) type Layers<'a, T> = [(&'a Source, &'a T)];

/// A key one file sets for all: the first layer's value that is set, with its source.
pub(super) fn first<T, V>(
    layers: &Layers<'_, T>,
    get: impl Fn(&T) -> Option<V>,
) -> Option<Sourced<V>> {
    layers.iter().find_map(|(source, section)| {
        get(section).map(|value| Sourced {
            value,
            source: (*source).clone(),
        })
    })
}

/// A value of the project file that waits for trust.
pub(super) fn needs_trust(kind: TrustKind, shown: String, content: String) -> TrustItem {
    TrustItem::new(PROJECT_FILE_NAME, kind, shown, content)
}

#[cfg(test)]
pub(super) mod testing {
    //! The settings tests' workspace: a folder with (or without) a `troupe.toml`.

    use super::super::files::PROJECT_FILE_NAME;
    use super::super::{Settings, SettingsError};

    pub fn workspace(project: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = project {
            std::fs::write(dir.path().join(PROJECT_FILE_NAME), text).unwrap();
        }
        dir
    }

    pub fn load_err(project: &str) -> SettingsError {
        let dir = workspace(Some(project));
        Settings::load(dir.path(), None).unwrap_err()
    }
}
