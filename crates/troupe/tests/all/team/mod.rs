//! The team runtime (SPEC §4.3, §4.4, §5, §6): teammates, the lead's events, both protocols at
//! runtime, the plan gate, the driver, recovery and closing — through `build_team` or the
//! runtime parts, with in-process scripted models or a real HTTP model server.
//!
//! - `support`: fixture (temp workspace, manual clock, sequential ids), per-agent models that
//!   decide from the conversation and can be held at a gate, a recording observer, and the
//!   signal tests await instead of sleeping.
//! - `e2e`: the whole scenario through a Chat Completions server on 127.0.0.1 (wiremock).
//! - `shutdown`: a busy teammate finishes first; no model call for the request; refusals after
//!   shutdown; an unanswered request expires.
//! - `plan`: rejection and its feedback; a response consumed after expiry.
//! - `settings_rules`: `[permissions]` entries of the settings for the lead, a teammate and the
//!   `task` subagent, over a provider that refuses everything.
//! - `plan_required`: teammates gated from their first call (`plan_required`, a run that
//!   requires plans), across runs, and what their prompts say.
//! - `invalid`: wrong id / kind / parties / duplicates, quarantined, state unchanged.
//! - `delivery`: failed sends keep requests pending; failed answers release and fail.
//! - `answers`: answers are single; no answer to a plan of a shut-down or failed teammate;
//!   a teammate is `shutdown` before its shutdown answer exists.
//! - `concurrency`: two reviewers racing on one plan; exactly one answer is sent.
//! - `cycles`: 200 runs in one process leave its open files and threads as the first did.
//! - `close`: closing mid-message releases it; the next run replays it.
//! - `recovery`: what a dead run left in `processing/` is recovered and processed.
//! - `respawn`: a shut-down or failed name spawned again: fresh conversation, old transcript
//!   kept, leftovers quarantined, old plans not counted; running or idle names refused.
//! - `bookkeeping`: todo, task board and cron tools are allowed without asking; writes ask.
//! - `hooks`: the settings' command hooks apply to the lead and to every teammate.
//! - `instructions`: `AGENTS.md` (a worktree teammate's own copy), `CLAUDE.md`, the cap,
//!   `[context] files`, the other `AGENTS.md` files listed, an edit seen at the next turn.
//! - `working_toolset`: a teammate's edit, search and board tools on the lead's board, narrowed
//!   by its definition, and what the plan gate leaves it while a plan is pending.

pub mod support;

mod answers;
mod approvals;
mod board;
mod bookkeeping;
mod close;
mod concurrency;
mod cycles;
mod delivery;
mod e2e;
mod events;
mod failure;
mod hooks;
mod instructions;
mod invalid;
mod living_prompt;
mod plan;
mod plan_required;
mod recovery;
mod replay;
mod respawn;
mod settings_rules;
mod shutdown;
mod toolset;
mod transcripts;
mod working_toolset;
