//! `troupe review`: a person answers a pending plan request as the lead, from another terminal.
//! Same validation as the `review_plan` tool — one answer per request, none to a plan of a
//! shut-down or failed teammate (read from `team.json`); the running team sees the response
//! arrive in the teammate's mailbox through its filesystem watch. Unlike the tool, it takes a
//! unique prefix of at least 8 characters for the request id (people type these).

use std::path::Path;

use troupe::bootstrap::PlanReview;
use troupe::error::ErrorCode;
use troupe::inspect::{RequestIdError, RequestIdInput};
use troupe::wire::AgentName;

use super::CliError;
use crate::render;

pub fn review(
    workspace: &Path,
    request_id: &str,
    approve: bool,
    feedback: Option<String>,
) -> Result<(), CliError> {
    let given = RequestIdInput::parse(request_id).map_err(|e| CliError::Usage(e.to_string()))?;
    let review = PlanReview::open(workspace)
        .map_err(|e| CliError::failed(format_args!("{e} [{}]", e.code())))?
        .ok_or_else(|| {
            CliError::Failed(format!(
                "no protocol requests in {} [protocol_not_found]",
                workspace.display()
            ))
        })?;
    let request_id = given.resolve(review.store.as_ref()).map_err(|e| match e {
        RequestIdError::Ambiguous { .. } => CliError::Usage(e.to_string()),
        e => CliError::failed(format_args!("{e} [{}]", e.code())),
    })?;
    let roster = review
        .roster()
        .map_err(|e| CliError::failed(format_args!("{e} [{}]", e.code())))?;
    let response = review
        .protocol
        .review_plan(
            &AgentName::lead(),
            request_id,
            approve,
            feedback.as_deref(),
            &roster,
        )
        .map_err(|e| CliError::failed(format_args!("{e} [{}]", e.code())))?;
    render::print_text(&format!(
        "{} plan request {request_id}; response {} delivered to {}'s mailbox\n",
        if approve { "approved" } else { "rejected" },
        response.id(),
        response.recipient()
    ))
}
