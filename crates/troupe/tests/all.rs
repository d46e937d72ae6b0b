//! The runtime's integration tests, linked into one binary (fast builds on small machines).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/model/mod.rs"]
mod model;
#[path = "all/protocol/mod.rs"]
mod protocol;
