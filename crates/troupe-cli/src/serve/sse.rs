//! `GET /api/events/stream`: the events as server-sent events. First every event after the
//! client's `Last-Event-ID` (or `?since=`), then each new one as it is appended — woken by the
//! file watch of [`super::changes`] (a shared team's: its stream's `NOTIFY`), never by a timer. Each event is
//! `id: <seq>\nevent: event\ndata: <json>\n\n`; a comment line every 15 s keeps proxies and
//! browsers from closing an idle stream. A browser that reconnects sends the last id it saw, so
//! nothing is lost or repeated.

use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Response, StatusCode};
use tokio::sync::{mpsc, watch};

use super::history::EventSource;
use super::response::{set_common_headers, Body};

const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How much of the events file one read takes: a large backlog is streamed, never held whole.
const BATCH_BYTES: usize = 1024 * 1024;

/// The most bytes of events sent as one chunk.
const CHUNK: usize = 256 * 1024;

/// The stream of the events after `since`, read from `cursor` and woken by `changes`.
pub fn stream(
    mut changes: watch::Receiver<u64>,
    mut cursor: EventSource,
    since: u64,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    tokio::spawn(async move {
        let mut sent = since;
        if tx
            .send(Bytes::from_static(b"retry: 1000\n\n"))
            .await
            .is_err()
        {
            return;
        }
        loop {
            // Marked seen before reading: a change during the read wakes the next wait.
            changes.borrow_and_update();
            let read = cursor.read_batch(BATCH_BYTES).await;
            let events = match read {
                Ok(events) => events,
                Err(e) => {
                    let data = serde_json::json!({"code": e.code, "message": e.message});
                    let _ = tx
                        .send(Bytes::from(format!("event: error\ndata: {data}\n\n")))
                        .await;
                    return;
                }
            };
            let mut chunk = String::new();
            for event in &events {
                if event.seq <= sent {
                    continue;
                }
                let _ = write!(
                    chunk,
                    "id: {}\nevent: event\ndata: {}\n\n",
                    event.seq,
                    event.to_json()
                );
                sent = event.seq;
                if chunk.len() >= CHUNK
                    && tx
                        .send(Bytes::from(std::mem::take(&mut chunk)))
                        .await
                        .is_err()
                {
                    return;
                }
            }
            if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
            if !events.is_empty() {
                // A large backlog goes out a batch at a time; read on before waiting.
                continue;
            }
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    () = tokio::time::sleep(KEEP_ALIVE) => {
                        if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                            return;
                        }
                    }
                    () = tx.closed() => return,
                }
            }
        }
    });
    let mut response = Response::new(Body::Stream(rx));
    *response.status_mut() = StatusCode::OK;
    set_common_headers(response.headers_mut(), "text/event-stream");
    response
}
