//! Recording a run and playing it again (issue 44): regression tests for prompts, tools and
//! teams, with no key and no network.
//!
//! - `record.rs` — the recording's lines (`.troupe/recordings/<run>.jsonl`): the start (prompt,
//!   settings digest, git `HEAD` and uncommitted changes), each model call (agent, its index,
//!   its place in the global order, the request as a change of the agent's previous one, the
//!   whole answer), the end (the final tree's digest).
//! - `recorder.rs` — [`RecordingModels`]: the run's models, each call recorded (redacted).
//! - `load.rs` — [`Recording`]: a recording read back strictly.
//! - `mask.rs` — a request as compared: ids, times, the workspace's path and the living
//!   prompt's timing-dependent parts masked; the digest.
//! - `player.rs` — [`Player`]: every call answered from a recording in its global order,
//!   each request compared, the first difference reported ([`Divergence`]).
//! - `start_point.rs` — the git starting point and the tree digest.

pub mod load;
pub mod mask;
pub mod player;
pub mod record;
pub mod recorder;
pub mod start_point;

pub use load::{RecordedCall, Recording};
pub use player::{Divergence, Mode, PlayOptions, Player, Report};
pub use recorder::{Recorder, RecordingModels};

use crate::error::ErrorCode;

/// Why a recording cannot be played.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("no recording at {0}")]
    NotFound(String),
    #[error("the recording {path} cannot be played: {why}")]
    Refused { path: String, why: String },
}

impl ErrorCode for ReplayError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "recording_not_found",
            Self::Refused { .. } => "recording_invalid",
        }
    }
}
