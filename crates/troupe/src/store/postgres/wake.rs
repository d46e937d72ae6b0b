//! Wakeups across processes: `LISTEN` on the team's channel over a connection of its own.
//!
//! A message insert sends `NOTIFY <channel>, '<recipient>'` in its own transaction (so a wake
//! is never seen before the row it announces); the listener forwards each payload as
//! [`Wake::Agent`]. When the connection is lost the listener reconnects with backoff (100 ms
//! doubling to 5 s) and, once it listens again, sends [`Wake::Rescan`]: notifications sent
//! while it was away are gone, so the receiver must look at everything — no wake is lost.
//!
//! Wakes leave the store's runtime through an unbounded channel; the receiver handles them on
//! its own runtime (a handler that called a store port here could wait on itself).

use std::time::Duration;

use futures_util::{stream, StreamExt};
use tokio::sync::mpsc::UnboundedSender;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, NoTls, Socket};
use tokio_util::sync::CancellationToken;

use super::tls::Tls;
use super::PgStore;

/// What a listener reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Something for this agent (a message; for `lead`, also a change to the team).
    Agent(String),
    /// The listener (re)connected: anything may have changed meanwhile.
    Rescan,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Listens until `stop` is cancelled; the first `Rescan` says it listens.
pub fn listen(store: &PgStore, wakes: UnboundedSender<Wake>, stop: CancellationToken) {
    listen_on(store, store.channel(), wakes, stop);
}

/// [`listen`] on another channel of the team (its event stream's, say).
pub fn listen_on(
    store: &PgStore,
    channel: String,
    wakes: UnboundedSender<Wake>,
    stop: CancellationToken,
) {
    let config = store.config().clone();
    let tls = store.tls().clone();
    store.handle().spawn(async move {
        let mut backoff = FIRST_BACKOFF;
        loop {
            if stop.is_cancelled() || wakes.is_closed() {
                return;
            }
            let session = match &tls {
                Tls::Off => session(&config, NoTls, &channel, &wakes, &stop).await,
                Tls::Required(connect) => {
                    session(&config, connect.clone(), &channel, &wakes, &stop).await
                }
            };
            match session {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!("database wakeups lost ({e}); reconnecting");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    });
}

/// One connection's life: listen, then forward until it breaks (an error) or `stop` (Ok).
async fn session<T>(
    config: &tokio_postgres::Config,
    tls: T,
    channel: &str,
    wakes: &UnboundedSender<Wake>,
    stop: &CancellationToken,
) -> Result<(), String>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = config.connect(tls).await.map_err(|e| e.to_string())?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    let _ = tx.send(Ok(n.payload().to_owned()));
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    return;
                }
            }
        }
        let _ = tx.send(Err("the connection closed".to_owned()));
    });
    let result = async {
        client
            .batch_execute(&format!("LISTEN {channel}"))
            .await
            .map_err(|e| e.to_string())?;
        let _ = wakes.send(Wake::Rescan);
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                next = rx.recv() => match next {
                    Some(Ok(payload)) => {
                        if wakes.send(Wake::Agent(payload)).is_err() {
                            return Ok(());
                        }
                    }
                    Some(Err(e)) => return Err(e),
                    None => return Err("the connection closed".to_owned()),
                },
            }
        }
    }
    .await;
    driver.abort();
    result
}
