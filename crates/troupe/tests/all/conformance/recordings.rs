//! The runs' recordings as read, on both backends (the `Recordings` port): what the recorder
//! wrote to a workspace's `.troupe/recordings/` reads the same from its files as from a shared
//! team's database, where the recorder copied each line — the runs oldest first, each run's
//! text line for line, nothing for a run that was never recorded.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::bootstrap::SameModel;
use troupe::model::{ChatMessage, ModelRequest, ModelResponse, ScriptedModel};
use troupe::replay::record::{End, Start, VERSION};
use troupe::replay::{Recorder, Recording, RecordingModels};
use troupe::store::postgres::recordings::PgRecordings;
use troupe::store::recordings::{FileRecordings, RecordingLine, Recordings};
use troupe::store::team_copy::{CopyTo, TeamCopy};
use troupe::team::ModelChooser;
use troupe_wire::AgentName;

use super::{both_async, Backend, Stores};

both_async!(recordings_read_the_same_on_both_backends);

async fn record(s: &Stores, run: &str, answers: &[&str]) {
    let copy = match &s.pg {
        Some(pg) => CopyTo::to(
            Some(Arc::new(PgRecordings::new(pg.clone())) as Arc<dyn TeamCopy<RecordingLine>>),
            "the team's recordings miss this line",
        ),
        None => CopyTo::nowhere(),
    };
    let start = Start {
        version: VERSION,
        run: run.into(),
        at: "2026-07-30T08:00:00.000Z".into(),
        prompt: "do it".into(),
        workspace: s.layout.workspace().display().to_string(),
        settings: "none".into(),
        git: None,
    };
    std::fs::create_dir_all(s.layout.state_dir()).unwrap();
    let recorder = Recorder::open(&s.layout, start, Default::default(), copy)
        .await
        .unwrap();
    let script = answers.iter().fold(ScriptedModel::new(), |script, a| {
        script.response(ModelResponse::text(*a, "m"))
    });
    let models = RecordingModels {
        inner: Arc::new(SameModel(Arc::new(script))),
        recorder: recorder.clone(),
    };
    let lead = models.model_for(&AgentName::lead());
    let mut messages = vec![ChatMessage::system("you lead"), ChatMessage::user("do it")];
    for _ in answers {
        let answer = lead
            .complete(&ModelRequest::turn(messages.clone(), Vec::new()))
            .await
            .unwrap();
        messages.push(answer.message.into());
        messages.push(ChatMessage::user("more"));
    }
    recorder
        .finish(End {
            at: "2026-07-30T08:00:01.000Z".into(),
            tree: None,
            files: 0,
        })
        .await;
}

async fn recordings_read_the_same_on_both_backends(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let port: Arc<dyn Recordings> = match &s.pg {
        Some(pg) => Arc::new(PgRecordings::new(pg.clone())),
        None => Arc::new(FileRecordings(s.layout.clone())),
    };
    assert!(port.runs().await.unwrap().is_empty());
    assert_eq!(port.text("run-1").await.unwrap(), None);
    record(&s, "run-1", &["one", "two", "three"]).await;
    // A later run: the file's time must be later than the first's.
    std::thread::sleep(std::time::Duration::from_millis(20));
    record(&s, "run-2", &["only"]).await;
    assert_eq!(port.runs().await.unwrap(), ["run-1", "run-2"]);
    let text = port.text("run-1").await.unwrap().unwrap();
    let file = std::fs::read_to_string(s.layout.recording("run-1")).unwrap();
    assert_eq!(text, file, "line for line");
    let recording = Recording::parse(&text).unwrap();
    assert_eq!(recording.calls.len(), 3);
    assert_eq!(recording.calls[2].request.messages.len(), 6);
    assert!(recording.end.is_some());
    assert_eq!(port.text("run-3").await.unwrap(), None);
}
