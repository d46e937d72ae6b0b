//! `review_permission` (SPEC §13): the lead answers a teammate's permission ask that was routed
//! to it (`[approvals] route = "lead"`), through the same single-answer step as every other
//! answerer — a person who answered first wins, and the tool says so.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::ask::{Choice, PermissionReply};
use super::desk::ApprovalDesk;
use crate::store::protocol::ProtocolError;
use crate::team::{TeamError, TeamHandle};
use crate::tools::{Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

pub struct ReviewPermission(pub TeamHandle);

#[async_trait]
impl ToolHandler for ReviewPermission {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "review_permission".into(),
            description: "Approve or deny a teammate's pending permission request (the request_id \
                comes from its permission_request event: the tool, its exact arguments and, for \
                writes, the diff). The teammate's call waits until someone answers; a person may \
                answer first. A denial's reason is what the teammate is told."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "request_id": {"type": "string", "minLength": 1},
                    "approve": {"type": "boolean"},
                    "reason": {"type": "string"}
                },
                "required": ["request_id", "approve"],
                "additionalProperties": false
            }),
            effect: Effect::External,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let (request_id, approve) = crate::team::tools::decision_args(&args)?;
        let reason = args
            .get("reason")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|r| !r.is_empty());
        let team = self.0.upgrade().map_err(|e| ToolError::coded(&e))?;
        let desk = ApprovalDesk::new(team.protocol().clone());
        let answered = async {
            let request = desk.request(request_id).await?;
            if request.target() != &ctx.agent {
                return Err(ProtocolError::Mismatch {
                    id: request_id,
                    why: format!(
                        "it is addressed to {}, not to {}; only asks routed to the lead \
                         ([approvals] route = \"lead\") are answered with review_permission",
                        request.target(),
                        ctx.agent
                    ),
                }
                .into());
            }
            let reply = match (approve, reason) {
                (true, Some(r)) => {
                    PermissionReply::new(Choice::Once, format!("approved by the lead: {r}"), "lead")
                }
                (true, None) => PermissionReply::new(Choice::Once, "approved by the lead", "lead"),
                (false, Some(r)) => {
                    PermissionReply::new(Choice::No, format!("denied by the lead: {r}"), "lead")
                }
                (false, None) => PermissionReply::new(Choice::No, "denied by the lead", "lead"),
            };
            let message = desk.answer(&request, &reply).await?;
            Ok::<_, TeamError>((request, message))
        }
        .await
        .map_err(|e| ToolError::coded(&e))?;
        let (request, message) = answered;
        Ok(json!({
            "request_id": request_id,
            "approved": approve,
            "response_message_id": message.id(),
            "to": request.sender(),
        })
        .to_string())
    }
}
