//! The roster, `.troupe/team.json`: who is on the team and in what state, for inspection.

use serde::{Deserialize, Serialize};

use crate::strict::parse_json_bytes;
use crate::{AgentName, RequestId, UtcTime, WireError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TeammateStatus {
    /// A worker is processing the teammate's mailbox.
    Running,
    /// No worker: the mailbox was empty and the worker task ended.
    Idle,
    /// A message could not be processed for a reason other than its own validity; see `detail`.
    Failed,
    /// The teammate answered a shutdown request and takes no more messages.
    Shutdown,
}

impl TeammateStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Idle => "idle",
            Self::Failed => "failed",
            Self::Shutdown => "shutdown",
        }
    }
}

/// Where a teammate's files are (SPEC §12): the lead's checkout, or a git worktree of its own
/// (`.troupe/worktrees/<name>` on branch `troupe/<name>`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// The teammate works in the lead's workspace, as before worktrees existed.
    #[default]
    None,
    /// The teammate works in a git worktree of its own and the lead merges its branch.
    Worktree,
}

impl Isolation {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Worktree => "worktree",
        }
    }

    /// `none` or `worktree`.
    pub fn parse(text: &str) -> Result<Self, WireError> {
        match text {
            "none" => Ok(Self::None),
            "worktree" => Ok(Self::Worktree),
            other => Err(WireError::new(format!(
                "isolation must be \"worktree\" or \"none\", not {other:?}"
            ))),
        }
    }

    pub fn is_none(&self) -> bool {
        *self == Self::None
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeammateRecord {
    pub name: AgentName,
    pub role: String,
    pub status: TeammateStatus,
    /// Why the teammate failed (null otherwise).
    pub detail: Option<String>,
    pub updated_at_utc: UtcTime,
    /// Spawned with `plan_required: true`: the plan gate denies its write and execute tools from
    /// its first call until a plan of its is approved (SPEC §6). Kept so that a later run gates
    /// it the same way. Missing in files written before the key existed: `false`.
    #[serde(default)]
    pub plan_required: bool,
    /// The latest plan request under this name when this teammate was spawned — a plan of an
    /// earlier teammate of the same name, which the plan gate does not count as this one's.
    /// Null when there was none.
    #[serde(default)]
    pub earlier_plan: Option<RequestId>,
    /// The agent definition (`agents/<name>.md`) it was spawned from, so that a later run builds
    /// it the same way. Absent when none (and in files written before the key existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<AgentName>,
    /// Where its files are, so that a later run (or a worker in another process) builds it in
    /// the same place. Absent when `none` (and in files written before the key existed).
    #[serde(default, skip_serializing_if = "Isolation::is_none")]
    pub isolation: Isolation,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamRoster {
    pub version: u64,
    pub teammates: Vec<TeammateRecord>,
}

impl TeamRoster {
    pub const VERSION: u64 = 1;

    pub fn empty() -> Self {
        Self {
            version: Self::VERSION,
            teammates: Vec::new(),
        }
    }

    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        let value = parse_json_bytes(bytes, "team")?;
        let roster: Self =
            serde_json::from_value(value).map_err(|e| WireError::new(format!("team: {e}")))?;
        if roster.version != Self::VERSION {
            return Err(WireError::new(format!(
                "team: unsupported version {}",
                roster.version
            )));
        }
        let mut names = std::collections::HashSet::new();
        if let Some(twice) = roster.teammates.iter().find(|t| !names.insert(&t.name)) {
            return Err(WireError::new(format!(
                "team: teammate {} appears twice",
                twice.name
            )));
        }
        Ok(roster)
    }

    pub fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MATE: &str = r#"{"name":"writer","role":"r","status":"idle","detail":null,"updated_at_utc":"2026-07-30T08:00:00.000Z"}"#;

    #[test]
    fn duplicate_keys_and_teammates_are_refused() {
        let one = format!(r#"{{"version":1,"teammates":[{MATE}]}}"#);
        assert!(TeamRoster::from_json_bytes(one.as_bytes()).is_ok());
        let key_twice = one.replace(r#""status":"idle""#, r#""status":"idle","status":"failed""#);
        let err = TeamRoster::from_json_bytes(key_twice.as_bytes()).unwrap_err();
        assert!(err.0.starts_with("team: duplicate key \"status\""), "{err}");
        let mate_twice = format!(r#"{{"version":1,"teammates":[{MATE},{MATE}]}}"#);
        let err = TeamRoster::from_json_bytes(mate_twice.as_bytes()).unwrap_err();
        assert_eq!(err.0, "team: teammate writer appears twice");
    }
}
