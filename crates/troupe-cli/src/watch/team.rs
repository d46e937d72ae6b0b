//! The view's reads of the team's stores (roster, pending plan requests) and the two things a
//! person does from it, each through the path its command uses: answering a plan as `troupe
//! review` does ([`answer_plan_in`]: one answer per request, none to a plan of a shut-down or
//! failed teammate) and messaging an agent as `troupe send` does.

use std::path::{Path, PathBuf};

use troupe::approvals::PermissionAsk;
use troupe::bootstrap::StoreChoice;
use troupe::inspect::Inspector;
use troupe::layout::Layout;
use troupe::wire::{AgentName, RequestId, RequestStatus};

use super::state::{Effect, PendingPlan, View};
use super::waiting::Runtime;
use crate::error::CliError;
use crate::plan_answer::answer_plan_in;
use crate::user_message::send_as_user;

/// The team the view shows.
pub struct Team {
    workspace: PathBuf,
    store: StoreChoice,
    /// Opened once: for a shared team it holds the database pool.
    inspector: Inspector,
    /// Where the view's thread waits for the reads and answers.
    runtime: Runtime,
}

impl Team {
    pub async fn open(workspace: &Path, store: StoreChoice) -> Result<Self, CliError> {
        let inspector = troupe::bootstrap::inspector_with(workspace, &store)
            .await
            .map_err(|e| CliError::coded(&e))?;
        Ok(Self {
            workspace: workspace.to_owned(),
            store,
            inspector,
            runtime: Runtime::current(),
        })
    }

    /// The team's reads (a session's `/status` and `/tasks`).
    pub fn inspector(&self) -> &Inspector {
        &self.inspector
    }

    /// Reads the roster and the pending plan requests into `view`.
    pub fn refresh(&self, view: &mut View) -> Result<(), CliError> {
        let roster = self
            .runtime
            .wait(self.inspector.roster())
            .map_err(|e| CliError::coded(&e))?;
        let teammates: Vec<(String, String, String)> = roster
            .teammates
            .iter()
            .map(|t| {
                (
                    t.name.to_string(),
                    t.role.clone(),
                    t.status.as_str().to_owned(),
                )
            })
            .collect();
        view.set_roster(&teammates);
        let answers = Layout::new(&self.workspace).protocol_answers_dir();
        let pending = self
            .runtime
            .wait(self.inspector.requests(Some(RequestStatus::Pending)))
            .map_err(|e| CliError::coded(&e))?
            .into_iter()
            // Answered but not yet read by its teammate (the answer waits in `answers/`):
            // no longer waiting for a person.
            .filter(|r| {
                r.kind == "plan_approval"
                    && r.target == AgentName::lead().as_str()
                    && answers
                        .join(format!("{}.json", r.id))
                        .symlink_metadata()
                        .is_err()
            })
            .map(|r| PendingPlan {
                request_id: r.id,
                from: r.sender,
                plan: r.content,
            })
            .collect();
        view.set_pending(pending);
        Ok(())
    }

    /// The permission asks waiting for a person (a session's view answers them), oldest first:
    /// pending, and not yet answered elsewhere (an answer waiting in `answers/` is one).
    pub fn pending_asks(&self) -> Result<Vec<PendingAsk>, CliError> {
        let answers = Layout::new(&self.workspace).protocol_answers_dir();
        let asks = self
            .runtime
            .wait(self.inspector.requests(Some(RequestStatus::Pending)))
            .map_err(|e| CliError::coded(&e))?
            .into_iter()
            .filter(|r| {
                r.kind == "permission"
                    && answers
                        .join(format!("{}.json", r.id))
                        .symlink_metadata()
                        .is_err()
            })
            .filter_map(|r| {
                let ask = PermissionAsk::from_content(&r.content).ok()?;
                Some(PendingAsk {
                    created_at: r.created_at_utc,
                    request_id: r.id,
                    from: r.sender,
                    ask,
                })
            })
            .collect();
        Ok(asks)
    }

    /// Carries out an answer or a message; returns what to tell the person (the outcome, or
    /// the error with its stable code).
    pub fn carry_out(&self, effect: &Effect) -> String {
        match effect {
            Effect::Quit => String::new(),
            Effect::Answer {
                request_id,
                approve,
                feedback,
            } => match self.runtime.wait(answer_plan_in(
                &self.workspace,
                &self.store,
                request_id,
                *approve,
                feedback.as_deref(),
            )) {
                Ok(answer) => format!(
                    "{} plan {} of {}",
                    if answer.approved {
                        "approved"
                    } else {
                        "rejected"
                    },
                    answer.request_id.short(),
                    answer.recipient
                ),
                Err(e) => e.to_string(),
            },
            Effect::Send { to, text } => {
                let sent = AgentName::parse(to)
                    .map_err(|e| CliError::usage(e.to_string()))
                    .and_then(|to| {
                        self.runtime
                            .wait(send_as_user(&self.workspace, &self.store, &to, text))
                    });
                match sent {
                    Ok(id) => format!("sent message {} to {to}", short_id(&id.to_string())),
                    Err(e) => e.to_string(),
                }
            }
        }
    }
}

/// A tool call waiting for a person's answer.
#[derive(Debug, Clone)]
pub struct PendingAsk {
    pub request_id: String,
    /// When it was asked (an ask older than the work going on has no call waiting for it).
    pub created_at: troupe::wire::UtcTime,
    /// The agent whose call it is.
    pub from: String,
    pub ask: PermissionAsk,
}

fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// A request id as the view shows it and a person types it: the short id (the random end;
/// the first digits of a UUIDv7 are its time, the same for plans made close together).
pub(crate) fn short_request_id(id: &str) -> String {
    RequestId::parse(id).map_or_else(|_| id.to_owned(), |id| id.short())
}
