//! `glob`: workspace paths matching a pattern, sorted, capped, confined.
//!
//! The walk starts at the pattern's literal prefix and never follows a symlinked folder, so it
//! cannot wander out of the workspace (or loop). A symlink is listed only if it resolves inside
//! the workspace. Names starting with `.` match only a pattern that spells the dot, so `**/*`
//! does not flood the result with `.git/` or `.troupe/` internals.
//!
//! What the workspace's ignore files exclude is skipped ([`super::ignore_rules`]), so that
//! `**/*.rs` does not wade through `target/` or `node_modules/`. Folders the pattern spells out
//! (its literal prefix, e.g. `target/` in `target/**/*.rlib`) are walked even when ignored: the
//! caller asked for them.

use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use async_trait::async_trait;
use glob::{MatchOptions, Pattern};
use serde_json::{json, Value};

use super::confine::Workspace;
use super::ignore_rules::IgnoreRules as Rules;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

/// At most this many paths are returned; the result says how many more matched.
pub const MAX_RESULTS: usize = 500;
/// The walk stops after visiting this many entries, so a huge tree cannot stall the agent.
pub const MAX_VISITED: usize = 200_000;

const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: true,
};

#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

#[async_trait]
impl ToolHandler for GlobTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "glob".to_owned(),
            description: format!(
                "List workspace files and folders whose path matches a glob pattern, relative \
                 to the workspace root: `*` matches within one folder, `**` across folders, \
                 `?` one character, `[abc]` a set; e.g. `src/**/*.rs` or `*.md`. Hidden names \
                 (starting with `.`) match only if the pattern spells the dot. Paths ignored by \
                 the workspace's .gitignore or .ignore files are skipped unless the pattern \
                 names their folder literally (e.g. `target/**`). Returns one path per line, \
                 sorted; at most {MAX_RESULTS} paths."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1,
                                "description": "Glob pattern relative to the workspace root."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            effect: Effect::Read,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let pattern_text = str_arg(&args, "pattern")?.to_owned();
        let workspace = Workspace::new(&ctx.workspace)?;
        let cancel = ctx.cancel.clone();
        // The walk is blocking file-system work.
        crate::sync::offload("glob", move || {
            run_glob(&workspace, &pattern_text, || cancel.is_cancelled())
        })
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?
    }
}

fn run_glob(
    workspace: &Workspace,
    pattern_text: &str,
    cancelled: impl Fn() -> bool,
) -> Result<String, ToolError> {
    let pattern_path = Path::new(pattern_text);
    if pattern_path.is_absolute() {
        return Err(ToolError::PermissionDenied(format!(
            "{pattern_text}: glob patterns are relative to the workspace root; absolute patterns are refused"
        )));
    }
    if pattern_path
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(ToolError::PermissionDenied(format!(
            "{pattern_text}: `..` would leave the workspace; glob patterns stay inside it"
        )));
    }
    let pattern = Pattern::new(pattern_text).map_err(|e| {
        ToolError::InvalidArguments(format!("{pattern_text} is not a valid glob pattern: {e}"))
    })?;
    // Start the walk at the literal prefix (folders without wildcards) of the pattern.
    let components: Vec<&str> = pattern_text
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let literal = components
        .iter()
        .take_while(|c| !c.contains(['*', '?', '[']))
        .count();
    let recursive = components.iter().any(|c| c.contains("**"));
    let max_depth = if recursive {
        usize::MAX
    } else {
        components.len()
    };
    let mut base = PathBuf::new();
    for c in &components[..literal.min(components.len().saturating_sub(1))] {
        base.push(c);
    }
    let start = workspace.root().join(&base);
    if !base.as_os_str().is_empty() {
        // The literal prefix itself may be a symlink: it must resolve inside.
        if !start.exists() {
            return Ok(format!("No paths match {pattern_text}."));
        }
        if !workspace.contains_resolved(&start) {
            return Err(ToolError::PermissionDenied(format!(
                "{pattern_text}: leads outside the workspace"
            )));
        }
    }
    // The rules of the root and of every folder of the literal prefix apply below it.
    let rules = Rules::down_to(workspace, &base);
    let mut matches: Vec<String> = Vec::new();
    let mut visited = 0usize;
    let mut truncated_walk = false;
    let mut stack: Vec<(PathBuf, usize, Option<Rc<Rules>>)> =
        vec![(base.clone(), base.components().count(), rules)];
    while let Some((rel_dir, depth, rules)) = stack.pop() {
        if cancelled() {
            return Err(ToolError::Cancelled("glob was cancelled".to_owned()));
        }
        let dir = workspace.root().join(&rel_dir);
        // The starting folder's own rules are already in; every other folder adds its own.
        let rules = if rel_dir == base {
            rules
        } else {
            Rules::of_folder(workspace, &dir, rules)
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            visited += 1;
            if visited > MAX_VISITED {
                truncated_walk = true;
                break;
            }
            let rel = rel_dir.join(entry.file_name());
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let is_symlink = file_type.is_symlink();
            if Rules::ignores(rules.as_deref(), &entry.path(), file_type.is_dir()) {
                continue;
            }
            if pattern.matches_path_with(&rel, OPTIONS)
                && (!is_symlink || workspace.contains_resolved(&entry.path()))
            {
                matches.push(rel.to_string_lossy().into_owned());
            }
            // Never descend through a symlink: that is how a walk leaves the workspace.
            if file_type.is_dir() && !is_symlink && depth + 1 < max_depth {
                stack.push((rel, depth + 1, rules.clone()));
            }
        }
        if truncated_walk {
            break;
        }
    }
    matches.sort();
    if matches.is_empty() {
        let mut text = format!("No paths match {pattern_text}.");
        if truncated_walk {
            text.push_str(&format!(
                " [the walk stopped after {MAX_VISITED} entries; use a narrower pattern]"
            ));
        }
        return Ok(text);
    }
    let total = matches.len();
    matches.truncate(MAX_RESULTS);
    let mut text = matches.join("\n");
    if total > MAX_RESULTS {
        text.push_str(&format!(
            "\n[{} more paths match; showing the first {MAX_RESULTS} of {total}; use a narrower pattern]",
            total - MAX_RESULTS
        ));
    }
    if truncated_walk {
        text.push_str(&format!(
            "\n[the walk stopped after {MAX_VISITED} entries; results may be incomplete]"
        ));
    }
    Ok(text)
}
