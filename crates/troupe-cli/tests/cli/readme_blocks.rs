//! Every fenced block of `README.md` and `docs/*.md` is run by a test here, or says in the
//! markdown why it is not. An example that stops working, or a new block nobody runs, fails.
//!
//! The convention: the line right above each opening fence is one HTML comment (invisible on
//! GitHub), one of
//!
//! - `<!-- run -->` — a `sh` block, run as one `sh -e` script with the `troupe` built for these
//!   tests first on `PATH`, in a workspace (the current directory) where a scripted team has
//!   already run: `script.json` holds the scripted-model example of `docs/settings.md`, and
//!   `troupe run --model-script script.json` has left a lead and an idle teammate `writer`.
//!   `HOME` and `XDG_CONFIG_HOME` are empty folders of the test; no model, store or trust
//!   variable is set. The script must exit 0.
//! - `<!-- run: exit N -->` — the same, and the script must exit N.
//! - `<!-- run: fresh -->` (or `<!-- run: fresh, exit N -->`) — in a workspace holding only
//!   `script.json`, nothing run yet.
//! - `<!-- example: KIND -->` — an example file, loaded by the binary as KIND says:
//!   `troupe.toml` (`troupe config --json` accepts it), `agent definition` (written to
//!   `agents/<name>.md`, a scripted lead spawns a teammate from it), `model script` (`troupe run
//!   --model-script` runs it to exit 0), `memory record` (written to `.troupe/memory/<name>.md`,
//!   `troupe memory list --json` lists it without problems), `audit line` (a scripted run
//!   writes a line with the same keys and the same decision).
//! - `<!-- sample: WHAT -->` — output or a listing, shown and not run.
//! - `<!-- not run: REASON -->` — a command that needs what a test cannot have (a model key, the
//!   network, another host).
//!
//! `docs/README.md` says the same for writers of the docs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::support::{command, ran, without_settings_variables, Ran};

/// A fenced block of a markdown file.
#[derive(Debug)]
pub struct Block {
    /// The file, relative to the repository (`README.md`, `docs/cli.md`).
    pub file: String,
    /// The line of the opening fence, from 1.
    pub line: usize,
    /// What follows the opening fence (`sh`, `toml`, or empty).
    pub lang: String,
    /// The marker comment's text between `<!--` and `-->`, trimmed; none when the line above
    /// the fence is not a comment.
    pub marker: Option<String>,
    /// The lines between the fences, each ending with a newline.
    pub text: String,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// What a marker says to do with its block.
#[derive(Debug, PartialEq)]
pub enum Marker {
    Run { fresh: bool, exit: i32 },
    Example(Kind),
    Sample,
    NotRun,
}

/// The kinds of example file, each loaded by the binary its own way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Settings,
    AgentDefinition,
    ModelScript,
    MemoryRecord,
    AuditLine,
}

/// The marker's meaning, or why it means nothing.
pub fn parse_marker(marker: &str) -> Result<Marker, String> {
    let (word, rest) = match marker.split_once(':') {
        Some((word, rest)) => (word.trim(), rest.trim()),
        None => (marker.trim(), ""),
    };
    match word {
        "run" => {
            let (mut fresh, mut exit) = (false, 0);
            for option in rest.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                if option == "fresh" {
                    fresh = true;
                } else if let Some(code) = option.strip_prefix("exit ") {
                    exit = code
                        .trim()
                        .parse()
                        .map_err(|_| format!("not an exit code: {code:?}"))?;
                } else {
                    return Err(format!("unknown run option {option:?}"));
                }
            }
            Ok(Marker::Run { fresh, exit })
        }
        "example" => match rest {
            "troupe.toml" => Ok(Marker::Example(Kind::Settings)),
            "agent definition" => Ok(Marker::Example(Kind::AgentDefinition)),
            "model script" => Ok(Marker::Example(Kind::ModelScript)),
            "memory record" => Ok(Marker::Example(Kind::MemoryRecord)),
            "audit line" => Ok(Marker::Example(Kind::AuditLine)),
            other => Err(format!("unknown example kind {other:?}")),
        },
        "sample" | "not run" if rest.is_empty() => Err(format!("`{word}:` needs a reason")),
        "sample" => Ok(Marker::Sample),
        "not run" => Ok(Marker::NotRun),
        other => Err(format!("unknown marker {other:?}")),
    }
}

pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `README.md`, then every `docs/*.md` in name order.
pub fn markdown_files() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(repository().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    let mut files = vec!["README.md".to_owned()];
    files.extend(docs);
    files
}

/// Every fenced block of `file` (relative to the repository).
pub fn blocks(file: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(repository().join(file)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut open: Option<(usize, String, Option<String>, String)> = None;
    for (i, line) in lines.iter().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        if let Some((start, lang, marker, mut text)) = open.take() {
            if fence.is_some_and(|rest| rest.trim().is_empty()) {
                found.push(Block {
                    file: file.to_owned(),
                    line: start,
                    lang,
                    marker,
                    text,
                });
            } else {
                text.push_str(line);
                text.push('\n');
                open = Some((start, lang, marker, text));
            }
        } else if let Some(lang) = fence {
            let marker = i
                .checked_sub(1)
                .map(|above| lines[above].trim())
                .and_then(|above| above.strip_prefix("<!--"))
                .and_then(|above| above.strip_suffix("-->"))
                .map(|marker| marker.trim().to_owned());
            open = Some((i + 1, lang.trim().to_owned(), marker, String::new()));
        }
    }
    assert!(open.is_none(), "{file}: a fence is not closed");
    found
}

/// Every block of every markdown file.
pub fn all_blocks() -> Vec<Block> {
    markdown_files().iter().flat_map(|f| blocks(f)).collect()
}

/// The first example block of `file` after the line `heading`.
pub fn example_after(file: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repository().join(file)).unwrap();
    let at = text
        .lines()
        .position(|line| line == heading)
        .unwrap_or_else(|| panic!("no {heading:?} in {file}"));
    blocks(file)
        .into_iter()
        .find(|b| {
            b.line > at
                && b.marker
                    .as_deref()
                    .is_some_and(|m| m.starts_with("example:"))
        })
        .unwrap_or_else(|| panic!("no example after {heading:?} in {file}"))
        .text
}

/// The scripted-model example that the run blocks' workspaces hold as `script.json`.
pub fn script_example() -> String {
    example_after("docs/settings.md", "## Scripted models")
}

pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

pub fn troupe(ws: &Path, args: &[&str]) -> Ran {
    ran(command(ws)
        .args(args)
        .args(["--workspace", ws.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap())
}

/// `troupe run --prompt go` in `ws` on the scripted model in `script`, approvals automatic.
pub fn run_script(ws: &Path, script: &Path) -> Ran {
    troupe(
        ws,
        &[
            "run",
            "--prompt",
            "go",
            "--approval",
            "auto",
            "--no-memory",
            "--model-script",
            script.to_str().unwrap(),
        ],
    )
}

/// Every block has a marker that means something.
#[test]
fn every_block_is_run_or_marked() {
    let blocks = all_blocks();
    assert!(blocks.len() > 10, "{blocks:#?}");
    let mut wrong = Vec::new();
    for block in &blocks {
        let Some(marker) = &block.marker else {
            wrong.push(format!(
                "{}: no marker above the fence (see tests/cli/readme_blocks.rs)",
                block.at()
            ));
            continue;
        };
        match parse_marker(marker) {
            Err(why) => wrong.push(format!("{}: {why}", block.at())),
            Ok(Marker::Run { .. }) if block.lang != "sh" => {
                wrong.push(format!("{}: a run block must be `sh`", block.at()));
            }
            Ok(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The markers themselves: what each form means, and that a reason is required.
#[test]
fn markers_mean_what_the_convention_says() {
    assert_eq!(
        parse_marker("run"),
        Ok(Marker::Run {
            fresh: false,
            exit: 0
        })
    );
    assert_eq!(
        parse_marker("run: fresh, exit 3"),
        Ok(Marker::Run {
            fresh: true,
            exit: 3
        })
    );
    assert_eq!(
        parse_marker("example: troupe.toml"),
        Ok(Marker::Example(Kind::Settings))
    );
    assert_eq!(parse_marker("not run: needs a key"), Ok(Marker::NotRun));
    assert_eq!(parse_marker("sample: output"), Ok(Marker::Sample));
    for bad in [
        "not run",
        "sample:",
        "run: exit x",
        "run: twice",
        "example: x",
        "skip",
    ] {
        assert!(parse_marker(bad).is_err(), "{bad}");
    }
}

/// A workspace for run blocks: `script.json`, and unless `fresh` the scripted team's run.
/// Returns the temporary folder, the workspace, `HOME` and `XDG_CONFIG_HOME`.
fn run_block_workspace(fresh: bool) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let (dir, root) = workspace();
    let (ws, home, config) = (root.join("ws"), root.join("home"), root.join("config"));
    for folder in [&ws, &home, &config] {
        std::fs::create_dir(folder).unwrap();
    }
    std::fs::write(ws.join("script.json"), script_example()).unwrap();
    if !fresh {
        let made = ran(command(&ws)
            .args(["run", "--model-script", "script.json", "--approval", "auto"])
            .args(["--no-memory", "--prompt", "Start."])
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", &config)
            .stdin(Stdio::null())
            .output()
            .unwrap());
        assert_eq!(made.code, 0, "the run blocks' scripted team: {made:#?}");
    }
    (dir, ws, home, config)
}

/// Every `run` block exits as its marker says.
#[test]
fn run_blocks_exit_as_marked() {
    let bin = Path::new(env!("CARGO_BIN_EXE_troupe")).parent().unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let mut failed = Vec::new();
    let mut count = 0;
    for block in all_blocks() {
        let Some(Ok(Marker::Run { fresh, exit })) = block.marker.as_deref().map(parse_marker)
        else {
            continue;
        };
        count += 1;
        let (_dir, ws, home, config) = run_block_workspace(fresh);
        let mut sh = Command::new("sh");
        sh.args(["-e", "-c", &block.text])
            .current_dir(&ws)
            .env("PATH", &path)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", &config)
            .stdin(Stdio::null());
        let out = ran(without_settings_variables(&mut sh).output().unwrap());
        if out.code != exit {
            failed.push(format!(
                "{}: exit {} (expected {exit})\n{}{out:#?}",
                block.at(),
                out.code,
                block.text
            ));
        }
    }
    assert!(count > 0, "no run block found");
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// The `name:` of a front matter, without a trailing comment.
fn front_matter_name(text: &str) -> String {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("name:"))
        .unwrap_or_else(|| panic!("no name: in\n{text}"));
    line.split(" #").next().unwrap().trim().to_owned()
}

/// An agent definition `agents/<name>.md` holding `text` is spawned as `rev1` by a scripted
/// lead: the run ends 0, says nothing about the file, and `team.json` names the definition.
pub fn spawn_from_definition(text: &str) {
    let name = front_matter_name(text);
    let (_dir, ws) = workspace();
    std::fs::create_dir(ws.join("agents")).unwrap();
    std::fs::write(ws.join(format!("agents/{name}.md")), text).unwrap();
    let script = ws.join("script.json");
    std::fs::write(
        &script,
        json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {
                    "name": "rev1", "agent": name, "role": "review", "prompt": "Review."}}]},
                {"text": "spawned"},
                {"text": "The reviewer reported."}
            ],
            "rev1": [{"text": "Nothing to review."}]
        }})
        .to_string(),
    )
    .unwrap();
    let out = run_script(&ws, &script);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        !out.stderr.contains(&format!("agents/{name}.md")),
        "no warning: {out:#?}"
    );
    let team: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join(".troupe/team.json")).unwrap())
            .unwrap();
    assert_eq!(team["teammates"][0]["definition"], name.as_str(), "{team}");
}

/// A settings example loads: `troupe config --json` of a workspace whose `troupe.toml` it is.
/// Returns the JSON; nothing is created in the workspace.
pub fn load_settings(text: &str) -> Value {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("troupe.toml"), text).unwrap();
    let out = troupe(&ws, &["config", "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!ws.join(".troupe").exists());
    serde_json::from_str(&out.stdout).unwrap()
}

/// A memory record example is listed by `troupe memory list --json`; returns the listing.
pub fn list_memory_record(text: &str) -> Value {
    let name = front_matter_name(text);
    let (_dir, ws) = workspace();
    std::fs::create_dir_all(ws.join(".troupe/memory")).unwrap();
    std::fs::write(ws.join(format!(".troupe/memory/{name}.md")), text).unwrap();
    let out = troupe(&ws, &["memory", "list", "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let listed: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(listed["records"][0]["name"], name.as_str(), "{listed}");
    assert_eq!(listed["problems"], json!([]), "{listed}");
    listed
}

/// The audit line example has the keys of a real line, and a scripted run (the docs' script)
/// writes a line with its agent, tool, decision, rule and reason.
fn audit_line_is_written(text: &str) {
    let example: Value = serde_json::from_str(text).unwrap();
    let (_dir, ws) = workspace();
    let script = ws.join("script.json");
    std::fs::write(&script, script_example()).unwrap();
    let out = run_script(&ws, &script);
    assert_eq!(out.code, 0, "{out:#?}");
    let audit = std::fs::read_to_string(ws.join(".troupe/audit.jsonl")).unwrap();
    let same = audit.lines().any(|line| {
        let real: Value = serde_json::from_str(line).unwrap();
        super::support::keys(&real) == super::support::keys(&example)
            && ["agent", "tool", "decision", "rule", "reason"]
                .iter()
                .all(|key| real[key] == example[key])
    });
    assert!(same, "no line like {example}\nin\n{audit}");
}

/// Every example block loads as its kind says.
#[test]
fn examples_load_as_their_kind() {
    let mut count = 0;
    for block in all_blocks() {
        let Some(Ok(Marker::Example(kind))) = block.marker.as_deref().map(parse_marker) else {
            continue;
        };
        count += 1;
        eprintln!("{}: {kind:?}", block.at());
        match kind {
            Kind::Settings => {
                load_settings(&block.text);
            }
            Kind::AgentDefinition => spawn_from_definition(&block.text),
            Kind::ModelScript => {
                let (_dir, ws) = workspace();
                let script = ws.join("script.json");
                std::fs::write(&script, &block.text).unwrap();
                let out = run_script(&ws, &script);
                assert_eq!(out.code, 0, "{}: {out:#?}", block.at());
            }
            Kind::MemoryRecord => {
                list_memory_record(&block.text);
            }
            Kind::AuditLine => audit_line_is_written(&block.text),
        }
    }
    assert!(count >= 5, "{count} examples");
}
