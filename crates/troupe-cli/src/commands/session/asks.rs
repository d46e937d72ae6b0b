//! How a session asks a person about a tool call: never on the terminal (the view has it), but
//! as the durable permission request every ask of a person becomes (SPEC §13), which the
//! session's view answers, as can `troupe approve` or `troupe deny` from elsewhere — whichever
//! comes first. The provider only waits: for the request's answer (the team's
//! `RequestedApproval` sees it arrive and withdraws this wait) or for the prompt's Ctrl-C.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use troupe::permissions::approval::{SaveAllow, INTERRUPTED_REASON};
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, Person, PersonReply, Withdrawal,
};

/// `--approval ask` in a session.
pub struct ViewAsks {
    /// Fired by the prompt's Ctrl-C: a waiting ask is answered no.
    cancel: CancellationToken,
    /// `s` (save the rule) writes the entry to the workspace's troupe.toml.
    saver: SaveAllow,
}

impl ViewAsks {
    pub fn new(cancel: CancellationToken, saver: SaveAllow) -> Self {
        Self { cancel, saver }
    }
}

#[async_trait]
impl ApprovalProvider for ViewAsks {
    fn name(&self) -> &'static str {
        "session"
    }

    /// A person answers, at the session's view: every ask is a durable request.
    fn person(&self) -> Person {
        Person::AtTerminal
    }

    fn save_entry(&self, entry: &str) -> Option<String> {
        Some((self.saver)(entry).unwrap_or_else(|e| format!("not saved: {e}")))
    }

    /// Only reached without a team's requests (never in a session): no.
    async fn approve(&self, _request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.cancel.cancelled().await;
        ApprovalAnswer::deny(INTERRUPTED_REASON).by("interrupt")
    }

    async fn ask_person(
        &self,
        _request: &ApprovalRequest<'_>,
        withdrawn: Withdrawal<'_>,
    ) -> PersonReply {
        tokio::select! {
            _ = withdrawn => PersonReply::Withdrawn,
            () = self.cancel.cancelled() => PersonReply::Interrupted,
        }
    }
}
