//! An approval provider that reports each question and its answer to the event stream
//! (`approval_asked`, `approval_answered`, SPEC §10), around any provider.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

use super::approval::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, Person, PersonReply, Withdrawal,
};
use crate::store::events::kinds::{self, preview};
use crate::store::events::EventSink;

pub struct ObservedApproval {
    inner: Arc<dyn ApprovalProvider>,
    events: Arc<dyn EventSink>,
}

impl ObservedApproval {
    pub fn new(inner: Arc<dyn ApprovalProvider>, events: Arc<dyn EventSink>) -> Self {
        Self { inner, events }
    }
}

#[async_trait]
impl ApprovalProvider for ObservedApproval {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn person(&self) -> Person {
        self.inner.person()
    }

    fn save_entry(&self, entry: &str) -> Option<String> {
        self.inner.save_entry(entry)
    }

    fn tell(&self, line: &str) {
        self.inner.tell(line);
    }

    fn answered_by(&self) -> &'static str {
        self.inner.answered_by()
    }

    async fn ask_person(
        &self,
        request: &ApprovalRequest<'_>,
        withdrawn: Withdrawal<'_>,
    ) -> PersonReply {
        self.inner.ask_person(request, withdrawn).await
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.events.emit(
            request.agent.as_str(),
            kinds::APPROVAL_ASKED,
            kinds::fields(json!({
                "tool": request.tool,
                "preview": preview(&request.arguments.to_string()),
                "reason": request.reason,
                "provider": self.inner.name(),
            })),
        );
        let answer = self.inner.approve(request).await;
        self.events.emit(
            request.agent.as_str(),
            kinds::APPROVAL_ANSWERED,
            kinds::fields(json!({
                "tool": request.tool,
                "allowed": answer.approved,
                "reason": answer.reason,
                "provider": self.inner.name(),
            })),
        );
        answer
    }
}
