//! `troupe trust [--show] [--revoke] [--yes]`: what a workspace's own `troupe.toml` and `.env`
//! would do that needs the person's trust (see `crate::trust`), and the person's answer,
//! recorded in their config folder. Prints the review on stdout; asks on a terminal; without
//! one, records only with `--yes`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use troupe::settings::trust::{TrustState, TrustStore};

use crate::error::CliError;
use crate::render;
use crate::trust::{describe, record, review, state};

/// What the command was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Review { yes: bool },
    Show,
    Revoke,
}

impl Action {
    pub fn of(show: bool, revoke: bool, yes: bool) -> Self {
        match (show, revoke) {
            (true, _) => Self::Show,
            (_, true) => Self::Revoke,
            _ => Self::Review { yes },
        }
    }
}

pub async fn trust(workspace: &Path, action: Action) -> Result<(), CliError> {
    let store = TrustStore::user();
    if action == Action::Revoke {
        let store = store.ok_or_else(crate::trust::no_config_folder)?;
        let had = store.revoke(workspace).map_err(|e| CliError::coded(&e))?;
        let what = if had {
            "no longer trusted"
        } else {
            "was not trusted"
        };
        return render::print_text(&format!("{}: {what}\n", workspace.display()));
    }
    let review = review(workspace, false)?;
    let state = state(workspace, &review.items)?;
    let mut text = describe(workspace, &review.items, state);
    if let (Some(store), Some(at)) = (
        &store,
        store
            .as_ref()
            .and_then(|s| s.trusted_at(workspace).ok().flatten()),
    ) {
        text.push_str(&format!(
            "trusted at {at} (recorded in {})\n",
            store.path().display()
        ));
    }
    // `describe` escaped what the workspace wrote; the rest is troupe's own.
    match (action, state) {
        (Action::Show, _) | (_, TrustState::NotNeeded | TrustState::Trusted) => {
            render::print_verbatim(&text)
        }
        (Action::Review { yes }, TrustState::Untrusted | TrustState::Changed) => {
            render::print_verbatim(&text)?;
            if !yes && !confirm()? {
                return Err(
                    CliError::usage(format!("{} was not trusted", workspace.display()))
                        .with_code(crate::trust::UNTRUSTED_CODE),
                );
            }
            record(workspace, &review.items)?;
            render::print_text(&format!("trusted {}\n", workspace.display()))
        }
        (Action::Revoke, _) => Ok(()),
    }
}

/// `Trust it? [y/N]` on the terminal; without one, a usage error naming `--yes`.
fn confirm() -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "no terminal to ask on: pass --yes to trust the workspace as shown".into(),
        ));
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "Trust it? [y/N] ");
    let _ = err.flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
