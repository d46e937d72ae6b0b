//! `troupe session` (bare `troupe` on a terminal): a session a person drives — the team's panes
//! as `troupe watch` shows them, and a prompt line. Each prompt goes to the lead as a user turn
//! and the team works until quiescent; the next prompt continues the same lead conversation.
//!
//! Layout: the session's core ([`core`]) has no terminal in it, so that the terminal here and
//! an editor's session later are two front ends of one thing:
//! - [`core`]: the team kept for the person across prompts; submit, send, cancel, start fresh.
//! - [`asks`]: `--approval ask` as durable permission requests, answered in the view or by
//!   `troupe approve` from anywhere.
//! - [`terminal`]: the terminal front end, on `watch`'s view, feed and terminal guard.
//! - [`prompt`]: the prompt line's keys (pure); [`commands`]: the `/commands` (pure);
//!   [`history`]: the prompts kept per workspace for ↑/↓.

mod asks;
mod commands;
pub(crate) mod core;
mod history;
mod prompt;
mod terminal;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;

use crate::args::SessionArgs;
use crate::error::CliError;

/// `troupe session`: the session on `workspace` until the person leaves it.
pub async fn session(workspace: &Path, args: SessionArgs) -> Result<(), CliError> {
    crate::watch::need_terminal("troupe session")?;
    terminal::session(workspace, args).await
}

/// The command line, with `session` added when it is bare `troupe` on a terminal (stdin and
/// stdout): then the session opens. Anywhere else bare `troupe` stays clap's help.
pub fn arguments() -> Vec<OsString> {
    let mut arguments: Vec<OsString> = std::env::args_os().collect();
    if arguments.len() == 1 && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        arguments.push("session".into());
    }
    arguments
}
