//! [`RequestedApproval`]: the approval provider of a team whose asks go to a person — every ask
//! becomes a durable `permission` request that takes one answer from whoever comes first.
//!
//! The call waits where it is (no model call meanwhile; the agent's mailbox waits behind it)
//! for the first of: the run's terminal prompt (when there is one), an answer recorded by
//! another process or the lead (`troupe approve`/`deny`, the page, `review_permission`, another
//! host of a shared team), the request's expiry, or the team closing (Ctrl-C, a worker's
//! SIGTERM). The terminal's answer is recorded through the same single-answer step, so a
//! person answering at the terminal while another answers elsewhere gets exactly one of the
//! two; the prompt of a request answered elsewhere is withdrawn, saying by whom.
//!
//! It wakes on arrivals in the team's mailboxes (every answer is delivered into the asking
//! agent's mailbox; this process's watch or the database's wakeups report it), never by
//! polling; the expiry is a timer.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, ProtocolRequest};

use super::ask::{Choice, PermissionAsk, PermissionReply};
use super::desk::{read_answer, Answered, ApprovalDesk};
use crate::clock::Clock;
use crate::permissions::{
    person_answer, ApprovalAnswer, ApprovalProvider, ApprovalRequest, Person, PersonReply,
    Withdrawal,
};
use crate::settings::{ApprovalRoute, NoTerminal};
use crate::store::events::kinds::{self, preview};
use crate::store::events::EventSink;
use crate::team::TeamError;

/// Told of each registered request (the `PermissionRequest` hook).
pub type OnRegistered = Arc<dyn Fn(&ProtocolRequest, &PermissionAsk) + Send + Sync>;

/// What a team gives the provider once it is built.
pub struct Binding {
    pub desk: ApprovalDesk,
    /// Changes on every arrival in the team's mailboxes.
    pub arrivals: watch::Receiver<u64>,
    pub events: Arc<dyn EventSink>,
    pub clock: Arc<dyn Clock>,
    /// Fired when the team closes: a waiting ask is denied.
    pub closing: CancellationToken,
    pub on_registered: Option<OnRegistered>,
    /// The run's secrets, taken out of every request before it is stored.
    pub redactor: crate::secrets::Redactor,
}

/// How the wait away from the terminal ended.
enum Elsewhere {
    Answered(Answered),
    Expired,
}

/// Durable permission requests around a provider that asks a person.
pub struct RequestedApproval {
    inner: Arc<dyn ApprovalProvider>,
    ttl: Duration,
    route: ApprovalRoute,
    no_terminal: NoTerminal,
    bound: OnceLock<Binding>,
}

impl RequestedApproval {
    pub fn new(
        inner: Arc<dyn ApprovalProvider>,
        ttl: Duration,
        route: ApprovalRoute,
        no_terminal: NoTerminal,
    ) -> Self {
        Self {
            inner,
            ttl,
            route,
            no_terminal,
            bound: OnceLock::new(),
        }
    }

    /// Binds the team (once; a second binding is ignored). Before it, asks go to the inner
    /// provider as they are.
    pub fn bind(&self, binding: Binding) {
        let _ = self.bound.set(binding);
    }

    /// Who answers `agent`'s asks: the lead for a teammate when asks are routed to it, else a
    /// person (`user`).
    fn target_of(&self, agent: &AgentName) -> AgentName {
        match self.route {
            ApprovalRoute::Lead if !agent.is_lead() => AgentName::lead(),
            _ => AgentName::user(),
        }
    }

    /// Records `reply` as the answer (`true`: it stands), or — when another answer came first —
    /// reads that one (`false`).
    async fn settle(
        &self,
        bound: &Binding,
        request: &ProtocolRequest,
        reply: PermissionReply,
    ) -> Result<(Answered, bool), String> {
        match bound.desk.answer(request, &reply).await {
            Ok(message) => Ok((read_answer(message), true)),
            Err(refused) => match bound.desk.answered(request).await {
                Ok(Some(first)) => Ok((first, false)),
                _ => Err(format!(
                    "the answer could not be recorded ({refused}); treated as no"
                )),
            },
        }
    }

    /// The wait for an answer from anywhere but this terminal, until it comes or the request
    /// expires. Wakes on arrivals; a closed arrivals channel leaves the timer alone.
    async fn elsewhere(bound: &Binding, request: &ProtocolRequest) -> Elsewhere {
        let mut arrivals = bound.arrivals.clone();
        let mut arrivals_open = true;
        loop {
            arrivals.borrow_and_update();
            match bound.desk.answered(request).await {
                Ok(Some(answered)) => return Elsewhere::Answered(answered),
                Ok(None) => {}
                Err(e) => tracing::warn!(request = %request.id(), "cannot read the answer: {e}"),
            }
            let left = request.expires_at_utc().millis_since(bound.clock.now());
            if left <= 0 {
                return Elsewhere::Expired;
            }
            let timer = tokio::time::sleep(Duration::from_millis(left.unsigned_abs()));
            if arrivals_open {
                tokio::select! {
                    changed = arrivals.changed() => arrivals_open = changed.is_ok(),
                    () = timer => {}
                }
            } else {
                timer.await;
            }
        }
    }

    fn report(
        &self,
        bound: &Binding,
        agent: &AgentName,
        kind: &'static str,
        fields: serde_json::Value,
    ) {
        bound
            .events
            .emit(agent.as_str(), kind, kinds::fields(fields));
    }

    /// The provider's answer from the request's answer; the answer is consumed (the request
    /// resolved) here, by the asking side, like every response.
    async fn finish(
        &self,
        bound: &Binding,
        ask: &ApprovalRequest<'_>,
        request: &ProtocolRequest,
        answered: Answered,
        terminal: Option<ApprovalAnswer>,
    ) -> ApprovalAnswer {
        if let Err(e) = bound.desk.store().consume_response(&answered.message).await {
            // Recorded in its window: the answer stands even if it is consumed late (its copy
            // in the mailbox is consumed when the agent next reads it).
            tracing::debug!(request = %request.id(), "answer not consumed now: {e}");
        }
        let reply = &answered.reply;
        self.report(
            bound,
            ask.agent,
            kinds::PERMISSION_ANSWERED,
            json!({
                "request_id": request.id(),
                "tool": ask.tool,
                "approved": answered.approved,
                "choice": reply.choice.as_str(),
                "by": reply.by,
                "reason": preview(&reply.reason),
            }),
        );
        if let Some(answer) = terminal {
            return answer.by(reply.by.clone());
        }
        let answer = match (answered.approved, reply.choice, ask.suggestion) {
            (true, Choice::Always | Choice::Save, Some(entry)) => {
                ApprovalAnswer::approve_always(reply.reason.clone(), entry)
            }
            (true, _, _) => ApprovalAnswer::approve(reply.reason.clone()),
            (false, _, _) => ApprovalAnswer::deny(reply.reason.clone()),
        };
        answer.by(reply.by.clone())
    }

    fn expired(
        &self,
        bound: &Binding,
        ask: &ApprovalRequest<'_>,
        request: &ProtocolRequest,
    ) -> ApprovalAnswer {
        self.report(
            bound,
            ask.agent,
            kinds::PERMISSION_EXPIRED,
            json!({"request_id": request.id(), "tool": ask.tool}),
        );
        ApprovalAnswer::deny(format!(
            "no answer within {}: permission request {} expired; treated as no",
            humantime::format_duration(self.ttl),
            request.id()
        ))
        .by("expiry")
    }
}

/// The terminal's reply as the request's answer, with the reason the terminal gives.
fn terminal_reply(reply: &PersonReply, answer: &ApprovalAnswer, by: &str) -> PermissionReply {
    let choice = match reply {
        PersonReply::Once => Choice::Once,
        PersonReply::Always(_) => Choice::Always,
        PersonReply::Save(_) => Choice::Save,
        _ => Choice::No,
    };
    PermissionReply::new(choice, answer.reason.clone(), by)
}

#[async_trait]
impl ApprovalProvider for RequestedApproval {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn person(&self) -> Person {
        self.inner.person()
    }

    fn save_entry(&self, entry: &str) -> Option<String> {
        self.inner.save_entry(entry)
    }

    fn answered_by(&self) -> &'static str {
        self.inner.answered_by()
    }

    fn tell(&self, line: &str) {
        self.inner.tell(line);
    }

    async fn approve(&self, ask: &ApprovalRequest<'_>) -> ApprovalAnswer {
        let person = self.inner.person();
        let Some(bound) = self.bound.get() else {
            return self.inner.approve(ask).await;
        };
        // A write to a protected path is a person's to answer, never the lead's.
        let target = if ask.person_only {
            AgentName::user()
        } else {
            self.target_of(ask.agent)
        };
        let waits = match person {
            Person::No => false,
            Person::AtTerminal => true,
            // SPEC §7: no terminal, nobody expected to answer — denied at once, as before.
            Person::NoTerminal => target.is_lead() || self.no_terminal == NoTerminal::Wait,
        };
        if !waits {
            return self.inner.approve(ask).await;
        }
        if bound.closing.is_cancelled() {
            return ApprovalAnswer::deny(crate::permissions::approval::INTERRUPTED_REASON)
                .by("interrupt");
        }
        let content = PermissionAsk::new(
            ask.tool,
            ask.effect,
            ask.arguments,
            ask.sandbox,
            ask.reason,
            ask.suggestion,
            ask.preview.and_then(|p| (p.0)()),
        )
        .redacted(&bound.redactor);
        let opened: Result<ProtocolRequest, TeamError> = bound
            .desk
            .open(ask.agent, &target, &content, self.ttl)
            .await;
        let request = match opened {
            Ok(request) => request,
            Err(e) => {
                return ApprovalAnswer::deny(format!(
                    "the permission request could not be registered ({e}); treated as no"
                ))
                .by("request")
            }
        };
        self.report(
            bound,
            ask.agent,
            kinds::PERMISSION_REQUESTED,
            json!({
                "request_id": request.id(),
                "tool": ask.tool,
                "summary": preview(&content.summary()),
                "to": target,
                "expires_at": request.expires_at_utc(),
            }),
        );
        if let Some(hook) = &bound.on_registered {
            hook(&request, &content);
        }
        let outcome: Arc<Mutex<Option<Elsewhere>>> = Arc::new(Mutex::new(None));
        let keep = outcome.clone();
        let id = request.id();
        let waiting = Self::elsewhere(bound, &request);
        let withdrawal: Withdrawal<'_> = Box::pin(async move {
            let found = waiting.await;
            let line = match &found {
                Elsewhere::Answered(a) => format!(
                    "permission request {id} was answered elsewhere ({}): {}",
                    a.reply.by,
                    if a.approved { "approved" } else { "denied" }
                ),
                Elsewhere::Expired => format!("permission request {id} expired unanswered"),
            };
            *crate::sync::lock(&keep) = Some(found);
            line
        });
        let reply = match person {
            Person::AtTerminal => {
                tokio::select! {
                    biased;
                    () = bound.closing.cancelled() => PersonReply::Interrupted,
                    reply = self.inner.ask_person(ask, withdrawal) => reply,
                }
            }
            _ => {
                tokio::select! {
                    () = bound.closing.cancelled() => PersonReply::Interrupted,
                    _ = withdrawal => PersonReply::Withdrawn,
                }
            }
        };
        if reply == PersonReply::Withdrawn {
            let found = crate::sync::lock(&outcome).take();
            return match found {
                Some(Elsewhere::Answered(a)) => self.finish(bound, ask, &request, a, None).await,
                Some(Elsewhere::Expired) => self.expired(bound, ask, &request),
                None => ApprovalAnswer::deny(crate::permissions::approval::INTERRUPTED_REASON)
                    .by("interrupt"),
            };
        }
        if reply == PersonReply::Interrupted {
            // Ctrl-C, or the team closing (a worker's SIGTERM): the call is denied as before.
            // The request is left unanswered — it expires, and an answer given later finds no
            // call waiting — so nothing is written into the mailbox of an agent being stopped.
            return ApprovalAnswer::deny(crate::permissions::approval::INTERRUPTED_REASON)
                .by("interrupt");
        }
        // The terminal answered (or its input closed): record it as the answer.
        let saved = match &reply {
            PersonReply::Save(entry) => Some(entry.clone()),
            _ => None,
        };
        let by = self.inner.answered_by();
        let local = person_answer(reply.clone(), None, by);
        let mine = terminal_reply(&reply, &local, by);
        match self.settle(bound, &request, mine).await {
            Ok((answered, true)) => {
                // Ours stands: now the entry may be saved.
                let local = match saved {
                    Some(entry) => person_answer(reply, self.inner.save_entry(&entry), by),
                    None => local,
                };
                self.finish(bound, ask, &request, answered, Some(local))
                    .await
            }
            Ok((first, false)) => {
                self.inner.tell(&format!(
                    "permission request {} was answered first elsewhere ({}): {}",
                    request.id(),
                    first.reply.by,
                    if first.approved { "approved" } else { "denied" }
                ));
                self.finish(bound, ask, &request, first, None).await
            }
            Err(why) => ApprovalAnswer::deny(why).by("request"),
        }
    }
}
