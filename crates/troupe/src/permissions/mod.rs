//! Permissions (SPEC §7): who may run which tool, who is asked, and the record of every answer.
//!
//! # Layout
//!
//! - [`effect`]: what a tool declares — its effect and scope — and the rules judge.
//! - [`rules`]: pure rules and how their verdicts combine (deny > ask > allow).
//! - [`patterns`], [`shell_words`]: a settings entry's pattern, matched against a call (its
//!   syntax checked at load by [`check_rule`], which lives in `settings`, the layer below).
//! - [`settings_rules`]: the settings' `[permissions]` entries over the defaults; session allows.
//! - [`policy`]: rules + approval provider + audit sink; the default policy of SPEC §7.
//! - [`approval`]: the `ApprovalProvider` port — automatic, deny-all, and the terminal prompt.
//! - [`audit`]: the `AuditSink` port — `.troupe/audit.jsonl` and an in-memory sink for tests.
//! - [`hooks`]: PreToolUse / PostToolUse hooks around the handler.
//!
//! **Architecture Invariant:** an approval can only turn `ask` into allow or deny; nothing loosens
//! a deny. The approval provider is never consulted for a call the rules deny.

pub mod approval;
pub mod audit;
pub mod effect;
pub mod hooks;
pub mod observed;
pub mod patterns;
pub mod policy;
pub mod rules;
pub mod settings_rules;
pub mod shell_words;

pub use approval::{
    person_answer, terminal_answer, ApprovalAnswer, ApprovalProvider, ApprovalRequest,
    AutoApproval, DenyApproval, Person, PersonReply, Preview, SaveAllow, TerminalApproval,
    Withdrawal,
};
pub use audit::{AuditEntry, AuditError, AuditRecord, AuditSink, JsonlAuditSink, MemoryAuditSink};
pub use effect::{Effect, Scope};
pub use hooks::{HookDecision, Hooks, PostToolUse, PreToolUse};
pub use patterns::check_rule;
pub use policy::{PermissionDecision, PermissionPolicy};
pub use rules::{Decision, EffectDefaults, PermissionRequest, PermissionRule, RuleVerdict};
pub use settings_rules::{SessionAllows, SettingsRules};
