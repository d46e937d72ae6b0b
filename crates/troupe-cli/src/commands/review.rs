//! `troupe review`: a person answers a pending plan request as the lead, from another terminal.
//! Same validation as the `review_plan` tool — one answer per request, none to a plan of a
//! shut-down or failed teammate (read from `team.json`); the running team sees the response
//! arrive in the teammate's mailbox through its filesystem watch. Unlike the tool, it takes a
//! unique prefix of at least 8 characters for the request id (people type these).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use troupe::clock::{Clock, SystemClock};
use troupe::error::ErrorCode;
use troupe::ids::RandomIds;
use troupe::inspect::{read_roster, RequestIdError, RequestIdInput};
use troupe::layout::Layout;
use troupe::store::mailbox::FileMailboxStore;
use troupe::store::protocol::JsonProtocolStore;
use troupe::team::{NoTeamObserver, Postman, ProtocolRuntime};
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
    let layout = Layout::new(workspace);
    if !layout.protocol_dir().is_dir() {
        return Err(CliError::Failed(format!(
            "no protocol requests in {} [protocol_not_found]",
            workspace.display()
        )));
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = JsonProtocolStore::open(&layout, clock.clone(), Arc::new(RandomIds))
        .map_err(|e| CliError::failed(format_args!("{e} [{}]", e.code())))?;
    let request_id = given.resolve(&store).map_err(|e| match e {
        RequestIdError::Ambiguous { .. } => CliError::Usage(e.to_string()),
        e => CliError::failed(format_args!("{e} [{}]", e.code())),
    })?;
    let roster = read_roster(&layout.team_file())
        .map_err(|e| CliError::failed(format_args!("{e} [{}]", e.code())))?;
    let mailbox = FileMailboxStore::new(&layout, clock.clone());
    let postman = Arc::new(Postman::new(
        Arc::new(mailbox),
        clock,
        Arc::new(RandomIds),
        Arc::new(NoTeamObserver),
    ));
    // The TTL is unused: review only answers existing requests.
    let protocol = ProtocolRuntime::new(Arc::new(store), postman, Duration::from_secs(300));
    let response = protocol
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
