//! The page's pending permission requests (SPEC §13): how `GET /api/state` shows each one
//! waiting for a person, and `POST /api/permission`, which answers one through the same function
//! as `troupe approve` / `troupe deny` (as `page`).
//!
//! A request's content is what an agent — a model — asked for: the page must show it as text,
//! never as markup. The server sends it as JSON values; the page puts them in text nodes.

use std::path::Path;

use hyper::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use troupe::approvals::{Choice, PermissionAsk};
use troupe::bootstrap::StoreChoice;
use troupe::inspect::RequestView;

use super::action::{cli_error, parse_body};
use super::response::{self, error, Body};
use crate::permission_answer::answer_permission_in;

/// A pending permission request as `/api/state` lists it: who asks whom, the call (tool,
/// effect, exact arguments, the command or path in one line, the diff of a write), the sandbox
/// it would run in, why the rules asked, the entry "always"/"save" would allow (none: only
/// "once" and "no" are offered), and its window. A request whose content cannot be read is
/// listed with `unreadable` (the cause) and nothing to answer it with.
pub fn view(request: &RequestView) -> Value {
    let mut view = json!({
        "request_id": request.id,
        "agent": request.sender,
        "target": request.target,
        "status": request.status,
        "created_at": request.created_at_utc,
        "expires_at": request.expires_at_utc,
    });
    let fields = match PermissionAsk::from_content(&request.content) {
        Ok(ask) => json!({
            "tool": ask.tool,
            "effect": ask.effect,
            "summary": ask.summary(),
            "arguments": ask.arguments,
            "sandbox": ask.sandbox,
            "reason": ask.reason,
            "suggestion": ask.suggestion,
            "preview": ask.preview,
        }),
        Err(cause) => json!({"unreadable": cause}),
    };
    if let (Some(view), Value::Object(fields)) = (view.as_object_mut(), fields) {
        view.extend(fields);
    }
    view
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionBody {
    request_id: String,
    /// `once`, `always`, `save` or `no`.
    choice: String,
    /// What the agent is told with a denial.
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /api/permission` `{request_id, choice, reason?}`: the same answer as `troupe approve
/// [--always|--save]` / `troupe deny [--reason]` (one shared function), recorded as by `page`.
/// A request answered already is refused (409) naming the first answer.
pub async fn answer(workspace: &Path, team: &StoreChoice, body: &[u8]) -> Response<Body> {
    let body: PermissionBody = match parse_body(body, "a permission answer") {
        Ok(body) => body,
        Err(bad) => return bad.response(),
    };
    let choice = match body.choice.as_str() {
        "once" => Choice::Once,
        "always" => Choice::Always,
        "save" => Choice::Save,
        "no" => Choice::No,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                "usage",
                &format!("choice must be \"once\", \"always\", \"save\" or \"no\", not {other:?}"),
            )
        }
    };
    let reason = body.reason.as_deref().filter(|r| !r.trim().is_empty());
    if reason.is_some() && choice.approves() {
        return error(
            StatusCode::BAD_REQUEST,
            "usage",
            "a reason goes with a denial (choice \"no\"), not with an approval",
        );
    }
    match answer_permission_in(workspace, team, &body.request_id, choice, reason, "page").await {
        Ok(answer) => response::json(
            StatusCode::OK,
            &json!({
                "ok": true,
                "request_id": answer.request_id.to_string(),
                "approved": answer.approved,
                "choice": answer.choice.as_str(),
                "agent": answer.agent,
                "call": answer.summary,
                "response_id": answer.response_id.to_string(),
                "saved": answer.saved,
            }),
        ),
        Err(e) => cli_error(&e),
    }
}
