//! Plan approval at runtime (SPEC §6): a rejected plan keeps the gate closed and its feedback
//! reaches the teammate; a response consumed after the window is refused and the gate says
//! expired; the run still ends after telling the sender.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::store::mailbox::MailboxState;
use troupe::team::TeamUpdate;
use troupe::wire::{MailboxMessage, ProtocolMessageKind, RequestStatus};

use super::support::{
    call, drive_in_background, finish, is_gate_denial, plan_request_events, say, Convo, Fixture,
    Models, Reply, TestModel,
};

/// The lead: spawns `writer`, reviews each new plan with `approve`/`feedback`, else says text.
fn reviewing_lead(
    approve: bool,
    feedback: &'static str,
) -> impl Fn(&Convo<'_>) -> Reply + Send + Sync {
    move |c| {
        if c.last_is_tool_result() {
            return say("Done for now.");
        }
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "writer", "role": "writer", "prompt": "Edit NOTES.md; plan first."}),
            );
        }
        let reviewed = c.calls_named("review_plan").len();
        if plan_request_events(c).len() > reviewed {
            let plan = &plan_request_events(c)[reviewed];
            return call(
                "review_plan",
                json!({"request_id": plan["request_id"], "approve": approve, "feedback": feedback}),
            );
        }
        say("Noted.")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_plan_keeps_the_gate_closed_and_the_feedback_reaches_the_teammate() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, reviewing_lead(false, "Name the file first."));
    let writer = TestModel::new(&f.signal, |c| {
        let rejected = c.last_user().starts_with("Plan rejected");
        match (rejected, c.last_is_tool_result()) {
            (false, false) => call("submit_plan", json!({"plan": "Edit some file."})),
            (false, true) => say("Submitted."),
            (true, false) => call("write_file", json!({"path": "NOTES.md", "content": "x"})),
            (true, true) => say("Understood; I will revise."),
        }
    });
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    let (team, _) = finish(drive_in_background(team, "go")).await;

    let requests = f.requests().await;
    assert_eq!(requests.len(), 1);
    let plan = &requests[0];
    assert_eq!(plan.stored_status(), RequestStatus::Rejected);
    assert_eq!(
        plan.resolution().unwrap().content.as_str(),
        "Name the file first."
    );
    // submit_plan, answer; then the rejection prompt, a write (denied), answer.
    assert_eq!(writer.calls(), 4);
    let prompt = writer.user_texts(3).last().unwrap().clone();
    let expected = format!(
        "Plan rejected ({}). Feedback: Name the file first.",
        plan.id()
    );
    assert!(prompt.starts_with(&expected), "{prompt}");
    let after_write = writer.wire_messages(4);
    let denial = Convo(&after_write).last_tool_result().unwrap();
    assert!(is_gate_denial(denial), "{denial}");
    assert!(denial.contains(&plan.id().to_string()), "{denial}");
    assert!(denial.contains("is rejected"), "{denial}");
    assert!(!f.workspace.join("NOTES.md").exists());
    // The response was consumed by the teammate, not quarantined.
    assert_eq!(f.count("writer", MailboxState::Quarantine).await, 0);
    assert_eq!(f.count("writer", MailboxState::Done).await, 2);
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_consumed_after_expiry_is_refused_and_the_sender_is_told() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, reviewing_lead(true, "Fine."));
    let writer = TestModel::new(&f.signal, |c| {
        let told_expired = c.last_user().contains("expired");
        match (told_expired, c.last_is_tool_result()) {
            (false, false) => call("submit_plan", json!({"plan": "Edit NOTES.md."})),
            (false, true) => say("Submitted."),
            (true, false) => call("write_file", json!({"path": "NOTES.md", "content": "x"})),
            (true, true) => say("Still blocked."),
        }
    });
    // The writer stays inside its first message (its second call) while the lead approves.
    let release = writer.gate(2);
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    let run = drive_in_background(team, "go");
    f.signal
        .until("the lead's approval sent while the writer is busy", || {
            writer.calls() == 2
                && f.recorder.sent().iter().any(|m| {
                    matches!(m, MailboxMessage::Protocol(p)
                        if p.kind() == ProtocolMessageKind::PlanApprovalResponse)
                })
        })
        .await;
    let plan = f.requests().await[0].clone();
    assert_eq!(plan.stored_status(), RequestStatus::Pending);
    // The window closes before the writer gets to the response.
    f.clock.set(plan.expires_at_utc());
    release.send(()).unwrap();
    let (team, _) = finish(run).await;

    // The response was refused: quarantined with the reason, the request left pending (shown
    // as expired), state unchanged.
    let quarantined = f.recorder.quarantined();
    assert_eq!(quarantined.len(), 1, "{quarantined:#?}");
    let (agent, _, reason) = &quarantined[0];
    assert_eq!(agent, "writer");
    assert!(reason.contains("expired"), "{reason}");
    let in_quarantine = f.messages("writer", MailboxState::Quarantine).await;
    assert_eq!(in_quarantine.len(), 1);
    assert_eq!(in_quarantine[0].kind_str(), "plan_approval_response");
    let stored = f.requests().await[0].clone();
    assert_eq!(stored, plan, "the request is unchanged");
    assert_eq!(stored.status_at(f.now()), RequestStatus::Expired);
    // The sender was told (once), and its gate says expired.
    let expired: Vec<_> = f
        .recorder
        .updates()
        .into_iter()
        .filter(|u| matches!(u, TeamUpdate::Expired(_)))
        .collect();
    assert_eq!(expired.len(), 1);
    assert_eq!(writer.calls(), 4);
    let notice = writer.user_texts(3).last().unwrap().clone();
    assert!(
        notice.contains(&format!("Your plan_approval request {} expired", plan.id())),
        "{notice}"
    );
    let messages = writer.wire_messages(4);
    let denial = Convo(&messages).last_tool_result().unwrap();
    assert!(is_gate_denial(denial), "{denial}");
    assert!(denial.contains("is expired"), "{denial}");
    assert!(!f.workspace.join("NOTES.md").exists());
    // Never shown "Plan approved".
    for n in 1..=writer.calls() {
        assert!(!writer
            .user_texts(n)
            .iter()
            .any(|t| t.starts_with("Plan approved")));
    }
    for agent in ["lead", "writer"] {
        assert_eq!(f.count(agent, MailboxState::Ready).await, 0);
        assert_eq!(f.count(agent, MailboxState::Processing).await, 0);
    }
    team.close().await;
}
