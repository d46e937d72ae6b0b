//! The plan gate (SPEC §6): a permission rule added to teammates' policies only.
//!
//! - no plan ever submitted → no opinion (no extra restriction);
//! - latest plan pending, rejected or expired → every tool except `read` tools, `send_message`
//!   and `submit_plan` is denied, with a reason naming the request;
//! - latest plan approved → no opinion: the normal policy applies, still asking and auditing.
//!
//! "Latest" is the protocol store's notion: the last plan request the teammate created, by
//! creation order. The gate reads the store on every call, so a plan approved or rejected by
//! another process is seen at once. A store that cannot be read closes the gate (fail closed).

use std::sync::Arc;

use troupe_wire::RequestStatus;

use crate::clock::Clock;
use crate::permissions::{Decision, PermissionRequest, PermissionRule, RuleVerdict};
use crate::store::protocol::ProtocolStore;
use crate::tools::Effect;

/// Tools a gated teammate keeps: it must be able to talk and to submit a new plan.
pub const UNGATED_TOOLS: [&str; 2] = ["send_message", "submit_plan"];

pub struct PlanGateRule {
    protocol: Arc<dyn ProtocolStore>,
    clock: Arc<dyn Clock>,
}

impl PlanGateRule {
    pub const RULE: &'static str = "plan_gate";

    pub fn new(protocol: Arc<dyn ProtocolStore>, clock: Arc<dyn Clock>) -> Self {
        Self { protocol, clock }
    }
}

impl PermissionRule for PlanGateRule {
    fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        if request.effect == Effect::Read || UNGATED_TOOLS.contains(&request.tool) {
            return None;
        }
        let deny = |reason: String| Some(RuleVerdict::new(Decision::Deny, Self::RULE, reason));
        match self.protocol.latest_plan_of(request.agent) {
            Ok(None) => None,
            Ok(Some(plan)) => match plan.status_at(self.clock.now()) {
                RequestStatus::Approved => None,
                status @ (RequestStatus::Pending
                | RequestStatus::Rejected
                | RequestStatus::Expired) => {
                    let next = match status {
                        RequestStatus::Pending => "wait for the lead's review",
                        _ => "submit a revised plan with submit_plan",
                    };
                    deny(format!(
                        "plan request {} is {status}: {} is blocked until a plan is approved ({next})",
                        plan.id(),
                        request.tool
                    ))
                }
            },
            Err(e) => deny(format!(
                "the plan gate could not read the protocol store ({e}); {} is blocked",
                request.tool
            )),
        }
    }
}
