//! The protocol store (SPEC §5) through its public API, on real files.
//!
//! - `support`: fixture (temp workspace, manual clock, sequential ids) and message builders.
//! - `lifecycle`: create, consume, validate, replay, expiry, latest plan, clock, failed writes.
//! - `corrupt`: load-time invariant violations of `state.json` and the archive.
//! - `answers`: one answer per request — recorded, delivered, others refused; interrupted
//!   deliveries finished once; bad records reported.
//! - `compaction`: the archive — small state, order, replays, crash leftovers, torn tail.
//! - `archive_reads`: archived requests are read back from the file, not kept in memory.
//! - `concurrency`: threads, store instances and processes racing (consuming, answering, creating).
//! - `timing`: an `#[ignore]`d measurement of round trips and `latest_plan_of`.

mod answers;
mod archive_reads;
mod compaction;
mod concurrency;
mod corrupt;
mod lifecycle;
pub mod support;
mod timing;
