//! [`FileTaskBoard`]: the task board as one JSON file per task.
//!
//! # On disk
//!
//! ```text
//! .troupe/tasks/
//!   <task-id>.json   one task (the keys of `Task`, pretty-printed), replaced atomically
//!   .tasks.lock      the cross-process lock every change holds
//! ```
//!
//! Every change (create, claim, complete) is a read-modify-write under `.tasks.lock`: load
//! every task, apply the pure rule, write the one file that changed (`durable::create_new` for a
//! new task, `durable::replace` otherwise). The lock is a `flock` on a fresh open file each
//! time, so it excludes other threads of this process as well as other processes: of two
//! claimers, the second loads the first one's claim and is refused. Reads (`get`, `list`) take no
//! lock: each file changes by one atomic rename, and a change writes one file only, so a reader
//! always sees whole tasks. That also lets `troupe tasks` inspect a board without writing.
//!
//! Why files and not an embedded database: boards are small (tens of tasks), the files are
//! greppable and hand-fixable, the durable-write and lock primitives already exist, and a
//! database crate would cost build time on the 2-core build machines.
//!
//! A file that does not parse, breaks a `Task` invariant, is named for another id, or a board
//! whose blockers are missing or form a cycle, is reported as `task_store_corrupt` naming the
//! file, never repaired or skipped: a skipped blocker would silently unblock its dependants.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use troupe_wire::{strict, AgentName};

use std::time::Duration;

use super::retention::finished_to_remove;
use super::rules::{self, Tasks};
use super::{ClaimToken, NewTask, Task, TaskBoard, TaskError, TaskId, DEFAULT_LEASE};
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::layout::Layout;
use crate::store::read::{read_regular, Links};
use crate::store::retention::{Kind, Report, Sweep};
use crate::store::{durable, lock, IoError};

/// A task file larger than this is refused as corrupt rather than read into memory.
const MAX_TASK_FILE_BYTES: u64 = 1 << 20;

pub struct FileTaskBoard {
    /// `.troupe/tasks`; created by the first change, so inspection never creates it.
    dir: PathBuf,
    lock: PathBuf,
    /// Creation and update times.
    clock: Arc<dyn Clock>,
    /// Task ids and claim tokens; canonical v4/v7 UUIDs.
    ids: Arc<dyn IdGenerator>,
    /// How long a claim lasts unless renewed.
    lease: Duration,
}

impl FileTaskBoard {
    /// A board over `layout`'s `.troupe/tasks/`. Touches nothing on disk.
    pub fn new(layout: &Layout, clock: Arc<dyn Clock>, ids: Arc<dyn IdGenerator>) -> Self {
        Self {
            dir: layout.tasks_dir(),
            lock: layout.tasks_lock(),
            clock,
            ids,
            lease: DEFAULT_LEASE,
        }
    }

    /// Claims last `lease` unless renewed.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, id: &TaskId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Runs one change under the lock: `change` gets every task and returns the task to write.
    fn change(
        &self,
        change: impl FnOnce(&Tasks) -> Result<Task, TaskError>,
        is_new: bool,
    ) -> Result<Task, TaskError> {
        durable::ensure_real_dir(&self.dir)?;
        let _guard = lock::lock_exclusive(&self.lock)?;
        let tasks = self.load_all()?;
        let task = change(&tasks)?;
        let bytes = task_bytes(&task)?;
        let path = self.path_of(&task.id);
        if is_new {
            durable::create_new(&path, &bytes).map_err(|e| {
                if e.source.kind() == std::io::ErrorKind::AlreadyExists {
                    TaskError::IdTaken(task.id)
                } else {
                    TaskError::Io(e)
                }
            })?;
        } else {
            durable::replace(&path, &bytes)?;
        }
        Ok(task)
    }

    fn load_all(&self) -> Result<Tasks, TaskError> {
        load_dir(&self.dir)
    }
}

/// Removes the finished tasks `sweep` lets go ([`super::retention`]) from `layout`'s board,
/// under the board's lock: no change can name one as a blocker while it goes, and what stays
/// still loads. A board that does not load (`task_store_corrupt`) is left whole. With
/// `sweep.dry_run` nothing is locked or removed.
pub fn prune(layout: &Layout, sweep: &Sweep, report: &mut Report) -> Result<(), TaskError> {
    let dir = layout.tasks_dir();
    if !dir.is_dir() {
        return Ok(());
    }
    let _guard = if sweep.dry_run {
        None
    } else {
        Some(lock::lock_exclusive(&layout.tasks_lock())?)
    };
    let tasks = load_dir(&dir)?;
    let size = |task: &Task| task_bytes(task).map_or(0, |b| b.len() as u64);
    let gone = finished_to_remove(&tasks, size, sweep, report);
    if !sweep.dry_run && !gone.is_empty() {
        let names: Vec<std::ffi::OsString> = gone
            .iter()
            .map(|(id, _)| format!("{id}.json").into())
            .collect();
        durable::remove_in(&dir, &names)?;
    }
    for (_, bytes) in gone {
        report.removed(Kind::Tasks, bytes);
    }
    Ok(())
}

/// Every task in `dir`, checked one by one and as a graph. A missing folder is an empty board.
fn load_dir(dir: &Path) -> Result<Tasks, TaskError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tasks::new()),
        Err(e) => return Err(IoError::new("list", dir, e).into()),
    };
    let mut tasks = Tasks::new();
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // The lock file and durable temp files start with a dot; other names are not ours.
        if name.starts_with(durable::TEMP_PREFIX) {
            continue;
        }
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        let path = entry.path();
        let id = TaskId::parse(stem).map_err(|_| TaskError::Corrupt {
            path: path.display().to_string(),
            reason: "the file name is not a task id".to_owned(),
        })?;
        let task = read_task(&path, &id)?.ok_or_else(|| TaskError::Corrupt {
            path: path.display().to_string(),
            reason: "the file vanished while the board was read".to_owned(),
        })?;
        tasks.insert(id, task);
    }
    rules::check_graph(&tasks).map_err(|reason| TaskError::Corrupt {
        path: dir.display().to_string(),
        reason,
    })?;
    Ok(tasks)
}

/// Reads and checks one task file; `None` when it does not exist.
fn read_task(path: &Path, id: &TaskId) -> Result<Option<Task>, TaskError> {
    let corrupt = |reason: String| TaskError::Corrupt {
        path: path.display().to_string(),
        reason,
    };
    // One open that neither follows a symlink nor blocks on a FIFO, then the type and size of
    // what was opened: no window for the file to be swapped between a check and the read.
    let read = read_regular(path, Links::Refuse, MAX_TASK_FILE_BYTES).map_err(|e| {
        match e.source.kind() {
            // Not a regular file, or too large: the file is wrong, not the storage.
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
                corrupt(e.source.to_string())
            }
            _ => e.into(),
        }
    })?;
    let Some(bytes) = read else {
        return Ok(None);
    };
    let task: Task = strict::from_json_bytes(&bytes, "").map_err(|e| corrupt(e.to_string()))?;
    if task.id != *id {
        return Err(corrupt(format!("it holds task {}", task.id)));
    }
    task.check().map_err(corrupt)?;
    Ok(Some(task))
}

fn task_bytes(task: &Task) -> Result<Vec<u8>, TaskError> {
    let mut bytes = serde_json::to_vec_pretty(task)
        .map_err(|e| TaskError::Invalid(format!("cannot encode task {}: {e}", task.id)))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// By creation time, then id: the order tasks were created in, as far as the clock can tell.
pub(crate) fn sorted(tasks: impl IntoIterator<Item = Task>) -> Vec<Task> {
    let mut tasks: Vec<Task> = tasks.into_iter().collect();
    tasks.sort_by_key(|t| (t.created_at_utc, t.id));
    tasks
}

/// The board's steps, synchronous: each takes the lock and touches the disk.
impl FileTaskBoard {
    fn create_now(&self, new: NewTask) -> Result<Task, TaskError> {
        let id = TaskId::from_uuid(self.ids.next_uuid())?;
        let now = self.clock.now();
        self.change(|tasks| rules::create(tasks, id, new, now), true)
    }

    fn get_now(&self, id: &TaskId) -> Result<Task, TaskError> {
        read_task(&self.path_of(id), id)?.ok_or(TaskError::NotFound(*id))
    }

    fn list_now(&self) -> Result<Vec<Task>, TaskError> {
        Ok(sorted(self.load_all()?.into_values()))
    }

    fn claim_now(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let token = ClaimToken::from_uuid(self.ids.next_uuid())?;
        let now = self.clock.now();
        self.change(
            |tasks| rules::claim(tasks, id, agent, now, token, self.lease),
            false,
        )
    }

    fn renew_now(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(
            |tasks| rules::renew(tasks, id, agent, token, now, self.lease),
            false,
        )
    }

    fn complete_now(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(|tasks| rules::complete(tasks, id, agent, token, now), false)
    }

    fn expire_now(&self, id: &TaskId) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(|tasks| rules::expire(tasks, id, now), false)
    }

    fn release_now(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
        reason: &str,
    ) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(
            |tasks| rules::release(tasks, id, agent, token, now, reason),
            false,
        )
    }
}

/// Every step runs its locked disk work off the async worker threads.
#[async_trait::async_trait]
impl TaskBoard for FileTaskBoard {
    async fn create(&self, new: NewTask) -> Result<Task, TaskError> {
        crate::sync::blocking(|| self.create_now(new))
    }

    async fn get(&self, id: &TaskId) -> Result<Task, TaskError> {
        crate::sync::blocking(|| self.get_now(id))
    }

    async fn list(&self) -> Result<Vec<Task>, TaskError> {
        crate::sync::blocking(|| self.list_now())
    }

    async fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        crate::sync::blocking(|| self.claim_now(id, agent))
    }

    async fn renew(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        crate::sync::blocking(|| self.renew_now(id, agent, token))
    }

    async fn complete(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        crate::sync::blocking(|| self.complete_now(id, agent, token))
    }

    async fn expire(&self, id: &TaskId) -> Result<Task, TaskError> {
        crate::sync::blocking(|| self.expire_now(id))
    }

    async fn release(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
        reason: &str,
    ) -> Result<Task, TaskError> {
        crate::sync::blocking(|| self.release_now(id, agent, token, reason))
    }
}
