//! `[context]`: which files of the workspace every agent's living system prompt carries as the
//! project's instructions (`team::instructions` reads them). `files` lists paths relative to the
//! workspace, in the order they are shown; when no file sets it, `AGENTS.md` (else `CLAUDE.md`).
//! An empty list shows none. Project over user: the first file that sets `files` decides.
//!
//! A listed path must stay in the workspace: an absolute path or a `..` is refused when the file
//! is parsed, a symbolic link leading out of the workspace when the settings are loaded
//! ([`check_links`], which knows the workspace). A listed file that does not exist is not an
//! error: the prompt says it was skipped. The files are content, not configuration — they run
//! nothing and send nothing anywhere — so nothing here waits for trust.

use std::path::{Component, Path};

use serde::Deserialize;
use toml::Spanned;

use super::error::{SettingsError, SettingsErrorKind as Kind};
use super::section::{first, Layers, Spans};
use super::{Source, Sourced};

/// `[context]`, merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextSettings {
    /// `files`, as the first file that sets it lists them (with that file); none: the default
    /// (`AGENTS.md`, else `CLAUDE.md`).
    pub files: Option<Sourced<Vec<ContextFile>>>,
}

/// One entry of `[context] files`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    /// Relative to the workspace, as written (trimmed): how the prompt names it.
    pub path: String,
    /// Its 1-based line in its settings file, for an error found once the workspace is known.
    pub line: usize,
}

/// `[context]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawContext {
    files: Option<Vec<Spanned<String>>>,
}

/// One file's `[context]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedContext {
    files: Option<Vec<ContextFile>>,
}

pub(super) fn parse(raw: RawContext, spans: &Spans<'_>) -> Result<ParsedContext, SettingsError> {
    let Some(entries) = raw.files else {
        return Ok(ParsedContext::default());
    };
    let mut files = Vec::with_capacity(entries.len());
    for entry in entries {
        let at = entry.span().start;
        let path = entry.get_ref().trim();
        if let Some(why) = lexical_problem(path) {
            return Err(spans.invalid(at, format!("`context.files` entry {path:?} {why}")));
        }
        files.push(ContextFile {
            path: path.to_owned(),
            line: super::section::line_of(spans.text, at),
        });
    }
    Ok(ParsedContext { files: Some(files) })
}

/// Why `path` cannot name a file of the workspace, judged on its text alone.
fn lexical_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("is blank");
    }
    if path.contains('\0') {
        return Some("contains a NUL byte");
    }
    let as_path = Path::new(path);
    if as_path.is_absolute() {
        return Some("is an absolute path; list files relative to the workspace");
    }
    if as_path
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Some("uses `..`, which leads out of the workspace; list files inside it");
    }
    if !as_path
        .components()
        .any(|c| matches!(c, Component::Normal(_)))
    {
        return Some("names the workspace itself, not a file");
    }
    None
}

/// Project over user: the first file that sets `files`.
pub(super) fn merge(layers: &Layers<'_, ParsedContext>) -> ContextSettings {
    ContextSettings {
        files: first(layers, |c| c.files.clone()),
    }
}

/// Refuses a listed file that exists and leads out of `workspace` through a symbolic link
/// (the file or a folder on its way), naming the settings file, its line and the key. A file
/// that does not exist passes: the prompt notes it when it is missing at a turn.
pub(super) fn check_links(
    settings: &ContextSettings,
    workspace: &Path,
) -> Result<(), SettingsError> {
    let Some(files) = &settings.files else {
        return Ok(());
    };
    let Ok(root) = std::fs::canonicalize(workspace) else {
        return Ok(());
    };
    let file = match &files.source {
        Source::Project(path) | Source::User(path) => path.clone(),
        other => other.describe().into(),
    };
    for entry in &files.value {
        let Ok(real) = std::fs::canonicalize(root.join(&entry.path)) else {
            continue;
        };
        if !real.starts_with(&root) {
            return Err(SettingsError::new(
                Kind::Invalid,
                &file,
                Some(entry.line),
                format!(
                    "`context.files` entry {:?} leads out of the workspace through a symbolic \
                     link; list files inside it",
                    entry.path
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::super::Settings;
    use super::*;

    fn files_of(dir: &Path) -> Option<Vec<String>> {
        let settings = Settings::load(dir, None).unwrap();
        settings
            .context
            .files
            .map(|f| f.value.into_iter().map(|e| e.path).collect())
    }

    #[test]
    fn files_are_read_in_order_and_need_no_trust() {
        let dir = workspace(Some(
            "[context]\nfiles = [\"docs/CONVENTIONS.md\", \" notes/a.md \", \"./b.md\"]\n",
        ));
        assert_eq!(
            files_of(dir.path()),
            Some(vec![
                "docs/CONVENTIONS.md".to_owned(),
                "notes/a.md".to_owned(),
                "./b.md".to_owned()
            ])
        );
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        assert!(reviewed.items.is_empty());
        assert_eq!(reviewed.untrusted.context, reviewed.trusted.context);
        let empty = workspace(Some("[context]\nfiles = []\n"));
        assert_eq!(files_of(empty.path()), Some(Vec::new()));
        let none = workspace(None);
        assert_eq!(files_of(none.path()), None);
    }

    #[test]
    fn a_path_out_of_the_workspace_is_refused_naming_file_line_and_key() {
        for (entry, says) in [
            ("/etc/passwd", "absolute path"),
            ("../secret.md", "`..`"),
            ("docs/../../x.md", "`..`"),
            ("  ", "is blank"),
            (".", "the workspace itself"),
        ] {
            let err = load_err(&format!("[context]\nfiles = [\n  \"{entry}\",\n]\n"));
            assert_eq!(
                (err.kind, err.line),
                (Kind::Invalid, Some(3)),
                "{entry}: {err}"
            );
            let shown = err.to_string();
            assert!(shown.contains("troupe.toml:3:"), "{shown}");
            assert!(shown.contains("`context.files`"), "{shown}");
            assert!(shown.contains(says), "{entry}: {shown}");
        }
        let err = load_err("[context]\nfile = []\n");
        assert_eq!(err.kind, Kind::UnknownKey);
    }

    #[test]
    fn a_symlink_out_of_the_workspace_is_refused_and_a_missing_file_is_not() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x.md"), "outside").unwrap();
        let dir = workspace(Some(
            "[context]\nfiles = [\"missing.md\",\n  \"inside.md\",\n  \"docs/x.md\"]\n",
        ));
        std::fs::write(dir.path().join("real.md"), "in").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real.md"), dir.path().join("inside.md"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("docs")).unwrap();
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(4)), "{err}");
        let shown = err.to_string();
        assert!(shown.contains("troupe.toml:4:"), "{shown}");
        assert!(
            shown.contains("\"docs/x.md\" leads out of the workspace"),
            "{shown}"
        );
        std::fs::remove_file(dir.path().join("docs")).unwrap();
        assert!(Settings::load(dir.path(), None).is_ok());
    }
}
