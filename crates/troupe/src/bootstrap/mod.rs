//! The composition root: the only place where concrete adapters are chosen and wired.
//!
//! [`build_team`] builds, in dependency order: the run lock; the stores — one mailbox store
//! after recovery, the protocol store, the audit sink, the task board; what a dead run left
//! half done — recorded answers delivered, orphan jobs settled; the base permission policy;
//! background jobs and cron; the team runtime, which builds its own postman and protocol
//! runtime on the one mailbox store; the teammate factory, whose policy for each teammate is
//! the base policy `with_rules([its plan gate])`; the lead's tools in [`LEAD_TOOLS`] order and
//! runner; the mailbox watch. [`Team::close`] runs in reverse: teammates (workers cancelled at
//! safe points, in-flight messages released), then cron, then background jobs (whole process
//! groups stopped), then the watch and the run lock. [`build_worker`] (`troupe worker`, a
//! process of a shared team) starts and closes the same way, without cron, the lead or
//! the watch.
//!
//! Every dispatcher (lead, subagent, teammates) and the job supervisor get the one [`Redactor`]
//! of the settings, so no tool result or job output holds the API key.
//!
//! The files, each depending only on those above it:
//! - `options.rs` — what a run is built from ([`TeamSettings`], [`SandboxOptions`],
//!   [`EventOptions`], [`LongLived`], [`StoreChoice`]), which model answers which agent
//!   ([`ModelChooser`]), and [`BootstrapError`].
//! - `shared.rs` — the composition of a shared team (PostgreSQL): which stores go to the
//!   database, teammate leases, wakeups from other processes, the takeover look.
//! - `prompts.rs` — the tool lists ([`LEAD_TOOLS`], [`TEAMMATE_TOOLS`]) and what agents are
//!   told: their system prompts, their plan gate, the living prompt; `rule_tools.rs` — that
//!   every permission rule names one of those tools or a configured MCP server's
//!   ([`check_rule_tools`]).
//! - `kit.rs` — what every runner gets for long runs: usage and token budget, context budget
//!   and artifacts, memory, the settings' hooks.
//! - `approvals.rs` — the run's approval provider as durable permission requests (SPEC §13):
//!   wrapped at the start, bound to the team once built.
//! - `observe.rs` — the run's event stream and traces.
//! - `run_lock.rs` — the workspace's run lock taken at a run's start (`Busy` when another run
//!   holds it; waited for while `troupe gc` holds it for its short roll of the event stream).
//! - `start.rs` — the run's start and close, one each for a lead and a worker: run lock, event
//!   stream, stores, what a dead run left half done, base policy and background jobs; the
//!   close in reverse order.
//! - `teammates.rs` — the factory of teammates' runners (their policy, tools, prompt, model
//!   and worktree) and the agent definitions; `factory.rs` — the team runtime on the opened
//!   stores.
//! - `lead.rs` — the lead's runner: its tools, prompt, model and conversation.
//! - `team.rs` — [`build_team`] and [`Team`]; `worker.rs` — [`build_worker`] and [`Worker`].
//! - `heap.rs` — the heap a run freed handed back to the system at [`Team::close`].
//! - `no_team.rs` — the adapters of the commands that run no team: [`inspector`],
//!   [`inspector_with`], [`PlanReview`] (`troupe review`) and [`send_as_user`], on the one bundle of
//!   stores `team_stores.rs` builds for either backend;
//!   `compact.rs` — [`compact_conversation`] (`troupe compact`); `views.rs` — [`TeamView`], a
//!   shared team opened by the commands that look at it without running it (`troupe log`,
//!   `timeline`, `serve`), and [`open_memory`] (`troupe memory`, either backend).
//!
//! [`Redactor`]: crate::secrets::Redactor

mod approvals;
mod compact;
mod factory;
mod heap;
mod kit;
mod lead;
mod no_team;
mod observe;
mod options;
mod prompts;
mod rule_tools;
mod run_lock;
mod shared;
mod start;
mod team;
mod team_stores;
mod teammates;
mod views;
mod worker;

pub use compact::{compact_conversation, Compacted};
pub use no_team::{inspector, inspector_on_files, inspector_with, send_as_user, PlanReview};
pub use options::{
    agent_model, BootstrapError, EventOptions, LongLived, ModelChooser, PgOptions, SameModel,
    SandboxOptions, ScriptedPerAgent, StoreChoice, TeamSettings,
};
pub use prompts::{lead_system_prompt, teammate_system_prompt, LEAD_TOOLS, TEAMMATE_TOOLS};
pub use rule_tools::check_rule_tools;
pub use shared::{takeover_bound, takeover_look, DEFAULT_SHARED_LEASE};
pub use team::{build_team, Team};
pub use views::{open_memory, TeamView};
pub use worker::{build_worker, Worker};
