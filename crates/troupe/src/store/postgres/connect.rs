//! Where a pooled connection lives: on the store's own runtime.
//!
//! The store ports are async and run on their caller's runtime — the run's, a test's, a CLI
//! command's short one. A connection, though, is a socket registered with one runtime's reactor
//! and a driver task on that runtime; made on a caller's runtime, it would die with it (a CLI
//! command's runtime is dropped at its end, a test's at its end) while the pool still lends it
//! out. So every connection is opened, and its driver runs, on [`super::PgStore`]'s own small
//! runtime; a port call on any runtime talks to it through the client's channel, with no
//! thread blocked on either side.

use deadpool_postgres::Connect;
use futures_util::future::BoxFuture;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, Config, Error, Socket};

/// Opens connections on `home` with the TLS `tls` (plain TCP or rustls).
pub(super) struct OnStoreRuntime<T> {
    pub(super) home: Handle,
    pub(super) tls: T,
}

impl<T> Connect for OnStoreRuntime<T>
where
    T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    fn connect(&self, config: &Config) -> BoxFuture<'_, Result<(Client, JoinHandle<()>), Error>> {
        let tls = self.tls.clone();
        let config = config.clone();
        let opened = self.home.spawn(async move {
            let (client, connection) = config.connect(tls).await?;
            let driver = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("a PostgreSQL connection ended: {e}");
                }
            });
            Ok((client, driver))
        });
        Box::pin(async move {
            match opened.await {
                Ok(result) => result,
                Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
                // Cancelled: the store's runtime stopped, which happens only when the store is
                // dropped — no caller holding it outlives that. Left to the pool's creation
                // time-out rather than invented as a database error.
                Err(_) => std::future::pending().await,
            }
        })
    }
}
