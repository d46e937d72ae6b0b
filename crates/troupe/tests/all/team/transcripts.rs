//! Transcripts (`.troupe/transcripts/<agent>.jsonl`): a later run continues each agent's
//! conversation, and an event a dead run had already appended is not appended again when its
//! message is redelivered.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::agent::transcript::{FileTranscript, Origin, TranscriptSink};
use troupe::ids::IdGenerator;
use troupe::model::ChatMessage;
use troupe::store::mailbox::{MailboxState, MailboxStore};
use troupe::wire::{AgentName, Content, MailboxMessage, OrdinaryKind, OrdinaryMessage};

use super::support::{call, drive, name, say, Fixture, Models, TestModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lead_and_a_teammate_continue_their_conversations_in_the_next_run() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |c| {
        if c.last_user() == "Start." {
            return match c.last_tool_result() {
                Some(_) => say("Started."),
                None => call(
                    "spawn_teammate",
                    json!({"name": "mate", "role": "r", "prompt": "Remember 42."}),
                ),
            };
        }
        if c.last_user() == "Ask the teammate." && !c.last_is_tool_result() {
            return call(
                "send_message",
                json!({"to": "mate", "content": "Which number?"}),
            );
        }
        say("Asked.")
    });
    let mate = TestModel::new(&f.signal, |_| say("ok"));
    let models = Models::new(&f.signal, &[("lead", &lead), ("mate", &mate)]);

    let mut first = f.build(models.clone()).await;
    drive(&mut first, "Start.").await;
    first.close().await;
    let lead_calls_in_first_run = lead.calls();
    let mate_calls_in_first_run = mate.calls();

    let mut second = f.build(models).await;
    drive(&mut second, "Ask the teammate.").await;
    second.close().await;

    // The lead's first request of the second run holds the first run's conversation.
    let texts = lead.user_texts(lead_calls_in_first_run + 1);
    assert_eq!(texts[0], "Start.");
    assert_eq!(texts.last().unwrap(), "Ask the teammate.");
    // So does the teammate's: its first task, then the new message.
    let mate_texts = mate.user_texts(mate_calls_in_first_run + 1);
    assert_eq!(mate_texts.first().unwrap(), "Task from lead:\nRemember 42.");
    assert_eq!(
        mate_texts.last().unwrap(),
        "Message from lead:\nWhich number?"
    );
    assert!(f.workspace.join(".troupe/transcripts/lead.jsonl").is_file());
    assert!(f.workspace.join(".troupe/transcripts/mate.jsonl").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_a_dead_run_appended_is_not_appended_again() {
    let f = Fixture::new();
    // What a dead run left: a result in the lead's processing/, already in the lead's transcript.
    let message = MailboxMessage::Ordinary(OrdinaryMessage {
        id: f.ids.message_id(),
        sender: name("mate"),
        recipient: AgentName::lead(),
        kind: OrdinaryKind::Result,
        content: Content::parse("the report").unwrap(),
        created_at_utc: f.now(),
    });
    let mailbox = f.mailbox();
    mailbox.send(&message).await.unwrap();
    mailbox.claim(&AgentName::lead()).await.unwrap().unwrap();
    let transcript = FileTranscript::new(f.layout.transcript(&AgentName::lead()));
    transcript
        .append(None, &ChatMessage::system("You are lead"), Origin::Runtime)
        .await
        .unwrap();
    let event = format!(
        "[event] {}",
        json!({"kind": "result", "sender": "mate", "message_id": message.id(), "content": "the report"})
    );
    transcript
        .append(
            Some(&message.id().to_string()),
            &ChatMessage::user(event),
            Origin::Input,
        )
        .await
        .unwrap();

    let lead = TestModel::new(&f.signal, |_| say("Done."));
    let mut team = f.build(Models::new(&f.signal, &[("lead", &lead)])).await;
    assert_eq!(team.recovered, 1);
    drive(&mut team, "Carry on.").await;
    team.close().await;

    // One model call: the user turn. The redelivered result was acked without a second one.
    assert_eq!(lead.calls(), 1);
    let events: Vec<String> = lead
        .user_texts(1)
        .into_iter()
        .filter(|t| t.starts_with("[event] "))
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(f.count("lead", MailboxState::Done).await, 1);
    assert_eq!(f.count("lead", MailboxState::Processing).await, 0);
}
