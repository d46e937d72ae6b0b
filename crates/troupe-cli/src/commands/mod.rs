//! One async function per command, run on the runtime `main` built for it; it awaits the
//! library directly. Each turns raw arguments into validated settings first, so that bad input
//! is refused before anything runs.

mod acp;
mod approve;
mod compact;
mod completions;
pub(crate) mod config;
mod config_approvals;
mod config_cost;
mod demo;
mod eval;
mod gc;
mod init;
pub(crate) mod inspect;
pub(crate) mod log;
mod mcp;
mod mcp_serve;
mod memory;
mod replay;
mod review;
pub(crate) mod run;
mod send;
pub(crate) mod session;
mod timeline;
mod trust;
pub(crate) mod usage;
mod worker;
mod worktrees;

use std::path::PathBuf;

use crate::args::{Cli, Command};
use crate::error::{CliError, Kind};

/// Runs the command on the runtime `main` chose for it.
pub async fn execute(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Demo { workspace } => demo::demo(workspace.or(cli.workspace), cli.verbose).await,
        Command::Run(args) => run::run(&resolve_workspace(cli.workspace)?, args, cli.verbose).await,
        Command::Worker(args) => {
            worker::worker(&resolve_workspace(cli.workspace)?, args, cli.verbose).await
        }
        Command::Review {
            request_id,
            approve,
            reject: _,
            feedback,
            store,
        } => {
            review::review(
                &resolve_workspace(cli.workspace)?,
                &request_id,
                approve,
                feedback,
                &store,
            )
            .await
        }
        Command::Approve {
            request_id,
            always,
            save,
            json,
            store,
        } => {
            let choice = match (always, save) {
                (_, true) => troupe::approvals::Choice::Save,
                (true, false) => troupe::approvals::Choice::Always,
                (false, false) => troupe::approvals::Choice::Once,
            };
            approve::answer(
                &resolve_workspace(cli.workspace)?,
                &request_id,
                choice,
                None,
                json,
                &store,
            )
            .await
        }
        Command::Deny {
            request_id,
            reason,
            json,
            store,
        } => {
            approve::answer(
                &resolve_workspace(cli.workspace)?,
                &request_id,
                troupe::approvals::Choice::No,
                reason.as_deref(),
                json,
                &store,
            )
            .await
        }
        Command::Send {
            agent,
            text,
            json,
            store,
        } => {
            send::send(
                &resolve_workspace(cli.workspace)?,
                &agent,
                &text,
                json,
                &store,
            )
            .await
        }
        Command::Status { json, store } => {
            inspect::status(&resolve_workspace(cli.workspace)?, json, &store).await
        }
        Command::Requests {
            status,
            json,
            store,
        } => {
            inspect::requests(
                &resolve_workspace(cli.workspace)?,
                status.as_deref(),
                json,
                &store,
            )
            .await
        }
        Command::Usage(args) => usage::usage(&resolve_workspace(cli.workspace)?, &args).await,
        Command::Gc {
            dry_run,
            json,
            store,
        } => gc::gc(&resolve_workspace(cli.workspace)?, dry_run, json, &store).await,
        Command::Jobs { json, store } => {
            inspect::jobs(&resolve_workspace(cli.workspace)?, json, &store).await
        }
        Command::Cron { json, store } => {
            inspect::cron(&resolve_workspace(cli.workspace)?, json, &store).await
        }
        Command::Tasks { json, store } => {
            inspect::tasks(&resolve_workspace(cli.workspace)?, json, &store).await
        }
        Command::Worktrees { json } => {
            worktrees::worktrees(&resolve_workspace(cli.workspace)?, json).await
        }
        Command::Compact {
            agent,
            model,
            no_memory,
            json,
            store,
        } => {
            compact::compact(
                &resolve_workspace(cli.workspace)?,
                &agent,
                &model,
                no_memory,
                json,
                &store,
            )
            .await
        }
        Command::Memory {
            action,
            json,
            store,
            team,
        } => {
            memory::memory(
                &resolve_workspace(cli.workspace)?,
                action,
                json,
                &crate::args::StoreFlags {
                    store,
                    team,
                    ..Default::default()
                },
            )
            .await
        }
        Command::Serve { port, store } => {
            crate::serve::serve(&resolve_workspace(cli.workspace)?, port, &store).await
        }
        Command::Session(args) => session::session(&resolve_workspace(cli.workspace)?, args).await,
        Command::Acp(args) => acp::acp(&resolve_workspace(cli.workspace)?, args).await,
        Command::Replay(args) => replay::replay(&resolve_workspace(cli.workspace)?, args).await,
        Command::Eval(args) => eval::eval(&resolve_workspace(cli.workspace)?, args).await,
        Command::Watch { store } => {
            crate::watch::watch(&resolve_workspace(cli.workspace)?, &store).await
        }
        Command::Timeline { html, store } => {
            timeline::timeline_html(&resolve_workspace(cli.workspace)?, &html, &store).await
        }
        Command::Log(args) => log::log(&resolve_workspace(cli.workspace)?, &args).await,
        Command::Completions { shell } => completions::completions(shell).await,
        Command::Mcp { action, json } => {
            mcp::mcp(&resolve_workspace(cli.workspace)?, action, json).await
        }
        Command::Init { json } => init::init(&resolve_workspace(cli.workspace)?, json).await,
        Command::Trust { show, revoke, yes } => {
            trust::trust(
                &resolve_workspace(cli.workspace)?,
                trust::Action::of(show, revoke, yes),
            )
            .await
        }
        Command::Config { model, store, json } => {
            config::config(&resolve_workspace(cli.workspace)?, &model, &store, json).await
        }
        Command::Mailbox {
            agent,
            state,
            json,
            store,
        } => {
            inspect::mailbox(
                &resolve_workspace(cli.workspace)?,
                &agent,
                state.as_deref(),
                json,
                &store,
            )
            .await
        }
    }
}

fn resolve_workspace(raw: Option<PathBuf>) -> Result<PathBuf, CliError> {
    let path = match raw {
        Some(p) => p,
        None => std::env::current_dir().map_err(|e| {
            CliError::new(
                Kind::Failed,
                format!("cannot read the current directory: {e}"),
            )
        })?,
    };
    if !path.is_dir() {
        return Err(CliError::usage(format!(
            "workspace {} is not a folder",
            path.display()
        )));
    }
    // Absolute, so that prompts, audit lines and the run lock name one place.
    std::fs::canonicalize(&path).map_err(|e| {
        CliError::new(
            Kind::Failed,
            format!("cannot resolve workspace {}: {e}", path.display()),
        )
    })
}
