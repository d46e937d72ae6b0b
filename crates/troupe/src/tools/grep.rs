//! `grep`: the workspace lines that match a regular expression, as `path:line:text`.
//!
//! Built on ripgrep's libraries: `grep-regex` matches (Rust regex syntax, one line at a time),
//! `grep-searcher` reads each file in pieces, numbers its lines and stops at a NUL byte (a binary
//! file is skipped), and the workspace's ignore files are read as the `glob` tool reads them
//! ([`super::ignore_rules`]). The walk is troupe's own, like `glob`'s, so that it stays in the
//! workspace:
//!
//! - `path` (default: the workspace) is confined like every file tool's path ([`Workspace`]):
//!   `..`, absolute paths elsewhere and symlinks that lead out are refused. A file named there is
//!   searched even if an ignore file or its hidden name would skip it on a walk.
//! - Below a folder, the walk skips what the ignore files ignore and hidden names (starting
//!   with `.`), as ripgrep does; it never descends through a symlinked folder, searches a
//!   symlinked file only if it resolves inside the workspace, and opens only regular files, so a
//!   FIFO, socket or device never blocks it.
//! - `.git/` and `.troupe/` (git's and troupe's own state) are never searched: not on a walk,
//!   not as `path`, not through a symlink.
//!
//! Files are searched in path order, so the result is the same from one call to the next; the
//! search stops at a cap ([`MAX_MATCHES`] lines, [`MAX_RESULT_BYTES`] bytes, [`MAX_VISITED`]
//! entries walked) and the result says so; a line over [`MAX_LINE_BYTES`] is cut around its first
//! match ([`shown_line`]).

mod file_search;
mod report;
mod shown_line;

use std::ffi::OsString;
use std::fs::FileType;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use serde_json::{json, Value};

use super::confine::Workspace;
use super::ignore_rules::IgnoreRules;
use super::read_file::open_workspace_file;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};
use crate::layout::Layout;
use crate::secrets::Redactor;
use crate::store::read::{open_regular, Links};

pub use file_search::MAX_SEARCHED_LINE_BYTES;
pub use report::{MAX_MATCHES, MAX_RESULT_BYTES};
pub use shown_line::{CUT_MARK, MAX_LINE_BYTES};

/// The walk stops after visiting this many entries, so a huge tree cannot stall the agent.
pub const MAX_VISITED: usize = super::glob::MAX_VISITED;

/// Folders that are never searched, wherever they are: git's state and troupe's.
pub const NEVER_SEARCHED: [&str; 2] = [".git", Layout::STATE_DIR];

#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[async_trait]
impl ToolHandler for GrepTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "grep".to_owned(),
            description: format!(
                "Search the workspace's files for lines matching a regular expression (Rust \
                 regex syntax, as ripgrep's; one line at a time). Returns one \
                 `path:line:text` per matching line, paths relative to the workspace root, files \
                 in path order. Searches the whole workspace, or the file or folder `path` \
                 names; `glob` keeps only files whose name matches it (e.g. `*.rs`, \
                 `*.{{ts,tsx}}`; a glob with a `/` matches the path from the workspace root, \
                 e.g. `src/**/*.rs`). Skips what .gitignore and .ignore files ignore, hidden \
                 files and folders (name them in `path` to search them), binary files, and \
                 never searches .git/ or .troupe/. At most {MAX_MATCHES} lines and \
                 {MAX_RESULT_BYTES} bytes are returned, and lines over {MAX_LINE_BYTES} bytes \
                 are cut around the match; the result says when it cut."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1,
                                "description": "The regular expression, e.g. `fn \\w+_test` or `TODO|FIXME`."},
                    "path": {"type": "string", "minLength": 1,
                             "description": "A file or folder to search, relative to the workspace root (default: the whole workspace)."},
                    "glob": {"type": "string", "minLength": 1,
                             "description": "Search only files whose name matches this glob, e.g. `*.rs`."},
                    "case_insensitive": {"type": "boolean",
                                         "description": "Match letters of either case (default false)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            effect: Effect::Read,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let query = Query::from_args(&args)?;
        let workspace = Workspace::new(&ctx.workspace)?;
        let redactor = ctx.redactor.clone();
        let cancel = ctx.cancel.clone();
        // The walk and the reads are blocking file-system work.
        crate::sync::offload("grep", move || {
            search(&workspace, &query, &redactor, &|| cancel.is_cancelled())
        })
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?
    }
}

/// A call's arguments, checked: the compiled regex and the name filter.
struct Query {
    pattern: String,
    matcher: RegexMatcher,
    /// The `path` argument as given (`.`: the workspace).
    path: String,
    names: Option<NameFilter>,
}

impl Query {
    fn from_args(args: &Value) -> Result<Self, ToolError> {
        let pattern = str_arg(args, "pattern")?.to_owned();
        let case_insensitive = args
            .get("case_insensitive")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(case_insensitive)
            // Lines end at `\n` (a match never spans two) and `$` matches before `\r\n` too.
            .line_terminator(Some(b'\n'))
            .crlf(true)
            .build(&pattern)
            .map_err(|e| {
                ToolError::InvalidArguments(format!(
                    "{pattern} is not a valid regular expression: {e}"
                ))
            })?;
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or(".")
            .to_owned();
        let names = match args.get("glob").and_then(Value::as_str) {
            Some(glob) => Some(NameFilter::new(glob)?),
            None => None,
        };
        Ok(Self {
            pattern,
            matcher,
            path,
            names,
        })
    }
}

/// The `glob` argument: matched against a file's name, or, when it holds a `/`, against its
/// path from the workspace root.
struct NameFilter {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl NameFilter {
    fn new(glob: &str) -> Result<Self, ToolError> {
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ToolError::InvalidArguments(format!("{glob} is not a valid glob pattern: {e}"))
            })?
            .compile_matcher();
        Ok(Self {
            matcher,
            whole_path: glob.contains('/'),
        })
    }

    /// Whether the file at `rel` (from the workspace root) is searched.
    fn accepts(&self, rel: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(rel)
        } else {
            rel.file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        }
    }
}

/// One thing left to do on the walk.
enum Step {
    /// Search the file at this path (from the workspace root); `links` says whether it was
    /// listed as a symlink (resolved inside) or as a file, which must still be one when opened.
    File(PathBuf, Links),
    /// List this folder; `rules` are its parent's, or its own when `own_rules` says so.
    Folder {
        rel: PathBuf,
        rules: Option<Rc<IgnoreRules>>,
        own_rules: bool,
    },
}

/// The search `query` asks for, in `workspace`.
fn search(
    workspace: &Workspace,
    query: &Query,
    redactor: &Redactor,
    cancelled: &dyn Fn() -> bool,
) -> Result<String, ToolError> {
    let start = workspace.resolve_read(&query.path)?;
    if is_state(workspace, &start) {
        return Err(ToolError::InvalidArguments(format!(
            "{}: grep never searches .git/ or {}/ (git's and troupe's own state); read_file \
             reads a file there",
            query.path,
            Layout::STATE_DIR
        )));
    }
    let shown_start = match workspace.display(&start) {
        shown if shown == "." => "the workspace".to_owned(),
        shown => shown,
    };
    let rel_start = start
        .strip_prefix(workspace.root())
        .unwrap_or(Path::new(""))
        .to_owned();
    let mut report = report::Report::default();
    let mut searcher = file_search::searcher();
    let mut search_one = |rel: &Path, file: std::fs::File, report: &mut report::Report| {
        let shown = rel.display().to_string();
        match file_search::search_file(
            &mut searcher,
            &query.matcher,
            &file,
            report.lines_wanted(),
            redactor,
            cancelled,
        ) {
            Ok(found) => report.add(&shown, found),
            Err(e) => {
                report.unsearched(&shown, &e.to_string());
                true
            }
        }
    };
    if start.is_dir() {
        let mut stack = vec![Step::Folder {
            rules: IgnoreRules::down_to(workspace, &rel_start),
            rel: rel_start,
            own_rules: true,
        }];
        let mut visited = 0usize;
        while let Some(step) = stack.pop() {
            if cancelled() {
                return Err(ToolError::Cancelled("grep was cancelled".to_owned()));
            }
            match step {
                Step::File(rel, links) => {
                    let path = workspace.root().join(&rel);
                    match open_regular(&path, links) {
                        Ok(Some(file)) => {
                            if !search_one(&rel, file, &mut report) {
                                break;
                            }
                        }
                        // Gone since it was listed.
                        Ok(None) => {}
                        Err(e) => {
                            report.unsearched(&rel.display().to_string(), &e.source.to_string())
                        }
                    }
                }
                Step::Folder {
                    rel,
                    rules,
                    own_rules,
                } => {
                    let dir = workspace.root().join(&rel);
                    let rules = if own_rules {
                        rules
                    } else {
                        IgnoreRules::of_folder(workspace, &dir, rules)
                    };
                    let entries = listed(&dir);
                    visited += entries.len();
                    if visited > MAX_VISITED {
                        report.walk_stopped(MAX_VISITED);
                        break;
                    }
                    // Pushed last to first, so that they are taken in name order.
                    for (name, file_type) in entries.into_iter().rev() {
                        if let Some(step) =
                            step_for(workspace, query, &rel, &rules, name, file_type)
                        {
                            stack.push(step);
                        }
                    }
                }
            }
        }
    } else {
        // A file named by `path`: searched whatever its name; opened as read_file opens it, so
        // a FIFO is refused at once.
        let file = open_workspace_file(&start, &query.path)?;
        search_one(&rel_start, file, &mut report);
    }
    Ok(report.render(format!(
        "No lines match {} in {shown_start}.",
        query.pattern
    )))
}

/// The entries of `dir`, sorted by name; an unreadable folder has none.
fn listed(dir: &Path) -> Vec<(OsString, FileType)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<(OsString, FileType)> = read
        .flatten()
        .filter_map(|entry| Some((entry.file_name(), entry.file_type().ok()?)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}

/// What the walk does with the entry `name` of the folder `parent` (whose ignore rules are
/// `rules`): nothing for a hidden, ignored, special or filtered-out entry and for a symlinked
/// folder; a symlinked file is searched only if it resolves to a file inside the workspace
/// (and outside `.git/` and `.troupe/`).
fn step_for(
    workspace: &Workspace,
    query: &Query,
    parent: &Path,
    rules: &Option<Rc<IgnoreRules>>,
    name: OsString,
    file_type: FileType,
) -> Option<Step> {
    if name.as_encoded_bytes().starts_with(b".") {
        return None;
    }
    let rel = parent.join(&name);
    let path = workspace.root().join(&rel);
    if IgnoreRules::ignores(rules.as_deref(), &path, file_type.is_dir()) {
        return None;
    }
    if file_type.is_dir() {
        return Some(Step::Folder {
            rel,
            rules: rules.clone(),
            own_rules: false,
        });
    }
    let links = if file_type.is_symlink() {
        let inside = std::fs::canonicalize(&path).is_ok_and(|real| {
            real.starts_with(workspace.root()) && !is_state(workspace, &real) && real.is_file()
        });
        inside.then_some(Links::Follow)?
    } else if file_type.is_file() {
        // Replaced by a symlink before it is opened: refused then, not followed.
        Links::Refuse
    } else {
        return None;
    };
    let wanted = query.names.as_ref().is_none_or(|names| names.accepts(&rel));
    wanted.then_some(Step::File(rel, links))
}

/// Whether the resolved path `real` lies in a `.git` or `.troupe` folder of the workspace.
fn is_state(workspace: &Workspace, real: &Path) -> bool {
    real.strip_prefix(workspace.root()).is_ok_and(|rel| {
        rel.components().any(
            |c| matches!(c, Component::Normal(name) if NEVER_SEARCHED.iter().any(|n| name == *n)),
        )
    })
}
