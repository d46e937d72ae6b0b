//! The team's event stream in PostgreSQL (`troupe_events`): every process of a shared team —
//! the lead and each worker — keeps writing its own `.troupe/events.jsonl`, and
//! [`PgEventMirror`] copies each event it writes into the database, so that `troupe log
//! --store` shows the whole team, in one order, from any machine.
//!
//! The copy is asynchronous, like the file's appends are unsynced: the event stream is a
//! record for people, and a run never waits on it. A background task inserts what has queued
//! up (up to [`BATCH`] events a statement) and notifies the team's events channel in the same
//! statement; a failed insert is tried again (an event is unique by its run and `seq`, so a
//! repeat adds nothing), and reported once if it keeps failing. Closing the mirror (the run's
//! end) waits a bounded time for the queue to drain.
//!
//! [`PgEvents`] reads them back after a team-wide position, each event's `seq` replaced by that
//! position (the file `seq`s of different processes overlap).

use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use troupe_wire::Event;

use super::roster::hostname;
use super::{db_error, PgStore};
use crate::store::events::EventListener;
use crate::store::{BackendError, PortError};
use crate::sync::lock;

/// The most events one insert carries.
const BATCH: usize = 256;
/// How long closing waits for the queued events to be written.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How many times a failed insert is tried before its events are given up (and reported).
const TRIES: u32 = 4;

/// The events channel of a team: its wake channel's name with `_events`.
pub fn events_channel(store: &PgStore) -> String {
    format!("{}_events", store.channel())
}

/// Calls `changed` on every `NOTIFY` of the team's events channel and every (re)connection of
/// its listener (what was inserted meanwhile is in the table), until the returned guard is
/// dropped or `changed` returns false. Must be called inside a Tokio runtime: the forwarding
/// task runs there.
pub fn on_change(
    store: &PgStore,
    changed: impl Fn() -> bool + Send + 'static,
) -> tokio_util::sync::DropGuard {
    let (notified, mut notifications) = unbounded_channel();
    let stop = tokio_util::sync::CancellationToken::new();
    super::wake::listen_on(store, events_channel(store), notified, stop.clone());
    tokio::spawn(async move {
        while notifications.recv().await.is_some() {
            if !changed() {
                return;
            }
        }
    });
    stop.drop_guard()
}

/// Copies every event it is given into `troupe_events`.
pub struct PgEventMirror {
    queue: Mutex<Option<UnboundedSender<(String, u64, String)>>>,
    drained: Mutex<Option<Receiver<()>>>,
}

impl PgEventMirror {
    pub fn start(store: &PgStore) -> Arc<Self> {
        let (tx, mut rx) = unbounded_channel::<(String, u64, String)>();
        let (done, drained): (SyncSender<()>, Receiver<()>) = std::sync::mpsc::sync_channel(1);
        let store_in = store.clone();
        let host = hostname();
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        store.handle().spawn(async move {
            let mut warned = false;
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                let mut tries = 0;
                while let Err(e) = store_in
                    .bounded(insert(&store_in, &host, pid, &batch))
                    .await
                {
                    tries += 1;
                    // A server that stopped answering while the team closed is not tried again.
                    if tries >= TRIES || store_in.given_up() {
                        if !warned {
                            tracing::warn!(
                                "{e}: {} events not copied to the shared stream (they are in \
                                 this workspace's .troupe/events.jsonl)",
                                batch.len()
                            );
                            warned = true;
                        }
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100 << tries)).await;
                }
            }
            let _ = done.send(());
        });
        Arc::new(Self {
            queue: Mutex::new(Some(tx)),
            drained: Mutex::new(Some(drained)),
        })
    }

    /// Stops taking events and waits (a bounded time) until those given are written.
    pub fn close(&self) {
        drop(lock(&self.queue).take());
        if let Some(drained) = lock(&self.drained).take() {
            if drained.recv_timeout(CLOSE_WAIT).is_err() {
                tracing::warn!("the shared event stream did not take the last events in time");
            }
        }
    }
}

impl Drop for PgEventMirror {
    fn drop(&mut self) {
        self.close();
    }
}

impl EventListener for PgEventMirror {
    fn event(&self, event: &Event) {
        if let Some(queue) = lock(&self.queue).as_ref() {
            let _ = queue.send((event.run_id.clone(), event.seq, event.to_line()));
        }
    }
}

async fn insert(
    store: &PgStore,
    host: &str,
    pid: i32,
    batch: &[(String, u64, String)],
) -> Result<(), BackendError> {
    let runs: Vec<&str> = batch.iter().map(|(run, _, _)| run.as_str()).collect();
    let seqs: Vec<i64> = batch
        .iter()
        .map(|(_, seq, _)| i64::try_from(*seq).unwrap_or(i64::MAX))
        .collect();
    let lines: Vec<&str> = batch.iter().map(|(_, _, line)| line.as_str()).collect();
    let client = store.claim_client().await?;
    client
        .execute(
            "WITH added AS (
                 INSERT INTO troupe_events (team, run_id, seq, host, pid, line)
                 SELECT $1, run, seq, $2, $3, line
                   FROM unnest($4::text[], $5::bigint[], $6::text[]) WITH ORDINALITY
                        AS e(run, seq, line, n)
                  ORDER BY n
                 ON CONFLICT DO NOTHING
                 RETURNING 1)
             SELECT pg_notify($7, '') FROM (SELECT count(*) FROM added) c",
            &[
                &store.team(),
                &host,
                &pid,
                &runs,
                &seqs,
                &lines,
                &events_channel(store),
            ],
        )
        .await
        .map_err(|e| db_error("copy events to the shared stream", e))?;
    Ok(())
}

/// Reads a team's shared event stream.
pub struct PgEvents {
    store: PgStore,
}

impl PgEvents {
    pub fn new(store: PgStore) -> Self {
        Self { store }
    }

    pub fn store(&self) -> &PgStore {
        &self.store
    }

    /// The team-wide position of the stream's last event (0 when it has none).
    pub async fn last(&self) -> Result<u64, BackendError> {
        super::retrying(|| {
            self.store.bounded(async {
                let client = self.store.client().await?;
                client
                    .query_one(
                        "SELECT coalesce(max(id), 0) FROM troupe_events WHERE team = $1",
                        &[&self.store.team()],
                    )
                    .await
                    .map(|row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
                    .map_err(|e| db_error("read the shared stream", e))
            })
        })
        .await
    }

    /// Up to `limit` events after the team-wide position `after`, in team order, each with its
    /// `seq` set to its position. A row that is not an event is `store_corrupt`.
    pub async fn after(&self, after: u64, limit: i64) -> Result<Vec<Event>, BackendError> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        self.select(
            "SELECT id, line FROM troupe_events WHERE team = $1 AND id > $2
              ORDER BY id LIMIT $3",
            after,
            limit,
        )
        .await
    }

    /// Up to `limit` events before the team-wide position `before` — the latest of them — in
    /// team order (oldest first), each with its `seq` set to its position: the history of a
    /// view that opened on the stream's end.
    pub async fn before(&self, before: u64, limit: i64) -> Result<Vec<Event>, BackendError> {
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let mut events = self
            .select(
                "SELECT id, line FROM troupe_events WHERE team = $1 AND id < $2
              ORDER BY id DESC LIMIT $3",
                before,
                limit,
            )
            .await?;
        events.reverse();
        Ok(events)
    }

    async fn select(
        &self,
        sql: &'static str,
        bound: i64,
        limit: i64,
    ) -> Result<Vec<Event>, BackendError> {
        let rows = super::retrying(|| {
            self.store.bounded(async {
                let client = self.store.client().await?;
                client
                    .query(sql, &[&self.store.team(), &bound, &limit])
                    .await
                    .map(|rows| {
                        rows.iter()
                            .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
                            .collect::<Vec<_>>()
                    })
                    .map_err(|e| db_error("read the shared event stream", e))
            })
        })
        .await?;
        rows.into_iter()
            .map(|(id, line)| {
                let mut event = Event::parse_line(&line).map_err(|e| {
                    BackendError::new(
                        "store_corrupt",
                        format!("troupe_events row {id} is not an event: {e}"),
                    )
                })?;
                event.seq = u64::try_from(id).unwrap_or(0);
                Ok(event)
            })
            .collect()
    }
}

/// How many events a reader of the shared stream takes at a time.
const READER_ROWS: usize = 1000;

#[async_trait::async_trait]
impl crate::store::events::stream::EventStream for PgEvents {
    async fn after(&self, after: u64, limit: usize) -> Result<Vec<Event>, PortError> {
        Ok(PgEvents::after(self, after, rows(limit)).await?)
    }

    async fn before(&self, before: u64, limit: usize) -> Result<Vec<Event>, PortError> {
        Ok(PgEvents::before(self, before, rows(limit)).await?)
    }

    async fn last(&self) -> Result<u64, PortError> {
        Ok(PgEvents::last(self).await?)
    }

    async fn reader(
        &self,
        after: u64,
    ) -> Result<Box<dyn crate::store::events::stream::EventReader>, PortError> {
        Ok(Box::new(PgReader {
            events: PgEvents::new(self.store.clone()),
            after,
        }))
    }

    fn on_change(
        &self,
        changed: crate::store::events::stream::OnChange,
    ) -> Result<crate::store::events::stream::Watching, PortError> {
        Ok(crate::store::events::stream::Watching::new(on_change(
            &self.store,
            move || changed(),
        )))
    }
}

fn rows(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A reader of the shared stream: the position of the last event it returned.
struct PgReader {
    events: PgEvents,
    after: u64,
}

#[async_trait::async_trait]
impl crate::store::events::stream::EventReader for PgReader {
    async fn next_batch(&mut self, _bytes: usize) -> Result<Vec<Event>, PortError> {
        let batch = self.events.after(self.after, rows(READER_ROWS)).await?;
        if let Some(last) = batch.last() {
            self.after = last.seq;
        }
        Ok(batch)
    }
}
