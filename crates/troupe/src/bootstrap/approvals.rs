//! Approvals as requests (SPEC §13) in a run: the approval provider the settings chose is
//! wrapped once, at the start, in a [`RequestedApproval`] — asks that go to a person become
//! durable `permission` requests — and bound to the team once its runtime exists.

use std::sync::Arc;

use serde_json::json;

use crate::approvals::{ApprovalDesk, Binding, OnRegistered, RequestedApproval};
use crate::hooks::CommandHooks;
use crate::settings::NoTerminal;
use crate::store::events::EventLog;
use crate::team::TeamRuntime;

use super::options::TeamSettings;

/// Wraps `settings.approval` for a run as `role` (`lead`, `worker`). Without a terminal, a
/// lead's asks are denied at once unless `[approvals] no_terminal = "wait"` (SPEC §7); a
/// worker's wait for an answer from elsewhere unless the settings say `"deny"`.
pub(super) fn wrap(settings: &mut TeamSettings, role: &str) -> Arc<RequestedApproval> {
    let section = &settings.settings.approvals;
    let no_terminal = match (&section.no_terminal, role) {
        (Some(chosen), _) => chosen.value,
        (None, "worker") => NoTerminal::Wait,
        (None, _) => NoTerminal::Deny,
    };
    let requests = Arc::new(RequestedApproval::new(
        settings.approval.clone(),
        section.ttl,
        section.route,
        no_terminal,
    ));
    settings.approval = requests.clone();
    requests
}

/// Binds the team: its protocol runtime answers and reads the requests, its mailboxes' arrivals
/// wake a waiting ask, its close ends one; each request runs the `PermissionRequest` hooks.
pub(super) fn bind(
    requests: &RequestedApproval,
    settings: &TeamSettings,
    runtime: &TeamRuntime,
    events: &Arc<EventLog>,
    hooks: Option<CommandHooks>,
) {
    let on_registered: Option<OnRegistered> = hooks.map(|hooks| {
        let hook: OnRegistered = Arc::new(move |request, ask| {
            let hooks = hooks.clone();
            let agent = request.sender().clone();
            let tool = ask.tool.clone();
            let arguments = ask.arguments.clone();
            let fields = crate::store::events::kinds::fields(json!({
                "request_id": request.id(),
                "to": request.target(),
                "summary": ask.summary(),
                "expires_at": request.expires_at_utc(),
            }));
            // A notice: the ask does not wait for it.
            tokio::spawn(async move {
                hooks
                    .permission_request(&agent, &tool, &arguments, fields)
                    .await;
            });
        });
        hook
    });
    requests.bind(Binding {
        desk: ApprovalDesk::new(runtime.protocol().clone()),
        arrivals: runtime.arrivals(),
        events: events.clone(),
        clock: settings.clock.clone(),
        closing: runtime.closing_token(),
        on_registered,
        redactor: settings.redactor.clone(),
    });
}
