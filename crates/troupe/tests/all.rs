//! The runtime's integration tests, linked into one binary (fast builds on small machines).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "all/mailbox.rs"]
mod mailbox;
