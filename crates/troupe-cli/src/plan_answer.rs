//! Answering a pending plan request as the lead: the one path that `troupe review` and the web
//! view's `POST /api/review` both call. In a module of its own so that neither the command nor
//! the server imports the other for it.

use std::path::Path;

use troupe::bootstrap::PlanReview;
use troupe::inspect::{RequestIdError, RequestIdInput};
use troupe::wire::{AgentName, MessageId, RequestId};

use crate::error::{CliError, Kind};

/// What answering a plan request did.
#[derive(Debug, Clone)]
pub struct PlanAnswer {
    pub request_id: RequestId,
    pub approved: bool,
    /// The response message delivered to the teammate.
    pub response_id: MessageId,
    pub recipient: AgentName,
}

/// The team's protocol store and runtime (`store`: a shared team's database, or the workspace),
/// and the request a person named by `request_id` — a full id, a short id (its last 8 hex digits) or a unique prefix; a malformed or
/// ambiguous one is a usage error. The one resolution of `review`, `approve` and `deny`.
pub async fn open_request(
    workspace: &Path,
    store: &troupe::bootstrap::StoreChoice,
    request_id: &str,
) -> Result<(PlanReview, RequestId), CliError> {
    let given = RequestIdInput::parse(request_id).map_err(|e| CliError::usage(e.to_string()))?;
    let review = PlanReview::open_with(workspace, store)
        .await
        .map_err(|e| CliError::coded(&e))?
        .ok_or_else(|| {
            CliError::new(
                Kind::Failed,
                format!("no protocol requests in {}", workspace.display()),
            )
            .with_code("protocol_not_found")
        })?;
    let request_id = given
        .resolve(review.store.as_ref())
        .await
        .map_err(|e| match e {
            RequestIdError::Ambiguous { .. } => CliError::usage(e.to_string()),
            e => CliError::coded(&e),
        })?;
    Ok((review, request_id))
}

/// Answers the plan request `request_id` (a full id or a unique prefix) as the lead, in the team
/// `store` names (a shared team's database, or the workspace). Errors end with their stable code
/// (their `code`); a malformed or ambiguous id is a usage error.
pub async fn answer_plan_in(
    workspace: &Path,
    store: &troupe::bootstrap::StoreChoice,
    request_id: &str,
    approve: bool,
    feedback: Option<&str>,
) -> Result<PlanAnswer, CliError> {
    let (review, request_id) = open_request(workspace, store, request_id).await?;
    let roster = review.roster().await.map_err(|e| CliError::coded(&e))?;
    let response = review
        .protocol
        .review_plan(&AgentName::lead(), request_id, approve, feedback, &roster)
        .await
        .map_err(|e| CliError::coded(&e))?;
    Ok(PlanAnswer {
        request_id,
        approved: approve,
        response_id: response.id(),
        recipient: response.recipient().clone(),
    })
}
