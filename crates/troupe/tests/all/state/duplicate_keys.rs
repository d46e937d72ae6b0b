//! A key that appears twice in one JSON object is refused in every format troupe reads, at any
//! depth — serde_json alone would keep the last value without a word. Each file below would
//! parse (to the same value, even) if the repeat were ignored.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::agent::transcript::FileTranscript;
use troupe::clock::ManualClock;
use troupe::cron::CronStore;
use troupe::error::ErrorCode;
use troupe::ids::SequentialIds;
use troupe::inspect::read_roster;
use troupe::jobs::record as job_record;
use troupe::layout::Layout;
use troupe::model::ScriptedModel;
use troupe::store::mailbox::{FileMailboxStore, MailboxEntry, MailboxState, MailboxStore};
use troupe::store::protocol::JsonProtocolStore;
use troupe::store::tasks::{FileTaskBoard, NewTask, TaskBoard};
use troupe::wire::{AgentName, MailboxMessage};

use super::with_duplicate;

const AT: &str = "2026-07-30T08:00:00.000Z";
const ID1: &str = "00000000-0000-4000-8000-000000000001";
const ID2: &str = "00000000-0000-4000-8000-000000000002";

fn workspace() -> (tempfile::TempDir, Layout) {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    (dir, layout)
}

fn write(path: &std::path::Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn assert_duplicate(err: &dyn std::fmt::Display, key: &str) {
    let text = err.to_string();
    assert!(
        text.contains(&format!("duplicate key \"{key}\"")),
        "{key}: {text}"
    );
}

#[tokio::test]
async fn a_mailbox_file_with_a_duplicate_key_is_quarantined_with_the_key_in_the_reason() {
    let (_dir, layout) = workspace();
    let store = FileMailboxStore::new(&layout, Arc::new(ManualClock::at_spec_epoch()));
    let alice = AgentName::parse("alice").unwrap();
    let message = format!(
        r#"{{"id":"{ID1}","sender":"lead","recipient":"alice","kind":"task","content":"hi","created_at_utc":"{AT}"}}"#
    );
    assert!(MailboxMessage::from_json_bytes(message.as_bytes()).is_ok());
    // A second recipient: read leniently, this would be a message for alice — or for bob.
    let twice = with_duplicate(message.as_bytes(), "recipient", "\"bob\"");
    write(
        &layout
            .mailbox_dir(&alice)
            .join("ready")
            .join(format!("{ID1}.json")),
        &twice,
    );
    assert_eq!(store.claim(&alice).await.unwrap(), None);
    match &store.list(&alice, MailboxState::Quarantine).await.unwrap()[..] {
        [MailboxEntry::Invalid { file_name, reason }] => {
            assert_eq!(file_name, &format!("{ID1}.json"));
            assert_duplicate(&reason.clone().unwrap_or_default(), "recipient");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn state_json_with_a_duplicate_key_is_corrupt() {
    let (_dir, layout) = workspace();
    let request = format!(
        r#"{{"id":"{ID1}","kind":"shutdown","sender":"lead","target":"alice","status":"pending","content":"stop","created_at_utc":"{AT}","expires_at_utc":"2026-07-30T08:05:00.000Z","resolution":null}}"#
    );
    let state = format!(r#"{{"version":1,"requests":[{request}]}}"#);
    let open = || {
        JsonProtocolStore::open(
            &layout,
            Arc::new(ManualClock::at_spec_epoch()),
            Arc::new(SequentialIds::new()),
        )
    };
    write(&layout.protocol_state(), state.as_bytes());
    open().unwrap();
    for (bytes, key) in [
        (with_duplicate(state.as_bytes(), "version", "1"), "version"),
        (
            state
                .replace(
                    r#""target":"alice""#,
                    r#""target":"alice","target":"alice""#,
                )
                .into_bytes(),
            "target",
        ),
    ] {
        write(&layout.protocol_state(), &bytes);
        let err = open().unwrap_err();
        assert_eq!(err.code(), "protocol_state_corrupt", "{err}");
        assert_duplicate(&err, key);
    }
}

#[tokio::test]
async fn an_archive_line_with_a_duplicate_key_is_corrupt() {
    let (_dir, layout) = workspace();
    let line = format!(
        r#"{{"id":"{ID1}","kind":"shutdown","sender":"lead","target":"alice","status":"approved","content":"stop","created_at_utc":"{AT}","expires_at_utc":"2026-07-30T08:05:00.000Z","resolution":{{"message_id":"{ID2}","approved":true,"content":"ok","resolved_at_utc":"{AT}"}}}}"#
    );
    let open = || {
        JsonProtocolStore::open(
            &layout,
            Arc::new(ManualClock::at_spec_epoch()),
            Arc::new(SequentialIds::new()),
        )
    };
    write(&layout.protocol_archive(), format!("{line}\n").as_bytes());
    assert_eq!(open().unwrap().list_ids().await, vec![ID1.to_owned()]);
    let nested = line.replace(r#""approved":true"#, r#""approved":true,"approved":true"#);
    write(&layout.protocol_archive(), format!("{nested}\n").as_bytes());
    let err = open().unwrap_err();
    assert_eq!(err.code(), "protocol_state_corrupt", "{err}");
    assert_duplicate(&err, "approved");
}

#[async_trait::async_trait]
trait ListIds {
    async fn list_ids(&self) -> Vec<String>;
}

#[async_trait::async_trait]
impl ListIds for JsonProtocolStore {
    async fn list_ids(&self) -> Vec<String> {
        use troupe::store::protocol::ProtocolStore;
        self.list()
            .await
            .unwrap()
            .iter()
            .map(|r| r.id().to_string())
            .collect()
    }
}

#[test]
fn team_json_with_a_duplicate_key_or_a_teammate_twice_is_corrupt() {
    let (_dir, layout) = workspace();
    let mate = |name: &str| {
        format!(
            r#"{{"name":"{name}","role":"r","status":"idle","detail":null,"updated_at_utc":"{AT}"}}"#
        )
    };
    let team = format!(r#"{{"version":1,"teammates":[{}]}}"#, mate("writer"));
    write(&layout.team_file(), team.as_bytes());
    assert_eq!(read_roster(&layout.team_file()).unwrap().teammates.len(), 1);
    for (bytes, needle) in [
        (
            with_duplicate(team.as_bytes(), "teammates", "[]"),
            "duplicate key \"teammates\"",
        ),
        (
            team.replace(r#""role":"r""#, r#""role":"r","role":"admin""#)
                .into_bytes(),
            "duplicate key \"role\"",
        ),
        (
            format!(
                r#"{{"version":1,"teammates":[{},{}]}}"#,
                mate("writer"),
                mate("writer")
            )
            .into_bytes(),
            "writer",
        ),
    ] {
        write(&layout.team_file(), &bytes);
        let err = read_roster(&layout.team_file()).unwrap_err();
        assert_eq!(err.code(), "team_state_corrupt", "{err}");
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    }
}

#[tokio::test]
async fn cron_json_with_a_duplicate_key_is_corrupt() {
    let (_dir, layout) = workspace();
    let cron = format!(
        r#"{{"version":1,"jobs":[{{"id":"{ID1}","cron":"30 2 * * *","timezone":"UTC","prompt":"p","recurring":true,"created_at_utc":"{AT}","next_fire_utc":"2026-07-31T02:30:00.000Z"}}]}}"#
    );
    write(&layout.cron_file(), cron.as_bytes());
    assert_eq!(CronStore::new(&layout).load().await.unwrap().len(), 1);
    write(
        &layout.cron_file(),
        &cron
            .replace(r#""prompt":"p""#, r#""prompt":"p","prompt":"p""#)
            .into_bytes(),
    );
    let err = CronStore::new(&layout).load().await.unwrap_err();
    assert_eq!(err.code(), "cron_state_corrupt", "{err}");
    assert_duplicate(&err, "prompt");
}

#[tokio::test]
async fn a_task_file_with_a_duplicate_key_is_corrupt() {
    let (_dir, layout) = workspace();
    let board = FileTaskBoard::new(
        &layout,
        Arc::new(ManualClock::at_spec_epoch()),
        Arc::new(SequentialIds::new()),
    );
    let task = board
        .create(NewTask {
            subject: "a".into(),
            description: None,
            blocked_by: vec![],
            ..Default::default()
        })
        .await
        .unwrap();
    let path = layout.tasks_dir().join(format!("{}.json", task.id));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, with_duplicate(&bytes, "subject", "\"b\"")).unwrap();
    let err = board.list().await.unwrap_err();
    assert_eq!(err.code(), "task_store_corrupt", "{err}");
    assert_duplicate(&err, "subject");
}

#[tokio::test]
async fn a_job_record_with_a_duplicate_key_is_corrupt() {
    let (_dir, layout) = workspace();
    let record = format!(
        r#"{{"id":"{ID1}","agent":"lead","command":"make","status":"running","exit_code":null,"started_at_utc":"{AT}","finished_at_utc":null,"output_tail":null}}"#
    );
    let path = layout.jobs_dir().join(format!("{ID1}.json"));
    write(&path, record.as_bytes());
    assert_eq!(job_record::read_all(&layout).unwrap().len(), 1);
    write(
        &path,
        &with_duplicate(record.as_bytes(), "command", "\"rm -rf /\""),
    );
    let err = job_record::read_all(&layout).unwrap_err();
    assert_duplicate(&err, "command");
    let inspected = troupe::bootstrap::inspector_on_files(
        layout.clone(),
        Arc::new(ManualClock::at_spec_epoch()),
    )
    .jobs()
    .await
    .unwrap_err();
    assert_duplicate(&inspected, "command");
}

#[test]
fn a_transcript_line_with_a_duplicate_key_is_an_error_naming_the_line() {
    let (_dir, layout) = workspace();
    let path = layout.transcript(&AgentName::lead());
    let good = r#"{"key":null,"message":{"role":"user","content":"x"}}"#;
    write(&path, format!("{good}\n").as_bytes());
    assert_eq!(FileTranscript::new(&path).load().unwrap().messages.len(), 1);
    let twice = good.replace(r#""content":"x""#, r#""content":"x","content":"y""#);
    write(&path, format!("{good}\n{twice}\n").as_bytes());
    let err = FileTranscript::new(&path).load().unwrap_err();
    assert_duplicate(&err, "content");
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn a_model_script_with_a_duplicate_key_is_refused() {
    let script = r#"{"responses":[{"tool_calls":[{"name":"write_file","arguments":{"path":"a","path":"b","content":"c"}}]}]}"#;
    let err = ScriptedModel::from_json_str(script).unwrap_err();
    assert_duplicate(&err, "path");
    assert!(ScriptedModel::from_json_str(&script.replace(r#""path":"b","#, "")).is_ok());
}
