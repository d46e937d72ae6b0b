//! The team's event stream as read, on both backends (the `EventStream` port): a workspace's
//! `events.jsonl` or every process's events in a shared team's table — the same positions,
//! the same reads before and after a position, a reader that goes on as the stream grows, and
//! a wakeup when it does.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use troupe::store::events::{kinds, EventLog};
use troupe::wire::Event;

use super::{both_async, Backend, Stores};

both_async!(
    the_stream_reads_the_same_on_both_backends,
    a_change_wakes_the_watcher
);

/// Writes `count` events as a process of the team does: appended to the workspace's stream,
/// and copied to the team's table (waited for) on PostgreSQL.
fn write(s: &Stores, run: &str, agents: &[&str]) {
    std::fs::create_dir_all(s.layout.state_dir()).unwrap();
    let log = EventLog::open(
        &s.layout,
        Arc::new(s.clock.clone()),
        run.to_owned(),
        troupe::secrets::Redactor::default(),
    )
    .unwrap();
    let mirror = s.pg.as_ref().map(|pg| {
        let mirror = troupe::store::postgres::events::PgEventMirror::start(pg);
        log.subscribe(mirror.clone());
        mirror
    });
    for agent in agents {
        let mut fields = serde_json::Map::new();
        fields.insert("text".into(), format!("from {agent}").into());
        log.record(agent, kinds::ASSISTANT_TEXT, fields);
    }
    if let Some(mirror) = mirror {
        mirror.close();
    }
}

fn agents(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.agent.as_str()).collect()
}

async fn read_all(reader: &mut Box<dyn troupe::store::events::stream::EventReader>) -> Vec<Event> {
    let mut all = Vec::new();
    loop {
        // A small batch on files, so that the reader must go on over several reads.
        let batch = reader.next_batch(64).await.unwrap();
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

async fn the_stream_reads_the_same_on_both_backends(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let stream = s.events();
    assert_eq!(stream.last().await.unwrap(), 0, "no stream yet");
    assert!(stream.after(0, 10).await.unwrap().is_empty());
    assert!(stream.before(u64::MAX, 10).await.unwrap().is_empty());
    let mut early = stream.reader(0).await.unwrap();
    assert!(early.next_batch(1 << 20).await.unwrap().is_empty());

    write(&s, "run-1", &["lead", "alice", "bob", "lead", "alice"]);
    let all = stream.after(0, 100).await.unwrap();
    assert_eq!(agents(&all), ["lead", "alice", "bob", "lead", "alice"]);
    assert!(
        all.windows(2).all(|w| w[0].seq < w[1].seq),
        "positions grow"
    );
    let seq: Vec<u64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(stream.last().await.unwrap(), seq[4]);
    assert_eq!(all[1].str("text"), Some("from alice"), "fields kept");
    assert_eq!(all[1].kind, kinds::ASSISTANT_TEXT);

    let two = stream.after(seq[0], 2).await.unwrap();
    assert_eq!(
        two.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [seq[1], seq[2]]
    );
    let latest = stream.before(seq[4], 2).await.unwrap();
    assert_eq!(
        latest.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [seq[2], seq[3]],
        "the latest before, oldest first"
    );
    assert_eq!(stream.before(u64::MAX, 100).await.unwrap().len(), 5);
    assert!(stream.after(seq[4], 10).await.unwrap().is_empty());

    // A reader made before the stream existed sees it all; one from a position sees the rest.
    assert_eq!(read_all(&mut early).await.len(), 5);
    let mut reader = stream.reader(seq[1]).await.unwrap();
    let rest = read_all(&mut reader).await;
    assert_eq!(
        rest.iter().map(|e| e.seq).collect::<Vec<_>>(),
        seq[2..].to_vec()
    );

    // Both go on as the stream grows (a second run appends to the same stream).
    write(&s, "run-2", &["carol", "lead"]);
    assert_eq!(agents(&read_all(&mut reader).await), ["carol", "lead"]);
    assert_eq!(agents(&read_all(&mut early).await), ["carol", "lead"]);
    let last = stream.last().await.unwrap();
    assert!(last > seq[4]);
    assert_eq!(stream.after(seq[4], 10).await.unwrap().len(), 2);
    // A fresh reader of the same stream from the same place reads the same events.
    let mut again = stream.reader(seq[1]).await.unwrap();
    assert_eq!(read_all(&mut again).await.len(), 5);
}

async fn a_change_wakes_the_watcher(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let stream = s.events();
    let (woke, mut wakes) = tokio::sync::mpsc::unbounded_channel();
    let watching = stream
        .on_change(Arc::new(move || woke.send(()).is_ok()))
        .unwrap();
    // Before anything exists (no `.troupe/` yet), and again once the stream is there.
    write(&s, "run-1", &["lead"]);
    tokio::time::timeout(Duration::from_secs(20), wakes.recv())
        .await
        .expect("a wakeup for the first event")
        .unwrap();
    while wakes.try_recv().is_ok() {}
    let mut reader = stream.reader(stream.last().await.unwrap()).await.unwrap();
    write(&s, "run-1b", &["alice"]);
    tokio::time::timeout(Duration::from_secs(20), wakes.recv())
        .await
        .expect("a wakeup for a later event")
        .unwrap();
    // What the wakeup announced is there to read.
    let mut got = Vec::new();
    while got.is_empty() {
        got = reader.next_batch(1 << 20).await.unwrap();
        if got.is_empty() {
            tokio::time::timeout(Duration::from_secs(20), wakes.recv())
                .await
                .expect("another wakeup")
                .unwrap();
        }
    }
    assert_eq!(agents(&got), ["alice"]);
    drop(watching);
}
