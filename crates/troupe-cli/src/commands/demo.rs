//! `troupe demo`: the scripted scenario of SPEC §8, printed as a timeline (its event stream,
//! rendered like `troupe run` renders it, on stdout).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use troupe::agent::NullObserver;
use troupe::bootstrap::{EventOptions, TeamSettings};
use troupe::clock::SystemClock;
use troupe::demo::{DemoModels, NOTES_FILE, PROMPT, TEAMMATE, WRITES};
use troupe::ids::RandomIds;
use troupe::permissions::AutoApproval;
use troupe::team::NoTeamObserver;

use crate::error::CliError;
use crate::observe::{Console, Sink};
use crate::render;

pub async fn demo(workspace: Option<PathBuf>, verbose: u8) -> Result<(), CliError> {
    let workspace = match workspace {
        Some(dir) => {
            refuse_occupied(&dir)?;
            std::fs::create_dir_all(&dir).map_err(|e| {
                CliError::failed(format_args!("cannot create {}: {e}", dir.display()))
            })?;
            std::fs::canonicalize(&dir).map_err(|e| {
                CliError::failed(format_args!("cannot resolve {}: {e}", dir.display()))
            })?
        }
        None => tempfile::Builder::new()
            .prefix("troupe-demo-")
            .tempdir()
            .map_err(|e| CliError::failed(format_args!("cannot create a workspace: {e}")))?
            .keep(),
    };
    render::print_text(&format!(
        "troupe demo — workspace {}\nprompt: {PROMPT}\n\n",
        workspace.display()
    ))?;
    let console = Arc::new(Console::new(Sink::Stdout, verbose > 0));
    // The demo's commands are its own script: on a machine that cannot confine them they run
    // unconfined, and it says so.
    let sandbox = match crate::sandboxing::options(
        &workspace,
        None,
        &Default::default(),
        crate::args::ApprovalMode::Auto,
    ) {
        Ok((sandbox, line)) => {
            render::print_text(&format!("{line}\n\n"))?;
            sandbox
        }
        Err(e) => {
            render::print_text(&format!(
                "sandbox off: {} (the demo runs its own scripted commands unconfined)\n\n",
                e
            ))?;
            troupe::bootstrap::SandboxOptions::off(&workspace)
        }
    };
    let settings = TeamSettings {
        workspace: workspace.clone(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        models: Arc::new(DemoModels),
        approval: Arc::new(AutoApproval),
        run_observer: Arc::new(NullObserver),
        team_observer: Arc::new(NoTeamObserver),
        max_turns: 10,
        request_ttl: Duration::from_secs(300),
        shell_timeout: Duration::from_secs(30),
        watch: true,
        require_plans: false,
        redactor: troupe::secrets::process_redactor(),
        long_lived: Default::default(),
        events: EventOptions {
            listeners: vec![console.clone()],
            prompt: PROMPT.to_owned(),
            telemetry: None,
        },
        settings: Default::default(),
        sandbox,
        mcp: Default::default(),
        store: Default::default(),
    };
    let interrupt = crate::interrupt::Interrupt::default();
    let outcome = super::run::drive(
        settings,
        PROMPT,
        &interrupt,
        None,
        None,
        &super::run::Say::Now,
    )
    .await;
    console.finish();
    let outcome = outcome?;
    let notes = std::fs::read_to_string(workspace.join(NOTES_FILE)).unwrap_or_default();
    let troupe = self_command();
    let ws = shell_word(&workspace.to_string_lossy());
    render::print_text(&format!(
        "\nlead's answer: {}\n\n{NOTES_FILE}:\n{notes}\nInspect it:\n  \
         {troupe} status --workspace {ws}\n  \
         {troupe} requests --workspace {ws}\n  \
         {troupe} mailbox {TEAMMATE} --workspace {ws}\n  \
         {troupe} usage --workspace {ws}\n",
        outcome.answer,
    ))
}

/// A folder given to the demo must hold neither troupe state nor any file the scenario writes
/// ([`WRITES`]): a `NOTES.md` there is the person's own, and the demo would overwrite it.
/// Checked before anything is created; a link counts, since a write would follow it.
fn refuse_occupied(dir: &Path) -> Result<(), CliError> {
    if dir.join(troupe::layout::Layout::STATE_DIR).exists() {
        return Err(CliError::usage(format!(
            "{} already holds troupe state; the demo needs a fresh folder (or none: it makes one)",
            dir.display()
        )));
    }
    let held: Vec<&str> = WRITES
        .iter()
        .copied()
        .filter(|name| dir.join(name).symlink_metadata().is_ok())
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "{} already holds {}, which the demo would overwrite; nothing was written. Give it a \
         folder without {} (or no --workspace: it makes one)",
        dir.display(),
        held.join(", "),
        if held.len() == 1 { "it" } else { "them" },
    )))
}

/// How the user can run this troupe again from a shell: `troupe` when the first `troupe` on
/// `PATH` is this very program, else this program's path (after `cargo run`, troupe is not on
/// `PATH`), else the `cargo run` line of the README.
fn self_command() -> String {
    let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "cargo run --release --bin troupe --".to_owned();
    };
    let first_on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("troupe"))
            .find(|candidate| candidate.is_file())
            .and_then(|found| std::fs::canonicalize(found).ok())
    });
    if first_on_path.as_ref() == Some(&exe) {
        "troupe".to_owned()
    } else {
        shell_word(&exe.to_string_lossy())
    }
}

/// `word` as one POSIX shell word: as it is when nothing in it is special, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/tmp/troupe-demo-x1"), "/tmp/troupe-demo-x1");
        assert_eq!(shell_word("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_word("/tmp/it's"), r"'/tmp/it'\''s'");
        assert_eq!(shell_word("$HOME"), "'$HOME'");
        assert_eq!(shell_word(""), "''");
    }
}
