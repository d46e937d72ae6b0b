//! `troupe send AGENT TEXT`: a person messages the lead or a teammate, during a run or before the
//! next (SPEC §10). The running team picks the message up through its mailbox watch; the lead
//! gets it as a `user_message` event, a teammate as a message from `user`. With a store URL
//! (`--store`, `TROUPE_STORE_URL`, `[store] url`) the message goes into the shared team's
//! database, where whichever process holds the recipient is woken.

use std::path::Path;

use troupe::wire::AgentName;

use crate::args::StoreFlags;
use crate::error::CliError;
use crate::render;
use crate::user_message::send_as_user;

pub async fn send(
    workspace: &Path,
    agent: &str,
    text: &str,
    json: bool,
    store: &StoreFlags,
) -> Result<(), CliError> {
    let to = AgentName::parse(agent).map_err(|e| CliError::usage(e.to_string()))?;
    let text = &crate::input::text_or_stdin(text, "the message")?;
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let store = crate::store_choice::store_choice(store, &settings, false)?;
    let id = send_as_user(workspace, &store, &to, text).await?;
    if json {
        render::print_json(&serde_json::json!({"message_id": id, "to": to, "from": "user"}))
    } else {
        render::print_text(&format!("sent message {id} from user to {to}\n"))
    }
}
