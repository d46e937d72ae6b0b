//! The task board: tasks the lead (and later teammates) create, claim and complete, with
//! dependencies between them.
//!
//! A task is `pending` (unowned), `in_progress` (claimed by one agent, its owner) or `completed`
//! (by its owner). It may be blocked by other tasks: it is claimable only when every blocker is
//! completed. Claims are atomic across threads, board instances and processes: of two claimers,
//! exactly one becomes the owner and the other gets `task_claimed`.
//!
//! **Leases** (SPEC §12). A claim carries a token and a lease that runs out at a set time; its
//! holder renews it while it works ([`TaskBoard::renew`]). A lease that ran out makes the task
//! claimable again: [`TaskBoard::expire`] returns it to `pending` (recording who held it and
//! why it came back), and a claim of a task whose lease ran out does the same before claiming.
//! Completing needs the live claim — the owner, its token, before the lease runs out — so a
//! holder that stalled past its lease cannot complete a task someone else now works on: a task
//! is completed exactly once.
//!
//! **Fit.** A task may carry `tags` and an `assignee`. One with an assignee fits only that
//! agent (and only it may claim it); one with tags fits agents whose skills name one of them;
//! one with neither fits everyone ([`Task::fits`]).
//!
//! # Layout
//!
//! - this file: the vocabulary — [`TaskId`], [`TaskStatus`], [`Task`], [`NewTask`],
//!   [`TaskView`], [`TaskError`] — and the [`TaskBoard`] port.
//! - [`rules`]: the pure transitions (create, claim, complete) over a set of tasks. Both
//!   implementations below apply exactly these, so they cannot disagree.
//! - [`file`]: [`FileTaskBoard`], one JSON file per task under `.troupe/tasks/`.
//! - [`memory`]: [`MemoryTaskBoard`], for tests and embedding.
//! - `store::postgres::PgTaskBoard`: one row per task, a team's board shared by workers.
//!
//! **Architecture Invariant:** the dependency graph is acyclic. Blockers are fixed when a task
//! is created and must already exist, so creation alone cannot close a cycle; [`rules`] still
//! checks every graph it writes, and loading refuses a graph that has one (a hand-edited file).

pub mod file;
pub mod held;
pub mod memory;
pub mod retention;
pub mod rules;

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use troupe_wire::{AgentName, UtcTime};
use uuid::Uuid;

use super::IoError;
use crate::error::ErrorCode;

pub use file::FileTaskBoard;
pub use held::HeldClaims;
pub use memory::MemoryTaskBoard;

/// The most tasks one task may be blocked by (a model listing hundreds is a mistake).
pub const MAX_BLOCKERS: usize = 64;
/// The longest subject, in characters.
pub const MAX_SUBJECT_CHARS: usize = 200;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 20_000;
/// The most tags one task may carry.
pub const MAX_TAGS: usize = 16;
/// The longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 40;
/// How long a claim lasts unless renewed, when settings do not say (`[tasks] lease`).
pub const DEFAULT_LEASE: std::time::Duration = std::time::Duration::from_secs(300);
/// The shortest and longest lease settings accept.
pub const MIN_LEASE: std::time::Duration = std::time::Duration::from_secs(1);
pub const MAX_LEASE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The token of one claim: a fresh UUID per claim, so a later claim of the same task by the
/// same agent (after its lease ran out) is told apart from the stale one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClaimToken(pub(crate) TaskId);

impl ClaimToken {
    pub fn parse(raw: &str) -> Result<Self, TaskError> {
        TaskId::parse(raw).map(Self)
    }

    pub fn from_uuid(uuid: Uuid) -> Result<Self, TaskError> {
        TaskId::from_uuid(uuid).map(Self)
    }
}

impl fmt::Display for ClaimToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The live part of a claim: its token and when its lease runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    pub token: ClaimToken,
    pub expires_at_utc: UtcTime,
}

/// Why a task came back to `pending` the last time it did: who held it, when, and why (its
/// lease ran out; its holder let it go).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Returned {
    pub owner: AgentName,
    pub at_utc: UtcTime,
    pub reason: String,
}

/// A task's id: a canonical lowercase hyphenated UUID v4 or v7 (SPEC §2), like every troupe id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(Uuid);

impl TaskId {
    pub fn parse(raw: &str) -> Result<Self, TaskError> {
        troupe_wire::id::parse_canonical_uuid(raw, "task id")
            .map(Self)
            .map_err(|e| TaskError::Invalid(e.to_string()))
    }

    /// Wraps a generated UUID, refusing the versions troupe does not use.
    pub fn from_uuid(uuid: Uuid) -> Result<Self, TaskError> {
        Self::parse(&uuid.hyphenated().to_string())
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl Serialize for TaskId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        TaskId::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Completed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
        }
    }
}

/// One task, exactly as stored in `.troupe/tasks/<id>.json` (keys in this order, no others).
///
/// Invariants, checked by [`Task::check`] on every load: the subject is not blank;
/// `pending` ⇔ no owner; no task blocks itself or lists a blocker twice;
/// `created_at_utc ≤ updated_at_utc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub id: TaskId,
    pub subject: String,
    /// Empty when none was given.
    pub description: String,
    /// Tasks that must be completed before this one can be claimed. Fixed at creation.
    pub blocked_by: Vec<TaskId>,
    pub status: TaskStatus,
    /// The agent that claimed the task; `null` while it is pending. The key is required:
    /// serde would otherwise read a missing `owner` as `null`.
    #[serde(deserialize_with = "present")]
    pub owner: Option<AgentName>,
    /// Skills the task needs (`rust`, `docs`): it fits agents whose skills name one of them.
    /// Absent when empty (files from before tags read as none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The one agent the task is for: only it may claim it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<AgentName>,
    /// The live claim of an `in_progress` task. A task claimed before leases existed has none
    /// and never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// The last time the task came back to `pending`, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned: Option<Returned>,
    pub created_at_utc: UtcTime,
    pub updated_at_utc: UtcTime,
}

impl Task {
    /// Checks the invariants above; the error says which one broke.
    pub fn check(&self) -> Result<(), String> {
        if self.subject.trim().is_empty() {
            return Err("the subject is blank".to_owned());
        }
        match (self.status, &self.owner) {
            (TaskStatus::Pending, Some(owner)) => {
                return Err(format!("a pending task has an owner ({owner})"))
            }
            (TaskStatus::InProgress | TaskStatus::Completed, None) => {
                return Err(format!("a task {} has no owner", self.status.as_str()))
            }
            _ => {}
        }
        if self.blocked_by.contains(&self.id) {
            return Err("the task is blocked by itself".to_owned());
        }
        for (i, blocker) in self.blocked_by.iter().enumerate() {
            if self.blocked_by[..i].contains(blocker) {
                return Err(format!("blocker {blocker} is listed twice"));
            }
        }
        if self.updated_at_utc < self.created_at_utc {
            return Err("updated_at_utc is before created_at_utc".to_owned());
        }
        if self.lease.is_some() && self.status != TaskStatus::InProgress {
            return Err(format!("a task {} has a lease", self.status.as_str()));
        }
        for tag in &self.tags {
            check_tag(tag)?;
        }
        Ok(())
    }

    /// Whether `agent`, with `skills` (lowercase words of its role and definition), may take
    /// this task from the board: assigned to it, or unassigned with no tags or a tag it has.
    pub fn fits(&self, agent: &AgentName, skills: &[String]) -> bool {
        match &self.assignee {
            Some(assignee) => assignee == agent,
            None => self.tags.is_empty() || self.tags.iter().any(|t| skills.contains(t)),
        }
    }

    /// Whether the task's lease ran out by `now` (never for a task without one).
    pub fn lease_expired(&self, now: UtcTime) -> bool {
        self.status == TaskStatus::InProgress
            && self.lease.is_some_and(|lease| lease.expires_at_utc <= now)
    }
}

/// A tag is a lowercase word: letters, digits, `-`, `_`, `.`, `+`, `#`, 1–40 characters.
pub fn check_tag(tag: &str) -> Result<(), String> {
    let ok_char = |c: char| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.' | '+' | '#')
    };
    if tag.is_empty() || tag.chars().count() > MAX_TAG_CHARS || !tag.chars().all(ok_char) {
        return Err(format!(
            "tag {tag:?} is not a lowercase word of 1-{MAX_TAG_CHARS} characters (a-z, 0-9, - _ . + #)"
        ));
    }
    Ok(())
}

/// The skills an agent brings to the board: the lowercase words of its role (and of its
/// definition's name and description), as tags are written.
pub fn skills_of(texts: &[&str]) -> Vec<String> {
    let mut skills: Vec<String> = Vec::new();
    for text in texts {
        for word in text.to_lowercase().split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    ',' | ';' | ':' | '/' | '(' | ')' | '[' | ']' | '"' | '\''
                )
        }) {
            let word = word.trim_matches(|c: char| matches!(c, '.' | '!' | '?'));
            if check_tag(word).is_ok() && !skills.iter().any(|s| s == word) {
                skills.push(word.to_owned());
            }
        }
    }
    skills
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<AgentName>, D::Error> {
    Option::<AgentName>::deserialize(deserializer)
}

/// What `create_task` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewTask {
    pub subject: String,
    pub description: Option<String>,
    pub blocked_by: Vec<TaskId>,
    pub tags: Vec<String>,
    pub assignee: Option<AgentName>,
}

/// A task as shown to models and people: the stored task plus its blockers that are not
/// completed yet (empty when it can be claimed, or once it is claimed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskView {
    #[serde(flatten)]
    pub task: Task,
    pub open_blockers: Vec<TaskId>,
}

/// Views of `tasks` (which must hold every blocker of every task: a board's full listing).
pub fn views(tasks: &[Task]) -> Vec<TaskView> {
    let status_of = |id: &TaskId| tasks.iter().find(|t| t.id == *id).map(|t| t.status);
    tasks
        .iter()
        .map(|task| TaskView {
            open_blockers: task
                .blocked_by
                .iter()
                .filter(|b| status_of(b) != Some(TaskStatus::Completed))
                .copied()
                .collect(),
            task: task.clone(),
        })
        .collect()
}

/// Why a task operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("there is no task {0}")]
    NotFound(TaskId),
    #[error("blocked_by names task {0}, which does not exist")]
    UnknownBlocker(TaskId),
    #[error(
        "task {id} is blocked by tasks that are not completed yet: {}",
        list(open)
    )]
    Blocked { id: TaskId, open: Vec<TaskId> },
    #[error("task {id} is already claimed by {owner}{hint}")]
    Claimed {
        id: TaskId,
        owner: AgentName,
        hint: &'static str,
    },
    #[error("task {id} is {}: {message}", status.as_str())]
    State {
        id: TaskId,
        status: TaskStatus,
        message: String,
    },
    /// The caller's claim is not live: its lease ran out, or the task was claimed again since.
    #[error("your claim on task {id} is no longer live: {message}")]
    LeaseLost { id: TaskId, message: String },
    #[error("{0}")]
    Invalid(String),
    /// The id generator produced an id the board already holds; nothing was written.
    #[error("the id generator produced task id {0}, which is already taken")]
    IdTaken(TaskId),
    #[error("the task board is corrupt: {path}: {reason}")]
    Corrupt { path: String, reason: String },
    #[error(transparent)]
    Io(#[from] IoError),
    /// The database backend failed (its own stable code).
    #[error(transparent)]
    Backend(#[from] super::BackendError),
}

fn list(ids: &[TaskId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl ErrorCode for TaskError {
    fn code(&self) -> &'static str {
        match self {
            TaskError::NotFound(_) | TaskError::UnknownBlocker(_) => "task_not_found",
            TaskError::Blocked { .. } => "task_blocked",
            TaskError::Claimed { .. } => "task_claimed",
            TaskError::State { .. } => "task_state",
            TaskError::LeaseLost { .. } => "task_lease_lost",
            TaskError::Invalid(_) => "invalid_arguments",
            TaskError::Corrupt { .. } => "task_store_corrupt",
            TaskError::IdTaken(_) | TaskError::Io(_) => "storage_error",
            TaskError::Backend(e) => e.code(),
        }
    }
}

/// The task board port. Every method is one atomic step: a caller never sees half of a
/// transition, and two concurrent transitions of one task never both succeed.
///
/// Methods are async: the file board runs its locked disk work off the async worker threads
/// (`sync::blocking`), the PostgreSQL board awaits its pool.
#[async_trait::async_trait]
pub trait TaskBoard: Send + Sync {
    /// Registers a pending, unowned task. Refuses a blank subject, unknown or repeated blockers,
    /// and any dependency cycle.
    async fn create(&self, new: NewTask) -> Result<Task, TaskError>;

    async fn get(&self, id: &TaskId) -> Result<Task, TaskError>;

    /// Every task, by creation time then id.
    async fn list(&self) -> Result<Vec<Task>, TaskError>;

    /// Makes `agent` the owner of a pending task whose blockers are all completed (or of an
    /// in-progress one whose lease ran out: it is returned first), with a fresh token and a
    /// lease of the board's length. A task assigned to another agent is refused.
    async fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError>;

    /// Extends the live claim `token` of `agent` by the board's lease length. A claim that is
    /// no longer live is `task_lease_lost`.
    async fn renew(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError>;

    /// Completes an in-progress task: only its owner may, with its live claim.
    async fn complete(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError>;

    /// Returns an in-progress task whose lease ran out to `pending`, recording why. A task
    /// whose lease is live (or that is not in progress) is refused `task_state`.
    async fn expire(&self, id: &TaskId) -> Result<Task, TaskError>;

    /// `agent` gives its live claim back (it stops, fails or closes): the task returns to
    /// `pending` with `reason`.
    async fn release(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
        reason: &str,
    ) -> Result<Task, TaskError>;
}
