//! The task board: tasks the lead (and later teammates) create, claim and complete, with
//! dependencies between them.
//!
//! A task is `pending` (unowned), `in_progress` (claimed by one agent, its owner) or `completed`
//! (by its owner). It may be blocked by other tasks: it is claimable only when every blocker is
//! completed. Claims are atomic across threads, board instances and processes: of two claimers,
//! exactly one becomes the owner and the other gets `task_claimed`.
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
pub mod memory;
pub mod rules;

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use troupe_wire::{AgentName, UtcTime};
use uuid::Uuid;

use super::IoError;
use crate::error::ErrorCode;

pub use file::FileTaskBoard;
pub use memory::MemoryTaskBoard;

/// The most tasks one task may be blocked by (a model listing hundreds is a mistake).
pub const MAX_BLOCKERS: usize = 64;
/// The longest subject, in characters.
pub const MAX_SUBJECT_CHARS: usize = 200;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 20_000;

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
        Ok(())
    }
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
/// Methods block (file locks); async callers run them on a blocking thread.
pub trait TaskBoard: Send + Sync {
    /// Registers a pending, unowned task. Refuses a blank subject, unknown or repeated blockers,
    /// and any dependency cycle.
    fn create(&self, new: NewTask) -> Result<Task, TaskError>;

    fn get(&self, id: &TaskId) -> Result<Task, TaskError>;

    /// Every task, by creation time then id.
    fn list(&self) -> Result<Vec<Task>, TaskError>;

    /// Makes `agent` the owner of a pending, unowned task whose blockers are all completed.
    fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError>;

    /// Completes an in-progress task; only its owner may.
    fn complete(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError>;
}
