//! [`ObservedBoard`]: the task board port, reporting each transition to the event stream and to
//! one listener (the team, which wakes the teammates a change concerns).
//!
//! Like the observed mailbox, it is a decorator around any board, so every path that changes a
//! task — the lead's and teammates' tools, a teammate pulling work, the lease keeper — is seen
//! without each of them remembering to say so. Only what succeeded is reported, after it
//! happened. Renewals are not events (they happen every third of a lease).

use std::sync::{Arc, OnceLock};

use serde_json::json;
use troupe_wire::AgentName;

use super::kinds::{self, compact};
use super::EventSink;
use crate::store::tasks::{ClaimToken, NewTask, Task, TaskBoard, TaskError, TaskId};

/// Called after a change that may give someone work: a task created, completed, released or
/// returned; the change returns once what it returns is done (the team woke whom it concerns).
pub type BoardListener =
    Box<dyn Fn() -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

pub struct ObservedBoard {
    inner: Arc<dyn TaskBoard>,
    events: Arc<dyn EventSink>,
    /// Set once the team exists (it is built after its stores).
    listener: OnceLock<BoardListener>,
}

impl ObservedBoard {
    pub fn new(inner: Arc<dyn TaskBoard>, events: Arc<dyn EventSink>) -> Self {
        Self {
            inner,
            events,
            listener: OnceLock::new(),
        }
    }

    /// Sets the listener; once (later calls are ignored).
    pub fn on_change(&self, listener: BoardListener) {
        let _ = self.listener.set(listener);
    }

    async fn changed(&self) {
        if let Some(listener) = self.listener.get() {
            listener().await;
        }
    }

    fn emit(&self, agent: &str, kind: &'static str, task: &Task, extra: serde_json::Value) {
        let mut fields = compact(json!({
            "task_id": task.id,
            "subject": kinds::preview(&task.subject),
            "status": task.status.as_str(),
            "owner": task.owner,
        }));
        fields.extend(compact(extra));
        self.events.emit(agent, kind, fields);
    }

    /// Reports a task that came back to the board (its lease ran out, or it was given back).
    fn returned(&self, kind: &'static str, task: &Task) {
        if let Some(returned) = &task.returned {
            self.emit(
                returned.owner.as_str(),
                kind,
                task,
                json!({"previous_owner": returned.owner, "reason": returned.reason}),
            );
        }
    }
}

#[async_trait::async_trait]
impl TaskBoard for ObservedBoard {
    async fn create(&self, new: NewTask) -> Result<Task, TaskError> {
        let task = self.inner.create(new).await?;
        let tags = (!task.tags.is_empty()).then(|| task.tags.clone());
        self.emit(
            "lead",
            kinds::TASK_CREATED,
            &task,
            json!({"tags": tags, "assignee": task.assignee, "blocked_by": task.blocked_by}),
        );
        self.changed().await;
        Ok(task)
    }

    async fn get(&self, id: &TaskId) -> Result<Task, TaskError> {
        self.inner.get(id).await
    }

    async fn list(&self) -> Result<Vec<Task>, TaskError> {
        self.inner.list().await
    }

    async fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let task = self.inner.claim(id, agent).await?;
        // A claim of a task whose lease ran out returned it first, in the same step.
        if task
            .returned
            .as_ref()
            .is_some_and(|r| r.at_utc == task.updated_at_utc)
        {
            self.returned(kinds::TASK_LEASE_EXPIRED, &task);
        }
        self.emit(
            agent.as_str(),
            kinds::TASK_CLAIMED,
            &task,
            json!({"lease_expires_at": task.lease.map(|l| l.expires_at_utc)}),
        );
        Ok(task)
    }

    async fn renew(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        self.inner.renew(id, agent, token).await
    }

    async fn complete(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        let task = self.inner.complete(id, agent, token).await?;
        self.emit(agent.as_str(), kinds::TASK_COMPLETED, &task, json!({}));
        self.changed().await;
        Ok(task)
    }

    async fn expire(&self, id: &TaskId) -> Result<Task, TaskError> {
        let task = self.inner.expire(id).await?;
        self.returned(kinds::TASK_LEASE_EXPIRED, &task);
        self.changed().await;
        Ok(task)
    }

    async fn release(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
        reason: &str,
    ) -> Result<Task, TaskError> {
        let task = self.inner.release(id, agent, token, reason).await?;
        self.returned(kinds::TASK_RELEASED, &task);
        self.changed().await;
        Ok(task)
    }
}
