//! `troupe status`, `troupe requests`, `troupe mailbox`, `troupe jobs`, `troupe cron`: read-only,
//! whether or not a run is going.

use std::path::Path;

use troupe::bootstrap::StoreChoice;
use troupe::inspect::{InspectError, Inspector, StatusReport};
use troupe::store::mailbox::MailboxState;
use troupe::wire::{AgentName, RequestStatus};

use crate::args::StoreFlags;
use crate::error::CliError;
use crate::render;

/// The inspector of the team `store` names: files, or its shared database.
async fn inspector_of(workspace: &Path, store: &StoreFlags) -> Result<Inspector, CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let choice = crate::store_choice::store_choice(store, &settings, false)?;
    troupe::bootstrap::inspector_with(workspace, &choice)
        .await
        .map_err(|e| CliError::coded(&e))
}

fn inspect_failed(error: InspectError) -> CliError {
    CliError::coded(&error)
}

pub async fn status(workspace: &Path, json: bool, store: &StoreFlags) -> Result<(), CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let choice = crate::store_choice::store_choice(store, &settings, false)?;
    let report = status_report(workspace, &choice).await?;
    if let Some(note) = state_shared_note(workspace) {
        eprintln!("{note}");
    }
    if json {
        render::print_json(&report)
    } else {
        render::print_text(&render::status(&report))
    }
}

/// The team's state as `troupe status --json` prints it, for the team `choice` names (also
/// `troupe mcp serve`'s `troupe_status`).
pub(crate) async fn status_report(
    workspace: &Path,
    choice: &StoreChoice,
) -> Result<StatusReport, CliError> {
    let inspector = troupe::bootstrap::inspector_with(workspace, choice)
        .await
        .map_err(|e| CliError::coded(&e))?;
    inspector.status().await.map_err(inspect_failed)
}

/// A line for stderr when the workspace's `.troupe/` lets other users of the machine in: its
/// transcripts hold what agents read, its requests the calls' arguments. Workspaces made before
/// troupe created it `0700` keep working; this says how to close them.
fn state_shared_note(workspace: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let state = workspace.join(troupe::layout::Layout::STATE_DIR);
    let mode = std::fs::symlink_metadata(&state).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "troupe: {} is readable by other users of this machine (mode {mode:04o}); \
             `chmod -R go-rwx {}` makes it yours alone",
            state.display(),
            state.display()
        )
    })
}

pub async fn requests(
    workspace: &Path,
    status: Option<&str>,
    json: bool,
    store: &StoreFlags,
) -> Result<(), CliError> {
    let status = status
        .map(RequestStatus::parse)
        .transpose()
        .map_err(|e| CliError::usage(e.to_string()))?;
    let inspector = inspector_of(workspace, store).await?;
    let views = inspector.requests(status).await.map_err(inspect_failed)?;
    if json {
        render::print_json(&serde_json::json!({ "requests": views }))
    } else {
        render::print_text(&render::requests(&views))
    }
}

/// JSON: `{"jobs":[{id, cron, timezone, prompt, recurring, durable, next_fire_utc,
/// next_fire_local}]}`.
pub async fn cron(workspace: &Path, json: bool, store: &StoreFlags) -> Result<(), CliError> {
    let inspector = inspector_of(workspace, store).await?;
    let jobs = inspector.cron_jobs().await.map_err(inspect_failed)?;
    if json {
        render::print_json(&serde_json::json!({ "jobs": jobs }))
    } else {
        render::print_text(&render::cron_jobs(&jobs))
    }
}

pub async fn tasks(workspace: &Path, json: bool, store: &StoreFlags) -> Result<(), CliError> {
    let inspector = inspector_of(workspace, store).await?;
    let views = inspector.tasks().await.map_err(inspect_failed)?;
    if json {
        render::print_json(&serde_json::json!({ "tasks": views }))
    } else {
        render::print_text(&render::tasks(&views))
    }
}

pub async fn mailbox(
    workspace: &Path,
    agent: &str,
    state: Option<&str>,
    json: bool,
    store: &StoreFlags,
) -> Result<(), CliError> {
    let agent = AgentName::parse(agent).map_err(|e| CliError::usage(e.to_string()))?;
    let state = state
        .map(|s| {
            MailboxState::parse(s).ok_or_else(|| {
                CliError::usage(format!(
                    "unknown mailbox state {s:?}: expected ready, processing, done or quarantine"
                ))
            })
        })
        .transpose()?;
    let inspector = inspector_of(workspace, store).await?;
    let report = inspector
        .mailbox(&agent, state)
        .await
        .map_err(inspect_failed)?;
    if json {
        render::print_json(&report)
    } else {
        render::print_text(&render::mailbox(&report))
    }
}

pub async fn jobs(workspace: &Path, json: bool, store: &StoreFlags) -> Result<(), CliError> {
    let inspector = inspector_of(workspace, store).await?;
    let jobs = inspector.jobs().await.map_err(inspect_failed)?;
    if json {
        // A struct rather than `json!`, so each record keeps its documented key order.
        #[derive(serde::Serialize)]
        struct Jobs<'a> {
            jobs: &'a [troupe::jobs::JobRecord],
        }
        render::print_json(&Jobs { jobs: &jobs })
    } else {
        render::print_text(&render::jobs(&jobs))
    }
}
