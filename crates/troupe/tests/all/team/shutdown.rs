//! Shutdown (SPEC §6): a busy teammate finishes the message it is working on before it answers a
//! shutdown request, and the request itself never reaches the model.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::store::mailbox::MailboxState;
use troupe::wire::{
    MailboxMessage, OrdinaryKind, ProtocolMessageKind, RequestKind, RequestStatus, TeammateStatus,
};

use super::support::{call, drive_in_background, finish, say, Fixture, Models, TestModel};

fn kinds(messages: &[MailboxMessage]) -> Vec<&'static str> {
    messages.iter().map(MailboxMessage::kind_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_teammate_finishes_its_message_before_shutting_down() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "writer", "role": "writer", "prompt": "Write the long report."}),
            );
        }
        if c.calls_named("request_shutdown").is_empty() {
            return call("request_shutdown", json!({"teammate": "writer"}));
        }
        say("Noted.")
    });
    let writer = TestModel::new(&f.signal, |_| say("Report finished."));
    // The writer's only model call waits until the test says so.
    let release = writer.gate(1);
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    let run = drive_in_background(team, "Start the report, then stop the writer.");

    // The lead's third call comes after request_shutdown ran: the request is queued while the
    // writer is still inside its first message.
    f.signal
        .until("the writer busy and the shutdown request sent", || {
            writer.calls() == 1 && lead.calls() >= 3
        })
        .await;
    assert_eq!(
        kinds(&f.messages("writer", MailboxState::Processing).await),
        ["task"]
    );
    assert_eq!(
        kinds(&f.messages("writer", MailboxState::Ready).await),
        ["shutdown_request"]
    );
    assert_eq!(
        f.requests().await[0].stored_status(),
        RequestStatus::Pending,
        "nothing answered the request yet"
    );
    release.send(()).unwrap();
    let (team, outcome) = finish(run).await;
    assert_eq!(outcome.answer, "Noted.");

    // One model call: the task. The shutdown request was handled without the model.
    assert_eq!(writer.calls(), 1);
    // The result of the task was sent before the shutdown response.
    let from_writer: Vec<String> = f
        .recorder
        .sent()
        .iter()
        .filter(|m| m.sender().as_str() == "writer")
        .map(|m| match m {
            MailboxMessage::Ordinary(o) => format!("{}: {}", o.kind.as_str(), o.content.as_str()),
            MailboxMessage::Protocol(p) => p.kind().as_str().to_owned(),
        })
        .collect();
    assert_eq!(
        from_writer,
        ["result: Report finished.", "shutdown_response"]
    );
    let requests = f.requests().await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].kind(), RequestKind::Shutdown);
    assert_eq!(requests[0].stored_status(), RequestStatus::Approved);
    let response = f
        .messages("lead", MailboxState::Done)
        .await
        .into_iter()
        .find_map(|m| match m {
            MailboxMessage::Protocol(p) if p.kind() == ProtocolMessageKind::ShutdownResponse => {
                Some(p)
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(
        requests[0].resolution().unwrap().message_id,
        response.id(),
        "the lead consumed the teammate's response"
    );
    assert_eq!(response.approved(), Some(true));
    assert_eq!(f.status_of(&team, "writer"), Some(TeammateStatus::Shutdown));
    assert_eq!(
        f.recorder.statuses_of("writer").last(),
        Some(&TeammateStatus::Shutdown)
    );
    // Both of the writer's messages are done, in order; nothing is left anywhere else.
    let done = f.messages("writer", MailboxState::Done).await;
    assert_eq!(kinds(&done), ["task", "shutdown_request"]);
    assert!(matches!(&done[0], MailboxMessage::Ordinary(m) if m.kind == OrdinaryKind::Task));
    for state in [MailboxState::Ready, MailboxState::Processing] {
        assert_eq!(f.count("writer", state).await, 0);
        assert_eq!(f.count("lead", state).await, 0);
    }
    // The lead saw the result before the shutdown answer.
    let last = lead.user_texts(lead.calls());
    let events: Vec<&String> = last.iter().filter(|t| t.starts_with("[event]")).collect();
    assert_eq!(events.len(), 2, "{last:#?}");
    assert!(events[0].contains("\"kind\":\"result\""), "{}", events[0]);
    assert!(events[1].contains("shutdown_response"), "{}", events[1]);
    team.close().await;
}

/// A teammate that is shut down takes no more messages: the lead's tools refuse it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_teammate_is_refused_by_send_message_and_request_shutdown() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "writer", "role": "writer", "prompt": "Say hi."}),
            );
        }
        let shutdown_answered = c
            .events()
            .iter()
            .any(|e| e["protocol_kind"] == "shutdown_response");
        if !shutdown_answered {
            if c.calls_named("request_shutdown").is_empty() {
                return call("request_shutdown", json!({"teammate": "writer"}));
            }
            return say("Waiting.");
        }
        match c.calls_named("send_message").len() + c.calls_named("request_shutdown").len() {
            1 => call(
                "send_message",
                json!({"to": "writer", "content": "one more"}),
            ),
            2 => call("request_shutdown", json!({"teammate": "writer"})),
            _ => say("Done."),
        }
    });
    let writer = TestModel::new(&f.signal, |_| say("hi"));
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    let (team, _) = finish(drive_in_background(team, "go")).await;
    let last = lead.wire_messages(lead.calls());
    let results: Vec<&str> = last
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let refusals: Vec<&&str> = results
        .iter()
        .filter(|r| r.starts_with("Error [teammate_state]"))
        .collect();
    assert_eq!(refusals.len(), 2, "{results:#?}");
    assert_eq!(writer.calls(), 1);
    assert_eq!(
        f.requests().await.len(),
        1,
        "no second shutdown request was registered"
    );
    team.close().await;
}

/// A shutdown request the teammate never got to in time: the lead is told by an event when it
/// expires, the run waits for the busy teammate, and the teammate refuses the stale request
/// (quarantined, not obeyed) when it finally claims it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_shutdown_request_expires_and_the_lead_is_told() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "writer", "role": "writer", "prompt": "A long task."}),
            );
        }
        if c.calls_named("request_shutdown").is_empty() {
            return call("request_shutdown", json!({"teammate": "writer"}));
        }
        say("Noted.")
    });
    let writer = TestModel::new(&f.signal, |_| say("Long task done."));
    let release = writer.gate(1);
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    let runtime = team.runtime.clone();
    let run = drive_in_background(team, "Start, then stop the writer.");
    f.signal
        .until("the writer busy and the shutdown request sent", || {
            writer.calls() == 1 && lead.calls() >= 3
        })
        .await;
    let request = f.requests().await[0].clone();
    f.clock.set(request.expires_at_utc());
    runtime.poke();
    f.signal
        .until("the lead told of the expiry", || {
            (1..=lead.calls()).any(|n| {
                lead.user_texts(n)
                    .iter()
                    .any(|t| t.contains("\"kind\":\"request_expired\""))
            })
        })
        .await;
    assert!(!run.is_finished(), "the run waits for the busy teammate");
    release.send(()).unwrap();
    let (team, _) = finish(run).await;

    let quarantined = f.recorder.quarantined();
    assert_eq!(quarantined.len(), 1, "{quarantined:#?}");
    assert_eq!(quarantined[0].0, "writer");
    assert!(quarantined[0].2.contains("expired"), "{}", quarantined[0].2);
    // The stream has the expiry and the quarantine.
    let expired = f.events_of("request_expired");
    assert_eq!(expired.len(), 1, "{expired:#?}");
    assert_eq!(
        expired[0].str("request_id"),
        Some(request.id().to_string().as_str())
    );
    assert_eq!(expired[0].str("protocol"), Some("shutdown"));
    let events_quarantined = f.events_of("message_quarantined");
    assert_eq!(events_quarantined.len(), 1);
    assert_eq!(events_quarantined[0].agent, "writer");
    assert_eq!(writer.calls(), 1);
    assert_eq!(
        f.requests().await[0],
        request,
        "still pending, shown as expired"
    );
    assert_eq!(f.status_of(&team, "writer"), Some(TeammateStatus::Idle));
    assert!(!f
        .recorder
        .sent()
        .iter()
        .any(|m| m.kind_str() == "shutdown_response"));
    team.close().await;
}
