//! A teammate's loop (SPEC §4.4, §6), and everything it does to the team, in one file: the
//! loop claims one message at a time and handles it; [`TeammateLoop`]'s methods are the team's
//! side of it (its ports, its status, the board, its worktree, its lease).
//!
//! - protocol messages are routed **before** any model call: a valid shutdown request makes the
//!   teammate mark itself `shutdown`, then answer, and stop without calling the model; a plan
//!   response is consumed in the protocol store before the same runner continues with a
//!   deterministic prompt;
//! - ordinary messages go through the model; the final answer returns to the lead as `result`,
//!   then the message is acked;
//! - a message that is invalid (wrong id, kind, parties, expired, duplicate) is quarantined and
//!   the loop continues; any other failure (storage, delivery, model, cancellation) releases
//!   the message back to `ready/` and — except for cancellation — marks the teammate `failed`.
//!
//! - with nothing in its mailbox, it takes the next task that fits it from the task board
//!   ([`TeammateLoop::next_task`], SPEC §12) and works on it as its next message: the answer
//!   completes the task and goes to the lead as a result; a failure or a close gives the task
//!   back to the board.
//!
//! Words: a *loop* is this task of one teammate, in one process; a *worker* is a `troupe worker`
//! process of a shared team, which runs the loops of the teammates it holds the lease of.

use std::sync::Arc;

use troupe_wire::{
    AgentName, Isolation, MailboxMessage, OrdinaryKind, ProtocolMessage, ProtocolMessageKind,
    RequestKind, TeammateStatus,
};

use tokio_util::sync::CancellationToken;
use troupe_wire::MessageId;

use crate::team::board_work;
use crate::team::error::TeamError;
use crate::team::observer::{TeamObserver, TeamUpdate};
use crate::team::postman::Postman;
use crate::team::protocol::{classify, quarantine_and_report, ProtocolRuntime, Triage};

use super::loops::SharedRunner;
use super::TeamInner;
use crate::agent::{Runner, TurnEnd};
use crate::store::mailbox::MailboxStore;
use crate::store::protocol::ProtocolError;
use crate::store::tasks::{Task, TaskError};
use crate::sync::offload;
use crate::worktree::Worktrees;

/// A teammate's loop: its name and the team it works in. Its methods are everything the loop
/// does to the team: use its ports, report its status, take and finish tasks, end.
pub(super) struct TeammateLoop {
    pub(super) team: Arc<TeamInner>,
    pub(super) name: AgentName,
}

impl TeammateLoop {
    pub(super) fn name(&self) -> &AgentName {
        &self.name
    }

    pub(super) fn postman(&self) -> &Postman {
        &self.team.postman
    }

    pub(super) fn protocol(&self) -> &ProtocolRuntime {
        &self.team.protocol
    }

    pub(super) fn observer(&self) -> &dyn TeamObserver {
        self.team.observer.as_ref()
    }

    pub(super) fn closing(&self) -> &CancellationToken {
        &self.team.closing
    }

    pub(super) async fn set_status(&self, status: TeammateStatus) {
        self.team.set_status(&self.name, status, None).await;
    }

    pub(super) async fn end(&self, status: TeammateStatus, detail: Option<String>) {
        // A teammate that stops for good gives back what it claimed with `claim_task`.
        if let (Some(work), TeammateStatus::Failed | TeammateStatus::Shutdown) =
            (self.team.board.get(), status)
        {
            let reason = format!("{} {}", self.name, status.as_str());
            work.claims().release_all(Some(&self.name), &reason).await;
        }
        // The status is set before the loop counts as ended, so a wake in between cannot
        // restart a teammate that just failed or shut down.
        match (status, detail) {
            (TeammateStatus::Failed, Some(reason)) => self.team.fail(&self.name, reason).await,
            (status, detail) => self.team.set_status(&self.name, status, detail).await,
        }
        self.team.loops.ended(&self.name);
        self.team.changed.notify_one();
    }

    pub(super) async fn try_idle(&self) -> bool {
        if self
            .team
            .loops
            .try_idle(&self.name, self.team.closing.is_cancelled())
        {
            self.team
                .set_status(&self.name, TeammateStatus::Idle, None)
                .await;
            return true;
        }
        false
    }

    pub(super) fn is_completed(&self, message: MessageId) -> bool {
        self.team.loops.is_completed(message)
    }

    pub(super) async fn holds_lease(&self) -> bool {
        self.team.placement.still_here(&self.name).await
    }

    pub(super) fn lost(&self) {
        tracing::warn!(
            "this worker lost its lease on {} (another worker runs it now); it stops running it",
            self.name
        );
        self.team.loops.ended(&self.name);
        self.team.loops.drop_idle(&self.name);
        self.team.changed.notify_one();
    }

    pub(super) fn mark_completed(&self, message: MessageId) {
        self.team.loops.mark_completed(message);
    }

    pub(super) async fn next_task(&self) -> Option<Task> {
        let work = self.team.board.get()?;
        if self.team.closing.is_cancelled() {
            return None;
        }
        let record = self.team.roster.get(&self.name).await?;
        if !self.team.gate_allows_claims(&record).await {
            return None;
        }
        match work
            .next_for(&self.name, &self.team.skills_of(&record))
            .await
        {
            Ok(task) => task,
            Err(e) => {
                tracing::warn!("{} could not take work from the task board: {e}", self.name);
                None
            }
        }
    }

    pub(super) async fn task_completed_by_me(&self, task: &Task) -> bool {
        let Some(work) = self.team.board.get() else {
            return false;
        };
        work.claims()
            .board()
            .get(&task.id)
            .await
            .is_ok_and(|now| crate::team::board_work::completed_by(&now, &self.name))
    }

    pub(super) async fn finish_task(
        &self,
        task: &Task,
        outcome: TaskOutcome,
    ) -> Result<Task, TaskError> {
        let Some(work) = self.team.board.get() else {
            return Err(TaskError::NotFound(task.id));
        };
        // The board reports the change (and wakes whom it concerns) itself.
        match outcome {
            TaskOutcome::Done => work.claims().complete(&task.id, &self.name).await,
            TaskOutcome::GiveBack(reason) => {
                work.claims().release(&task.id, &self.name, &reason).await
            }
        }
    }

    pub(super) async fn after_result(&self, message: &MailboxMessage) {
        if let Some(worktrees) = self.own_worktree().await {
            let (name, message) = (self.name.clone(), message.clone());
            let committed = offload("commit the teammate's work", move || {
                crate::team::isolation::commit_finished_work(&worktrees, &name, &message)
            });
            if let Err(e) = committed.await {
                tracing::warn!("{e}");
            }
        }
    }

    pub(super) async fn after_task(&self, task: &Task) {
        if let Some(worktrees) = self.own_worktree().await {
            let (name, subject) = (self.name.clone(), task.subject.clone());
            let committed = offload("commit the teammate's work", move || {
                crate::team::isolation::commit_work(&worktrees, &name, &subject)
            });
            if let Err(e) = committed.await {
                tracing::warn!("{e}");
            }
        }
    }
}

impl TeammateLoop {
    /// The team's worktrees when this teammate works in one of its own.
    pub(super) async fn own_worktree(&self) -> Option<Arc<Worktrees>> {
        let worktrees = self.team.worktrees.clone()?;
        let isolated = self
            .team
            .roster
            .get(&self.name)
            .await
            .is_some_and(|r| r.isolation == Isolation::Worktree);
        isolated.then_some(worktrees)
    }
}

impl TeammateLoop {
    pub(super) fn mailbox(&self) -> &dyn MailboxStore {
        self.postman().mailbox().as_ref()
    }
}

/// What becomes of a task a loop took from the board.
pub(super) enum TaskOutcome {
    /// The teammate answered: the task is completed.
    Done,
    /// It could not finish (failure, close): back to the board with this reason.
    GiveBack(String),
}

/// How handling one message ended.
enum Handled {
    /// Acked or quarantined; take the next message.
    Next,
    /// The teammate shut down; the loop ends.
    Shutdown,
    /// Closing: the message was released; the loop ends.
    Cancelled,
    /// Released; the teammate is failed with this reason.
    Failed(String),
    /// Another worker holds the teammate now; this one stops, touching nothing.
    LeaseLost,
}

pub(super) async fn run(team: TeammateLoop, runner: SharedRunner) {
    let team = &team;
    let mut runner = runner.lock().await;
    // Marked `running` once it has work, not when it starts: a loop started by a wake that
    // finds nothing (a takeover look, a board change for someone else) goes back to sleep
    // without a status change (no event, no write).
    let mut marked_running = false;
    let mut mark_running = async || {
        if !std::mem::replace(&mut marked_running, true) {
            team.set_status(TeammateStatus::Running).await;
        }
    };
    loop {
        if team.closing().is_cancelled() {
            team.end(TeammateStatus::Idle, None).await;
            return;
        }
        if !team.holds_lease().await {
            team.lost();
            return;
        }
        let message = match team.mailbox().claim(team.name()).await {
            Ok(Some(message)) => {
                mark_running().await;
                message
            }
            Ok(None) => {
                if let Some(task) = team.next_task().await {
                    mark_running().await;
                    match work_on_task(team, &mut runner, &task).await {
                        Handled::Next => continue,
                        Handled::Cancelled => {
                            team.end(TeammateStatus::Idle, None).await;
                            return;
                        }
                        Handled::Failed(reason) => {
                            team.end(TeammateStatus::Failed, Some(reason)).await;
                            return;
                        }
                        Handled::LeaseLost => {
                            team.lost();
                            return;
                        }
                        Handled::Shutdown => {
                            team.end(TeammateStatus::Shutdown, None).await;
                            return;
                        }
                    }
                }
                if team.try_idle().await {
                    return;
                }
                continue;
            }
            Err(e) => {
                let reason = format!("claim failed: {e}");
                team.end(TeammateStatus::Failed, Some(reason)).await;
                return;
            }
        };
        let handled = if team.closing().is_cancelled() {
            Handled::Cancelled
        } else {
            handle(team, &mut runner, &message).await
        };
        match handled {
            Handled::Next => {}
            Handled::Shutdown => {
                team.end(TeammateStatus::Shutdown, None).await;
                return;
            }
            Handled::Cancelled => {
                release(team, &message).await;
                team.end(TeammateStatus::Idle, None).await;
                return;
            }
            Handled::Failed(reason) => {
                release(team, &message).await;
                team.end(TeammateStatus::Failed, Some(reason)).await;
                return;
            }
            Handled::LeaseLost => {
                team.lost();
                return;
            }
        }
    }
}

async fn release(team: &TeammateLoop, message: &MailboxMessage) {
    if let Err(e) = team.mailbox().release(team.name(), message.id()).await {
        // Still in processing/: recovery at the next start puts it back. Nothing is lost.
        tracing::warn!(
            "could not release {} for {}: {e}",
            message.id(),
            team.name()
        );
    }
}

/// Quarantines `message` and reports it.
async fn quarantine(team: &TeammateLoop, message: &MailboxMessage, reason: &str) -> Handled {
    let quarantined = quarantine_and_report(
        team.mailbox(),
        team.observer(),
        team.name(),
        message,
        reason,
    )
    .await;
    match quarantined {
        Ok(()) => Handled::Next,
        Err(e) => Handled::Failed(format!("could not quarantine {}: {e}", message.id())),
    }
}

async fn handle(team: &TeammateLoop, runner: &mut Runner, message: &MailboxMessage) -> Handled {
    match message {
        MailboxMessage::Ordinary(m) => {
            let prompt = match m.kind {
                OrdinaryKind::Task => format!("Task from {}:\n{}", m.sender, m.content),
                OrdinaryKind::Message => format!("Message from {}:\n{}", m.sender, m.content),
                OrdinaryKind::Result => format!("Result from {}:\n{}", m.sender, m.content),
            };
            run_and_report(team, runner, message, &prompt).await
        }
        MailboxMessage::Protocol(p) => match p.kind() {
            ProtocolMessageKind::ShutdownRequest => shutdown(team, message, p).await,
            ProtocolMessageKind::PlanApprovalResponse => {
                plan_response(team, runner, message, p).await
            }
            ProtocolMessageKind::PermissionResponse => permission_response(team, message, p).await,
            other => {
                quarantine(
                    team,
                    message,
                    &format!("a teammate does not accept {} messages", other.as_str()),
                )
                .await
            }
        },
    }
}

/// Runs the model on `prompt` (once per message id), sends the answer to the lead, acks.
async fn run_and_report(
    team: &TeammateLoop,
    runner: &mut Runner,
    message: &MailboxMessage,
    prompt: &str,
) -> Handled {
    let name = team.name();
    if !team.is_completed(message.id()) {
        runner.recall(prompt).await;
        runner
            .push_user_once(&message.id().to_string(), prompt)
            .await;
        runner.observer().handling(name, &[message.id()]);
        let answer = match runner.run_turn(team.closing()).await {
            Ok(outcome) => match outcome.end {
                TurnEnd::Answered(text) if !text.trim().is_empty() => text,
                TurnEnd::Answered(_) => "(finished without a written answer)".to_owned(),
                TurnEnd::Cancelled => return Handled::Cancelled,
                end @ (TurnEnd::MaxTurns { .. }
                | TurnEnd::TokenBudget { .. }
                | TurnEnd::CostBudget { .. }) => {
                    format!("({})", end.stop_reason().unwrap_or_default())
                }
            },
            Err(e) => return Handled::Failed(format!("model call failed: {e}")),
        };
        // A worker paused past its lease must not report a second time what the new holder
        // reports (its tools were already denied by the lease gate).
        if !team.holds_lease().await {
            return Handled::LeaseLost;
        }
        team.after_result(message).await;
        let sent = team
            .postman()
            .send_ordinary(name, &AgentName::lead(), OrdinaryKind::Result, &answer)
            .await;
        if let Err(e) = sent {
            return Handled::Failed(format!("could not send the result to the lead: {e}"));
        }
        team.mark_completed(message.id());
    }
    ack_and(team, message, Handled::Next).await
}

/// Works on `task`, taken from the board: runs the model on it, completes it, and sends the
/// answer to the lead as the task's result. A failure or a close gives the task back.
async fn work_on_task(team: &TeammateLoop, runner: &mut Runner, task: &Task) -> Handled {
    let name = team.name();
    let prompt = board_work::task_prompt(task);
    let key = match &task.lease {
        Some(lease) => format!("task:{}:{}", task.id, lease.token),
        None => format!("task:{}", task.id),
    };
    runner.recall(&prompt).await;
    runner.push_user_once(&key, &prompt).await;
    let give_back = |reason: String| async move {
        if let Err(e) = team.finish_task(task, TaskOutcome::GiveBack(reason)).await {
            tracing::warn!("{name} could not give task {} back: {e}", task.id);
        }
    };
    let answer = match runner.run_turn(team.closing()).await {
        Ok(outcome) => match outcome.end {
            TurnEnd::Answered(text) if !text.trim().is_empty() => text,
            TurnEnd::Answered(_) => "(finished without a written answer)".to_owned(),
            TurnEnd::Cancelled => {
                give_back("the run closed before it was done".to_owned()).await;
                return Handled::Cancelled;
            }
            end @ (TurnEnd::MaxTurns { .. }
            | TurnEnd::TokenBudget { .. }
            | TurnEnd::CostBudget { .. }) => {
                let why = end.stop_reason().unwrap_or_default();
                give_back(format!("{name} stopped: {why}")).await;
                return Handled::Failed(format!("task {} not finished: {why}", task.id));
            }
        },
        Err(e) => {
            give_back(format!("{name} failed: {e}")).await;
            return Handled::Failed(format!("model call failed: {e}"));
        }
    };
    if !team.holds_lease().await {
        return Handled::LeaseLost;
    }
    team.after_task(task).await;
    let status = match team.finish_task(task, TaskOutcome::Done).await {
        Ok(_) => "completed".to_owned(),
        Err(_) if team.task_completed_by_me(task).await => "completed".to_owned(),
        Err(e) => format!("not completed: {e}"),
    };
    let content = format!("Task {} ({}) {status}.\n{answer}", task.id, task.subject);
    let sent = team
        .postman()
        .send_ordinary(name, &AgentName::lead(), OrdinaryKind::Result, &content)
        .await;
    match sent {
        Ok(_) => Handled::Next,
        Err(e) => Handled::Failed(format!("could not send the result to the lead: {e}")),
    }
}

/// A valid shutdown request: the teammate marks itself `shutdown`, *then* answers (so whoever
/// reads the answer — the lead, `troupe status` — finds a teammate that takes no more messages),
/// acks, and its loop ends. No model call.
async fn shutdown(
    team: &TeammateLoop,
    message: &MailboxMessage,
    request_message: &ProtocolMessage,
) -> Handled {
    let name = team.name();
    let request = match classify(
        team.protocol()
            .store()
            .validate_request(request_message)
            .await,
    ) {
        Triage::Ok(request) => request,
        Triage::Quarantine(e) => {
            let not_pending = matches!(e, ProtocolError::State { .. });
            if not_pending && answer_was_consumed(team, request_message).await {
                // A redelivered request whose answer the lead already has: stop as answered.
                team.set_status(TeammateStatus::Shutdown).await;
                return ack_and(team, message, Handled::Shutdown).await;
            }
            return quarantine(team, message, &e.to_string()).await;
        }
        Triage::Storage(e) => return Handled::Failed(format!("protocol store: {e}")),
    };
    team.set_status(TeammateStatus::Shutdown).await;
    match team
        .protocol()
        .respond(&request, true, "Shutting down.")
        .await
    {
        Ok(_) => {}
        // An earlier attempt (before a crash or a failed delivery) answered already, and the
        // refusal made sure that answer is delivered.
        Err(TeamError::Protocol(ProtocolError::Answered { by, .. })) if &by == name => {}
        Err(e) => {
            return Handled::Failed(format!(
                "could not answer shutdown request {}: {e}",
                request.id()
            ))
        }
    }
    ack_and(team, message, Handled::Shutdown).await
}

/// Whether the shutdown request `request_message` announces (a message that matched it in
/// everything but its pending state) was resolved by this teammate's answer: the lead consumed
/// the answer, and only the ack of the request was lost.
async fn answer_was_consumed(team: &TeammateLoop, request_message: &ProtocolMessage) -> bool {
    let name = team.name();
    let Ok(Some(request)) = team
        .protocol()
        .store()
        .get(request_message.request_id())
        .await
    else {
        return false;
    };
    request.kind() == RequestKind::Shutdown
        && request.target() == name
        && request.resolution().is_some_and(|r| r.approved)
}

async fn ack_and(team: &TeammateLoop, message: &MailboxMessage, then: Handled) -> Handled {
    match team.mailbox().ack(team.name(), message).await {
        Ok(_) => then,
        Err(e) => Handled::Failed(format!("could not ack {}: {e}", message.id())),
    }
}

/// The mailbox copy of an answer to one of this teammate's permission asks: the waiting call
/// consumed it already (a replay here), or the call is gone (the process stopped while it
/// waited) and this resolves the request. Never a model call. A copy that came after the
/// request's window is acked as it is; one that does not match its request is quarantined.
async fn permission_response(
    team: &TeammateLoop,
    message: &MailboxMessage,
    response: &ProtocolMessage,
) -> Handled {
    match classify(team.protocol().store().consume_response(response).await) {
        Triage::Ok(consumed) => {
            if !consumed.replayed {
                team.observer()
                    .update(&TeamUpdate::Resolved(consumed.request.clone()));
            }
            ack_and(team, message, Handled::Next).await
        }
        Triage::Quarantine(ProtocolError::Expired { .. }) => {
            ack_and(team, message, Handled::Next).await
        }
        Triage::Quarantine(e) => quarantine(team, message, &e.to_string()).await,
        Triage::Storage(e) => Handled::Failed(format!("protocol store: {e}")),
    }
}

async fn plan_response(
    team: &TeammateLoop,
    runner: &mut Runner,
    message: &MailboxMessage,
    response: &ProtocolMessage,
) -> Handled {
    // Consume first: by the time the runner continues, the plan gate sees the new state.
    let consumed = match classify(team.protocol().store().consume_response(response).await) {
        Triage::Ok(consumed) => consumed,
        Triage::Quarantine(e) => return quarantine(team, message, &e.to_string()).await,
        Triage::Storage(e) => return Handled::Failed(format!("protocol store: {e}")),
    };
    if !consumed.replayed {
        team.observer()
            .update(&TeamUpdate::Resolved(consumed.request.clone()));
    }
    let id = response.request_id();
    let prompt = if response.approved() == Some(true) {
        format!(
            "Plan approved ({id}). Feedback: {}. Carry out the plan now.",
            response.content()
        )
    } else {
        format!(
            "Plan rejected ({id}). Feedback: {}. Revise the plan and submit it again with submit_plan before doing any work.",
            response.content()
        )
    };
    run_and_report(team, runner, message, &prompt).await
}
