//! `troupe init [--json]`: a commented `troupe.toml` for the workspace, with a `[model]` section
//! for what the environment offers — OpenAI (`OPENAI_API_KEY`), else Anthropic
//! (`ANTHROPIC_API_KEY`), else a scripted model written beside it (`troupe.script.json`), so
//! that `troupe run --prompt …` works at once with no key. In a git repository `.troupe/` is
//! added to the workspace's `.gitignore` (created, or a line appended; never twice). The file's
//! trust-requiring values (the provider, the script) are recorded as trusted: the person who ran
//! `init` wrote them. Then it prints what it wrote and what to run next.
//!
//! Nothing is overwritten: an existing `troupe.toml` (or script file) is refused with exit 2
//! before anything is written. Every file is written to a temp file and linked into place
//! without replacing anything (`durable::create_new`), so a link planted at the path is never
//! followed; `.gitignore` is replaced the same way, and only when it is a regular file.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde::Serialize;
use troupe::model::config::{process_env, read_env_file, ENV_FILE_NAME};
use troupe::settings::PROJECT_FILE_NAME;
use troupe::store::durable;
use troupe::store::read::{open_regular, read_regular, Links};

use crate::error::CliError;
use crate::render;

/// The scripted model's file `init` writes when no key is found, beside `troupe.toml`.
pub const SCRIPT_FILE_NAME: &str = "troupe.script.json";
/// The line `init` adds to `.gitignore`.
const IGNORE_LINE: &str = ".troupe/";
/// The most of a `.gitignore` read to see whether `.troupe/` is already there.
const MAX_GITIGNORE_BYTES: u64 = 1 << 20;

/// The model the written file names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Found {
    OpenAi,
    Anthropic,
    Scripted,
}

/// What `init` did, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    workspace: String,
    model: Found,
    /// The files written, relative to the workspace.
    written: Vec<String>,
    /// `created`, `appended`, `already ignored`, `not a git repository`, or why it was left.
    gitignore: String,
    /// Whether the written file's trust was recorded (none needed counts as recorded).
    trusted: bool,
    /// Why trust could not be recorded, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    trust_problem: Option<String>,
    /// What to run next.
    next: Vec<String>,
}

pub async fn init(workspace: &Path, json: bool) -> Result<(), CliError> {
    let model = found_model(workspace);
    let config = workspace.join(PROJECT_FILE_NAME);
    let script = workspace.join(SCRIPT_FILE_NAME);
    let mut targets = vec![&config];
    if model == Found::Scripted {
        targets.push(&script);
    }
    for target in &targets {
        // A link counts as there, wherever it points: nothing is written through it.
        if std::fs::symlink_metadata(target).is_ok() {
            return Err(exists(target));
        }
    }
    let mut written = Vec::new();
    if model == Found::Scripted {
        create(&script, SCRIPT.as_bytes())?;
        written.push(SCRIPT_FILE_NAME.to_owned());
    }
    if let Err(e) = create(&config, settings_text(model).as_bytes()) {
        if model == Found::Scripted {
            let _ = durable::remove(&script);
        }
        return Err(e);
    }
    written.insert(0, PROJECT_FILE_NAME.to_owned());
    let gitignore = ignore_state_folder(workspace);
    let (trusted, trust_problem) = match record_trust(workspace) {
        Ok(()) => (true, None),
        Err(e) => (false, Some(e)),
    };
    let report = Report {
        workspace: workspace.display().to_string(),
        model,
        written,
        gitignore,
        trusted,
        trust_problem,
        next: vec![
            "troupe run --prompt \"Say hello\"".to_owned(),
            "troupe watch".to_owned(),
        ],
    };
    if json {
        return render::print_json(&report);
    }
    render::print_text(&describe(&report))
}

fn exists(path: &Path) -> CliError {
    CliError::usage(format!(
        "{} already exists: troupe init writes nothing over an existing file (move it away, or \
         edit it by hand)",
        path.display()
    ))
    .with_code("init_exists")
}

/// OpenAI when its key is set (the environment, then the workspace's `.env`), else
/// Anthropic's, else a scripted model.
fn found_model(workspace: &Path) -> Found {
    let env = process_env().unwrap_or_default();
    let dotenv = read_env_file(&workspace.join(ENV_FILE_NAME)).unwrap_or_default();
    let set = |name: &str| {
        env.get(name)
            .or_else(|| dotenv.get(name))
            .is_some_and(|v| !v.trim().is_empty())
    };
    if set("OPENAI_API_KEY") {
        Found::OpenAi
    } else if set("ANTHROPIC_API_KEY") {
        Found::Anthropic
    } else {
        Found::Scripted
    }
}

/// `bytes` at `path`, which must not exist: linked into place complete, never through a link;
/// readable by others as a file one writes by hand would be.
fn create(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    durable::create_new(path, bytes).map_err(|e| {
        if e.source.kind() == ErrorKind::AlreadyExists {
            exists(path)
        } else {
            CliError::failed(e).with_code("io_error")
        }
    })?;
    readable_by_others(path, 0o644);
    Ok(())
}

/// Gives the regular file at `path` (never a link) `mode`; a failure leaves the file as it is.
fn readable_by_others(path: &Path, mode: u32) {
    if let Ok(Some(file)) = open_regular(path, Links::Refuse) {
        let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
    }
}

/// Adds `.troupe/` to the workspace's `.gitignore` when the workspace is in a git repository
/// and it is not there yet; says what happened.
fn ignore_state_folder(workspace: &Path) -> String {
    if !workspace.ancestors().any(|dir| dir.join(".git").exists()) {
        return "not a git repository".to_owned();
    }
    let path = workspace.join(".gitignore");
    let old = match read_regular(&path, Links::Refuse, MAX_GITIGNORE_BYTES) {
        Ok(old) => old,
        Err(e) => return format!("left as it is ({e})"),
    };
    let Some(old) = old else {
        return match durable::create_new(&path, format!("{IGNORE_LINE}\n").as_bytes()) {
            Ok(()) => {
                readable_by_others(&path, 0o644);
                "created".to_owned()
            }
            Err(e) => format!("not created ({e})"),
        };
    };
    let text = String::from_utf8_lossy(&old);
    if text.lines().any(ignores_state_folder) {
        return "already ignored".to_owned();
    }
    let mode = std::fs::symlink_metadata(&path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    let mut new = old.clone();
    if !new.is_empty() && !new.ends_with(b"\n") {
        new.push(b'\n');
    }
    new.extend_from_slice(format!("{IGNORE_LINE}\n").as_bytes());
    match durable::replace(&path, &new) {
        Ok(()) => {
            readable_by_others(&path, mode);
            "appended".to_owned()
        }
        Err(e) => format!("left as it is ({e})"),
    }
}

/// Whether a `.gitignore` line ignores the workspace's `.troupe` folder as a whole.
fn ignores_state_folder(line: &str) -> bool {
    let line = line.trim();
    let line = line.strip_prefix('/').unwrap_or(line);
    let line = line.strip_suffix("/**").unwrap_or(line);
    let line = line.strip_suffix('/').unwrap_or(line);
    matches!(line, ".troupe" | "**/.troupe")
}

/// Records the trust the written file needs (the person ran `init`: they chose it). Only the
/// items of `troupe.toml`; a `.env` that was already there is left for `troupe trust`.
fn record_trust(workspace: &Path) -> Result<(), String> {
    let review = crate::trust::review(workspace, true).map_err(|e| e.to_string())?;
    let items: Vec<_> = review
        .items
        .into_iter()
        .filter(|item| item.file == PROJECT_FILE_NAME)
        .collect();
    if items.is_empty() {
        return Ok(());
    }
    crate::trust::record(workspace, &items).map_err(|e| e.to_string())
}

fn describe(report: &Report) -> String {
    let mut out = String::new();
    for file in &report.written {
        out.push_str(&format!(
            "wrote {}\n",
            Path::new(&report.workspace).join(file).display()
        ));
    }
    out.push_str(&format!(
        "model: {}\n",
        match report.model {
            Found::OpenAi => "OpenAI (OPENAI_API_KEY is set)",
            Found::Anthropic => "Anthropic (ANTHROPIC_API_KEY is set)",
            Found::Scripted => {
                "scripted: no OPENAI_API_KEY or ANTHROPIC_API_KEY was found, so troupe.script.json \
                 answers (no network, no key; see troupe.toml to switch)"
            }
        }
    ));
    out.push_str(&format!(".gitignore: {}\n", report.gitignore));
    match &report.trust_problem {
        None => out.push_str("trusted: troupe.toml (you wrote it with troupe init)\n"),
        Some(why) => out.push_str(&format!(
            "not trusted yet ({why}); run `troupe trust` to review it\n"
        )),
    }
    out.push_str("next:\n");
    for command in &report.next {
        out.push_str(&format!("  {command}\n"));
    }
    out
}

/// The written `troupe.toml`: comments that say what each value does and where the rest is.
fn settings_text(model: Found) -> String {
    let model_section = match model {
        Found::OpenAi => "\
[model]
# OPENAI_API_KEY was set when this file was written: agents use OpenAI's Chat Completions.
# The key stays in the environment (or .env); it never goes in this file.
provider = \"openai\"
# OPENAI_MODEL, when set, decides over this.
model = \"gpt-4.1-mini\"
# base_url = \"http://127.0.0.1:11434/v1\"   # any OpenAI-compatible server (Ollama, vLLM, ...)
"
        .to_owned(),
        Found::Anthropic => "\
[model]
# ANTHROPIC_API_KEY was set when this file was written: agents use Anthropic's Messages API.
# The key stays in the environment (or .env); it never goes in this file.
provider = \"anthropic\"
# ANTHROPIC_MODEL, when set, decides over this.
model = \"claude-sonnet-4-5\"
"
        .to_owned(),
        Found::Scripted => format!(
            "\
[model]
# No OPENAI_API_KEY or ANTHROPIC_API_KEY was found when this file was written, so every agent
# is answered from the scripted model in {SCRIPT_FILE_NAME}: no network, no key. Edit that
# file to script other answers (its format: `--model-script` in docs/cli.md).
# To use a real model, remove the `script` line and set OPENAI_API_KEY and OPENAI_MODEL (or
# ANTHROPIC_API_KEY and ANTHROPIC_MODEL) in the environment or in .env.
script = \"{SCRIPT_FILE_NAME}\"
"
        ),
    };
    format!(
        "\
# troupe.toml: troupe's settings for this workspace (written by `troupe init`).
# Every section and key: docs/settings.md. `troupe config` shows the values in effect and
# where each came from. Secrets never go here.

{model_section}
# [permissions]
# allow = [\"shell(cargo test:*)\"]      # run without asking
# deny = [\"read_file(.env)\"]

# [context]
# Files every agent's system prompt carries (default: AGENTS.md, else CLAUDE.md).
# files = [\"AGENTS.md\", \"docs/CONVENTIONS.md\"]
"
    )
}

/// The scripted model `init` writes when no key is found: the lead looks at the workspace's
/// files with `glob`, then answers saying where its answer came from.
const SCRIPT: &str = r#"{
  "agents": {
    "lead": [
      {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]},
      {"text": "Hello from troupe's scripted model (troupe.script.json): I looked at the files of this workspace with glob, and this answer is canned. Set OPENAI_API_KEY or ANTHROPIC_API_KEY and remove the `script` line of troupe.toml to work with a real model, or try `troupe demo` to watch a scripted team with a teammate, a plan and an approval."}
    ]
  }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_troupe_line_is_recognised_in_its_usual_spellings() {
        for line in [
            ".troupe",
            ".troupe/",
            "/.troupe/",
            " .troupe/ ",
            ".troupe/**",
            "**/.troupe",
        ] {
            assert!(ignores_state_folder(line), "{line}");
        }
        for line in ["# .troupe/", ".troupe/x", "troupe", "!.troupe/"] {
            assert!(!ignores_state_folder(line), "{line}");
        }
    }

    #[test]
    fn the_written_settings_and_script_parse() {
        for model in [Found::OpenAi, Found::Anthropic, Found::Scripted] {
            let text = settings_text(model);
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(PROJECT_FILE_NAME), &text).unwrap();
            troupe::settings::Settings::load(dir.path(), None).unwrap();
        }
        troupe::model::ScriptedModel::from_json_str(SCRIPT).unwrap();
    }
}
