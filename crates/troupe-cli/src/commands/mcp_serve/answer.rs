//! `troupe_answer {request_id, approve, reason}`: a pending request answered by the person
//! through the client. The request's kind decides the path: a permission request is answered
//! as `troupe approve`/`troupe deny` answer it (this one call, by `mcp`), a plan request as
//! `troupe review` answers it (as the lead; the reason is the feedback). Any other kind is
//! refused. One answer per request: a request answered already is refused, naming the first
//! answer.

use serde_json::json;
use troupe::approvals::Choice;
use troupe::store::protocol::ProtocolError;
use troupe::wire::RequestKind;

use super::reply::{failed, structured};
use crate::commands::session::core::Core;
use crate::error::CliError;

pub async fn troupe_answer(
    core: &Core,
    request_id: &str,
    approve: bool,
    reason: Option<&str>,
) -> rmcp::model::CallToolResult {
    match answer(core, request_id, approve, reason).await {
        Ok(value) => structured(value),
        Err(e) => failed(&e),
    }
}

async fn answer(
    core: &Core,
    request_id: &str,
    approve: bool,
    reason: Option<&str>,
) -> Result<serde_json::Value, CliError> {
    let (workspace, store) = (core.workspace(), core.store());
    let (review, id) = crate::plan_answer::open_request(workspace, store, request_id).await?;
    let request = review
        .store
        .get(id)
        .await
        .map_err(|e| CliError::coded(&e))?
        .ok_or_else(|| CliError::coded(&ProtocolError::NotFound(id)))?;
    // The full id from here: the prefix the person gave was resolved once.
    let full = id.to_string();
    match request.kind() {
        RequestKind::Permission => {
            let choice = if approve { Choice::Once } else { Choice::No };
            let answer = crate::permission_answer::answer_permission_in(
                workspace, store, &full, choice, reason, "mcp",
            )
            .await?;
            Ok(json!({
                "kind": "permission",
                "request_id": answer.request_id,
                "approved": answer.approved,
                "agent": answer.agent,
                "call": answer.summary,
                "response_message_id": answer.response_id,
            }))
        }
        RequestKind::PlanApproval => {
            let answer =
                crate::plan_answer::answer_plan_in(workspace, store, &full, approve, reason)
                    .await?;
            Ok(json!({
                "kind": "plan_approval",
                "request_id": answer.request_id,
                "approved": answer.approved,
                "agent": answer.recipient,
                "response_message_id": answer.response_id,
            }))
        }
        other => Err(CliError::usage(format!(
            "request {id} is a {} request: troupe_answer answers plan and permission requests",
            other.as_str()
        ))
        .with_code("not_answerable")),
    }
}
