//! [`HeldClaims`]: the claims this process holds on a board, with their tokens.
//!
//! A claim's token is the proof of a live claim (SPEC §12): it stays in the process that made
//! the claim, never in a tool argument. `claim_task`, `complete_task` and a teammate's
//! work-stealing go through here, so completing uses the token the same process got when it
//! claimed; the lease keeper renews every held claim while the process lives, and the team
//! releases them when it closes. A process that dies holds nothing: its leases run out and the
//! tasks come back to the board.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use troupe_wire::AgentName;

use super::{ClaimToken, Task, TaskBoard, TaskError, TaskId, TaskStatus};
use crate::sync::lock;

pub struct HeldClaims {
    board: Arc<dyn TaskBoard>,
    /// The token of each claim made here and not yet completed or released.
    held: Mutex<BTreeMap<(AgentName, TaskId), ClaimToken>>,
    /// Signalled when a claim is added, so a keeper waiting with nothing to renew wakes.
    added: tokio::sync::Notify,
}

impl HeldClaims {
    pub fn new(board: Arc<dyn TaskBoard>) -> Self {
        Self {
            board,
            held: Mutex::new(BTreeMap::new()),
            added: tokio::sync::Notify::new(),
        }
    }

    pub fn board(&self) -> &Arc<dyn TaskBoard> {
        &self.board
    }

    /// Claims `id` for `agent` and keeps the token.
    pub async fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let task = self.board.claim(id, agent).await?;
        if let Some(lease) = &task.lease {
            lock(&self.held).insert((agent.clone(), *id), lease.token);
            self.added.notify_one();
        }
        Ok(task)
    }

    /// Completes `id` with the claim `agent` holds here. A claim this process does not hold
    /// (made by an earlier run, or already given back) is `task_lease_lost`, unless the task
    /// was claimed before leases existed.
    pub async fn complete(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let token = self.token_for(id, agent).await?;
        let result = self.board.complete(id, agent, &token).await;
        if !matches!(&result, Err(e) if is_transient(e)) {
            lock(&self.held).remove(&(agent.clone(), *id));
        }
        result
    }

    /// Gives back `agent`'s claim on `id` (the task returns to `pending` with `reason`).
    pub async fn release(
        &self,
        id: &TaskId,
        agent: &AgentName,
        reason: &str,
    ) -> Result<Task, TaskError> {
        let token = self.token_for(id, agent).await?;
        let result = self.board.release(id, agent, &token, reason).await;
        if !matches!(&result, Err(e) if is_transient(e)) {
            lock(&self.held).remove(&(agent.clone(), *id));
        }
        result
    }

    /// Gives back every claim held here by `agent` (every agent's with `None`); what could not
    /// be given back is logged (its lease runs out instead).
    pub async fn release_all(&self, agent: Option<&AgentName>, reason: &str) -> Vec<Task> {
        let held: Vec<(AgentName, TaskId)> = lock(&self.held)
            .keys()
            .filter(|(holder, _)| agent.is_none_or(|a| a == holder))
            .cloned()
            .collect();
        let mut released = Vec::new();
        for (holder, id) in held {
            match self.release(&id, &holder, reason).await {
                Ok(task) => released.push(task),
                Err(e) => tracing::warn!(
                    "could not give back {holder}'s claim on task {id} ({e}); its lease will run out"
                ),
            }
        }
        released
    }

    /// Renews every claim held here. A claim that is no longer live is dropped and returned
    /// with the reason; one that could not be renewed for another reason (storage) is kept and
    /// tried again next time.
    pub async fn renew_all(&self) -> Vec<(AgentName, TaskId, TaskError)> {
        let held: Vec<((AgentName, TaskId), ClaimToken)> = lock(&self.held)
            .iter()
            .map(|(key, token)| (key.clone(), *token))
            .collect();
        let mut lost = Vec::new();
        for ((agent, id), token) in held {
            match self.board.renew(&id, &agent, &token).await {
                Ok(_) => {}
                Err(e) if is_transient(&e) => {
                    tracing::warn!("could not renew {agent}'s claim on task {id}: {e}")
                }
                Err(e) => {
                    lock(&self.held).remove(&(agent.clone(), id));
                    lost.push((agent, id, e));
                }
            }
        }
        lost
    }

    /// Whether any claim is held here.
    pub fn is_empty(&self) -> bool {
        lock(&self.held).is_empty()
    }

    /// Whether `agent`'s claim on `id` is held here.
    pub fn holds(&self, agent: &AgentName, id: &TaskId) -> bool {
        lock(&self.held).contains_key(&(agent.clone(), *id))
    }

    /// The tasks `agent` holds here.
    pub fn held_by(&self, agent: &AgentName) -> Vec<TaskId> {
        lock(&self.held)
            .keys()
            .filter(|(holder, _)| holder == agent)
            .map(|(_, id)| *id)
            .collect()
    }

    /// Resolves once a claim is added (or at once if one was added since the last call).
    pub async fn added(&self) {
        self.added.notified().await;
    }

    /// The token `agent` holds for `id` here, or why it cannot act on the claim.
    async fn token_for(&self, id: &TaskId, agent: &AgentName) -> Result<ClaimToken, TaskError> {
        if let Some(token) = lock(&self.held).get(&(agent.clone(), *id)) {
            return Ok(*token);
        }
        let task = self.board.get(id).await?;
        match (&task.lease, task.status, &task.owner) {
            // Claimed before leases existed: its owner completes it without a token.
            (None, TaskStatus::InProgress, Some(owner)) if owner == agent => {
                Ok(ClaimToken(task.id))
            }
            (Some(lease), TaskStatus::InProgress, Some(owner)) if owner == agent => {
                Err(TaskError::LeaseLost {
                    id: *id,
                    message: format!(
                        "this run holds no claim on it (an earlier run of {agent} claimed it); \
                         it comes back to the board when its lease runs out at {}",
                        lease.expires_at_utc
                    ),
                })
            }
            // Not the caller's: the board's own refusal says why.
            _ => Ok(ClaimToken(task.id)),
        }
    }
}

/// A failure that says nothing about the claim (storage, database): the claim is kept.
fn is_transient(error: &TaskError) -> bool {
    matches!(error, TaskError::Io(_) | TaskError::Backend(_))
}
