//! Answering a pending permission request (SPEC §13): the one path that `troupe approve`,
//! `troupe deny` and the web view's `POST /api/permission` call. Like a plan answer it takes a
//! full request id or a unique prefix, and goes through the protocol store's single-answer step:
//! a request answered already — at the run's terminal, by another `troupe approve`, by the
//! lead — is refused naming the first answer.

use std::path::Path;

use troupe::approvals::{ApprovalDesk, Choice, PermissionAsk, PermissionReply};
use troupe::error::ErrorCode;
use troupe::team::TeamError;
use troupe::wire::{AgentName, MessageId, ProtocolRequest, RequestId};

use crate::error::{CliError, Kind};

/// What answering a permission request did.
#[derive(Debug, Clone)]
pub struct PermissionAnswer {
    pub request_id: RequestId,
    pub approved: bool,
    pub choice: Choice,
    /// The response message delivered to the asking agent.
    pub response_id: MessageId,
    pub agent: AgentName,
    /// The asked call in one line (`shell: cargo test`).
    pub summary: String,
    /// Where a `--save`d entry went, or why it could not be saved.
    pub saved: Option<String>,
}

/// Answers the permission request `request_id` with `choice` (`No` denies, with `reason`), as
/// `by` (`cli`, `page`), in the team `store` names. `--always`/`--save` need the request's
/// suggested entry; `--save` writes it to `workspace`'s `troupe.toml` once the answer stands.
pub async fn answer_permission_in(
    workspace: &Path,
    store: &troupe::bootstrap::StoreChoice,
    request_id: &str,
    choice: Choice,
    reason: Option<&str>,
    by: &str,
) -> Result<PermissionAnswer, CliError> {
    let (review, request_id) =
        crate::plan_answer::open_request(workspace, store, request_id).await?;
    let desk = ApprovalDesk::new(review.protocol.clone());
    let request = desk
        .request(request_id)
        .await
        .map_err(|e| CliError::coded(&e))?;
    let ask = PermissionAsk::from_content(request.content().as_str()).map_err(|e| {
        CliError::new(
            Kind::Failed,
            format!("permission request {request_id}: {e}"),
        )
        .with_code("protocol_state_corrupt")
    })?;
    if matches!(choice, Choice::Always | Choice::Save) && ask.suggestion.is_none() {
        return Err(CliError::usage(format!(
            "permission request {request_id} ({}) has no rule entry to allow for the run; \
             approve it once (without --always or --save)",
            ask.summary()
        )));
    }
    let who = format!("{by} (pid {})", std::process::id());
    let text = match (choice, reason.map(str::trim).filter(|r| !r.is_empty())) {
        (Choice::No, Some(r)) => format!("denied with {who}: {r}"),
        (Choice::No, None) => format!("denied with {who}"),
        (Choice::Once, _) => format!("approved with {who}"),
        (Choice::Always | Choice::Save, _) => format!(
            "approved with {who}; {} allowed for this run",
            ask.suggestion.as_deref().unwrap_or_default()
        ),
    };
    let reply = PermissionReply::new(choice, text, by);
    let response = match desk.answer(&request, &reply).await {
        Ok(response) => response,
        Err(refused) => return Err(refused_naming_the_first(&desk, &request, &refused).await),
    };
    let saved = match (choice, &ask.suggestion) {
        (Choice::Save, Some(entry)) => Some(troupe::sync::blocking(|| save(workspace, entry))),
        _ => None,
    };
    Ok(PermissionAnswer {
        request_id,
        approved: choice.approves(),
        choice,
        response_id: response.id(),
        agent: request.sender().clone(),
        summary: ask.summary(),
        saved,
    })
}

/// The refusal of an answer, with — when an answer was recorded first — who gave it and what it
/// said (the store's refusal names only the request's target, `user`, which every person's
/// answer is sent as).
async fn refused_naming_the_first(
    desk: &ApprovalDesk,
    request: &ProtocolRequest,
    refused: &TeamError,
) -> CliError {
    let first = match desk.answered(request).await {
        Ok(Some(first)) => first,
        _ => return CliError::coded(refused),
    };
    let said = match first.reply.reason.trim() {
        "" => String::new(),
        reason => format!(" ({reason})"),
    };
    CliError::failed(format_args!(
        "{refused}; the first answer: {} {} by {}{said}",
        if first.approved { "approved" } else { "denied" },
        first.reply.choice.as_str(),
        first.reply.by,
    ))
    .with_code(refused.code())
}

/// Saves `entry` to the workspace's `troupe.toml`, recording that entry (only) as trusted.
fn save(workspace: &Path, entry: &str) -> String {
    match crate::save_allow::saver(workspace)(entry) {
        Ok(place) => format!("saved allow {entry} to {place}"),
        Err(e) => format!("could not save allow {entry}: {e}"),
    }
}
