//! A teammate's worker (SPEC §4.4, §6): claims one message at a time and handles it.
//!
//! - protocol messages are routed **before** any model call: a valid shutdown request makes the
//!   teammate answer and stop without calling the model; a plan response is consumed in the
//!   protocol store before the same runner continues with a deterministic prompt;
//! - ordinary messages go through the model; the final answer returns to the lead as `result`,
//!   then the message is acked;
//! - a message that is invalid (wrong id, kind, parties, expired, duplicate) is quarantined and
//!   the worker continues; any other failure (storage, delivery, model, cancellation) releases
//!   the message back to `ready/` and — except for cancellation — marks the teammate `failed`.

use std::sync::Arc;

use troupe_wire::{
    AgentName, MailboxMessage, OrdinaryKind, ProtocolMessage, ProtocolMessageKind, TeammateStatus,
};

use super::error::TeamError;
use super::observer::TeamUpdate;
use super::runtime::TeamInner;
use crate::agent::{Runner, TurnEnd};
use crate::store::mailbox::MailboxStore;

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
}

pub(crate) async fn run(
    team: Arc<TeamInner>,
    name: AgentName,
    runner: Arc<tokio::sync::Mutex<Runner>>,
) {
    let mailbox = team.postman.mailbox().clone();
    let mut runner = runner.lock().await;
    loop {
        if team.closing.is_cancelled() {
            finish(&team, &name, TeammateStatus::Idle, None);
            return;
        }
        let message = match mailbox.claim(&name) {
            Ok(Some(message)) => message,
            Ok(None) => {
                if team.try_finish_worker(&name) {
                    team.set_status(&name, TeammateStatus::Idle, None);
                    return;
                }
                continue;
            }
            Err(e) => {
                finish(
                    &team,
                    &name,
                    TeammateStatus::Failed,
                    Some(format!("claim failed: {e}")),
                );
                return;
            }
        };
        let handled = if team.closing.is_cancelled() {
            Handled::Cancelled
        } else {
            handle(&team, &name, &mut runner, &message).await
        };
        match handled {
            Handled::Next => {}
            Handled::Shutdown => {
                finish(&team, &name, TeammateStatus::Shutdown, None);
                return;
            }
            Handled::Cancelled => {
                release(mailbox.as_ref(), &name, &message);
                finish(&team, &name, TeammateStatus::Idle, None);
                return;
            }
            Handled::Failed(reason) => {
                release(mailbox.as_ref(), &name, &message);
                finish(&team, &name, TeammateStatus::Failed, Some(reason));
                return;
            }
        }
    }
}

/// The status is set before the worker counts as ended, so a wake in between cannot restart a
/// teammate that just failed or shut down.
fn finish(team: &TeamInner, name: &AgentName, status: TeammateStatus, detail: Option<String>) {
    match (status, detail) {
        (TeammateStatus::Failed, Some(reason)) => team.fail(name, reason),
        (status, detail) => team.set_status(name, status, detail),
    }
    team.worker_ended(name);
}

fn release(mailbox: &dyn MailboxStore, name: &AgentName, message: &MailboxMessage) {
    if let Err(e) = mailbox.release(name, message.id()) {
        // Still in processing/: recovery at the next start puts it back. Nothing is lost.
        tracing::warn!("could not release {} for {name}: {e}", message.id());
    }
}

fn quarantine(
    team: &TeamInner,
    name: &AgentName,
    message: &MailboxMessage,
    reason: &str,
) -> Handled {
    match team
        .postman
        .mailbox()
        .quarantine(name, message.id(), reason)
    {
        Ok(_) => {
            team.observer.update(&TeamUpdate::Quarantined {
                agent: name.clone(),
                message: message.id().to_string(),
                reason: reason.to_owned(),
            });
            Handled::Next
        }
        Err(e) => Handled::Failed(format!("could not quarantine {}: {e}", message.id())),
    }
}

async fn handle(
    team: &Arc<TeamInner>,
    name: &AgentName,
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
            run_and_report(team, name, runner, message, &prompt).await
        }
        MailboxMessage::Protocol(p) => match p.kind() {
            ProtocolMessageKind::ShutdownRequest => shutdown(team, name, message, p),
            ProtocolMessageKind::PlanApprovalResponse => {
                plan_response(team, name, runner, message, p).await
            }
            other => quarantine(
                team,
                name,
                message,
                &format!("a teammate does not accept {} messages", other.as_str()),
            ),
        },
    }
}

/// Runs the model on `prompt` (once per message id), sends the answer to the lead, acks.
async fn run_and_report(
    team: &Arc<TeamInner>,
    name: &AgentName,
    runner: &mut Runner,
    message: &MailboxMessage,
    prompt: &str,
) -> Handled {
    let already_done = team
        .completed
        .lock()
        .map(|c| c.contains(&message.id()))
        .unwrap_or(false);
    if !already_done {
        runner.push_user_once(&message.id().to_string(), prompt);
        let answer = match runner.run_turn(&team.closing).await {
            Ok(outcome) => match outcome.end {
                TurnEnd::Answered(text) if !text.trim().is_empty() => text,
                TurnEnd::Answered(_) => "(finished without a written answer)".to_owned(),
                TurnEnd::MaxTurns { limit } => {
                    format!("(stopped after {limit} model calls without a final answer)")
                }
                TurnEnd::Cancelled => return Handled::Cancelled,
            },
            Err(e) => return Handled::Failed(format!("model call failed: {e}")),
        };
        if let Err(e) =
            team.postman
                .send_ordinary(name, &AgentName::lead(), OrdinaryKind::Result, &answer)
        {
            return Handled::Failed(format!("could not send the result to the lead: {e}"));
        }
        if let Ok(mut completed) = team.completed.lock() {
            completed.insert(message.id());
        }
    }
    match team.postman.mailbox().ack(name, message) {
        Ok(_) => Handled::Next,
        Err(e) => Handled::Failed(format!("could not ack {}: {e}", message.id())),
    }
}

fn shutdown(
    team: &Arc<TeamInner>,
    name: &AgentName,
    message: &MailboxMessage,
    request_message: &ProtocolMessage,
) -> Handled {
    let request = match team.protocol.store().validate_request(request_message) {
        Ok(request) => request,
        Err(e) if TeamError::is_invalid_message(&e) => {
            return quarantine(team, name, message, &e.to_string())
        }
        Err(e) => return Handled::Failed(format!("protocol store: {e}")),
    };
    // The status first: once the lead sees the answer, the roster already says `shutdown`, so
    // spawning the name again waits for this worker to end instead of finding it running. If
    // the answer cannot be sent, the teammate ends `failed` instead.
    team.set_status(name, TeammateStatus::Shutdown, None);
    if let Err(e) = team.protocol.respond(&request, true, "Shutting down.") {
        return Handled::Failed(format!(
            "could not answer shutdown request {}: {e}",
            request.id()
        ));
    }
    match team.postman.mailbox().ack(name, message) {
        Ok(_) => Handled::Shutdown,
        Err(e) => Handled::Failed(format!("could not ack {}: {e}", message.id())),
    }
}

async fn plan_response(
    team: &Arc<TeamInner>,
    name: &AgentName,
    runner: &mut Runner,
    message: &MailboxMessage,
    response: &ProtocolMessage,
) -> Handled {
    // Consume first: by the time the runner continues, the plan gate sees the new state.
    let consumed = match team.protocol.store().consume_response(response) {
        Ok(consumed) => consumed,
        Err(e) if TeamError::is_invalid_message(&e) => {
            return quarantine(team, name, message, &e.to_string())
        }
        Err(e) => return Handled::Failed(format!("protocol store: {e}")),
    };
    if !consumed.replayed {
        team.observer
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
    run_and_report(team, name, runner, message, &prompt).await
}
