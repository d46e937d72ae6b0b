//! Durable agent memory (SPEC §9 "Memory"): one small Markdown record per memory in
//! `.troupe/memory/<name>.md`, surviving compaction and new sessions.
//!
//! A record is front matter with exactly three keys and a body:
//!
//! ```text
//! ---
//! name: <slug>
//! type: user|feedback|project|reference
//! description: <one line>
//! ---
//! <body>
//! ```
//!
//! Why one file per record: a person can read, edit or delete one with any editor, and one bad
//! file never hides the others — [`MemoryStore::list`] reports it as a problem beside the valid
//! records. Every change is an atomic replace ([`durable::replace`]) under the memory lock, so a
//! crash leaves the old record or the new one, never a torn mix; readers skip the temp files.
//!
//! Names are validated before any path is built from them, so a name like `../x` never reaches
//! the file system.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::read::{read_regular, Links};
use super::{durable, lock, BackendError, IoError};
use crate::error::ErrorCode;
use crate::layout::Layout;

/// The longest name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 200;
/// The largest body, in bytes.
pub const MAX_BODY_BYTES: usize = 4096;
/// The most lines a body may have.
pub const MAX_BODY_LINES: usize = 200;
/// The largest record file read: the body plus front matter at its largest (a description of
/// 200 four-byte characters), with room to spare. Bigger files are refused unread.
pub const MAX_RECORD_FILE_BYTES: u64 = 8 * 1024;

const FENCE: &str = "---";
const EXTENSION: &str = ".md";

/// What a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryType {
    /// Who the user is and what they prefer.
    User,
    /// Corrections and guidance the user gave about how to work.
    Feedback,
    /// Facts about the project that are not in the code.
    Project,
    /// Where to find things (links, documents, systems).
    Reference,
}

impl MemoryType {
    pub const ALL: [MemoryType; 4] = [Self::User, Self::Feedback, Self::Project, Self::Reference];

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Feedback => "feedback",
            Self::Project => "project",
            Self::Reference => "reference",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == raw)
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One memory. Build it with [`MemoryRecord::new`], which checks every rule; the store checks
/// them again before writing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// A slug (`^[a-z0-9]+(-[a-z0-9]+)*$`, at most 64 bytes); also the file stem.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: MemoryType,
    /// One line, not blank, at most 200 characters: what selection sees of the record.
    pub description: String,
    /// At most 4096 bytes and 200 lines.
    pub body: String,
}

impl MemoryRecord {
    pub fn new(
        name: impl Into<String>,
        kind: MemoryType,
        description: impl Into<String>,
        body: impl Into<String>,
    ) -> Result<Self, MemoryError> {
        let record = Self {
            name: name.into(),
            kind,
            description: description.into(),
            body: body.into(),
        };
        record.validate()?;
        Ok(record)
    }

    /// Checks every rule of a record (the fields are public, so a record may have been built
    /// without [`MemoryRecord::new`]).
    pub fn validate(&self) -> Result<(), MemoryError> {
        check_name(&self.name)?;
        check_description(&self.description)?;
        check_body(&self.body)
    }

    /// The file's text.
    pub fn render(&self) -> String {
        format!(
            "{FENCE}\nname: {}\ntype: {}\ndescription: {}\n{FENCE}\n{}",
            self.name, self.kind, self.description, self.body
        )
    }

    /// Parses a record file's text whose file stem is `stem`: exactly the keys `name`, `type` and
    /// `description`, each once, `name` equal to the stem, and the rules of
    /// [`MemoryRecord::new`].
    pub fn parse(stem: &str, text: &str) -> Result<Self, String> {
        let rest = text
            .strip_prefix("---\n")
            .ok_or("the file does not start with a `---` line")?;
        let mut name = None;
        let mut kind = None;
        let mut description = None;
        let mut rest = rest;
        loop {
            let (line, after) = match rest.split_once('\n') {
                Some(split) => split,
                None => return Err("the front matter has no closing `---` line".to_owned()),
            };
            rest = after;
            if line == FENCE {
                break;
            }
            let (key, value) = line
                .split_once(": ")
                .ok_or_else(|| format!("front matter line {line:?} is not `key: value`"))?;
            let slot = match key {
                "name" => &mut name,
                "type" => &mut kind,
                "description" => &mut description,
                other => return Err(format!("unknown front matter key {other:?}")),
            };
            if slot.replace(value).is_some() {
                return Err(format!("front matter key {key:?} appears twice"));
            }
        }
        let name = name.ok_or("front matter key \"name\" is missing")?;
        let kind = kind.ok_or("front matter key \"type\" is missing")?;
        let description = description.ok_or("front matter key \"description\" is missing")?;
        let kind = MemoryType::parse(kind).ok_or_else(|| {
            format!("type {kind:?} is not one of user, feedback, project, reference")
        })?;
        if name != stem {
            return Err(format!(
                "name {name:?} differs from the file name {stem:?}{EXTENSION}"
            ));
        }
        Self::new(name, kind, description, rest).map_err(|e| e.to_string())
    }
}

/// Whether `name` is a valid record name (a slug of at most 64 bytes).
pub fn is_valid_name(name: &str) -> bool {
    check_name(name).is_ok()
}

fn check_name(name: &str) -> Result<(), MemoryError> {
    let slug = !name.is_empty()
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if !slug {
        return Err(invalid(format!(
            "name {name:?} is not a slug (lowercase letters and digits in words joined by `-`)"
        )));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "name is {} bytes, more than {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    Ok(())
}

fn check_description(description: &str) -> Result<(), MemoryError> {
    if description.trim().is_empty() {
        return Err(invalid("the description is blank".to_owned()));
    }
    if description.chars().any(char::is_control) {
        return Err(invalid(
            "the description must be one line without control characters".to_owned(),
        ));
    }
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(invalid(format!(
            "the description is {chars} characters, more than {MAX_DESCRIPTION_CHARS}"
        )));
    }
    Ok(())
}

fn check_body(body: &str) -> Result<(), MemoryError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(invalid(format!(
            "the body is {} bytes, more than {MAX_BODY_BYTES}",
            body.len()
        )));
    }
    let lines = body.lines().count();
    if lines > MAX_BODY_LINES {
        return Err(invalid(format!(
            "the body has {lines} lines, more than {MAX_BODY_LINES}"
        )));
    }
    Ok(())
}

fn invalid(reason: String) -> MemoryError {
    MemoryError::Invalid { reason }
}

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// A record (or a name) breaks a rule.
    #[error("invalid memory record: {reason}")]
    Invalid { reason: String },
    /// A record file on disk is not a valid record.
    #[error("memory file {file} is malformed: {reason}")]
    Malformed { file: String, reason: String },
    /// No record has this name.
    #[error("no memory record named {name:?}")]
    NotFound { name: String },
    /// Reading or writing the memory folder failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The shared team's database failed (its own stable code).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The model's answer to a memory query was not what was asked for; nothing was written.
    #[error("the model's {purpose} answer is invalid: {reason}")]
    Answer {
        purpose: &'static str,
        reason: String,
    },
    /// The model call of a memory query failed.
    #[error("the {purpose} model call failed: {message}")]
    Model {
        purpose: &'static str,
        message: String,
    },
}

impl ErrorCode for MemoryError {
    fn code(&self) -> &'static str {
        match self {
            Self::Invalid { .. } => "memory_invalid",
            Self::Malformed { .. } => "memory_malformed",
            Self::NotFound { .. } => "memory_not_found",
            Self::Io(_) => "memory_io",
            Self::Backend(e) => e.code(),
            Self::Answer { .. } => "memory_answer_invalid",
            Self::Model { .. } => "memory_model_failed",
        }
    }
}

/// A folder entry that is not a valid record, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryProblem {
    /// The entry's path.
    pub file: String,
    /// One line.
    pub reason: String,
}

/// What [`MemoryStore::list`] found: the valid records by name, and the entries that are not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryCatalog {
    pub records: Vec<MemoryRecord>,
    pub problems: Vec<MemoryProblem>,
}

/// Where a team's records are kept: the port under [`MemoryStore`], with two adapters —
/// [`FileMemory`], a workspace's folder, and the PostgreSQL one (`store/postgres/memory.rs`, a
/// row per record). The store checks every name and record before it calls the port; the
/// adapter keeps the same records, names and rules, and reports what it cannot read as a
/// problem beside the valid records. Every method is one atomic step.
#[async_trait::async_trait]
pub trait MemoryRecords: Send + Sync {
    /// Where the records are, for messages (a folder, `troupe_memory (team "default")`).
    fn place(&self) -> String;
    /// The valid records by name, and a problem for each entry that is not one.
    async fn list(&self) -> Result<MemoryCatalog, MemoryError>;
    /// The record `name` (a valid name), `None` if there is none.
    async fn get(&self, name: &str) -> Result<Option<MemoryRecord>, MemoryError>;
    /// Creates or replaces a (valid) record.
    async fn put(&self, record: &MemoryRecord) -> Result<(), MemoryError>;
    /// Removes the record `name` (a valid name); whether there was one.
    async fn forget(&self, name: &str) -> Result<bool, MemoryError>;
    /// Writes `into` (valid), then removes `removed` (valid names, `into`'s not among them):
    /// never a loss, at worst a duplicate.
    async fn merge(&self, into: &MemoryRecord, removed: &[String]) -> Result<(), MemoryError>;
}

/// The records of a team, on the adapter bootstrap chose — a workspace's folder
/// ([`MemoryStore::open`]) or a shared team's rows: the same records, names and rules.
/// Opening creates nothing; a folder appears at the first write.
#[derive(Clone)]
pub struct MemoryStore {
    records: Arc<dyn MemoryRecords>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("records", &self.records.place())
            .finish()
    }
}

/// A row of a team's records (a record rendered as its file would be) as a record, or why not
/// (named like a file would be: `<place> row "<name>"`).
pub fn record_of_row(place: &str, name: &str, text: &str) -> Result<MemoryRecord, MemoryProblem> {
    let file = format!("{place} row {name:?}");
    if !is_valid_name(name) {
        return Err(MemoryProblem {
            file,
            reason: "the name is not a valid memory name (a lowercase slug)".to_owned(),
        });
    }
    MemoryRecord::parse(name, text).map_err(|reason| MemoryProblem {
        file,
        reason: one_line(&reason),
    })
}

impl MemoryStore {
    /// The records of the workspace's `.troupe/memory/`.
    pub fn open(layout: &Layout) -> Self {
        Self::on(Arc::new(FileMemory::open(layout)))
    }

    /// The records `records` keeps.
    pub fn on(records: Arc<dyn MemoryRecords>) -> Self {
        Self { records }
    }

    /// Where the records are, for messages.
    pub fn place(&self) -> String {
        self.records.place()
    }

    /// Every record: valid records sorted by name, and a problem for each entry that cannot be
    /// read or parsed (a symlink, a FIFO, an oversized or malformed file or row). Nothing: an
    /// empty catalog.
    pub async fn list(&self) -> Result<MemoryCatalog, MemoryError> {
        self.records.list().await
    }

    /// The record named `name`, `None` if there is none. A name that is not a slug is refused
    /// before any path is built.
    pub async fn get(&self, name: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        check_name(name)?;
        self.records.get(name).await
    }

    /// Creates or replaces a record, atomically, under the memory lock.
    pub async fn put(&self, record: &MemoryRecord) -> Result<(), MemoryError> {
        record.validate()?;
        self.records.put(record).await
    }

    /// Removes a record; `false` if there was none. Creates nothing when the folder is missing.
    pub async fn forget(&self, name: &str) -> Result<bool, MemoryError> {
        check_name(name)?;
        self.records.forget(name).await
    }

    /// Replaces the records `merged_names` by `into`: `into` is written first, then the others
    /// are removed, all under one hold of the lock. A crash in between leaves a duplicate,
    /// never a loss. Every name is checked before anything is written.
    pub async fn apply_merge(
        &self,
        merged_names: &[String],
        into: &MemoryRecord,
    ) -> Result<(), MemoryError> {
        into.validate()?;
        let removed: Vec<String> = merged_names
            .iter()
            .filter(|name| **name != into.name)
            .cloned()
            .collect();
        for name in &removed {
            check_name(name)?;
        }
        self.records.merge(into, &removed).await
    }
}

/// A workspace's records: one file per record in `.troupe/memory/`, every change an atomic
/// replace under the memory lock.
#[derive(Debug, Clone)]
pub struct FileMemory {
    dir: PathBuf,
    lock: PathBuf,
}

impl FileMemory {
    pub fn open(layout: &Layout) -> Self {
        Self {
            dir: layout.memory_dir(),
            lock: layout.memory_lock(),
        }
    }

    /// The path of a record, once its name is known to be valid.
    fn path_of(&self, name: &str) -> Result<PathBuf, MemoryError> {
        check_name(name)?;
        Ok(self.dir.join(format!("{name}{EXTENSION}")))
    }

    fn list_files(&self, mut catalog: MemoryCatalog) -> Result<MemoryCatalog, MemoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(catalog),
            Err(e) => return Err(IoError::new("read folder", &self.dir, e).into()),
        };
        for entry in entries {
            let entry = entry.map_err(|e| IoError::new("read folder", &self.dir, e))?;
            let path = entry.path();
            let file_name = entry.file_name();
            let Some(file_name) = file_name.to_str() else {
                if file_name.as_encoded_bytes().ends_with(EXTENSION.as_bytes()) {
                    catalog
                        .problems
                        .push(problem(&path, "the file name is not UTF-8"));
                }
                continue;
            };
            if file_name.starts_with(durable::TEMP_PREFIX) {
                continue;
            }
            let Some(stem) = file_name.strip_suffix(EXTENSION) else {
                continue;
            };
            if !is_valid_name(stem) {
                catalog.problems.push(problem(
                    &path,
                    "the file name is not a valid memory name (a lowercase slug)",
                ));
                continue;
            }
            match self.read(stem, &path) {
                Ok(Some(record)) => catalog.records.push(record),
                // Removed while listing.
                Ok(None) => {}
                Err(reason) => catalog.problems.push(problem(&path, &reason)),
            }
        }
        catalog.records.sort_by(|a, b| a.name.cmp(&b.name));
        catalog.problems.sort_by(|a, b| a.file.cmp(&b.file));
        Ok(catalog)
    }

    fn get_file(&self, name: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        let path = self.path_of(name)?;
        let Some(bytes) = read_regular(&path, Links::Refuse, MAX_RECORD_FILE_BYTES)? else {
            return Ok(None);
        };
        parse_bytes(name, &bytes)
            .map(Some)
            .map_err(|reason| MemoryError::Malformed {
                file: path.display().to_string(),
                reason,
            })
    }

    fn write_locked(&self, record: &MemoryRecord) -> Result<(), MemoryError> {
        let path = self.path_of(&record.name)?;
        durable::replace(&path, record.render().as_bytes())?;
        Ok(())
    }

    /// Makes the folder (refusing a symlinked one) and takes the lock.
    fn lock(&self) -> Result<lock::LockGuard, MemoryError> {
        durable::ensure_real_dir(&self.dir)?;
        Ok(lock::lock_exclusive(&self.lock)?)
    }

    fn dir_exists(&self) -> Result<bool, MemoryError> {
        match std::fs::symlink_metadata(&self.dir) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(IoError::new("inspect folder", &self.dir, e).into()),
        }
    }

    fn read(&self, stem: &str, path: &Path) -> Result<Option<MemoryRecord>, String> {
        match read_regular(path, Links::Refuse, MAX_RECORD_FILE_BYTES) {
            Ok(Some(bytes)) => parse_bytes(stem, &bytes).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(one_line(&e.source.to_string())),
        }
    }
}

#[async_trait::async_trait]
impl MemoryRecords for FileMemory {
    fn place(&self) -> String {
        self.dir.display().to_string()
    }

    async fn list(&self) -> Result<MemoryCatalog, MemoryError> {
        // Reading the folder and its files: off the async threads.
        crate::sync::blocking(|| self.list_files(MemoryCatalog::default()))
    }

    async fn get(&self, name: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        crate::sync::blocking(|| self.get_file(name))
    }

    async fn put(&self, record: &MemoryRecord) -> Result<(), MemoryError> {
        crate::sync::blocking(|| {
            let _guard = self.lock()?;
            self.write_locked(record)
        })
    }

    async fn forget(&self, name: &str) -> Result<bool, MemoryError> {
        let path = self.path_of(name)?;
        crate::sync::blocking(|| {
            if !self.dir_exists()? {
                return Ok(false);
            }
            let _guard = self.lock()?;
            Ok(durable::remove(&path)?)
        })
    }

    async fn merge(&self, into: &MemoryRecord, removed: &[String]) -> Result<(), MemoryError> {
        let paths = removed
            .iter()
            .map(|name| self.path_of(name))
            .collect::<Result<BTreeSet<_>, _>>()?;
        crate::sync::blocking(|| {
            let _guard = self.lock()?;
            self.write_locked(into)?;
            for path in paths {
                durable::remove(&path)?;
            }
            Ok(())
        })
    }
}

fn parse_bytes(stem: &str, bytes: &[u8]) -> Result<MemoryRecord, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the file is not UTF-8".to_owned())?;
    MemoryRecord::parse(stem, text)
}

fn problem(path: &Path, reason: &str) -> MemoryProblem {
    MemoryProblem {
        file: path.display().to_string(),
        reason: one_line(reason),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
