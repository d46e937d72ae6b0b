//! The approval prompt on a terminal with spinners on it: while the prompt is up, the spinners
//! are off the screen and event lines wait, so that `Allow? [y/N]` stays the last thing shown.

use std::sync::Arc;

use async_trait::async_trait;
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, Person, PersonReply, Withdrawal,
};

use super::Console;

/// Pauses `console` around each question `inner` asks.
pub struct PausingApproval {
    pub inner: Arc<dyn ApprovalProvider>,
    pub console: Arc<Console>,
}

#[async_trait]
impl ApprovalProvider for PausingApproval {
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
        let _paused = self.console.pause();
        self.inner.ask_person(request, withdrawn).await
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        let _paused = self.console.pause();
        self.inner.approve(request).await
    }
}
