//! [`MemoryTaskBoard`]: the task board in memory, for tests and embedders that need no
//! durability. Same rules as the file board; a mutex makes each change atomic.

use std::sync::{Arc, Mutex, MutexGuard};

use troupe_wire::AgentName;

use super::file::sorted;
use std::time::Duration;

use super::rules::{self, Tasks};
use super::{ClaimToken, NewTask, Task, TaskBoard, TaskError, TaskId, DEFAULT_LEASE};
use crate::clock::Clock;
use crate::ids::IdGenerator;

pub struct MemoryTaskBoard {
    tasks: Mutex<Tasks>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    lease: Duration,
}

impl MemoryTaskBoard {
    pub fn new(clock: Arc<dyn Clock>, ids: Arc<dyn IdGenerator>) -> Self {
        Self {
            tasks: Mutex::new(Tasks::new()),
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

    /// Applies `rule` to the board and stores the task it returns.
    fn change(
        &self,
        rule: impl FnOnce(&Tasks, troupe_wire::UtcTime) -> Result<Task, TaskError>,
    ) -> Result<Task, TaskError> {
        let mut tasks = self.tasks();
        let task = rule(&tasks, self.clock.now());
        self.apply(task, &mut tasks)
    }

    fn tasks(&self) -> MutexGuard<'_, Tasks> {
        // A panic elsewhere cannot leave a half-applied change: changes are one insert.
        crate::sync::lock(&self.tasks)
    }

    fn apply(&self, task: Result<Task, TaskError>, tasks: &mut Tasks) -> Result<Task, TaskError> {
        let task = task?;
        tasks.insert(task.id, task.clone());
        Ok(task)
    }
}

#[async_trait::async_trait]
impl TaskBoard for MemoryTaskBoard {
    async fn create(&self, new: NewTask) -> Result<Task, TaskError> {
        let id = TaskId::from_uuid(self.ids.next_uuid())?;
        self.change(|tasks, now| rules::create(tasks, id, new, now))
    }

    async fn get(&self, id: &TaskId) -> Result<Task, TaskError> {
        self.tasks()
            .get(id)
            .cloned()
            .ok_or(TaskError::NotFound(*id))
    }

    async fn list(&self) -> Result<Vec<Task>, TaskError> {
        Ok(sorted(self.tasks().values().cloned()))
    }

    async fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let token = ClaimToken::from_uuid(self.ids.next_uuid())?;
        self.change(|tasks, now| rules::claim(tasks, id, agent, now, token, self.lease))
    }

    async fn renew(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        self.change(|tasks, now| rules::renew(tasks, id, agent, token, now, self.lease))
    }

    async fn complete(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        self.change(|tasks, now| rules::complete(tasks, id, agent, token, now))
    }

    async fn expire(&self, id: &TaskId) -> Result<Task, TaskError> {
        self.change(|tasks, now| rules::expire(tasks, id, now))
    }

    async fn release(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
        reason: &str,
    ) -> Result<Task, TaskError> {
        self.change(|tasks, now| rules::release(tasks, id, agent, token, now, reason))
    }
}
