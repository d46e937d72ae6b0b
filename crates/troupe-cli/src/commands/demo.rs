//! `troupe demo`: the scripted scenario of SPEC §8, printed as a timeline.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe::bootstrap::TeamSettings;
use troupe::clock::SystemClock;
use troupe::demo::{DemoModels, NOTES_FILE, PROMPT};
use troupe::ids::RandomIds;
use troupe::permissions::AutoApproval;
use troupe::team::TeamObserver;

use super::CliError;
use crate::observe::{Console, Sink};
use crate::render;

pub fn demo(workspace: Option<PathBuf>) -> Result<(), CliError> {
    let workspace = match workspace {
        Some(dir) if dir.join(troupe::layout::Layout::STATE_DIR).exists() => {
            return Err(CliError::Usage(format!(
                "{} already holds troupe state; the demo needs a fresh folder (or none: it makes one)",
                dir.display()
            )));
        }
        Some(dir) => {
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
    let console = Arc::new(Console::new(Sink::Stdout));
    let settings = TeamSettings {
        workspace: workspace.clone(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        models: Arc::new(DemoModels),
        approval: Arc::new(AutoApproval),
        run_observer: console.clone(),
        team_observer: console as Arc<dyn TeamObserver>,
        max_turns: 10,
        request_ttl: Duration::from_secs(300),
        shell_timeout: Duration::from_secs(30),
        watch: true,
        redactor: troupe::secrets::process_redactor(),
    };
    let outcome = super::run::drive(settings, PROMPT)?;
    let notes = std::fs::read_to_string(workspace.join(NOTES_FILE)).unwrap_or_default();
    render::print_text(&format!(
        "\nlead's answer: {}\n\n{NOTES_FILE}:\n{notes}\nInspect it: troupe status --workspace {ws}\n             troupe requests --workspace {ws}\n",
        outcome.answer,
        ws = workspace.display()
    ))
}
