//! The suite file of `troupe eval`: its TOML format (strict: an unknown key, a wrong type or a
//! check with two keys is refused with the file and line), and its validation into cases ready
//! to run — paths resolved against the suite's folder, fixtures looked at, regexes compiled.
//! Every refusal is exit 2 (`eval_suite_invalid`) naming the file and, when it has one, the case.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::fixture;
use crate::error::CliError;

/// The code of a suite refused before anything ran.
pub const SUITE_INVALID_CODE: &str = "eval_suite_invalid";

/// How long a repetition's run may take unless the suite says otherwise.
const DEFAULT_TIMEOUT_SECS: f64 = 600.0;

/// The most repetitions one case may ask for.
const MAX_REPEAT: u32 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    case: Vec<RawCase>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    model: Option<RawModel>,
    repeat: Option<u32>,
    min_pass: Option<f64>,
    timeout: Option<f64>,
    approval: Option<Approval>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: String,
    prompt: String,
    fixture: RawFixture,
    model: Option<RawModel>,
    repeat: Option<u32>,
    min_pass: Option<f64>,
    timeout: Option<f64>,
    approval: Option<Approval>,
    #[serde(default)]
    check: Vec<RawCheck>,
}

/// `model = "configured"`, `{ script = "FILE" }` or `{ recording = "FILE" }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum RawModel {
    Configured,
    Script(PathBuf),
    Recording(PathBuf),
}

/// `fixture = "DIR"` or `{ git = "DIR", rev = "REV" }` (`rev` defaults to `HEAD`).
#[derive(Debug)]
enum RawFixture {
    Folder(PathBuf),
    Git(RawGit),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGit {
    git: PathBuf,
    #[serde(default = "head")]
    rev: String,
}

fn head() -> String {
    "HEAD".to_owned()
}

impl<'de> Deserialize<'de> for RawFixture {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FixtureVisitor;
        impl<'de> Visitor<'de> for FixtureVisitor {
            type Value = RawFixture;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a folder (a string) or { git = \"DIR\", rev = \"REV\" }")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawFixture, E> {
                Ok(RawFixture::Folder(PathBuf::from(value)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawFixture, A::Error> {
                RawGit::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawFixture::Git)
            }
        }
        deserializer.deserialize_any(FixtureVisitor)
    }
}

/// One `[[case.check]]`: a table with exactly one of these keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum RawCheck {
    FileExists(String),
    FileContains(FileText),
    FileMatches(FileRegex),
    Command(String),
    ToolCalled(String),
    ToolNotCalled(String),
    ExitCode(i32),
    MaxTokens(u64),
    MaxCost(f64),
    MaxSeconds(f64),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileText {
    path: String,
    text: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRegex {
    path: String,
    regex: String,
}

/// How the run's permission asks are answered: `auto` approves every ask, `deny` refuses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    Auto,
    Deny,
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Deny => "deny",
        }
    }
}

/// Which model answers a case's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Model {
    /// The model the person's settings configure.
    Configured,
    /// `--model-script FILE` (absolute).
    Script(PathBuf),
    /// `--model-recording FILE` (absolute).
    Recording(PathBuf),
}

/// Where a repetition's fresh workspace comes from.
#[derive(Debug, Clone)]
pub enum Fixture {
    /// A folder, copied (absolute, canonical).
    Folder(PathBuf),
    /// A git repository's commit, cloned and checked out.
    Git {
        /// The repository's folder (absolute, canonical).
        repo: PathBuf,
        /// The revision as the suite wrote it.
        rev: String,
        /// The commit it named when the suite was read.
        commit: String,
    },
}

/// One check of a repetition.
#[derive(Debug, Clone)]
pub enum Check {
    FileExists(String),
    FileContains { path: String, text: String },
    FileMatches { path: String, regex: regex::Regex },
    Command(String),
    ToolCalled(String),
    ToolNotCalled(String),
    ExitCode(i32),
    MaxTokens(u64),
    MaxCost(f64),
    MaxSeconds(f64),
}

impl Check {
    /// The check as the suite wrote it, for the report: `file_contains NOTES.md "usage"`.
    pub fn describe(&self) -> String {
        match self {
            Self::FileExists(path) => format!("file_exists {path}"),
            Self::FileContains { path, text } => format!("file_contains {path} {text:?}"),
            Self::FileMatches { path, regex } => {
                format!("file_matches {path} /{}/", regex.as_str())
            }
            Self::Command(command) => format!("command {command:?}"),
            Self::ToolCalled(tool) => format!("tool_called {tool}"),
            Self::ToolNotCalled(tool) => format!("tool_not_called {tool}"),
            Self::ExitCode(code) => format!("exit_code {code}"),
            Self::MaxTokens(n) => format!("max_tokens {n}"),
            Self::MaxCost(usd) => format!("max_cost ${usd}"),
            Self::MaxSeconds(s) => format!("max_seconds {s}"),
        }
    }
}

/// A case ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub prompt: String,
    pub fixture: Fixture,
    pub model: Model,
    pub repeat: u32,
    pub min_pass: f64,
    pub timeout: Duration,
    pub approval: Approval,
    /// The checks, with `exit_code = 0` added when the suite gave no `exit_code` check.
    pub checks: Vec<Check>,
}

/// A suite ready to run.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The suite file as given.
    pub file: PathBuf,
    pub cases: Vec<Case>,
}

/// Reads and validates the suite at `file`.
pub fn load(file: &Path) -> Result<Suite, CliError> {
    let shown = file.display().to_string();
    let invalid =
        |why: String| CliError::usage(format!("{shown}: {why}")).with_code(SUITE_INVALID_CODE);
    let meta = std::fs::metadata(file).map_err(|e| invalid(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(invalid("not a regular file".into()));
    }
    let text =
        std::fs::read_to_string(file).map_err(|e| invalid(format!("cannot read it: {e}")))?;
    let raw: RawSuite = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|span| line_of(&text, span.start));
        let mut message = e.message().trim().replace('\n', " ");
        if message.starts_with("wanted exactly 1 element") {
            // serde's words for an enum table with two keys.
            message = "a [[case.check]] holds exactly one check (file_exists, file_contains, \
                       file_matches, command, tool_called, tool_not_called, exit_code, \
                       max_tokens, max_cost, max_seconds)"
                .into();
        }
        match line {
            Some(line) => CliError::usage(format!("{shown}:{line}: {message}")),
            None => CliError::usage(format!("{shown}: {message}")),
        }
        .with_code(SUITE_INVALID_CODE)
    })?;
    let folder = std::fs::canonicalize(file)
        .ok()
        .and_then(|f| f.parent().map(Path::to_path_buf))
        .ok_or_else(|| invalid("cannot find its folder".into()))?;
    if raw.case.is_empty() {
        return Err(invalid("no [[case]]: a suite needs at least one".into()));
    }
    let mut cases: Vec<Case> = Vec::with_capacity(raw.case.len());
    for (index, case) in raw.case.into_iter().enumerate() {
        let label = if case.name.trim().is_empty() {
            format!("case {}", index + 1)
        } else {
            format!("case {:?}", case.name)
        };
        let case = validate(case, &raw.defaults, &folder)
            .map_err(|why| invalid(format!("{label}: {why}")))?;
        if cases.iter().any(|c| c.name == case.name) {
            return Err(invalid(format!("{label}: two cases have this name")));
        }
        cases.push(case);
    }
    Ok(Suite {
        file: file.to_path_buf(),
        cases,
    })
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .unwrap_or(text)
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

fn validate(raw: RawCase, defaults: &RawDefaults, folder: &Path) -> Result<Case, String> {
    if raw.name.trim().is_empty() {
        return Err("`name` must not be blank".into());
    }
    if raw.name.chars().any(char::is_control) {
        return Err("`name` must not hold control characters".into());
    }
    if raw.prompt.trim().is_empty() {
        return Err("`prompt` must not be blank".into());
    }
    let repeat = raw.repeat.or(defaults.repeat).unwrap_or(1);
    if repeat == 0 || repeat > MAX_REPEAT {
        return Err(format!("`repeat` must be 1 to {MAX_REPEAT}, not {repeat}"));
    }
    let min_pass = raw.min_pass.or(defaults.min_pass).unwrap_or(1.0);
    if !(0.0..=1.0).contains(&min_pass) {
        return Err(format!("`min_pass` must be from 0 to 1, not {min_pass}"));
    }
    let timeout = raw
        .timeout
        .or(defaults.timeout)
        .unwrap_or(DEFAULT_TIMEOUT_SECS);
    let timeout = seconds(timeout)
        .ok_or_else(|| format!("`timeout` must be a positive number of seconds, not {timeout}"))?;
    let model = match raw.model.or_else(|| defaults.model.clone()) {
        None | Some(RawModel::Configured) => Model::Configured,
        Some(RawModel::Script(path)) => Model::Script(input_file(folder, &path, "script")?),
        Some(RawModel::Recording(path)) => {
            Model::Recording(input_file(folder, &path, "recording")?)
        }
    };
    let fixture = match raw.fixture {
        RawFixture::Folder(path) => {
            let dir = existing_dir(folder, &path, "fixture")?;
            fixture::inspect_folder(&dir)?;
            Fixture::Folder(dir)
        }
        RawFixture::Git(git) => {
            let repo = existing_dir(folder, &git.git, "fixture's git repository")?;
            let commit = fixture::resolve_rev(&repo, &git.rev)?;
            Fixture::Git {
                repo,
                rev: git.rev,
                commit,
            }
        }
    };
    let mut checks = Vec::with_capacity(raw.check.len() + 1);
    for (index, check) in raw.check.into_iter().enumerate() {
        checks.push(check_of(check).map_err(|why| format!("check {} ({why})", index + 1))?);
    }
    if !checks.iter().any(|c| matches!(c, Check::ExitCode(_))) {
        checks.insert(0, Check::ExitCode(0));
    }
    Ok(Case {
        name: raw.name,
        prompt: raw.prompt,
        fixture,
        model,
        repeat,
        min_pass,
        timeout,
        approval: raw.approval.or(defaults.approval).unwrap_or(Approval::Auto),
        checks,
    })
}

fn seconds(value: f64) -> Option<Duration> {
    (value.is_finite() && value > 0.0)
        .then(|| Duration::try_from_secs_f64(value).ok())
        .flatten()
}

fn check_of(raw: RawCheck) -> Result<Check, String> {
    Ok(match raw {
        RawCheck::FileExists(path) => Check::FileExists(relative(path)?),
        RawCheck::FileContains(FileText { path, text }) => Check::FileContains {
            path: relative(path)?,
            text,
        },
        RawCheck::FileMatches(FileRegex { path, regex }) => Check::FileMatches {
            path: relative(path)?,
            regex: regex::RegexBuilder::new(&regex)
                .multi_line(true)
                .build()
                .map_err(|e| format!("bad regex: {}", e.to_string().replace('\n', " ")))?,
        },
        RawCheck::Command(command) if command.trim().is_empty() => {
            return Err("`command` must not be blank".into())
        }
        RawCheck::Command(command) => Check::Command(command),
        RawCheck::ToolCalled(tool) => Check::ToolCalled(tool),
        RawCheck::ToolNotCalled(tool) => Check::ToolNotCalled(tool),
        RawCheck::ExitCode(code) => Check::ExitCode(code),
        RawCheck::MaxTokens(n) => Check::MaxTokens(n),
        RawCheck::MaxCost(usd) if usd.is_finite() && usd >= 0.0 => Check::MaxCost(usd),
        RawCheck::MaxCost(usd) => return Err(format!("`max_cost` must be 0 or more, not {usd}")),
        RawCheck::MaxSeconds(s) if s.is_finite() && s > 0.0 => Check::MaxSeconds(s),
        RawCheck::MaxSeconds(s) => return Err(format!("`max_seconds` must be positive, not {s}")),
    })
}

/// A path inside the workspace copy: relative, without `..`.
fn relative(path: String) -> Result<String, String> {
    let parsed = Path::new(&path);
    let inside = !path.is_empty()
        && parsed
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if inside {
        Ok(path)
    } else {
        Err(format!(
            "{path:?} must be a relative path inside the workspace, without `..`"
        ))
    }
}

/// `path` against the suite's folder, canonical; a folder.
fn existing_dir(folder: &Path, path: &Path, what: &str) -> Result<PathBuf, String> {
    let joined = folder.join(path);
    match std::fs::canonicalize(&joined) {
        Ok(dir) if dir.is_dir() => Ok(dir),
        Ok(_) => Err(format!("{what} {} is not a folder", joined.display())),
        Err(e) => Err(format!("{what} {}: {e}", joined.display())),
    }
}

/// `path` against the suite's folder, canonical; a regular file.
fn input_file(folder: &Path, path: &Path, what: &str) -> Result<PathBuf, String> {
    let joined = folder.join(path);
    match std::fs::canonicalize(&joined) {
        Ok(file) if file.is_file() => Ok(file),
        Ok(_) => Err(format!(
            "model {what} {} is not a regular file",
            joined.display()
        )),
        Err(e) => Err(format!("model {what} {}: {e}", joined.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }

    #[test]
    fn check_paths_stay_inside() {
        assert!(relative("a/b.md".into()).is_ok());
        assert!(relative("../x".into()).is_err());
        assert!(relative("/etc/passwd".into()).is_err());
        assert!(relative(String::new()).is_err());
    }
}
