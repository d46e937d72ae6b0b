//! The lead-only rule: `spawn_teammate`, `request_shutdown` and `review_plan` act for the lead
//! (SPEC §4.1, §6); any other agent's call of them is denied by the permission policy — and so
//! audited as denied — before a handler runs. Added to teammates' policies next to their plan
//! gate; tools never check who calls them.

use crate::permissions::{Decision, PermissionRequest, PermissionRule, RuleVerdict};

/// The tools only the lead may call.
pub const LEAD_ONLY_TOOLS: [&str; 3] = ["spawn_teammate", "request_shutdown", "review_plan"];

#[derive(Debug, Clone, Copy, Default)]
pub struct LeadOnlyRule;

impl LeadOnlyRule {
    pub const RULE: &'static str = "lead_only";
}

#[async_trait::async_trait]
impl PermissionRule for LeadOnlyRule {
    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        (!request.agent.is_lead() && LEAD_ONLY_TOOLS.contains(&request.tool)).then(|| {
            RuleVerdict::new(
                Decision::Deny,
                Self::RULE,
                format!("only the lead may call {}", request.tool),
            )
        })
    }
}
