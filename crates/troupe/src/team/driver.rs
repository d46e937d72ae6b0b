//! The driver of a run (SPEC §8 `troupe run`): the lead's user turn, then event turns until the
//! team is quiescent — no worker running, no event queued, no protocol request pending (a pending
//! request waits for its answer or its expiry; on expiry its sender is told).
//!
//! **Event order** (SPEC §4.3): an event enters the lead's history first; only then is the
//! protocol store updated (a response consumed) and the mailbox message acked. A failed ack is
//! retried later without another model call: the event's key is already in the history, so it is
//! not appended again and no turn runs for it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, MailboxMessage, ProtocolMessageKind, RequestStatus};

use super::error::TeamError;
use super::events::{EventSource, LeadEvent};
use super::observer::TeamUpdate;
use super::protocol::{classify, quarantine_and_report, Triage};
use super::runtime::TeamRuntime;
use crate::agent::{Runner, RunnerError, TurnEnd};
use crate::cron::CronWakeup;
use crate::error::ErrorCode;
use crate::jobs::{JobCompletion, JobSupervisor};
use crate::model::types::ChatMessage;
use crate::store::response_ack::ResponseAckError;

/// How long the driver waits before retrying a failed ack, and the most retries of one event.
const ACK_RETRY_DELAY: Duration = Duration::from_millis(200);
const ACK_RETRIES: u32 = 25;

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error(transparent)]
    Team(#[from] TeamError),
    #[error("could not ack event {key} after {ACK_RETRIES} tries: {cause}")]
    AckGaveUp { key: String, cause: String },
}

impl ErrorCode for DriveError {
    fn code(&self) -> &'static str {
        match self {
            Self::Runner(e) => e.code(),
            Self::Team(e) => e.code(),
            Self::AckGaveUp { .. } => "storage_error",
        }
    }
}

/// The end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveOutcome {
    /// The lead's last answer.
    pub answer: String,
    /// How the last lead turn ended.
    pub last_end: TurnEnd,
    pub event_turns: usize,
    pub cancelled: bool,
}

/// Where non-mailbox events come from: background job completions and cron wakeups.
#[derive(Default)]
pub struct ExternalEvents {
    /// The supervisor whose running jobs keep the run alive.
    pub jobs: Option<Arc<JobSupervisor>>,
    pub job_completions: Option<UnboundedReceiver<JobCompletion>>,
    pub cron_wakeups: Option<UnboundedReceiver<CronWakeup>>,
    /// Tasks whose lease ran out, back on the board.
    pub task_returns: Option<UnboundedReceiver<crate::store::tasks::Task>>,
}

/// How the lead's events are grouped into turns. A run takes whatever has arrived; a replay
/// (`replay::Player`) waits for the events its recorded turn started with and puts them in the
/// recorded order, so that timing never changes what the lead is asked.
pub trait EventPacing: Send + Sync {
    /// Given the history texts of the events at hand (not yet in the history): run the turn
    /// now with those named, in this order (the others are held for a later turn; an empty
    /// list runs them all), or wait for more.
    fn arrange(&self, texts: &[String]) -> Pace;
}

/// What [`EventPacing::arrange`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pace {
    Now(Vec<usize>),
    /// Wait for more events, at most this long.
    Wait(Duration),
}

pub struct Driver {
    team: TeamRuntime,
    /// How the lead's events are grouped into turns (none: as they come).
    pacing: Option<Arc<dyn EventPacing>>,
    /// Events held back by the pacing until the rest of their turn's arrive.
    paced: Vec<LeadEvent>,
    external: ExternalEvents,
    /// External events received while waiting, not yet turned into history.
    buffered: Vec<LeadEvent>,
    /// Events appended to the history whose store update or ack is still to do.
    unfinished: Vec<LeadEvent>,
    /// Requests whose expiry was already reported.
    expired_noticed: HashSet<troupe_wire::RequestId>,
    /// Failed finishing attempts per unfinished event (by key): each event has its own budget.
    retries: HashMap<String, u32>,
    /// Teammate failures reported so far (keys their events).
    failures_seen: usize,
}

impl Driver {
    pub fn new(team: TeamRuntime) -> Self {
        Self::with_external(team, ExternalEvents::default())
    }

    pub fn with_external(team: TeamRuntime, external: ExternalEvents) -> Self {
        Self {
            team,
            pacing: None,
            paced: Vec::new(),
            external,
            buffered: Vec::new(),
            unfinished: Vec::new(),
            expired_noticed: HashSet::new(),
            retries: HashMap::new(),
            failures_seen: 0,
        }
    }

    /// Groups the lead's events into turns with `pacing` (a replay's).
    pub fn pace_with(&mut self, pacing: Option<Arc<dyn EventPacing>>) {
        self.pacing = pacing;
    }

    /// Every external event that has arrived, without waiting.
    async fn take_external(&mut self) -> Vec<LeadEvent> {
        let mut events = std::mem::take(&mut self.buffered);
        if let Some(rx) = self.external.job_completions.as_mut() {
            while let Ok(completion) = rx.try_recv() {
                events.push(LeadEvent::job(completion));
            }
        }
        let now = self.team.clock().now();
        for (name, reason) in self.team.take_failures().await {
            self.failures_seen += 1;
            events.push(LeadEvent::teammate_failed(
                &name,
                &reason,
                now,
                self.failures_seen,
            ));
        }
        if let Some(rx) = self.external.cron_wakeups.as_mut() {
            while let Ok(wakeup) = rx.try_recv() {
                events.push(LeadEvent::cron(wakeup));
            }
        }
        if let Some(rx) = self.external.task_returns.as_mut() {
            while let Ok(task) = rx.try_recv() {
                events.push(LeadEvent::task_lease_expired(&task));
            }
        }
        events
    }

    /// Runs `prompt` as the lead's user turn, then event turns until quiescent (or cancelled).
    pub async fn run(
        &mut self,
        lead: &mut Runner,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<DriveOutcome, DriveError> {
        let first = lead.run_user_turn(prompt, cancel).await?;
        let outcome = DriveOutcome {
            answer: answer_text(&first.end),
            last_end: first.end,
            event_turns: 0,
            cancelled: false,
        };
        self.drive_events(lead, outcome, cancel).await
    }

    /// Goes on with what an interrupted run left, with no new prompt (`troupe run --continue`):
    /// the lead's unanswered turn first (its conversation ends on a person's message or a tool
    /// result), then event turns until quiescent — queued messages, teammates' unfinished work,
    /// open requests. `None`, having changed nothing, when there is nothing to continue.
    pub async fn resume(
        &mut self,
        lead: &mut Runner,
        cancel: &CancellationToken,
    ) -> Result<Option<DriveOutcome>, DriveError> {
        let unanswered = lead
            .history()
            .messages()
            .last()
            .is_some_and(|m| matches!(m, ChatMessage::User { .. } | ChatMessage::Tool { .. }));
        let mut outcome = DriveOutcome {
            answer: last_answer(lead),
            last_end: TurnEnd::Answered(last_answer(lead)),
            event_turns: 0,
            cancelled: false,
        };
        if unanswered {
            let turn = lead.run_turn(cancel).await?;
            outcome.answer = answer_text(&turn.end);
            outcome.last_end = turn.end;
        } else if !self.has_work().await? {
            return Ok(None);
        }
        self.drive_events(lead, outcome, cancel).await.map(Some)
    }

    /// Whether anything is left for the team: an open request, a teammate with messages or
    /// work, a job running, a task held elsewhere, anything queued for the lead.
    async fn has_work(&mut self) -> Result<bool, DriveError> {
        if !self.unfinished.is_empty() || !self.buffered.is_empty() {
            return Ok(true);
        }
        if self.team.teammates_have_work().await? || self.next_expiry().await?.is_some() {
            return Ok(true);
        }
        Ok(self.left_over().await? || self.drain_late_events().await)
    }

    /// Event turns until quiescent (or cancelled), from `outcome` on.
    async fn drive_events(
        &mut self,
        lead: &mut Runner,
        mut outcome: DriveOutcome,
        cancel: &CancellationToken,
    ) -> Result<DriveOutcome, DriveError> {
        loop {
            if cancel.is_cancelled() {
                outcome.cancelled = true;
                return Ok(outcome);
            }
            // A spent token or cost budget stops the run: the team closes without more model
            // calls.
            if outcome.last_end.budget_spent() {
                return Ok(outcome);
            }
            let mut events = std::mem::take(&mut self.unfinished);
            let mut fresh = std::mem::take(&mut self.paced);
            fresh.extend(self.take_external().await);
            // Store calls (locks, disk) run off the async threads.
            fresh.extend(self.claim_lead_events().await?);
            fresh.extend(self.expiry_events().await?);
            if let (Some(pacing), false) = (&self.pacing, fresh.is_empty()) {
                let texts: Vec<String> = fresh.iter().map(LeadEvent::history_text).collect();
                match pacing.arrange(&texts) {
                    Pace::Now(order) => {
                        let (now, later) = in_order(fresh, &order);
                        fresh = now;
                        self.paced = later;
                    }
                    Pace::Wait(at_most) => {
                        self.paced = fresh;
                        tokio::select! {
                            () = cancel.cancelled() => {}
                            () = self.team.changed() => {}
                            () = tokio::time::sleep(at_most) => {}
                        }
                        if events.is_empty() {
                            continue;
                        }
                        fresh = Vec::new();
                    }
                }
            }
            events.extend(fresh);
            if !events.is_empty() {
                let mut appended = 0;
                let handled: Vec<troupe_wire::MessageId> = events
                    .iter()
                    .filter_map(|event| match &event.source {
                        EventSource::Mailbox(message) => Some(message.id()),
                        _ => None,
                    })
                    .collect();
                for event in &events {
                    if lead.push_user_once(&event.key, event.history_text()).await {
                        appended += 1;
                    }
                }
                for event in events {
                    self.finish_event(event).await?;
                }
                if appended > 0 {
                    lead.observer().handling(&AgentName::lead(), &handled);
                    let turn = lead.run_turn(cancel).await?;
                    outcome.event_turns += 1;
                    if let TurnEnd::Answered(_) = &turn.end {
                        outcome.answer = answer_text(&turn.end);
                    }
                    outcome.last_end = turn.end;
                } else if !self.unfinished.is_empty() {
                    tokio::select! {
                        () = cancel.cancelled() => {}
                        () = tokio::time::sleep(ACK_RETRY_DELAY) => {}
                    }
                }
                continue;
            }
            let next_expiry = self.next_expiry().await?;
            // Quiet by every measure, then the channels: an event that arrived meanwhile is
            // buffered and runs in the next round — at once, not after the wait below, which
            // nothing would end (its sender is done and the team has gone quiet).
            if self.is_quiescent(next_expiry.is_some()).await? {
                if !self.drain_late_events().await {
                    return Ok(outcome);
                }
                continue;
            }
            let wait = next_expiry.unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                () = cancel.cancelled() => {}
                () = self.team.changed() => {}
                () = tokio::time::sleep(wait) => {}
                Some(completion) = recv_or_pend(&mut self.external.job_completions) => {
                    self.buffered.push(LeadEvent::job(completion));
                }
                Some(wakeup) = recv_or_pend(&mut self.external.cron_wakeups) => {
                    self.buffered.push(LeadEvent::cron(wakeup));
                }
                Some(task) = recv_or_pend(&mut self.external.task_returns) => {
                    self.buffered.push(LeadEvent::task_lease_expired(&task));
                }
            }
        }
    }

    /// Claims everything ready in the lead's mailbox. Invalid protocol messages are quarantined.
    async fn claim_lead_events(&self) -> Result<Vec<LeadEvent>, DriveError> {
        let lead = AgentName::lead();
        let mailbox = self.team.mailbox().clone();
        let store = self.team.protocol().store().clone();
        let mut events = Vec::new();
        while let Some(message) = mailbox.claim(&lead).await.map_err(TeamError::from)? {
            if let MailboxMessage::Protocol(p) = &message {
                if p.kind() == ProtocolMessageKind::PermissionResponse {
                    self.settle_permission_response(&message, p).await?;
                    continue;
                }
            }
            let verdict: Result<(), _> = match &message {
                MailboxMessage::Ordinary(_) => Ok(()),
                MailboxMessage::Protocol(p) => match p.kind() {
                    ProtocolMessageKind::ShutdownResponse => {
                        store.validate_response(p).await.map(|_| ())
                    }
                    // A teammate's permission ask routed to the lead (`[approvals] route`).
                    ProtocolMessageKind::PlanApprovalRequest
                    | ProtocolMessageKind::PermissionRequest => {
                        store.validate_request(p).await.map(|_| ())
                    }
                    other => Err(crate::store::protocol::ProtocolError::Mismatch {
                        id: p.request_id(),
                        why: format!("the lead does not accept {} messages", other.as_str()),
                    }),
                },
            };
            match classify(verdict) {
                Triage::Ok(()) => events.push(LeadEvent::from_message(message)),
                Triage::Quarantine(e) => self.quarantine(&message, &e.to_string()).await?,
                Triage::Storage(e) => {
                    let _ = mailbox.release(&lead, message.id()).await;
                    return Err(TeamError::from(e).into());
                }
            }
        }
        Ok(events)
    }

    /// The mailbox copy of an answer to one of the lead's own permission asks: consumed (a
    /// replay when the waiting call consumed it) and acked; never an event for the model. A
    /// copy past its window is acked as it is; one that does not match is quarantined.
    async fn settle_permission_response(
        &self,
        message: &MailboxMessage,
        response: &troupe_wire::ProtocolMessage,
    ) -> Result<(), DriveError> {
        let lead = AgentName::lead();
        let store = self.team.protocol().store().clone();
        match classify(store.consume_response(response).await) {
            Triage::Ok(consumed) => {
                if !consumed.replayed {
                    self.team
                        .postman()
                        .observer()
                        .update(&TeamUpdate::Resolved(consumed.request));
                }
            }
            Triage::Quarantine(crate::store::protocol::ProtocolError::Expired { .. }) => {}
            Triage::Quarantine(e) => return self.quarantine(message, &e.to_string()).await,
            Triage::Storage(e) => {
                let _ = self.team.mailbox().release(&lead, message.id()).await;
                return Err(TeamError::from(e).into());
            }
        }
        self.team
            .mailbox()
            .ack(&lead, message)
            .await
            .map_err(TeamError::from)?;
        Ok(())
    }

    async fn quarantine(&self, message: &MailboxMessage, reason: &str) -> Result<(), DriveError> {
        quarantine_and_report(
            self.team.mailbox().as_ref(),
            self.team.postman().observer().as_ref(),
            &AgentName::lead(),
            message,
            reason,
        )
        .await
        .map_err(TeamError::from)?;
        Ok(())
    }

    /// After the event is in the history: consume a response, then ack.
    async fn finish_event(&mut self, event: LeadEvent) -> Result<(), DriveError> {
        let EventSource::Mailbox(message) = &event.source else {
            return Ok(());
        };
        if let MailboxMessage::Protocol(p) = message {
            if p.kind() == ProtocolMessageKind::ShutdownResponse {
                // The consume and the ack together (one transaction in a shared store).
                let finished = self
                    .team
                    .response_ack()
                    .consume_and_ack(&AgentName::lead(), message, p)
                    .await;
                let consumed = match finished {
                    Ok((consumed, _)) => consumed,
                    Err(ResponseAckError::Ack(e)) => return self.retry_later(event, e.to_string()),
                    Err(ResponseAckError::Consume(e)) if TeamError::is_invalid_message(&e) => {
                        self.retries.remove(&event.key);
                        return self.quarantine(message, &e.to_string()).await;
                    }
                    Err(ResponseAckError::Consume(e)) => {
                        return self.retry_later(event, e.to_string())
                    }
                };
                self.retries.remove(&event.key);
                if !consumed.replayed {
                    self.team
                        .postman()
                        .observer()
                        .update(&TeamUpdate::Resolved(consumed.request));
                }
                return Ok(());
            }
        }
        match self.team.mailbox().ack(&AgentName::lead(), message).await {
            Ok(_) => {
                self.retries.remove(&event.key);
                Ok(())
            }
            Err(e) => self.retry_later(event, e.to_string()),
        }
    }

    fn retry_later(&mut self, event: LeadEvent, cause: String) -> Result<(), DriveError> {
        let tries = self.retries.entry(event.key.clone()).or_insert(0);
        *tries += 1;
        if *tries > ACK_RETRIES {
            return Err(DriveError::AckGaveUp {
                key: event.key,
                cause,
            });
        }
        tracing::warn!("event {} not finished ({cause}); retrying", event.key);
        self.unfinished.push(event);
        Ok(())
    }

    /// Expired pending requests not yet reported: the lead's become events; a teammate's plan
    /// expiry is told to the teammate by a message.
    async fn expiry_events(&mut self) -> Result<Vec<LeadEvent>, DriveError> {
        let store = self.team.protocol().store().clone();
        let now = self.team.clock().now();
        let mut events = Vec::new();
        for request in store.pending().await.map_err(TeamError::from)? {
            if request.status_at(now) != RequestStatus::Expired
                || !self.expired_noticed.insert(request.id())
            {
                continue;
            }
            self.team
                .postman()
                .observer()
                .update(&TeamUpdate::Expired(request.clone()));
            // A permission ask's expiry is its waiting call's denial: nobody else is told.
            if request.kind() == troupe_wire::RequestKind::Permission {
                continue;
            }
            if request.sender().is_lead() {
                events.push(LeadEvent::expired(request, now));
            } else if self.team.check_reachable(request.sender()).await.is_ok() {
                let text = format!(
                    "Your {} request {} expired at {} without an answer. The plan gate stays \
                     closed; submit a revised plan with submit_plan if you still need to act.",
                    request.kind().as_str(),
                    request.id(),
                    request.expires_at_utc()
                );
                self.team
                    .postman()
                    .send_ordinary(
                        &AgentName::lead(),
                        request.sender(),
                        troupe_wire::OrdinaryKind::Message,
                        &text,
                    )
                    .await?;
            }
        }
        Ok(events)
    }

    /// Time until the earliest pending request expires, if any is still open.
    async fn next_expiry(&self) -> Result<Option<Duration>, DriveError> {
        let now = self.team.clock().now();
        let pending = self
            .team
            .protocol()
            .store()
            .pending()
            .await
            .map_err(TeamError::from)?;
        // A permission request keeps nobody waiting here: its call waits on it (and keeps its
        // agent busy), and a request whose call is gone must not hold the run open.
        Ok(pending
            .iter()
            .filter(|r| r.kind() != troupe_wire::RequestKind::Permission)
            .filter(|r| r.is_open_at(now))
            .map(|r| r.expires_at_utc().millis_since(now))
            .min()
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0).max(1))))
    }

    /// Whether the run is over, by every measure that needs no waiting: no open request, no
    /// unfinished event, no teammate worker running, no background job running, nothing ready
    /// in the lead's mailbox. Changes nothing.
    async fn is_quiescent(&self, open_requests: bool) -> Result<bool, DriveError> {
        if open_requests || !self.unfinished.is_empty() || self.team.any_teammate_busy().await? {
            return Ok(false);
        }
        Ok(!self.left_over().await?)
    }

    /// Whether work is left that no teammate of this process shows: a background job running,
    /// a task held elsewhere coming back, something ready in the lead's mailbox.
    async fn left_over(&self) -> Result<bool, DriveError> {
        // Idle here, the channels after (`drain_late_events`): a job's completion is sent
        // before it stops counting as running, so this order never misses one.
        if self
            .external
            .jobs
            .as_ref()
            .is_some_and(|jobs| !jobs.is_idle())
        {
            return Ok(true);
        }
        // A task a dead run or another process holds comes back when its lease runs out, and a
        // teammate here takes it: the run waits for that.
        if self.team.awaiting_tasks().await {
            return Ok(true);
        }
        let counts = self
            .team
            .mailbox()
            .counts(&AgentName::lead())
            .await
            .map_err(TeamError::from)?;
        Ok(counts.ready > 0)
    }

    /// Moves events that arrived on the external channels since the last look into the buffer;
    /// whether there were any.
    async fn drain_late_events(&mut self) -> bool {
        let late = self.take_external().await;
        if late.is_empty() {
            return false;
        }
        self.buffered = late;
        true
    }
}

/// The events `order` names, in its order, and the others (held for a later turn). An empty
/// order takes them all, as they are.
fn in_order(events: Vec<LeadEvent>, order: &[usize]) -> (Vec<LeadEvent>, Vec<LeadEvent>) {
    if order.is_empty() {
        return (events, Vec::new());
    }
    let mut slots: Vec<Option<LeadEvent>> = events.into_iter().map(Some).collect();
    let now: Vec<LeadEvent> = order
        .iter()
        .filter_map(|&i| slots.get_mut(i)?.take())
        .collect();
    (now, slots.into_iter().flatten().collect())
}

/// Receives from an optional channel; pends forever when there is none (or it closed).
async fn recv_or_pend<T>(rx: &mut Option<UnboundedReceiver<T>>) -> Option<T> {
    match rx.as_mut() {
        Some(rx) => match rx.recv().await {
            Some(item) => Some(item),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The lead's last answer in its conversation (empty when it has none).
fn last_answer(lead: &Runner) -> String {
    lead.history()
        .messages()
        .iter()
        .rev()
        .find_map(|m| match m {
            ChatMessage::Assistant(a) if a.tool_calls.is_empty() => a.content.clone(),
            _ => None,
        })
        .unwrap_or_default()
}

fn answer_text(end: &TurnEnd) -> String {
    match (end, end.stop_reason()) {
        (TurnEnd::Answered(text), _) => text.clone(),
        (_, reason) => format!("({})", reason.unwrap_or_default()),
    }
}

impl Driver {
    pub fn team(&self) -> &TeamRuntime {
        &self.team
    }
}
