//! A crash in the middle of an append leaves a last line without its `\n`. Every append-only
//! file troupe writes cuts such a tail off before appending, so the next record never gets glued
//! onto it (which would turn a tolerated torn tail into a parse error in the middle of the file).

use std::io::Write;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::agent::transcript::{FileTranscript, Origin, TranscriptSink};
use troupe::clock::ManualClock;
use troupe::layout::Layout;
use troupe::model::ChatMessage;
use troupe::permissions::{AuditEntry, AuditSink, JsonlAuditSink};
use troupe::store::mailbox::{FileMailboxStore, MailboxEntry, MailboxState, MailboxStore};
use troupe::store::protocol::{DurableFiles, ProtocolFiles};
use troupe::wire::AgentName;

use super::assert_clean_jsonl;

fn append_raw(path: &std::path::Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[tokio::test]
async fn a_transcript_with_a_torn_tail_takes_the_next_message_on_a_line_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcripts/lead.jsonl");
    let first_run = FileTranscript::new(&path);
    first_run
        .append(None, &ChatMessage::user("one"), Origin::Person)
        .await
        .unwrap();
    append_raw(&path, b"{\"key\":null,\"message\":{\"role\":\"assi");

    // The next run loads (ignoring the torn tail) and goes on appending.
    let second_run = FileTranscript::new(&path);
    assert_eq!(
        second_run.load().unwrap().messages,
        vec![ChatMessage::user("one")]
    );
    second_run
        .append(Some("k"), &ChatMessage::user("two"), Origin::Input)
        .await
        .unwrap();

    // And the run after that still reads every line.
    let loaded = FileTranscript::new(&path).load().unwrap();
    assert_eq!(
        loaded.messages,
        vec![ChatMessage::user("one"), ChatMessage::user("two")]
    );
    assert!(loaded.keys.contains("k"));
    assert_eq!(assert_clean_jsonl(&path).len(), 2);
}

#[tokio::test]
async fn the_audit_log_cuts_a_torn_tail_before_its_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    std::fs::create_dir_all(layout.state_dir()).unwrap();
    let entry = |tool: &str| AuditEntry {
        agent: AgentName::lead(),
        tool: tool.to_owned(),
        allowed: true,
        rule: "default".to_owned(),
        reason: "read tools are allowed".to_owned(),
        input_digest: "0000000000000000".to_owned(),
        sandbox: None,
    };
    let clock = Arc::new(ManualClock::at_spec_epoch());
    JsonlAuditSink::open(&layout, clock.clone())
        .unwrap()
        .record(entry("glob"))
        .await
        .unwrap();
    append_raw(
        &layout.audit_log(),
        b"{\"at\":\"2026-07-30T08:00:00.000Z\",\"agent\":\"le",
    );

    let next_run = JsonlAuditSink::open(&layout, clock).unwrap();
    next_run.record(entry("read_file")).await.unwrap();
    let lines = assert_clean_jsonl(&layout.audit_log());
    let tools: Vec<&str> = lines.iter().map(|l| l["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, vec!["glob", "read_file"]);
}

#[tokio::test]
async fn the_quarantine_journal_cuts_a_torn_tail_and_keeps_the_next_reason() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let store = FileMailboxStore::new(&layout, Arc::new(ManualClock::at_spec_epoch()));
    let alice = AgentName::parse("alice").unwrap();
    let mailbox = layout.mailbox_dir(&alice);
    std::fs::create_dir_all(mailbox.join("ready")).unwrap();
    // An earlier quarantine whose journal line was torn by a crash.
    append_raw(
        &mailbox.join("quarantine.jsonl"),
        b"{\"file_name\":\"x.json\",\"from\":\"re",
    );
    let bad = "00000000-0000-4000-8000-000000000001.json";
    std::fs::write(mailbox.join("ready").join(bad), b"not json").unwrap();
    assert_eq!(store.claim(&alice).await.unwrap(), None);

    let lines = assert_clean_jsonl(&mailbox.join("quarantine.jsonl"));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["file_name"], bad);
    // The reason is found again when the quarantine is listed.
    let listed = store.list(&alice, MailboxState::Quarantine).await.unwrap();
    match &listed[..] {
        [MailboxEntry::Invalid { file_name, reason }] => {
            assert_eq!(file_name, bad);
            let reason = reason.as_deref().unwrap_or_default();
            assert!(reason.contains("does not parse"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_protocol_archive_writer_cuts_a_torn_tail_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("archive.jsonl");
    append_raw(&path, b"{\"a\":1}\n{\"half");
    DurableFiles.append_archive(&path, b"{\"b\":2}\n").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n{\"b\":2}\n");
    // A file that is all torn tail is cut to nothing.
    std::fs::write(&path, b"{\"half").unwrap();
    DurableFiles.append_archive(&path, b"{\"c\":3}\n").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"c\":3}\n");
}
