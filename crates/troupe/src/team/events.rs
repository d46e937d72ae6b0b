//! Events for the lead (SPEC §4.3): what reaches the lead between its turns, as the JSON that is
//! appended to its history as a user message.

use serde_json::{json, Value};
use troupe_wire::{AgentName, MailboxMessage, ProtocolRequest, UtcTime};

use crate::cron::CronWakeup;
use crate::jobs::JobCompletion;

/// One event waiting to enter the lead's history.
#[derive(Debug, Clone, PartialEq)]
pub struct LeadEvent {
    /// The idempotency key: the message id for mailbox events, `expired:<request id>` for
    /// expiry notices. An event with a key already in the history is never appended again.
    pub key: String,
    pub body: Value,
    pub source: EventSource,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventSource {
    /// A message claimed from the lead's mailbox; it stays in `processing/` until acked.
    Mailbox(MailboxMessage),
    /// A request the lead sent expired without an answer.
    Expired(ProtocolRequest),
    /// A background shell job ended.
    Job(JobCompletion),
    /// A cron job is due.
    Cron(CronWakeup),
    /// A teammate failed (its message went back to `ready/`).
    TeammateFailed,
    /// A task's lease ran out and the task came back to the board.
    TaskReturned,
}

impl LeadEvent {
    pub fn from_message(message: MailboxMessage) -> Self {
        let body = match &message {
            MailboxMessage::Ordinary(m) if m.sender.is_user() => json!({
                "kind": "user_message",
                "sender": m.sender,
                "message_id": m.id,
                "content": m.content,
            }),
            MailboxMessage::Ordinary(m) => json!({
                "kind": m.kind.as_str(),
                "sender": m.sender,
                "message_id": m.id,
                "content": m.content,
            }),
            MailboxMessage::Protocol(m) => json!({
                "kind": "protocol",
                "protocol_kind": m.kind().as_str(),
                "sender": m.sender(),
                "message_id": m.id(),
                "request_id": m.request_id(),
                "approved": m.approved(),
                "content": m.content(),
            }),
        };
        Self {
            key: message.id().to_string(),
            body,
            source: EventSource::Mailbox(message),
        }
    }

    pub fn expired(request: ProtocolRequest, now: UtcTime) -> Self {
        let body = json!({
            "kind": "request_expired",
            "sender": "troupe",
            "request_id": request.id(),
            "protocol_kind": request.kind().as_str(),
            "target": request.target(),
            "expired_at_utc": request.expires_at_utc(),
            "noticed_at_utc": now,
            "content": format!(
                "Your {} request {} to {} expired at {} without an answer.",
                request.kind().as_str(), request.id(), request.target(), request.expires_at_utc()
            ),
        });
        Self {
            key: format!("expired:{}", request.id()),
            body,
            source: EventSource::Expired(request),
        }
    }

    pub fn job(completion: JobCompletion) -> Self {
        let body = json!({
            "kind": "job_completed",
            "sender": "troupe",
            "job_id": completion.job_id,
            "started_by": completion.agent,
            "command": completion.command,
            "status": completion.status,
            "exit_code": completion.exit_code,
            "output_tail": completion.output_tail,
            "started_at_utc": completion.started_at_utc,
            "finished_at_utc": completion.finished_at_utc,
            "content": format!(
                "Background job {} ({}) ended {}{}.",
                completion.job_id,
                completion.command,
                crate::jobs::record::JobStatus::from(completion.status).as_str(),
                completion.exit_code.map(|c| format!(" with exit code {c}")).unwrap_or_default()
            ),
        });
        Self {
            key: format!("job:{}", completion.job_id),
            body,
            source: EventSource::Job(completion),
        }
    }

    pub fn cron(wakeup: CronWakeup) -> Self {
        let body = json!({
            "kind": "cron_wakeup",
            "sender": "troupe",
            "job_id": wakeup.job_id,
            "scheduled_for_utc": wakeup.scheduled_for_utc,
            "fired_at_utc": wakeup.fired_at_utc,
            "content": wakeup.prompt,
        });
        Self {
            key: format!("cron:{}:{}", wakeup.job_id, wakeup.scheduled_for_utc),
            body,
            source: EventSource::Cron(wakeup),
        }
    }

    /// `seq` tells apart successive failures of the same teammate within a run.
    pub fn teammate_failed(name: &AgentName, reason: &str, at: UtcTime, seq: usize) -> Self {
        let body = json!({
            "kind": "teammate_failed",
            "sender": name,
            "at_utc": at,
            "content": format!(
                "{name} failed and stopped working: {reason}. Its message is back in its mailbox; \
                 it takes no more messages in this run."
            ),
        });
        Self {
            key: format!("failed:{name}:{seq}"),
            body,
            source: EventSource::TeammateFailed,
        }
    }

    /// A task whose lease ran out is back on the board (SPEC §12, `task_lease_expired`).
    pub fn task_lease_expired(task: &crate::store::tasks::Task) -> Self {
        let (owner, at, reason) = match &task.returned {
            Some(r) => (Some(r.owner.clone()), Some(r.at_utc), r.reason.clone()),
            None => (None, None, "its lease ran out".to_owned()),
        };
        let body = json!({
            "kind": "task_lease_expired",
            "sender": "troupe",
            "task_id": task.id,
            "subject": task.subject,
            "previous_owner": owner,
            "returned_at_utc": at,
            "content": format!(
                "Task {} ({}) is back on the board, pending: {}{}. A teammate it fits takes it \
                 when idle, or you can claim or reassign it.",
                task.id,
                task.subject,
                owner.as_ref().map(|o| format!("{o}'s claim ended, ")).unwrap_or_default(),
                reason
            ),
        });
        Self {
            key: format!(
                "task-returned:{}:{}",
                task.id,
                at.map(|a| a.to_string()).unwrap_or_default()
            ),
            body,
            source: EventSource::TaskReturned,
        }
    }

    /// The user message the lead's history receives.
    pub fn history_text(&self) -> String {
        format!("[event] {}", self.body)
    }
}
