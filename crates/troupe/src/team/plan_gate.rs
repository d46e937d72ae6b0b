//! The plan gate (SPEC §6): a permission rule added to teammates' policies only, one per
//! teammate (built with its runner).
//!
//! - no plan of this teammate yet → no opinion, unless the teammate is gated from its start
//!   ([`GateStart`]: spawned with `plan_required`, or the run requires plans) — then every tool
//!   except `read` tools, `send_message` and `submit_plan` is denied ("no plan approved yet;
//!   submit_plan first");
//! - latest plan pending, rejected or expired → the same tools are denied, with a reason naming
//!   the request;
//! - latest plan approved → no opinion: the normal policy applies, still asking and auditing.
//!
//! Only the effect counts, never the scope: a write to troupe's own state is denied like any
//! other, so a gated teammate cannot `claim_task` or `complete_task` (SPEC §12: the plan gate
//! applies before any claim), while `list_tasks`, `get_task`, `glob` and `grep` (reads) stay
//! allowed.
//!
//! "Latest" is the protocol store's notion: the last plan request the teammate created, by
//! creation order. A plan of an earlier teammate with the same name (one that was shut down or
//! failed, then spawned again) is not this teammate's: the roster records the latest plan under
//! the name at spawn time, and the gate treats it as no plan. The gate reads the store on every
//! call, so a plan approved or rejected by another process is seen at once. A store that cannot
//! be read closes the gate (fail closed).

use std::sync::Arc;

use troupe_wire::{RequestId, RequestStatus};

use crate::clock::Clock;
use crate::permissions::Effect;
use crate::permissions::{Decision, PermissionRequest, PermissionRule, RuleVerdict};
use crate::store::protocol::ProtocolStore;

/// Tools a gated teammate keeps: it must be able to talk and to submit a new plan.
pub const UNGATED_TOOLS: [&str; 2] = ["send_message", "submit_plan"];

/// When a teammate's gate first closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateStart {
    /// Only once it submits a plan: a teammate that never plans is not restricted.
    AtFirstPlan,
    /// From its first call: it was spawned with `plan_required: true`.
    PlanRequired,
    /// From its first call: the run requires a plan of every teammate (`--require-plans`).
    RunRequiresPlans,
}

impl GateStart {
    /// The teammate's own rule wins in the wording; either makes it gated from the start.
    pub fn of(plan_required: bool, run_requires_plans: bool) -> Self {
        match (plan_required, run_requires_plans) {
            (true, _) => Self::PlanRequired,
            (false, true) => Self::RunRequiresPlans,
            (false, false) => Self::AtFirstPlan,
        }
    }

    pub fn from_first_call(self) -> bool {
        self != Self::AtFirstPlan
    }

    /// Why the teammate is gated before any plan (for reasons and prompts).
    pub fn cause(self) -> &'static str {
        match self {
            Self::AtFirstPlan => "a teammate is gated only once it submits a plan",
            Self::PlanRequired => "this teammate was spawned with plan_required",
            Self::RunRequiresPlans => {
                "this run requires a plan of every teammate (--require-plans)"
            }
        }
    }
}

pub struct PlanGateRule {
    protocol: Arc<dyn ProtocolStore>,
    clock: Arc<dyn Clock>,
    start: GateStart,
    /// A plan under the same name from before this teammate was spawned: not its own.
    earlier_plan: Option<RequestId>,
}

impl PlanGateRule {
    pub const RULE: &'static str = "plan_gate";

    /// A gate that closes at the teammate's first plan and counts every plan under its name.
    pub fn new(protocol: Arc<dyn ProtocolStore>, clock: Arc<dyn Clock>) -> Self {
        Self {
            protocol,
            clock,
            start: GateStart::AtFirstPlan,
            earlier_plan: None,
        }
    }

    /// When the gate first closes.
    pub fn starting(mut self, start: GateStart) -> Self {
        self.start = start;
        self
    }

    /// Treats `earlier_plan` (when it is still the latest plan under the name) as no plan.
    pub fn ignoring(mut self, earlier_plan: Option<RequestId>) -> Self {
        self.earlier_plan = earlier_plan;
        self
    }

    fn no_plan_yet(&self, tool: &str) -> Option<RuleVerdict> {
        self.start.from_first_call().then(|| {
            RuleVerdict::new(
                Decision::Deny,
                Self::RULE,
                format!(
                    "no plan approved yet; submit_plan first ({}: {tool} is blocked until the \
                     lead approves a plan of yours)",
                    self.start.cause()
                ),
            )
        })
    }
}

#[async_trait::async_trait]
impl PermissionRule for PlanGateRule {
    /// It reads the latest plan from the protocol store on every call (an async port).
    fn reads_ports(&self) -> bool {
        true
    }

    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        if request.effect == Effect::Read || UNGATED_TOOLS.contains(&request.tool) {
            return None;
        }
        let deny = |reason: String| Some(RuleVerdict::new(Decision::Deny, Self::RULE, reason));
        match self.protocol.latest_plan_of(request.agent).await {
            Ok(None) => self.no_plan_yet(request.tool),
            Ok(Some(plan)) if Some(plan.id()) == self.earlier_plan => {
                self.no_plan_yet(request.tool)
            }
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
