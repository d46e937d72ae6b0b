//! Who answers a permission ask during a `troupe_run` under `--approval ask`: there is no
//! terminal (stdin is the protocol's), so
//!
//! - when the client declared the elicitation capability, [`Elicited`] asks the person through
//!   the client: an elicitation with the call, why it is asked, its diff, and a form of one
//!   yes/no and an optional reason. The ask is also the durable permission request every ask of
//!   a person becomes (SPEC §13), so `troupe approve`/`deny` or `troupe_answer` from elsewhere
//!   answer it too; whichever answer comes first stands, and the elicitation gives way.
//! - otherwise [`NoElicitation`] is a provider with no terminal: the call is denied at once,
//!   with a reason that says how to allow it (or, with `[approvals] no_terminal = "wait"`, the
//!   request waits for `troupe_answer` or `troupe approve` as it would for `troupe run` without
//!   a terminal).

use async_trait::async_trait;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;
use troupe::approvals::PermissionAsk;
use troupe::permissions::approval::INTERRUPTED_REASON;
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, Person, PersonReply, Withdrawal,
};

/// Who a person's answer through the client is recorded as (`approval:mcp` in the audit).
const BY: &str = "mcp";

/// How calls that were denied can be allowed, said with the denials.
pub const HOW_TO_ALLOW: &str = "to allow such calls without asking: `troupe mcp serve \
     --approval auto`, or an allow rule in troupe.toml (`[permissions] allow = \
     [\"write_file(docs/**)\"]`); to be asked: a client with MCP elicitation, or `[approvals] \
     no_terminal = \"wait\"` and troupe_answer for each request";

/// `--approval ask` with a client that can be asked: each ask is an elicitation.
pub struct Elicited {
    peer: Peer<RoleServer>,
    /// Fired by the run's cancel: a waiting ask is answered no.
    cancel: CancellationToken,
}

impl Elicited {
    pub fn new(peer: Peer<RoleServer>, cancel: CancellationToken) -> Self {
        Self { peer, cancel }
    }

    async fn elicit(&self, request: &ApprovalRequest<'_>) -> PersonReply {
        let schema = ElicitationSchema::builder()
            .required_bool_with("approve", |b| {
                b.title("Allow this call")
                    .description("Yes allows this one call; no denies it.")
            })
            .optional_string_with("reason", |s| {
                s.title("Reason")
                    .description("Why not (the agent reads it), when you deny the call.")
            })
            .build();
        let schema = match schema {
            Ok(schema) => schema,
            Err(e) => return PersonReply::Failed(format!("the approval form: {e}")),
        };
        let asked = self
            .peer
            .create_elicitation(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: message(request),
                requested_schema: schema,
            })
            .await;
        let result = match asked {
            Ok(result) => result,
            Err(e) => return PersonReply::Failed(format!("the MCP client was not asked: {e}")),
        };
        match result.action {
            ElicitationAction::Accept => {
                let content = result.content.unwrap_or_default();
                let reason = content
                    .get("reason")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                match content.get("approve").and_then(serde_json::Value::as_bool) {
                    Some(true) => PersonReply::Once,
                    Some(false) => PersonReply::No(reason),
                    None => PersonReply::Failed(
                        "the MCP client's answer had no yes/no (approve)".to_owned(),
                    ),
                }
            }
            ElicitationAction::Decline => PersonReply::No(String::new()),
            ElicitationAction::Cancel => PersonReply::No("dismissed without an answer".to_owned()),
            _ => PersonReply::Failed("the MCP client answered with an unknown action".to_owned()),
        }
    }
}

#[async_trait]
impl ApprovalProvider for Elicited {
    fn name(&self) -> &'static str {
        "mcp"
    }

    /// A person answers, through the client: every ask is a durable request.
    fn person(&self) -> Person {
        Person::AtTerminal
    }

    fn answered_by(&self) -> &'static str {
        BY
    }

    /// Only reached without a team's requests (never in a run): no, once the run is stopped.
    async fn approve(&self, _request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.cancel.cancelled().await;
        ApprovalAnswer::deny(INTERRUPTED_REASON).by("interrupt")
    }

    async fn ask_person(
        &self,
        request: &ApprovalRequest<'_>,
        withdrawn: Withdrawal<'_>,
    ) -> PersonReply {
        tokio::select! {
            _ = withdrawn => PersonReply::Withdrawn,
            () = self.cancel.cancelled() => PersonReply::Interrupted,
            reply = self.elicit(request) => reply,
        }
    }
}

/// The elicitation's text: who asks for what, why, and the diff when there is one.
fn message(request: &ApprovalRequest<'_>) -> String {
    let ask = PermissionAsk::new(
        request.tool,
        request.effect,
        request.arguments,
        request.sandbox,
        request.reason,
        request.suggestion,
        None,
    );
    let mut text = format!(
        "troupe: agent {} wants to run {}\nwhy asked: {}",
        request.agent,
        ask.summary(),
        request.reason
    );
    if let Some(diff) = request.preview.and_then(|preview| (preview.0)()) {
        text.push_str("\n\n");
        text.push_str(&troupe::store::events::kinds::cut(&diff, 4000));
    }
    text
}

/// `--approval ask` with a client that cannot be asked: as `troupe run` without a terminal.
pub struct NoElicitation;

#[async_trait]
impl ApprovalProvider for NoElicitation {
    fn name(&self) -> &'static str {
        "mcp"
    }

    /// It would ask a person, but nobody can be asked here.
    fn person(&self) -> Person {
        Person::NoTerminal
    }

    fn answered_by(&self) -> &'static str {
        BY
    }

    async fn approve(&self, _request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        ApprovalAnswer::deny(format!(
            "denied: the MCP client cannot be asked (it did not declare elicitation) and \
             --approval is ask; {HOW_TO_ALLOW}"
        ))
    }
}
