//! The permission policy: rules, then the approval provider when the rules say `ask`; every
//! final decision is written to the audit sink before it takes effect — a PreToolUse hook's
//! deny too ([`PermissionPolicy::deny_by_hook`]): one audit path, one place that builds the
//! audit entry (`PermissionPolicy::record`).
//!
//! Rules are async: one that reads a port ([`PermissionRule::reads_ports`], e.g. the plan gate
//! reading the protocol store, the lease gate reading the roster) awaits it; so is the audit
//! sink.

use std::sync::Arc;

use super::approval::{ApprovalProvider, ApprovalRequest};
use super::audit::{input_digest, AuditEntry, AuditError, AuditSink};
use super::rules::{
    combine, Decision, EffectDefaults, PermissionRequest, PermissionRule, RuleVerdict,
};
use super::settings_rules::SettingsRules;
use crate::settings::RuleEntry;

/// The audit's name for the protected-path step (`protected+approval:terminal`).
pub const PROTECTED_RULE: &str = "protected";

/// A final decision: allowed or denied (never `ask`), with what decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionDecision {
    pub allowed: bool,
    /// What the rules said before any approval (`Ask` means the provider answered).
    pub rules_said: Decision,
    /// `default`, `<rule>`, or `<rule>+approval:<provider>` when a provider answered.
    pub rule: String,
    pub reason: String,
}

/// Rules + approval provider + audit sink. Cheap to clone (all shared).
#[derive(Clone)]
pub struct PermissionPolicy {
    rules: Vec<Arc<dyn PermissionRule>>,
    approval: Arc<dyn ApprovalProvider>,
    audit: Arc<dyn AuditSink>,
    /// The settings' rules when built by [`Self::from_settings`]: where an approval's
    /// "always" is remembered and where the prompt's suggestion comes from.
    settings: Option<Arc<SettingsRules>>,
}

impl PermissionPolicy {
    /// A policy with exactly these rules (no defaults added).
    pub fn new(
        rules: Vec<Arc<dyn PermissionRule>>,
        approval: Arc<dyn ApprovalProvider>,
        audit: Arc<dyn AuditSink>,
    ) -> Self {
        Self {
            rules,
            approval,
            audit,
            settings: None,
        }
    }

    /// The policy of SPEC §7 with the settings' `[permissions]` rules: a matching entry decides
    /// over the default policy ([`SettingsRules`]); rules added later with [`Self::with_rules`]
    /// (the plan gate) still deny above all. An approval answered "always" is remembered as a
    /// session allow shared by every policy derived from this one.
    pub fn from_settings(
        rules: &[RuleEntry],
        workspace: &std::path::Path,
        approval: Arc<dyn ApprovalProvider>,
        audit: Arc<dyn AuditSink>,
    ) -> Self {
        let settings = Arc::new(SettingsRules::new(rules, workspace));
        Self {
            rules: vec![settings.clone()],
            approval,
            audit,
            settings: Some(settings),
        }
    }

    /// The default policy of SPEC §7 ([`EffectDefaults`]).
    pub fn default_policy(approval: Arc<dyn ApprovalProvider>, audit: Arc<dyn AuditSink>) -> Self {
        Self::new(vec![Arc::new(EffectDefaults)], approval, audit)
    }

    /// The same policy with `extra` rules added after the existing ones, keeping the same
    /// approval provider and audit sink. Since the strongest verdict wins, an added deny beats
    /// the defaults' allow and ask; an added allow cannot loosen an existing ask or deny.
    pub fn with_rules(&self, extra: impl IntoIterator<Item = Arc<dyn PermissionRule>>) -> Self {
        let mut rules = self.rules.clone();
        rules.extend(extra);
        Self {
            rules,
            approval: self.approval.clone(),
            audit: self.audit.clone(),
            settings: self.settings.clone(),
        }
    }

    pub fn approval(&self) -> &Arc<dyn ApprovalProvider> {
        &self.approval
    }

    pub fn audit(&self) -> &Arc<dyn AuditSink> {
        &self.audit
    }

    /// What the rules alone say (no approval, no audit).
    pub async fn evaluate(&self, request: &PermissionRequest<'_>) -> RuleVerdict {
        // Collected first: a closure held across the awaits would make the future not `Send`.
        let rules: Vec<&dyn PermissionRule> = self.rules.iter().map(|r| r.as_ref()).collect();
        combine(rules, request).await
    }

    /// Audits a PreToolUse hook's deny as the policy's own decision (`hook:<name>`), and returns
    /// it. The deny stands even if it cannot be recorded (the error says so).
    pub async fn deny_by_hook(
        &self,
        request: &PermissionRequest<'_>,
        hook: &str,
        reason: String,
    ) -> (PermissionDecision, Result<(), AuditError>) {
        let decision = PermissionDecision {
            allowed: false,
            rules_said: Decision::Deny,
            rule: format!("hook:{hook}"),
            reason,
        };
        let recorded = self.record(request, &decision).await;
        (decision, recorded)
    }

    /// Writes `decision` about `request` to the audit sink: the one place an audit entry is built.
    async fn record(
        &self,
        request: &PermissionRequest<'_>,
        decision: &PermissionDecision,
    ) -> Result<(), AuditError> {
        self.audit
            .record(AuditEntry {
                agent: request.agent.clone(),
                tool: request.tool.to_owned(),
                allowed: decision.allowed,
                rule: decision.rule.clone(),
                reason: decision.reason.clone(),
                input_digest: input_digest(request.arguments),
                sandbox: request.sandbox,
            })
            .await
    }

    /// The approval provider's answer about `request`, asked for `reason`.
    async fn ask(
        &self,
        request: &PermissionRequest<'_>,
        reason: &str,
        suggestion: Option<&str>,
    ) -> super::approval::ApprovalAnswer {
        self.approval
            .approve(&ApprovalRequest {
                agent: request.agent,
                tool: request.tool,
                effect: request.effect,
                arguments: request.arguments,
                reason,
                suggestion,
                sandbox: request.sandbox,
                preview: request.preview,
                person_only: request.protected.is_some(),
            })
            .await
    }

    /// A write to a protected path (`crate::protected`): a deny of the rules stands; else a
    /// rule naming the path exactly allows it; else a person is asked — never a provider that
    /// answers on its own (`--approval auto`), never a broad rule (`write_file`).
    async fn decide_protected(
        &self,
        request: &PermissionRequest<'_>,
        hit: &crate::protected::Hit,
        verdict: RuleVerdict,
    ) -> PermissionDecision {
        if verdict.decision == Decision::Deny {
            return PermissionDecision {
                allowed: false,
                rules_said: Decision::Deny,
                rule: verdict.rule,
                reason: verdict.reason,
            };
        }
        let exact = self
            .settings
            .as_ref()
            .and_then(|s| s.exact_allow(request, &hit.shown));
        if let Some(rule) = exact {
            return PermissionDecision {
                allowed: true,
                rules_said: Decision::Allow,
                reason: format!(
                    "{}; allowed by {rule}, which names it exactly",
                    hit.explain()
                ),
                rule,
            };
        }
        let suggestion = format!("{}({})", request.tool, hit.shown);
        if self.approval.person() == super::approval::Person::No {
            return PermissionDecision {
                allowed: false,
                rules_said: Decision::Ask,
                rule: PROTECTED_RULE.to_owned(),
                reason: format!(
                    "{}: a write there is asked of a person, and no person answers in this run \
                     ({} approval); only a rule naming the path exactly ({suggestion}) allows it \
                     without asking",
                    hit.explain(),
                    self.approval.name()
                ),
            };
        }
        let reason = format!(
            "{}: a write there is always asked of a person",
            hit.explain()
        );
        self.asked(request, PROTECTED_RULE, &reason, Some(&suggestion))
            .await
    }

    /// The provider's answer for a call the rules sent to `ask` (by `rule`, for `reason`), as a
    /// decision; an "always" answer is remembered as a session allow.
    async fn asked(
        &self,
        request: &PermissionRequest<'_>,
        rule: &str,
        reason: &str,
        suggestion: Option<&str>,
    ) -> PermissionDecision {
        let answer = self.ask(request, reason, suggestion).await;
        if let (true, Some(entry), Some(settings)) =
            (answer.approved, &answer.remember, &self.settings)
        {
            settings.session().remember(entry);
        }
        PermissionDecision {
            allowed: answer.approved,
            rules_said: Decision::Ask,
            rule: format!(
                "{rule}+approval:{}",
                answer.by.as_deref().unwrap_or(self.approval.name())
            ),
            reason: answer.reason,
        }
    }

    /// Asks the approval provider whether `request`'s command, refused by the sandbox
    /// (`refusal`), may run once more unconfined; the answer is audited as
    /// `sandbox-rerun+approval:<provider>` with `"sandbox": "off"`. Rules are not consulted: the
    /// call already passed them, and no rule can grant leaving the sandbox — only a person can.
    pub async fn approve_unconfined_rerun(
        &self,
        request: &PermissionRequest<'_>,
        refusal: &str,
    ) -> Result<PermissionDecision, AuditError> {
        let reason = format!("rerun this command outside the sandbox? It was refused: {refusal}");
        let answer = self.ask(request, &reason, None).await;
        let decision = PermissionDecision {
            allowed: answer.approved,
            rules_said: Decision::Ask,
            rule: format!(
                "sandbox-rerun+approval:{}",
                answer.by.as_deref().unwrap_or(self.approval.name())
            ),
            reason: answer.reason,
        };
        let unconfined = PermissionRequest {
            sandbox: Some(crate::sandbox::Mode::Off),
            ..*request
        };
        self.record(&unconfined, &decision).await?;
        Ok(decision)
    }

    /// Rules, then the approval provider for `ask`; the final decision is audited. An audit
    /// failure is returned as an error and the caller must not run the tool (fail closed).
    pub async fn decide(
        &self,
        request: &PermissionRequest<'_>,
    ) -> Result<PermissionDecision, AuditError> {
        let verdict = self.evaluate(request).await;
        if let Some(hit) = request.protected {
            let decision = self.decide_protected(request, hit, verdict).await;
            self.record(request, &decision).await?;
            return Ok(decision);
        }
        let decision = match verdict.decision {
            Decision::Allow | Decision::Deny => PermissionDecision {
                allowed: verdict.decision == Decision::Allow,
                rules_said: verdict.decision,
                rule: verdict.rule,
                reason: verdict.reason,
            },
            Decision::Ask => {
                let suggestion = self.settings.as_ref().and_then(|s| s.suggestion(request));
                self.asked(
                    request,
                    &verdict.rule,
                    &verdict.reason,
                    suggestion.as_deref(),
                )
                .await
            }
        };
        // The audit sink appends off the async threads.
        self.record(request, &decision).await?;
        Ok(decision)
    }
}
