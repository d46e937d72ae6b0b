//! `troupe review`: a person answers a pending plan request as the lead, from another terminal.
//! Same validation as the `review_plan` tool — one answer per request, none to a plan of a
//! shut-down or failed teammate (read from `team.json`); the running team sees the response
//! arrive in the teammate's mailbox through its filesystem watch. Unlike the tool, it takes the
//! short id (the id's last 8 hex digits, as shown) or a unique prefix of at least 8 characters
//! for the request id (people type these).
//!
//! [`answer_plan_in`] is the one path: `troupe review` and the web view's `POST /api/review` both
//! call it.

use std::path::Path;

use crate::error::CliError;
use crate::plan_answer::answer_plan_in;
use crate::render;

pub async fn review(
    workspace: &Path,
    request_id: &str,
    approve: bool,
    feedback: Option<String>,
    store: &crate::args::StoreFlags,
) -> Result<(), CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let store = crate::store_choice::store_choice(store, &settings, false)?;
    let answer =
        answer_plan_in(workspace, &store, request_id, approve, feedback.as_deref()).await?;
    render::print_text(&format!(
        "{} plan request {}; response {} delivered to {}'s mailbox\n",
        if answer.approved {
            "approved"
        } else {
            "rejected"
        },
        answer.request_id,
        answer.response_id,
        answer.recipient
    ))
}
