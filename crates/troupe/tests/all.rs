//! The runtime's integration tests, linked into one binary (fast builds on small machines).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/board/mod.rs"]
mod board;
#[path = "all/model/mod.rs"]
mod model;
#[path = "all/permissions/mod.rs"]
mod permissions;
#[path = "all/protocol/mod.rs"]
mod protocol;
#[path = "all/tools/mod.rs"]
mod tools;
