//! The person's answers, asked in the editor with `session/request_permission`:
//! - [`EditorAsks`]: a tool call the permission rules ask a person about (`--approval ask`,
//!   the default). The ask is the durable permission request every ask of a person is (SPEC
//!   §13); the editor's answer goes through it like `troupe approve`'s — the first answer
//!   wins, the audit names `acp` — and when someone answers elsewhere first, the editor's
//!   prompt gives way (its later answer finds the request answered and changes nothing).
//! - [`ask_plan`]: a teammate's plan waiting for the lead, which the person may answer as the
//!   lead does (`troupe review`); the lead may answer it first.
//!
//! Options: `allow_once`, `allow_always` (when the rules suggest an entry to remember for the
//! run), `reject_once`; for a plan, `approve` and `reject`.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use async_trait::async_trait;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::StoreChoice;
use troupe::permissions::approval::INTERRUPTED_REASON;
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, Person, PersonReply, Withdrawal,
};

use super::updates::{title, tool_kind, Updates};

/// `--approval ask` in an editor's session.
pub struct EditorAsks {
    updates: Arc<Updates>,
    /// Fired by `session/cancel`: a waiting ask is answered no.
    cancel: CancellationToken,
}

impl EditorAsks {
    pub fn new(updates: Arc<Updates>, cancel: CancellationToken) -> Self {
        Self { updates, cancel }
    }
}

/// The option ids troupe offers.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const APPROVE: &str = "approve";
const REJECT: &str = "reject";

#[async_trait]
impl ApprovalProvider for EditorAsks {
    fn name(&self) -> &'static str {
        "acp"
    }

    fn person(&self) -> Person {
        Person::AtTerminal
    }

    fn answered_by(&self) -> &'static str {
        "acp"
    }

    /// Only reached without a team's requests (never in a session): no.
    async fn approve(&self, _request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        ApprovalAnswer::deny(INTERRUPTED_REASON).by("acp")
    }

    async fn ask_person(
        &self,
        request: &ApprovalRequest<'_>,
        withdrawn: Withdrawal<'_>,
    ) -> PersonReply {
        let agent = request.agent.as_str();
        let call_id = self
            .updates
            .current_call(agent)
            .unwrap_or_else(|| format!("{agent}:ask-{}", uuid::Uuid::new_v4()));
        let mut options =
            vec![json!({"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"})];
        if let Some(entry) = request.suggestion {
            options.push(json!({
                "optionId": ALLOW_ALWAYS,
                "name": format!("Allow {entry} for this run"),
                "kind": "allow_always",
            }));
        }
        options.push(json!({"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"}));
        let tool_call = json!({
            "toolCallId": call_id,
            "title": format!("{} — {}", title(agent, request.tool, request.arguments), request.reason),
            "kind": tool_kind(request.tool),
            "status": "pending",
            "rawInput": request.arguments,
            "_meta": {"troupe": {"agent": agent, "tool": request.tool}},
        });
        let tool_call = self.updates.redacted(tool_call);
        let Some(asked) = permission_request(self.updates.session_id(), tool_call, options) else {
            return PersonReply::Failed(
                "the editor's permission request could not be built".into(),
            );
        };
        let answer = self.updates.connection().send_request(asked).block_task();
        tokio::select! {
            _ = withdrawn => PersonReply::Withdrawn,
            () = self.cancel.cancelled() => PersonReply::Interrupted,
            answer = answer => match answer.map(chosen) {
                Ok(Some(option)) if option == ALLOW_ONCE => PersonReply::Once,
                Ok(Some(option)) if option == ALLOW_ALWAYS => match request.suggestion {
                    Some(entry) => PersonReply::Always(entry.to_owned()),
                    None => PersonReply::Once,
                },
                Ok(Some(option)) if option == REJECT_ONCE => PersonReply::No(String::new()),
                Ok(Some(other)) => PersonReply::Failed(format!("the editor chose an option troupe did not offer: {other}")),
                // The editor cancelled the ask (its prompt was cancelled).
                Ok(None) => PersonReply::Interrupted,
                Err(e) => PersonReply::Failed(format!("the editor's answer failed: {e}")),
            },
        }
    }
}

/// A `session/request_permission` request from its wire form.
fn permission_request(
    session_id: &str,
    tool_call: Value,
    options: Vec<Value>,
) -> Option<RequestPermissionRequest> {
    let value = json!({"sessionId": session_id, "toolCall": tool_call, "options": options});
    serde_json::from_value(value)
        .map_err(|e| tracing::warn!(error = %e, "session/request_permission not built"))
        .ok()
}

/// The option the editor chose; `None` when it cancelled the ask.
fn chosen(response: RequestPermissionResponse) -> Option<String> {
    match response.outcome {
        RequestPermissionOutcome::Selected(selected) => Some(selected.option_id.0.to_string()),
        _ => None,
    }
}

/// Asks the editor about the plan request `request_id` from `teammate`, and answers it as the
/// lead with the editor's choice (`troupe review`'s path). Said on the log when the lead (or
/// another person) answered first.
pub async fn ask_plan(
    connection: ConnectionTo<Client>,
    session_id: String,
    workspace: PathBuf,
    store: StoreChoice,
    request_id: String,
    teammate: String,
) {
    let tool_call = json!({
        "toolCallId": format!("plan:{request_id}"),
        "title": format!("{teammate} asks the lead to approve its plan (request {request_id})"),
        "kind": "think",
        "status": "pending",
        "_meta": {"troupe": {"agent": teammate, "request_id": request_id}},
    });
    let options = vec![
        json!({"optionId": APPROVE, "name": "Approve the plan", "kind": "allow_once"}),
        json!({"optionId": REJECT, "name": "Reject the plan", "kind": "reject_once"}),
    ];
    let Some(asked) = permission_request(&session_id, tool_call, options) else {
        return;
    };
    let approve = match connection.send_request(asked).block_task().await {
        Ok(response) => match chosen(response).as_deref() {
            Some(APPROVE) => true,
            Some(REJECT) => false,
            _ => return,
        },
        Err(_) => return,
    };
    let feedback = (!approve).then_some("rejected in the editor");
    if let Err(e) =
        crate::plan_answer::answer_plan_in(&workspace, &store, &request_id, approve, feedback).await
    {
        tracing::info!(request_id, error = %e, "the editor's plan answer was not taken");
    }
}
