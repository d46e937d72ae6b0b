//! A teammate's worker (SPEC §4.4, §6): claims one message at a time and handles it.
//!
//! - protocol messages are routed **before** any model call: a valid shutdown request makes the
//!   teammate mark itself `shutdown`, then answer, and stop without calling the model; a plan response is consumed in the
//!   protocol store before the same runner continues with a deterministic prompt;
//! - ordinary messages go through the model; the final answer returns to the lead as `result`,
//!   then the message is acked;
//! - a message that is invalid (wrong id, kind, parties, expired, duplicate) is quarantined and
//!   the worker continues; any other failure (storage, delivery, model, cancellation) releases
//!   the message back to `ready/` and — except for cancellation — marks the teammate `failed`.
//!
//! - with nothing in its mailbox, it takes the next task that fits it from the task board
//!   ([`WorkerContext::next_task`], SPEC §12) and works on it as its next message: the answer
//!   completes the task and goes to the lead as a result; a failure or a close gives the task
//!   back to the board.
//!
//! A worker sees the team only through [`WorkerContext`] (its ports, its teammate's status, the
//! lifecycle calls `try_idle` and `end`), which the runtime implements: the worker never
//! reaches the runtime's state, and this file does not import the runtime.

use troupe_wire::{
    AgentName, MailboxMessage, OrdinaryKind, ProtocolMessage, ProtocolMessageKind, RequestKind,
    TeammateStatus,
};

use tokio_util::sync::CancellationToken;
use troupe_wire::MessageId;

use super::board_work;
use super::error::TeamError;
use super::observer::{TeamObserver, TeamUpdate};
use super::postman::Postman;
use super::protocol::{classify, quarantine_and_report, ProtocolRuntime, Triage};
use super::workers::SharedRunner;
use crate::agent::{Runner, TurnEnd};
use crate::store::mailbox::MailboxStore;
use crate::store::protocol::ProtocolError;
use crate::store::tasks::{Task, TaskError};

/// What a worker may do to the team: use its ports, report its teammate's status, end. The
/// runtime implements it; nothing else of the runtime's state is reachable from a worker.
#[async_trait::async_trait]
pub(super) trait WorkerContext: Send + Sync + 'static {
    /// The teammate this worker serves.
    fn name(&self) -> &AgentName;
    fn postman(&self) -> &Postman;
    fn protocol(&self) -> &ProtocolRuntime;
    fn observer(&self) -> &dyn TeamObserver;
    /// Cancelled when the team closes: the worker stops at its next safe point.
    fn closing(&self) -> &CancellationToken;
    async fn set_status(&self, status: TeammateStatus);
    /// Sets the final status (a failure with its reason for the lead), then the worker no
    /// longer counts as running.
    async fn end(&self, status: TeammateStatus, detail: Option<String>);
    /// Found nothing to claim: goes idle and returns true, unless a wake came in meanwhile.
    async fn try_idle(&self) -> bool;
    /// Whether `message` was finished (result sent) by an earlier attempt whose ack failed.
    fn is_completed(&self, message: MessageId) -> bool;
    fn mark_completed(&self, message: MessageId);
    /// The next task from the board that fits this teammate, claimed for it; `None` when
    /// nothing fits, its plan gate is closed, or the team has no board.
    async fn next_task(&self) -> Option<Task> {
        None
    }
    /// Completes a task this worker took (`Done`) or gives it back to the board.
    async fn finish_task(&self, task: &Task, outcome: TaskOutcome) -> Result<Task, TaskError> {
        let _ = outcome;
        Err(TaskError::NotFound(task.id))
    }
    /// Whether this teammate completed `task` itself (with `complete_task`).
    async fn task_completed_by_me(&self, task: &Task) -> bool {
        let _ = task;
        false
    }
    /// The teammate finished `message` and its result is about to go to the lead: what its
    /// workspace does then (a worktree teammate's changes are committed on its branch). The
    /// default: nothing.
    async fn after_result(&self, _message: &MailboxMessage) {}
    /// The same for a task taken from the board, before it is completed: a worktree
    /// teammate's changes are committed on its branch with the task's subject.
    async fn after_task(&self, _task: &Task) {}
    /// Whether this process still holds the teammate's lease (always, outside a distributed team).
    async fn holds_lease(&self) -> bool {
        true
    }
    /// The lease went to another worker: this one stops without touching the teammate's
    /// status or messages (they are the new holder's).
    fn lost(&self) {}

    fn mailbox(&self) -> &dyn MailboxStore {
        self.postman().mailbox().as_ref()
    }
}

/// What becomes of a task a worker took from the board.
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
    /// The teammate shut down; the worker ends.
    Shutdown,
    /// Closing: the message was released; the worker ends.
    Cancelled,
    /// Released; the teammate is failed with this reason.
    Failed(String),
    /// Another worker holds the teammate now; this one stops, touching nothing.
    LeaseLost,
}

pub(super) async fn run(team: impl WorkerContext, runner: SharedRunner) {
    let team: &dyn WorkerContext = &team;
    let mut runner = runner.lock().await;
    // Marked `running` once it has work, not when it starts: a worker started by a wake that
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

async fn release(team: &dyn WorkerContext, message: &MailboxMessage) {
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
async fn quarantine(team: &dyn WorkerContext, message: &MailboxMessage, reason: &str) -> Handled {
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

async fn handle(
    team: &dyn WorkerContext,
    runner: &mut Runner,
    message: &MailboxMessage,
) -> Handled {
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
    team: &dyn WorkerContext,
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
async fn work_on_task(team: &dyn WorkerContext, runner: &mut Runner, task: &Task) -> Handled {
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
/// acks, and its worker ends. No model call.
async fn shutdown(
    team: &dyn WorkerContext,
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
async fn answer_was_consumed(team: &dyn WorkerContext, request_message: &ProtocolMessage) -> bool {
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

async fn ack_and(team: &dyn WorkerContext, message: &MailboxMessage, then: Handled) -> Handled {
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
    team: &dyn WorkerContext,
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
    team: &dyn WorkerContext,
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
