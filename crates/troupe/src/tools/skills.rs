//! Skills: instructions kept in the workspace as `skills/<name>/SKILL.md`, which an agent loads
//! on demand with `load_skill` (SPEC §4.1, tool 8) instead of carrying them in every prompt.
//!
//! A SKILL.md may open with front matter:
//!
//! ```text
//! ---
//! name: release-notes
//! description: How to write the release notes of this project.
//! ---
//! ```
//!
//! [`catalog`] lists the skills with their descriptions (the composition root puts
//! [`render_catalog`] in the system prompt, so the model knows what it can load). The folder
//! name is the skill's name — it is what `load_skill` takes — and front matter only adds the
//! description; a file without valid front matter is listed with an empty description.
//!
//! Loading goes through [`confine`](super::confine): a skill folder or file that is a symlink
//! leading out of the workspace is refused, like any file tool path.

use std::path::Path;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};
use crate::store::read::{read_regular, Links};

/// The folder of skills, relative to the workspace.
pub const SKILLS_DIR: &str = "skills";
/// The file of one skill inside its folder.
pub const SKILL_FILE: &str = "SKILL.md";
/// A SKILL.md larger than this is refused (it would flood the model's context).
pub const MAX_SKILL_BYTES: u64 = 200_000;

/// One skill of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillInfo {
    /// The folder name: a lowercase slug, what `load_skill` takes.
    pub name: String,
    /// From the front matter; empty when there is none.
    pub description: String,
}

/// The loadable skills of `workspace`, by name. Never fails: a missing `skills/` folder is an
/// empty catalog, and folders that could not be loaded (not a slug, no SKILL.md, a symlink out
/// of the workspace) are left out.
pub fn catalog(workspace: &Path) -> Vec<SkillInfo> {
    let Ok(root) = Workspace::new(workspace) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(root.root().join(SKILLS_DIR)) else {
        return Vec::new();
    };
    let mut skills: Vec<SkillInfo> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            if !troupe_wire::name::is_slug(&name) {
                return None;
            }
            let path = root.resolve_read(&skill_path(&name)).ok()?;
            let text = read_limited(&path).ok()?;
            Some(SkillInfo {
                description: front_matter(&text).description.unwrap_or_default(),
                name,
            })
        })
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

/// One line per skill, `- <name>: <description>` (or `- <name>`); empty when there are none.
pub fn render_catalog(skills: &[SkillInfo]) -> String {
    let mut out = String::new();
    for skill in skills {
        out.push_str("- ");
        out.push_str(&skill.name);
        let description = skill.description.split_whitespace().collect::<Vec<_>>();
        if !description.is_empty() {
            out.push_str(": ");
            out.push_str(&description.join(" "));
        }
        out.push('\n');
    }
    out
}

/// The fields troupe reads from a SKILL.md's front matter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: Option<String>,
    pub description: Option<String>,
}

/// Reads the front matter: the text must start with a `---` line and have a closing `---`
/// line; inside, `key: value` lines (quotes around the value are dropped, and a value of `>`
/// or `|` or nothing continues on the indented lines after it). Anything else — no opening or
/// closing line — is no front matter at all.
pub fn front_matter(text: &str) -> FrontMatter {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return FrontMatter::default();
    }
    let mut body: Vec<&str> = Vec::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        body.push(line);
    }
    if !closed {
        return FrontMatter::default();
    }
    let mut matter = FrontMatter::default();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let mut value = value.trim().to_owned();
        if matches!(value.as_str(), "" | ">" | "|" | ">-" | "|-") {
            let mut parts = Vec::new();
            while i < body.len() && body[i].starts_with(char::is_whitespace) {
                parts.push(body[i].trim());
                i += 1;
            }
            value = parts.join(" ").trim().to_owned();
        }
        let value = unquote(&value).to_owned();
        match key.trim() {
            "name" => matter.name = Some(value),
            "description" => matter.description = Some(value),
            _ => {}
        }
    }
    matter
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

fn skill_path(name: &str) -> String {
    format!("{SKILLS_DIR}/{name}/{SKILL_FILE}")
}

/// The text of a SKILL.md: a regular file (a FIFO or device is refused without blocking), at
/// most [`MAX_SKILL_BYTES`], UTF-8. Confinement has already resolved the path, so a link is
/// followed.
fn read_limited(path: &Path) -> Result<String, String> {
    let bytes = match read_regular(path, Links::Follow, MAX_SKILL_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err("no such file".to_owned()),
        Err(e) => return Err(e.source.to_string()),
    };
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// The `load_skill` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadSkillTool;

#[async_trait]
impl ToolHandler for LoadSkillTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "load_skill".to_owned(),
            description: format!(
                "Load a skill: returns the instructions in {SKILLS_DIR}/<name>/{SKILL_FILE} of \
                 the workspace. Load a skill when the task matches its description in the list \
                 of available skills, then follow it."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 64,
                             "description": "The skill's name, a lowercase slug such as `release-notes`."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            effect: Effect::Read,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let name = str_arg(&args, "name")?.to_owned();
        if !troupe_wire::name::is_slug(&name) {
            return Err(ToolError::InvalidArguments(format!(
                "invalid skill name {name:?}: expected a lowercase slug (a-z, 0-9, single hyphens)"
            )));
        }
        let workspace_root = ctx.workspace.clone();
        crate::sync::offload("load_skill", move || load(&workspace_root, &name))
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?
    }
}

fn load(workspace_root: &Path, name: &str) -> Result<String, ToolError> {
    let workspace = Workspace::new(workspace_root)?;
    let raw = skill_path(name);
    let path = match workspace.resolve_read(&raw) {
        Ok(path) => path,
        Err(ToolError::NotFound(_)) => {
            let available: Vec<String> = catalog(workspace_root)
                .into_iter()
                .map(|s| s.name)
                .collect();
            let available = if available.is_empty() {
                "there are no skills in this workspace".to_owned()
            } else {
                format!("available skills: {}", available.join(", "))
            };
            return Err(ToolError::NotFound(format!(
                "there is no skill named {name:?} ({raw} does not exist); {available}"
            )));
        }
        Err(e) => return Err(e),
    };
    read_limited(&path).map_err(|why| ToolError::Failed(format!("cannot load {raw}: {why}")))
}
