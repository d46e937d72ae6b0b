//! `troupe approve ID [--always | --save]` and `troupe deny ID [--reason TEXT]`: a person answers
//! a pending permission request — a tool call waiting at its call for a person — from any
//! terminal (SPEC §13). The running team sees the answer arrive in the asking agent's mailbox
//! (its watch, or the database's wakeup on a shared team) and the call goes on or is
//! denied; a request answered already is refused, naming the first answer.

use std::path::Path;

use troupe::approvals::Choice;

use crate::args::StoreFlags;
use crate::error::CliError;
use crate::permission_answer::answer_permission_in;
use crate::render;

pub async fn answer(
    workspace: &Path,
    request_id: &str,
    choice: Choice,
    reason: Option<&str>,
    json: bool,
    store: &StoreFlags,
) -> Result<(), CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let store = crate::store_choice::store_choice(store, &settings, false)?;
    let answer = answer_permission_in(workspace, &store, request_id, choice, reason, "cli").await?;
    if json {
        return render::print_json(&serde_json::json!({
            "request_id": answer.request_id,
            "approved": answer.approved,
            "choice": answer.choice.as_str(),
            "agent": answer.agent,
            "call": answer.summary,
            "response_message_id": answer.response_id,
            "saved": answer.saved,
        }));
    }
    let mut text = format!(
        "{} permission request {} of {} ({}); response {} delivered\n",
        if answer.approved {
            "approved"
        } else {
            "denied"
        },
        answer.request_id,
        answer.agent,
        answer.summary,
        answer.response_id
    );
    if let Some(saved) = answer.saved {
        text.push_str(&format!("{saved}\n"));
    }
    render::print_text(&text)
}
