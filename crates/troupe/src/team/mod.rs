//! The team: persistent teammates, events for the lead, the two protocols at runtime, the plan
//! gate, and the driver of a run.
//!
//! - [`postman`]: builds and sends messages through the one shared mailbox store; wakes recipients.
//! - [`protocol`]: register-before-send requests and their responses (SPEC §6).
//! - [`runtime`]: the public `TeamRuntime` — spawning, statuses, closing — which builds its own
//!   postman and protocol runtime.
//! - `workers`: the worker lifecycle (slots, tasks, completed messages), one private type.
//! - `worker`: what a teammate's worker does with each message, through a small context.
//! - [`definitions`]: agent definitions (`agents/<name>.md`) the lead spawns teammates from.
//! - [`driver`]: the lead's user turn, then event turns until quiescent.
//! - [`events`]: the JSON events the lead's history receives.
//! - [`plan_gate`]: the permission rule added to teammates' policies.
//! - [`lead_only`]: the rule, also on teammates' policies, that keeps the lead's team tools the
//!   lead's.
//! - [`living_prompt`]: the lead's and teammates' system prompts, rebuilt when the roster,
//!   pending requests, selected memory or the project's instructions change.
//! - [`instructions`]: the project's instructions in every prompt — `AGENTS.md` (else
//!   `CLAUDE.md`) or `[context] files`, capped — and the other `AGENTS.md` files, listed.
//! - [`roster`]: the roster in `team.json`.
//! - [`tools`]: the team and protocol tools.
//! - [`watch`]: notices messages written by other processes (a filesystem watch, not polling).
//! - [`observer`]: the timeline of what happened.
//! - [`isolation`]: a worktree teammate's finished work committed on its branch; merged, clean
//!   worktrees of shut-down teammates removed at close.
//! - [`merge_tool`]: the lead's `merge_teammate`.

pub mod board_work;
pub mod definitions;
pub mod driver;
pub mod error;
pub mod events;
pub mod instructions;
pub mod isolation;
pub mod lead_only;
pub mod lease_gate;
pub mod living_prompt;
pub mod merge_tool;
pub mod models;
pub mod observer;
pub mod placement;
pub mod plan_gate;
pub mod postman;
pub mod protocol;
pub mod recorder;
pub mod roster;
pub mod runtime;
pub mod tools;
pub mod watch;

pub use driver::{DriveError, DriveOutcome, Driver, EventPacing, ExternalEvents, Pace};
pub use error::TeamError;
pub use lead_only::LeadOnlyRule;
pub use models::ModelChooser;
pub use observer::{NoTeamObserver, RecordingObserver, TeamObserver, TeamUpdate};
pub use placement::{Claim, Here, Placement, UnderLease};
pub use plan_gate::{GateStart, PlanGateRule};
pub use postman::{Postman, Waker};
pub use protocol::ProtocolRuntime;
pub use runtime::{Spawned, TeamHandle, TeamPorts, TeamRuntime, TeammateFactory};
