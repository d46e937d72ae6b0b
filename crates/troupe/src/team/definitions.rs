//! Agent definitions: `agents/<name>.md` in the workspace, each a reusable kind of teammate the
//! lead can spawn with `spawn_teammate {agent: "<name>"}`.
//!
//! A definition is a front matter block between `---` lines, then the agent's instructions:
//!
//! ```text
//! ---
//! name: reviewer
//! description: Reviews a change and reports problems; never edits files
//! model: gpt-4.1-nano
//! tools: [read_file, shell]
//! plan_required: false
//! ---
//! You review changes. Read the files you are pointed at, run the tests, and report ...
//! ```
//!
//! The front matter is simple `key: value` lines (no YAML engine): `name` and `description` are
//! required; `model` (the model this teammate runs on), `tools` (a list, `[a, b]` or `- item`
//! lines, a subset of the teammate tools, plus MCP tools `mcp__<server>__<tool>` or all of a
//! server's, `mcp__<server>__*` — a teammate gets an MCP tool only when its list names it),
//! `plan_required` (`true`/`false`) and `sandbox`
//! (`workspace-write`, `read-only`, `off`; only ever tightens the run's) are optional.
//! Blank lines and `#` comments (a whole line, or after a space as in YAML) are ignored; a value
//! may be quoted.
//!
//! Definitions are read once at run start. **An invalid file never stops a run**: it is skipped
//! and reported as a [`Problem`] naming the file (a name that is not an agent name, a reserved
//! name, a name other than the file stem, an unknown key or tool, a duplicate, a file too large,
//! a symbolic link or other non-regular file). Files are opened through
//! [`crate::store::read::open_regular`], so a FIFO or a link is refused without blocking.

use std::collections::BTreeSet;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use troupe_wire::AgentName;

use crate::store::read::{open_regular, Links};

/// The folder of definitions, under the workspace.
pub const DEFINITIONS_DIR: &str = "agents";

/// The largest definition file read.
pub const MAX_DEFINITION_BYTES: u64 = 256 * 1024;

/// The teammate tools a definition cannot take away: without them a teammate could not report
/// to the lead or pass its plan gate.
pub const ALWAYS_GRANTED: [&str; 2] = ["send_message", "submit_plan"];

/// One valid definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    pub name: AgentName,
    pub description: String,
    /// The model this kind of teammate runs on; none: the run's model.
    pub model: Option<String>,
    /// The tools it is offered (besides [`ALWAYS_GRANTED`]); none: all teammate tools.
    pub tools: Option<Vec<String>>,
    /// Gate it from its first call until a plan of its is approved.
    pub plan_required: bool,
    /// The sandbox its commands run under. It can only tighten the run's: a looser mode here
    /// is ignored with a warning (a workspace's files must not lift the user's sandbox).
    pub sandbox: Option<crate::sandbox::Mode>,
    /// The body: its instructions, added to its system prompt.
    pub instructions: String,
    pub file: PathBuf,
}

impl AgentDefinition {
    /// Whether a teammate of this definition is offered the MCP tool `tool`
    /// (`mcp__<server>__<tool>`): only when its `tools` list names it, or names all of its
    /// server's tools (`mcp__<server>__*`). Without a list: none.
    pub fn allows_mcp_tool(&self, tool: &str) -> bool {
        self.tools.as_ref().is_some_and(|tools| {
            tools.iter().any(|listed| {
                listed == tool
                    || listed
                        .strip_suffix('*')
                        .is_some_and(|server| listed.ends_with("__*") && tool.starts_with(server))
            })
        })
    }

    /// Whether a teammate of this definition is offered `tool`.
    pub fn allows_tool(&self, tool: &str) -> bool {
        ALWAYS_GRANTED.contains(&tool)
            || self
                .tools
                .as_ref()
                .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }
}

/// A definition file that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "agent definition {} skipped: {}",
            self.file.display(),
            self.message
        )
    }
}

/// Reads every `agents/*.md` of `workspace` (in file-name order): the valid definitions and
/// the problems of the others. `tools` are the tools a definition may list. A missing folder
/// is no definitions.
pub fn load_definitions(workspace: &Path, tools: &[&str]) -> (Vec<AgentDefinition>, Vec<Problem>) {
    let dir = workspace.join(DEFINITIONS_DIR);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
        Err(e) => {
            return (
                Vec::new(),
                vec![Problem {
                    file: dir,
                    message: format!("cannot read the folder: {e}"),
                }],
            )
        }
    };
    files.sort();
    let mut definitions: Vec<AgentDefinition> = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        let problem = |message: String| Problem {
            file: file.clone(),
            message,
        };
        let text = match read_capped(&file) {
            Ok(text) => text,
            Err(message) => {
                problems.push(problem(message));
                continue;
            }
        };
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        match parse_definition(&text, &stem, tools) {
            Ok(mut definition) => {
                if definitions.iter().any(|d| d.name == definition.name) {
                    problems.push(problem(format!(
                        "a definition named {} was already read",
                        definition.name
                    )));
                    continue;
                }
                definition.file = file.clone();
                definitions.push(definition);
            }
            Err(message) => problems.push(problem(message)),
        }
    }
    (definitions, problems)
}

fn read_capped(file: &Path) -> Result<String, String> {
    let handle = match open_regular(file, Links::Refuse) {
        Ok(Some(handle)) => handle,
        Ok(None) => return Err("it disappeared while being read".into()),
        Err(e) => return Err(e.to_string()),
    };
    let mut bytes = Vec::new();
    handle
        .take(MAX_DEFINITION_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_DEFINITION_BYTES {
        return Err(format!("larger than {MAX_DEFINITION_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())
}

/// One front matter value.
#[derive(Debug)]
enum Value {
    Scalar(String),
    List(Vec<String>),
}

/// Parses one definition's text; `stem` is its file name without `.md`, which `name` must
/// equal; `tools` are the tools it may list.
/// `mcp__<server>__<tool>` or `mcp__<server>__*`, parts in `[a-z0-9_]`, neither empty.
fn is_mcp_tool_entry(entry: &str) -> bool {
    let Some(rest) = entry.strip_prefix(crate::permissions::rules::MCP_TOOL_PREFIX) else {
        return false;
    };
    let Some((server, tool)) = rest.split_once("__") else {
        return false;
    };
    let part = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    part(server) && (tool == "*" || part(tool))
}

pub fn parse_definition(text: &str, stem: &str, tools: &[&str]) -> Result<AgentDefinition, String> {
    let (front, body) = split_front_matter(text)?;
    let entries = parse_front_matter(front)?;
    let mut name = None;
    let mut description = None;
    let mut model = None;
    let mut listed_tools = None;
    let mut plan_required = false;
    let mut sandbox = None;
    for (key, value) in entries {
        match (key.as_str(), value) {
            ("name", Value::Scalar(v)) => name = Some(v),
            ("description", Value::Scalar(v)) => description = Some(v),
            ("model", Value::Scalar(v)) => model = Some(v),
            ("tools", Value::List(v)) => listed_tools = Some(v),
            ("tools", Value::Scalar(v)) if v.is_empty() => listed_tools = Some(Vec::new()),
            ("plan_required", Value::Scalar(v)) => {
                plan_required = match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("plan_required must be true or false, not {v:?}")),
                }
            }
            ("sandbox", Value::Scalar(v)) => sandbox = Some(v.parse::<crate::sandbox::Mode>()?),
            ("name" | "description" | "model" | "plan_required" | "sandbox", Value::List(_)) => {
                return Err(format!("{key} must be a single value, not a list"))
            }
            ("tools", Value::Scalar(v)) => {
                return Err(format!(
                    "tools must be a list ([a, b] or - lines), not {v:?}"
                ))
            }
            (other, _) => {
                return Err(format!(
                    "unknown key {other:?} (known: name, description, model, tools, \
                     plan_required, sandbox)"
                ))
            }
        }
    }
    let name = name.ok_or("no name")?;
    let name = AgentName::parse(&name).map_err(|e| e.to_string())?;
    if name.is_lead() || name.is_reserved() {
        return Err(format!("the name {name} is reserved"));
    }
    if name.as_str() != stem {
        return Err(format!(
            "its name {name} differs from its file name {stem}.md"
        ));
    }
    let description = description
        .filter(|d| !d.trim().is_empty())
        .ok_or("no description")?;
    let model = match model {
        Some(m) if m.trim().is_empty() => return Err("model must not be blank".into()),
        other => other,
    };
    if let Some(listed) = &listed_tools {
        let mut seen = BTreeSet::new();
        for tool in listed {
            if !tools.contains(&tool.as_str()) && !is_mcp_tool_entry(tool) {
                return Err(format!(
                    "unknown tool {tool:?} (a teammate's tools: {})",
                    tools.join(", ")
                ));
            }
            if !seen.insert(tool) {
                return Err(format!("tool {tool:?} is listed twice"));
            }
        }
    }
    Ok(AgentDefinition {
        name,
        description,
        model,
        tools: listed_tools,
        plan_required,
        sandbox,
        instructions: body.trim().to_owned(),
        file: PathBuf::new(),
    })
}

/// The front matter (between the first line `---` and the next) and the body after it.
fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("no front matter (the file must start with a --- line)")?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err("the front matter has no closing --- line".into())
}

fn parse_front_matter(front: &str) -> Result<Vec<(String, Value)>, String> {
    let mut entries: Vec<(String, Value)> = Vec::new();
    for (number, raw) in front.lines().enumerate() {
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        let at = |message: String| format!("front matter line {}: {message}", number + 2);
        if let Some(item) = line.strip_prefix("- ").or((line == "-").then_some("")) {
            match entries.last_mut() {
                Some((_, Value::List(items))) => items.push(unquote(item.trim())),
                Some((_, value)) if matches!(&*value, Value::Scalar(s) if s.is_empty()) => {
                    *value = Value::List(vec![unquote(item.trim())]);
                }
                _ => return Err(at("a list item without a key above it".into())),
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(at(format!("expected key: value, got {line:?}")));
        };
        let key = key.trim().to_owned();
        if entries.iter().any(|(k, _)| *k == key) {
            return Err(at(format!("the key {key} appears twice")));
        }
        let value = value.trim();
        let value = match value.strip_prefix('[') {
            Some(inner) => {
                let inner = inner
                    .strip_suffix(']')
                    .ok_or_else(|| at(format!("the list of {key} has no closing ]")))?;
                Value::List(
                    inner
                        .split(',')
                        .map(|item| unquote(item.trim()))
                        .filter(|item| !item.is_empty())
                        .collect(),
                )
            }
            None => Value::Scalar(unquote(value)),
        };
        entries.push((key, value));
    }
    Ok(entries)
}

/// `raw` without its comment: a `#` at the start or after whitespace, outside quotes, starts
/// one (as in YAML), so `model: gpt-4.1-nano   # optional` is `model: gpt-4.1-nano`. A `#`
/// inside a word (`C#`) or quotes (`"issue #12"`) is kept.
fn strip_comment(raw: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (at, c) in raw.char_indices() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'')
                if previous.is_whitespace() || previous == ':' || previous == '[' =>
            {
                quote = Some(c)
            }
            (None, '#') if previous.is_whitespace() => return &raw[..at],
            (None, _) => {}
        }
        previous = c;
    }
    raw
}

fn unquote(value: &str) -> String {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner.to_owned();
        }
    }
    value.to_owned()
}

/// How the lead's system prompt lists the definitions (empty: none).
pub fn render_for_lead(definitions: &[AgentDefinition]) -> String {
    if definitions.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "Agent definitions (spawn_teammate with agent: \"<name>\" gives the teammate that \
         definition's instructions, tools, plan rule and model):\n",
    );
    for d in definitions {
        text.push_str(&format!("- {} — {}\n", d.name, d.description));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: [&str; 5] = [
        "shell",
        "read_file",
        "write_file",
        "send_message",
        "submit_plan",
    ];

    fn parse(text: &str, stem: &str) -> Result<AgentDefinition, String> {
        parse_definition(text, stem, &TOOLS)
    }

    #[test]
    fn comments_after_values_are_ignored_as_in_yaml() {
        let text = "---\nname: reviewer                 # must equal the file name\n\
                    description: Reviews C# code and \"issue #12\" fixes  # a comment\n\
                    model: gpt-4.1-nano            # optional\n\
                    tools: [read_file, shell]      # optional\n\
                    plan_required: true            # optional\n\
                    # a whole-line comment\n\
                    sandbox: read-only             # optional\n---\nBody.\n";
        let d = parse(text, "reviewer").unwrap();
        assert_eq!(d.description, "Reviews C# code and \"issue #12\" fixes");
        assert_eq!(d.model.as_deref(), Some("gpt-4.1-nano"));
        assert_eq!(
            d.tools,
            Some(vec!["read_file".to_owned(), "shell".to_owned()])
        );
        assert!(d.plan_required);
        assert_eq!(d.sandbox, Some(crate::sandbox::Mode::ReadOnly));
    }

    #[test]
    fn a_full_definition_parses() {
        let d = parse(
            "---\nname: reviewer\ndescription: \"Reviews changes\"\nmodel: gpt-4.1-nano\n\
             tools: [read_file, shell]\nplan_required: true\n# a comment\n---\nReview well.\n",
            "reviewer",
        )
        .unwrap();
        assert_eq!(d.name.as_str(), "reviewer");
        assert_eq!(d.description, "Reviews changes");
        assert_eq!(d.model.as_deref(), Some("gpt-4.1-nano"));
        assert_eq!(
            d.tools,
            Some(vec!["read_file".to_owned(), "shell".to_owned()])
        );
        assert!(d.plan_required);
        assert_eq!(d.instructions, "Review well.");
        assert!(d.allows_tool("shell") && d.allows_tool("submit_plan"));
        assert!(!d.allows_tool("write_file"));
    }

    #[test]
    fn mcp_tools_are_offered_only_when_listed() {
        let d = parse(
            "---\nname: f\ndescription: d\ntools: [read_file, mcp__fixture__echo, mcp__time__*]\n---\n",
            "f",
        )
        .unwrap();
        assert!(d.allows_mcp_tool("mcp__fixture__echo"));
        assert!(!d.allows_mcp_tool("mcp__fixture__crash"));
        assert!(d.allows_mcp_tool("mcp__time__get_current_time"));
        assert!(!d.allows_mcp_tool("mcp__timer__x"));
        assert!(!d.allows_tool("shell"));
        let all = parse("---\nname: f\ndescription: d\n---\n", "f").unwrap();
        assert!(
            !all.allows_mcp_tool("mcp__fixture__echo"),
            "no list: no MCP tools"
        );
        for bad in [
            "mcp__Fix__echo",
            "mcp__fixture",
            "mcp____echo",
            "mcp__f__",
            "mcp__f__e*",
        ] {
            let text = format!("---\nname: f\ndescription: d\ntools: [{bad}]\n---\n");
            assert!(parse(&text, "f").is_err(), "{bad}");
        }
    }

    #[test]
    fn dash_lists_and_defaults() {
        let d = parse(
            "---\nname: w\ndescription: writes\ntools:\n  - write_file\n  - 'read_file'\n---\nbody",
            "w",
        )
        .unwrap();
        assert_eq!(
            d.tools,
            Some(vec!["write_file".to_owned(), "read_file".to_owned()])
        );
        assert_eq!(d.model, None);
        assert!(!d.plan_required);
        let all = parse("---\nname: w\ndescription: x\n---\n", "w").unwrap();
        assert!(all.allows_tool("write_file"));
    }

    #[test]
    fn each_kind_of_invalid_definition_is_refused_with_a_reason() {
        let cases = [
            ("name: w\ndescription: x\n", "w", "no front matter"),
            ("---\nname: w\ndescription: x\n", "w", "no closing"),
            (
                "---\nname: Bad_Name\ndescription: x\n---\n",
                "Bad_Name",
                "invalid agent name",
            ),
            ("---\nname: lead\ndescription: x\n---\n", "lead", "reserved"),
            ("---\nname: user\ndescription: x\n---\n", "user", "reserved"),
            (
                "---\nname: troupe\ndescription: x\n---\n",
                "troupe",
                "reserved",
            ),
            (
                "---\nname: other\ndescription: x\n---\n",
                "w",
                "differs from its file name",
            ),
            (
                "---\nname: w\ndescription: x\ncolor: red\n---\n",
                "w",
                "unknown key",
            ),
            (
                "---\nname: w\ndescription: x\ntools: [spawn_teammate]\n---\n",
                "w",
                "unknown tool",
            ),
            (
                "---\nname: w\ndescription: x\ntools: [shell, shell]\n---\n",
                "w",
                "twice",
            ),
            (
                "---\nname: w\ndescription: x\nplan_required: yes\n---\n",
                "w",
                "true or false",
            ),
            ("---\nname: w\n---\n", "w", "no description"),
            ("---\ndescription: x\n---\n", "w", "no name"),
            (
                "---\nname: w\nname: w\ndescription: x\n---\n",
                "w",
                "appears twice",
            ),
            (
                "---\nname: w\ndescription: x\ntools: shell\n---\n",
                "w",
                "must be a list",
            ),
            ("---\n- shell\n---\n", "w", "without a key"),
        ];
        for (text, stem, expected) in cases {
            let error = parse(text, stem).unwrap_err();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(DEFINITIONS_DIR)).unwrap();
        dir
    }

    fn write(ws: &Path, file: &str, text: &str) {
        std::fs::write(ws.join(DEFINITIONS_DIR).join(file), text).unwrap();
    }

    #[test]
    fn loading_skips_invalid_files_and_reports_them_by_name() {
        let ws = workspace();
        write(
            ws.path(),
            "a.md",
            "---\nname: a\ndescription: first\n---\nDo a.",
        );
        write(
            ws.path(),
            "b.md",
            "---\nname: b\ndescription: x\nfoo: 1\n---\n",
        );
        write(ws.path(), "notes.txt", "not a definition");
        let (definitions, problems) = load_definitions(ws.path(), &TOOLS);
        assert_eq!(definitions.len(), 1);
        assert_eq!(definitions[0].name.as_str(), "a");
        assert_eq!(definitions[0].file, ws.path().join("agents/a.md"));
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].to_string().contains("agents/b.md"),
            "{}",
            problems[0]
        );
        assert!(problems[0].message.contains("unknown key"));
    }

    #[test]
    fn a_missing_folder_is_no_definitions() {
        let ws = tempfile::tempdir().unwrap();
        assert_eq!(
            load_definitions(ws.path(), &TOOLS),
            (Vec::new(), Vec::new())
        );
    }

    #[test]
    fn symlinks_fifos_and_large_files_are_refused_without_blocking() {
        let ws = workspace();
        let target = ws.path().join("real.md");
        std::fs::write(&target, "---\nname: link\ndescription: x\n---\n").unwrap();
        std::os::unix::fs::symlink(&target, ws.path().join("agents/link.md")).unwrap();
        let fifo = ws.path().join("agents/fifo.md");
        let c = std::ffi::CString::new(fifo.as_os_str().to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let big = format!(
            "---\nname: big\ndescription: x\n---\n{}",
            "x".repeat(MAX_DEFINITION_BYTES as usize)
        );
        write(ws.path(), "big.md", &big);
        let (definitions, problems) = load_definitions(ws.path(), &TOOLS);
        assert!(definitions.is_empty(), "{definitions:?}");
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 3, "{text:?}");
        assert!(text
            .iter()
            .any(|p| p.contains("big.md") && p.contains("larger")));
        assert!(text
            .iter()
            .any(|p| p.contains("link.md") && p.contains("symbolic link")));
        assert!(text.iter().any(|p| p.contains("fifo.md")));
    }

    #[test]
    fn the_lead_sees_each_definition_with_its_description() {
        let d = parse(
            "---\nname: reviewer\ndescription: Reviews\n---\n",
            "reviewer",
        )
        .unwrap();
        assert_eq!(render_for_lead(&[]), "");
        assert!(render_for_lead(&[d]).contains("- reviewer — Reviews\n"));
    }
}
