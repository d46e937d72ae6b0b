//! The agent: one conversation history and the runner that loops model → tools → model.
//!
//! - [`context`]: keeping a conversation inside the model's window (SPEC §9): the tool-result
//!   budget, micro-compaction, summary compaction and what it never loses.
//! - [`history`]: the conversation, with idempotency keys so a re-delivered input is appended once.
//! - [`memory`]: the model's side of durable memory (extract, select, consolidate) and the
//!   [`memory::Memory`] facade over the store.
//! - [`runner`]: the tool-call loop, its max-turns bound and its cancellation safe points.
//! - [`observer`]: what a runner reports while it works (the CLI shows it on stderr).
//! - [`subagent_tool`]: the `task` tool, which runs a one-shot subagent — a runner of its own.
//! - [`compactor`]: where compaction sits in the runner's loop (before each call, after a
//!   prompt-too-long refusal) and the tool-result budget.
//! - [`transcript`]: each agent's conversation on disk, so a later run continues it.
//! - [`prompt`]: the living system prompt's port.
//! - [`usage`]: the tokens each agent spends, summed for the run and logged to `usage.jsonl`.

pub mod compactor;
pub mod context;
pub mod history;
pub mod memory;
pub mod observer;
pub mod prompt;
pub mod runner;
pub mod subagent_tool;
pub mod transcript;
pub mod usage;

pub use history::History;
pub use observer::{NullObserver, RunObserver, TurnSummary};
pub use runner::{Runner, RunnerError, TurnEnd, TurnOutcome};
pub use subagent_tool::SubagentTool;
pub use usage::{NoUsage, UsageSink};
