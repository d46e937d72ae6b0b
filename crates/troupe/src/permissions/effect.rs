//! What a tool does to the world ([`Effect`]) and whose state it changes ([`Scope`]): the two
//! facts a tool declares and the default permission rule judges (SPEC §7). Defined here, beside
//! the rules that read them; `tools` re-exports them for tool definitions.

use serde::{Deserialize, Serialize};

/// What a tool can do to the world. The default permission policy is keyed on it, together
/// with the tool's [`Scope`] (SPEC §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Looks, changes nothing.
    Read,
    /// Changes state: files in the workspace, or — for a tool whose [`Scope`] is
    /// [`Scope::TroupeState`] — only troupe's own records.
    Write,
    /// Runs arbitrary programs.
    Execute,
    /// Acts on the team or the protocols (messages, spawning, plans).
    External,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Execute => "execute",
            Effect::External => "external",
        }
    }
}

/// Where a tool's changes land. It does not soften the [`Effect`] (a bookkeeping tool still
/// *writes*); it tells the default policy whose state is written (SPEC §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The workspace, processes, the outside world: what a person may want to approve.
    #[default]
    World,
    /// Only troupe's own bookkeeping — the todo list, the task board, cron jobs — never a
    /// workspace file or a process. The default policy allows such writes without asking.
    TroupeState,
}
