//! The lease gate: in a team shared through PostgreSQL, a teammate's tools with effects run
//! only while this process holds the teammate's lease. A worker that paused past its lease
//! (SIGSTOP, a long GC-like stall, a lost network) and resumes mid-turn finds another worker
//! running the teammate: its writes and commands are denied before any handler runs, so no
//! effect happens twice. Reads stay allowed (they change nothing). Like the plan gate it is a
//! permission rule on teammates' policies; the policy awaits it (it reads the async roster).

use std::sync::Arc;

use troupe_wire::AgentName;

use crate::permissions::{Decision, Effect, PermissionRequest, PermissionRule, RuleVerdict};
use crate::store::roster::LeasedRoster;
use crate::store::BackendError;

pub struct LeaseGate {
    roster: Arc<dyn LeasedRoster>,
    name: AgentName,
}

impl LeaseGate {
    pub const RULE: &'static str = "lease_gate";

    pub fn new(roster: Arc<dyn LeasedRoster>, name: AgentName) -> Self {
        Self { roster, name }
    }
}

impl LeaseGate {
    /// The verdict on `request` given what the roster said of the lease.
    fn verdict(
        &self,
        request: &PermissionRequest<'_>,
        holds: Result<bool, BackendError>,
    ) -> Option<RuleVerdict> {
        let deny = |reason: String| Some(RuleVerdict::new(Decision::Deny, Self::RULE, reason));
        match holds {
            Ok(true) => None,
            Ok(false) => deny(format!(
                "this worker no longer holds {}'s lease (another worker runs it now); {} is \
                 blocked",
                self.name, request.tool
            )),
            Err(e) => deny(format!(
                "the lease of {} could not be checked ({e}); {} is blocked",
                self.name, request.tool
            )),
        }
    }
}

#[async_trait::async_trait]
impl PermissionRule for LeaseGate {
    fn reads_ports(&self) -> bool {
        true
    }

    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        if request.effect == Effect::Read {
            return None;
        }
        let holds = self.roster.holds(&self.name).await;
        self.verdict(request, holds)
    }
}
