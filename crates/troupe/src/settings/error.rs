//! Why a settings file was refused: always the file, and the line when there is one.

use std::fmt;
use std::path::PathBuf;

/// What was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsErrorKind {
    /// Not readable: a symlink (project file), a FIFO, a folder, too large, not UTF-8, an I/O error.
    Read,
    /// Not TOML (a duplicate key included).
    Syntax,
    /// A key troupe does not know.
    UnknownKey,
    /// A secret (API key, token, password) in a settings file.
    Secret,
    /// A known key with a value troupe refuses (bad rule syntax, hook event, timeout…).
    Invalid,
}

/// A settings file troupe refuses to run with (exit 2, before any state is created).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    pub kind: SettingsErrorKind,
    pub file: PathBuf,
    /// 1-based, when the problem is at a place in the file.
    pub line: Option<usize>,
    pub message: String,
}

impl SettingsError {
    pub(crate) fn new(
        kind: SettingsErrorKind,
        file: &std::path::Path,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for SettingsError {}

impl SettingsError {
    /// The stable code (the same codes `ErrorCode::code` gives).
    pub fn code(&self) -> &'static str {
        match self.kind {
            SettingsErrorKind::Read => "settings_read",
            SettingsErrorKind::Syntax => "settings_syntax",
            SettingsErrorKind::UnknownKey => "settings_unknown_key",
            SettingsErrorKind::Secret => "settings_secret",
            SettingsErrorKind::Invalid => "settings_invalid",
        }
    }
}
