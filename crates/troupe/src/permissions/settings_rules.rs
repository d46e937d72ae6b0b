//! The `[permissions]` rules of the settings as one [`PermissionRule`] (SPEC §7): among the
//! entries that match a call, deny > ask > allow (the first in order among equals), and the
//! verdict names the entry (`troupe.toml allow[2] "shell(cargo test:*)"`); when none matches,
//! the default policy ([`EffectDefaults`]) decides. A matching entry thus decides *over* the
//! defaults (an allow for `shell(cargo test:*)` runs it without asking), while rules added
//! beside this one — the plan gate, the lead-only rule — still deny above all, since the
//! policy keeps the strongest verdict.
//!
//! The run's **session allows** ([`SessionAllows`]) are allow entries remembered at the
//! approval prompt ("always"): in memory, shared by every clone of the policy, named
//! `session allow "shell(cargo test:*)"` in the audit.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::patterns::{suggest, RulePattern, Use};
use super::rules::{Decision, EffectDefaults, PermissionRequest, PermissionRule, RuleVerdict};
use crate::settings::{RuleEntry, RuleList};

struct Entry {
    decision: Decision,
    name: String,
    pattern: RulePattern,
}

impl Entry {
    fn of(entry: &RuleEntry) -> Self {
        Self {
            decision: match entry.list {
                RuleList::Deny => Decision::Deny,
                RuleList::Ask => Decision::Ask,
                RuleList::Allow => Decision::Allow,
            },
            name: entry.describe(),
            pattern: RulePattern::parse(&entry.text),
        }
    }

    fn session(text: &str) -> Self {
        Self {
            decision: Decision::Allow,
            name: format!("session allow {text:?}"),
            pattern: RulePattern::parse(text),
        }
    }

    fn applies(&self, request: &PermissionRequest<'_>, workspace: &Path) -> bool {
        let usage = match self.decision {
            Decision::Allow => Use::Allow,
            Decision::Ask | Decision::Deny => Use::Restrict,
        };
        self.pattern
            .matches(request.tool, request.arguments, workspace, usage)
    }
}

/// Allow entries remembered for the rest of the run. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct SessionAllows {
    entries: Arc<RwLock<Vec<Entry>>>,
}

impl SessionAllows {
    /// Remembers `text` (an entry such as `shell(cargo test:*)`) as an allow for this run.
    pub fn remember(&self, text: &str) {
        let mut entries = self
            .entries
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let name = format!("session allow {text:?}");
        if !entries.iter().any(|e| e.name == name) {
            entries.push(Entry::session(text));
        }
    }

    /// The remembered entries' texts' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.entries
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .map(|e| e.name.clone())
            .collect()
    }
}

/// The settings' rules over the default policy, with the run's session allows.
pub struct SettingsRules {
    entries: Vec<Entry>,
    session: SessionAllows,
    workspace: PathBuf,
}

impl SettingsRules {
    pub const RULE_SESSION: &'static str = "session allow";

    pub fn new(rules: &[RuleEntry], workspace: &Path) -> Self {
        Self {
            entries: rules.iter().map(Entry::of).collect(),
            session: SessionAllows::default(),
            workspace: workspace.to_path_buf(),
        }
    }

    /// Shares `session` (the policy's) instead of a fresh one.
    pub fn with_session(mut self, session: SessionAllows) -> Self {
        self.session = session;
        self
    }

    pub fn session(&self) -> &SessionAllows {
        &self.session
    }

    /// The entry the approval prompt suggests for this call (see [`suggest`]).
    pub fn suggestion(&self, request: &PermissionRequest<'_>) -> Option<String> {
        suggest(request.tool, request.arguments, &self.workspace)
    }

    /// The first allow entry (settings, then session allows) that names this call's tool on
    /// exactly the workspace path `relative`, by name: what alone may allow a write to a
    /// protected path.
    pub fn exact_allow(&self, request: &PermissionRequest<'_>, relative: &str) -> Option<String> {
        let session = self
            .session
            .entries
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.entries
            .iter()
            .chain(session.iter())
            .find(|e| {
                e.decision == Decision::Allow && e.pattern.names_exactly(request.tool, relative)
            })
            .map(|e| e.name.clone())
    }

    /// The strongest matching entry (settings, then session allows), if any.
    pub fn matching(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        let session = self
            .session
            .entries
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut strongest: Option<&Entry> = None;
        for entry in self.entries.iter().chain(session.iter()) {
            if !entry.applies(request, &self.workspace) {
                continue;
            }
            if strongest.is_none_or(|s| entry.decision > s.decision) {
                strongest = Some(entry);
            }
        }
        strongest.map(|entry| {
            let reason = match entry.decision {
                Decision::Allow => format!("allowed by {}", entry.name),
                Decision::Ask => format!("{} asks for approval", entry.name),
                Decision::Deny => format!("denied by {}", entry.name),
            };
            RuleVerdict::new(entry.decision, entry.name.clone(), reason)
        })
    }
}

#[async_trait::async_trait]
impl PermissionRule for SettingsRules {
    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        match self.matching(request) {
            Some(verdict) => Some(verdict),
            None => EffectDefaults.evaluate(request).await,
        }
    }
}
