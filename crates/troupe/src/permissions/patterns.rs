//! Permission rule patterns (SPEC §7): the text of a `[permissions]` entry, parsed, and matched
//! against one call (tool name, JSON arguments, workspace root).
//!
//! - `tool` (`read_file`, `mcp__server__tool`): every call of that tool.
//! - `shell(PREFIX:*)`: every simple command of the chain starts with PREFIX's words
//!   (`cargo test:*` matches `cargo test` and `cargo test --all`, not `cargo testx`);
//!   `shell(EXACT)`: the command's words are exactly EXACT's. Chains are split by
//!   [`super::shell_words`]: an **allow** needs every part to match and the chain to be
//!   transparent (no substitution, redirection, subshell, expansion); a **deny** or **ask**
//!   applies when any part matches.
//! - `read_file(GLOB)`, `write_file(GLOB)`, `edit_file(GLOB)`, `glob(GLOB)` (its `path`
//!   argument, `.` when absent): GLOB is relative to the workspace (`docs/**`, `.env`, `*.md`;
//!   `*` does not cross `/`, `**` does), matched against the call's path normalised lexically
//!   (`a/../.env` is `.env`; an absolute path inside the workspace is made relative).
//!   A path that leaves the workspace is never allowed by a path pattern; it is denied (or
//!   asked) by a pattern that starts with `**`, matched against the absolute path — so
//!   `deny = ["read_file(**/.env)"]` also covers `/elsewhere/.env`.
//!   A shell deny is best effort: `bash -c '…'`, `env rm …` or `FOO=1 rm …` do not start with
//!   `rm -rf`; what holds is the other side — an allow never covers more than it names.
//! - Anything else (an unknown argument pattern such as `mcp__s__t(x)`, an unparsable entry):
//!   it never allows; as a deny or ask it applies to every call of the tool it names (fail
//!   closed).
//!
//! An entry's syntax (`name` or `name(arg)`) is checked when the settings load, by
//! [`check_rule`]. That grammar lives in `settings::rules`, a layer below this one, so that a
//! malformed entry is refused with its file and line before anything runs (settings may not call
//! up into permissions); it is re-exported here, where entries are matched. Parsing here never
//! fails: an entry the grammar lets through but no pattern understands is opaque.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::shell_words::{split_chain, words};
use crate::protected::{lexical, slashed};
pub use crate::settings::check_rule;

/// The file tools whose path argument a pattern can name.
pub const PATH_TOOLS: [&str; 4] = ["read_file", "write_file", "edit_file", "glob"];

/// How a pattern is used: an allow entry, or a deny/ask entry (which fail closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Allow,
    Restrict,
}

/// One parsed entry.
#[derive(Debug, Clone)]
pub enum RulePattern {
    /// Every call of the tool.
    Tool(String),
    /// `shell(PREFIX:*)`: the words of PREFIX.
    ShellPrefix(Vec<String>),
    /// `shell(EXACT)`.
    ShellExact(Vec<String>),
    /// `read_file(GLOB)` and the other file tools.
    Path {
        tool: String,
        glob: glob::Pattern,
        anywhere: bool,
    },
    /// Not understood: never allows; restricts every call of `tool` (if it names one).
    Opaque { tool: Option<String> },
}

fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl RulePattern {
    /// Parses an entry's text; never fails (see [`RulePattern::Opaque`]).
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if is_tool_name(text) {
            return Self::Tool(text.to_owned());
        }
        let Some((tool, rest)) = text.split_once('(') else {
            return Self::Opaque { tool: None };
        };
        let tool = tool.trim();
        let opaque = || Self::Opaque {
            tool: is_tool_name(tool).then(|| tool.to_owned()),
        };
        let Some(argument) = rest.strip_suffix(')') else {
            return opaque();
        };
        let argument = argument.trim();
        if argument.is_empty() {
            return opaque();
        }
        if tool == "shell" {
            let (text, prefix) = match argument.strip_suffix(":*") {
                Some(prefix) => (prefix, true),
                None => (argument, false),
            };
            return match words(text) {
                Some(words) if !words.is_empty() => {
                    if prefix {
                        Self::ShellPrefix(words)
                    } else {
                        Self::ShellExact(words)
                    }
                }
                _ => opaque(),
            };
        }
        if PATH_TOOLS.contains(&tool) {
            let cleaned = argument.strip_prefix("./").unwrap_or(argument);
            return match glob::Pattern::new(cleaned) {
                Ok(glob) => Self::Path {
                    tool: tool.to_owned(),
                    glob,
                    anywhere: cleaned.starts_with("**"),
                },
                Err(_) => opaque(),
            };
        }
        opaque()
    }

    /// Whether this pattern names `tool` on exactly the workspace path `relative`
    /// (`/`-separated): `write_file(.git/config)`, not `write_file(.git/**)` nor `write_file`.
    /// Only such a rule allows a write to a protected path (`crate::protected`).
    pub fn names_exactly(&self, tool: &str, relative: &str) -> bool {
        match self {
            Self::Path {
                tool: name, glob, ..
            } => {
                let text = glob.as_str();
                name == tool && !text.contains(['*', '?', '[', ']', '{', '}']) && text == relative
            }
            _ => false,
        }
    }

    /// Whether this pattern, used as `usage`, applies to the call.
    pub fn matches(&self, tool: &str, arguments: &Value, workspace: &Path, usage: Use) -> bool {
        match self {
            Self::Tool(name) => name == tool,
            Self::ShellPrefix(prefix) => {
                tool == "shell" && shell_matches(arguments, usage, |w| w.starts_with(prefix))
            }
            Self::ShellExact(exact) => {
                tool == "shell" && shell_matches(arguments, usage, |w| w == exact.as_slice())
            }
            Self::Path {
                tool: name,
                glob,
                anywhere,
            } => {
                if name != tool {
                    return false;
                }
                let Some(path) = call_path(tool, arguments) else {
                    // No path to judge: restrict, never allow.
                    return usage == Use::Restrict;
                };
                let options = glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: true,
                    require_literal_leading_dot: false,
                };
                match normalise(workspace, path) {
                    Place::Inside(relative) => glob.matches_with(&relative, options),
                    Place::Outside(absolute) => {
                        usage == Use::Restrict
                            && *anywhere
                            && glob.matches_with(&absolute.to_string_lossy(), options)
                    }
                }
            }
            Self::Opaque { tool: name } => usage == Use::Restrict && name.as_deref() == Some(tool),
        }
    }
}

fn shell_matches(arguments: &Value, usage: Use, part_matches: impl Fn(&[String]) -> bool) -> bool {
    let Some(command) = arguments.get("command").and_then(Value::as_str) else {
        return usage == Use::Restrict;
    };
    let chain = split_chain(command);
    match usage {
        Use::Allow => {
            !chain.opaque && !chain.parts.is_empty() && chain.parts.iter().all(|p| part_matches(p))
        }
        Use::Restrict => chain.parts.iter().any(|p| part_matches(p)),
    }
}

/// The path argument a path pattern is matched against.
fn call_path<'a>(tool: &str, arguments: &'a Value) -> Option<&'a str> {
    match tool {
        "glob" => Some(arguments.get("path").and_then(Value::as_str).unwrap_or(".")),
        _ => arguments.get("path").and_then(Value::as_str),
    }
}

/// Where a call's path is, lexically (symlinks are the tools' confinement's business).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Relative to the workspace, `/`-separated, `.` for the root itself.
    Inside(String),
    /// Leaves the workspace: the absolute, normalised path.
    Outside(PathBuf),
}

/// Normalises `path` (relative to `workspace`, or absolute) without touching the disk.
pub fn normalise(workspace: &Path, path: &str) -> Place {
    // A relative workspace is taken from the current folder (no disk access beyond it).
    let root = lexical(&std::path::absolute(workspace).unwrap_or_else(|_| workspace.to_owned()));
    let joined = lexical(&root.join(path));
    match joined.strip_prefix(&root) {
        Ok(relative) => Place::Inside(slashed(relative)),
        Err(_) => Place::Outside(joined),
    }
}

/// The entry the approval prompt suggests remembering for a call: for `shell`, the first two
/// words of its command and `:*` (one word when that is all; `None` for an opaque or chained
/// command); for the file tools, the normalised path (`None` outside the workspace); for other
/// tools, the bare tool name.
pub fn suggest(tool: &str, arguments: &Value, workspace: &Path) -> Option<String> {
    if tool == "shell" {
        let command = arguments.get("command").and_then(Value::as_str)?;
        let chain = split_chain(command);
        if chain.opaque || chain.parts.len() != 1 {
            return None;
        }
        let first: Vec<&str> = chain.parts[0].iter().take(2).map(String::as_str).collect();
        if first.iter().any(|w| !is_plain_word(w)) {
            return None;
        }
        return Some(format!("shell({}:*)", first.join(" ")));
    }
    if PATH_TOOLS.contains(&tool) {
        let path = call_path(tool, arguments)?;
        return match normalise(workspace, path) {
            Place::Inside(relative) if is_plain_path(&relative) => {
                Some(format!("{tool}({relative})"))
            }
            _ => None,
        };
    }
    is_tool_name(tool).then(|| tool.to_owned())
}

/// A word that reads back as itself in a pattern (no quoting, no glob or shell syntax).
fn is_plain_word(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=+,@%".contains(c))
}

/// A path that reads back as itself as a glob.
fn is_plain_path(path: &str) -> bool {
    path != "." && !path.chars().any(|c| "*?[]()".contains(c) || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalise_resolves_dots_and_absolute_paths() {
        let ws = Path::new("/ws");
        assert_eq!(normalise(ws, "a/../.env"), Place::Inside(".env".into()));
        assert_eq!(
            normalise(ws, "./docs/x.md"),
            Place::Inside("docs/x.md".into())
        );
        assert_eq!(
            normalise(ws, "/ws/docs/x.md"),
            Place::Inside("docs/x.md".into())
        );
        assert_eq!(normalise(ws, "../x"), Place::Outside("/x".into()));
        assert_eq!(
            normalise(ws, "/etc/passwd"),
            Place::Outside("/etc/passwd".into())
        );
        assert_eq!(normalise(ws, "."), Place::Inside(".".into()));
        // A relative workspace: absolute paths elsewhere are still outside.
        assert!(matches!(
            normalise(Path::new("."), "/etc/x"),
            Place::Outside(_)
        ));
        assert_eq!(
            normalise(Path::new("."), "a/./b"),
            Place::Inside("a/b".into())
        );
    }

    #[test]
    fn suggestions() {
        let ws = Path::new("/ws");
        let shell = |c: &str| suggest("shell", &json!({"command": c}), ws);
        assert_eq!(
            shell("cargo test --all").as_deref(),
            Some("shell(cargo test:*)")
        );
        assert_eq!(shell("ls").as_deref(), Some("shell(ls:*)"));
        assert_eq!(shell("a && b"), None);
        assert_eq!(shell("echo $(x)"), None);
        assert_eq!(
            suggest("write_file", &json!({"path": "./docs/a.md"}), ws).as_deref(),
            Some("write_file(docs/a.md)")
        );
        assert_eq!(suggest("write_file", &json!({"path": "../a.md"}), ws), None);
        assert_eq!(
            suggest("mcp__s__t", &json!({}), ws).as_deref(),
            Some("mcp__s__t")
        );
    }

    #[test]
    fn suggested_entries_are_ones_the_settings_accept() {
        // "Always" at the prompt saves the suggestion into troupe.toml: it has to load again.
        let ws = Path::new("/ws");
        for (tool, arguments) in [
            ("shell", json!({"command": "cargo test --all"})),
            ("shell", json!({"command": "ls"})),
            ("write_file", json!({"path": "./docs/a.md"})),
            ("read_file", json!({"path": "/ws/src/main.rs"})),
            ("edit_file", json!({"path": "a-b/c.rs"})),
            ("mcp__s__t", json!({})),
        ] {
            let entry = suggest(tool, &arguments, ws).unwrap();
            assert_eq!(check_rule(&entry), Ok(()), "{entry}");
        }
    }
}
