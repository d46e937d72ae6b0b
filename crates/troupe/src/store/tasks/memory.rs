//! [`MemoryTaskBoard`]: the task board in memory, for tests and embedders that need no
//! durability. Same rules as the file board; a mutex makes each change atomic.

use std::sync::{Arc, Mutex, MutexGuard};

use troupe_wire::AgentName;

use super::file::sorted;
use super::rules::{self, Tasks};
use super::{NewTask, Task, TaskBoard, TaskError, TaskId};
use crate::clock::Clock;
use crate::ids::IdGenerator;

pub struct MemoryTaskBoard {
    tasks: Mutex<Tasks>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
}

impl MemoryTaskBoard {
    pub fn new(clock: Arc<dyn Clock>, ids: Arc<dyn IdGenerator>) -> Self {
        Self {
            tasks: Mutex::new(Tasks::new()),
            clock,
            ids,
        }
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

impl TaskBoard for MemoryTaskBoard {
    fn create(&self, new: NewTask) -> Result<Task, TaskError> {
        let id = TaskId::from_uuid(self.ids.next_uuid())?;
        let mut tasks = self.tasks();
        let task = rules::create(&tasks, id, new, self.clock.now());
        self.apply(task, &mut tasks)
    }

    fn get(&self, id: &TaskId) -> Result<Task, TaskError> {
        self.tasks()
            .get(id)
            .cloned()
            .ok_or(TaskError::NotFound(*id))
    }

    fn list(&self) -> Result<Vec<Task>, TaskError> {
        Ok(sorted(self.tasks().values().cloned()))
    }

    fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let mut tasks = self.tasks();
        let task = rules::claim(&tasks, id, agent, self.clock.now());
        self.apply(task, &mut tasks)
    }

    fn complete(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let mut tasks = self.tasks();
        let task = rules::complete(&tasks, id, agent, self.clock.now());
        self.apply(task, &mut tasks)
    }
}
