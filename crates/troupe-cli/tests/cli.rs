//! The `troupe` binary, run as a child process (`CARGO_BIN_EXE_troupe`), linked into one test
//! binary.
//!
//! - `support`: running the binary with a clean model environment; output checks.
//! - `demo`: `troupe demo` and the inspection commands' JSON shapes on its workspace.
//! - `errors`: bad input and broken state files: one line on stderr, the right exit code.
//! - `run`: missing model configuration; a second run on a held workspace.
//! - `model`: `troupe run` against a Chat Completions server: configuration precedence, exit
//!   codes on model failures, approval modes.
//! - `tasks`: `troupe tasks` and the task summary of `troupe status`.
//! - `orphans`: a job left running by a killed run is stopped by the next run.
//! - `review`: `troupe review` from another process while a team runs in this one.
//! - `secrets`: the API key stays out of troupe's own environment, of what the model is sent
//!   and of every file under `.troupe/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "cli/demo.rs"]
mod demo;
#[path = "cli/errors.rs"]
mod errors;
#[path = "cli/model.rs"]
mod model;
#[path = "cli/orphans.rs"]
mod orphans;
#[path = "cli/review.rs"]
mod review;
#[path = "cli/run.rs"]
mod run;
#[path = "cli/secrets.rs"]
mod secrets;
#[path = "cli/support.rs"]
mod support;
#[path = "cli/tasks.rs"]
mod tasks;
