//! The runtime's integration tests, linked into one binary (fast builds on small machines).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::new_without_default)]

#[path = "all/agent/mod.rs"]
mod agent;
#[path = "all/architecture.rs"]
mod architecture;
#[path = "all/blocking_rule.rs"]
mod blocking_rule;
#[path = "all/board/mod.rs"]
mod board;
#[path = "all/code_map.rs"]
mod code_map;
#[path = "all/conformance/mod.rs"]
mod conformance;
#[path = "all/cron/mod.rs"]
mod cron;
#[path = "all/error_codes.rs"]
mod error_codes;
#[path = "all/jobs/mod.rs"]
mod jobs;
#[path = "all/mailbox.rs"]
pub mod mailbox;
#[path = "all/mcp.rs"]
mod mcp;
#[path = "all/memory/mod.rs"]
mod memory;
#[path = "all/model/mod.rs"]
mod model;
#[path = "all/permissions/mod.rs"]
mod permissions;
#[path = "all/protocol/mod.rs"]
pub mod protocol;
#[path = "all/retention_pg.rs"]
mod retention_pg;
#[path = "all/sandbox.rs"]
mod sandbox;
#[path = "all/state/mod.rs"]
mod state;
#[path = "all/team/mod.rs"]
mod team;
#[path = "all/tools/mod.rs"]
mod tools;
#[path = "all/worktree/mod.rs"]
mod worktree;
