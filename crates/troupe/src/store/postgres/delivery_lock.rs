//! The delivery lock of an answer: who may write a recorded answer into its mailbox.
//!
//! `PgProtocolStore::answer` commits the answer record and only then delivers it (a delivery is
//! a query of its own; see the `protocol` module). Between the two, another answerer finds the
//! record and must tell a writer that is still delivering from one that is gone — only the
//! latter's delivery may be finished by someone else. The writer therefore holds this lock from
//! before its record is committed until its delivery returned: a **session** advisory lock on a
//! connection of its own, so the server drops it when the writer's connection ends — a process
//! killed, a host gone, a network cut — just as the kernel drops `.troupe/run.lock` of a dead
//! run. A finisher (a refused answerer, a run's start) only *tries* the lock: held means the
//! writer is alive and delivering, so the finisher leaves the answer to it; taken means the
//! writer finished or is gone, so the finisher delivers (idempotent by message id) and releases.
//!
//! The lock is class 4 on `hashtext(schema/team/request id)`: one per request, so answers to
//! different requests never wait on each other.

use troupe_wire::RequestId;

use super::{db_error, PgStore};
use crate::store::BackendError;

/// The class of the advisory lock (see `super`'s list of classes).
const CLASS: i32 = 4;

/// Holds the delivery lock of one request until released or dropped (dropping closes the
/// connection, which releases the lock on the server, only a moment later).
pub(super) struct DeliveryLock {
    client: tokio_postgres::Client,
    store: PgStore,
    request: String,
}

impl DeliveryLock {
    /// Takes the lock of `id`, waiting for it. Called by the writer inside the transaction that
    /// records the answer, under the protocol lock: no record exists yet, so nobody else holds it
    /// but for a moment.
    pub(super) async fn take(store: &PgStore, id: RequestId) -> Result<Self, BackendError> {
        let lock = Self::connect(store, id).await?;
        lock.client
            .execute(
                "SELECT pg_advisory_lock($1, hashtext(current_schema() || '/' || $2 || '/' || $3))",
                &[&CLASS, &lock.store.team(), &lock.request],
            )
            .await
            .map_err(|e| db_error("take an answer's delivery lock", e))?;
        Ok(lock)
    }

    /// Takes the lock of `id` if its writer finished or is gone; `None` while a writer holds it.
    pub(super) async fn try_take(
        store: &PgStore,
        id: RequestId,
    ) -> Result<Option<Self>, BackendError> {
        let lock = Self::connect(store, id).await?;
        let got: bool = lock
            .client
            .query_one(
                "SELECT pg_try_advisory_lock($1, hashtext(current_schema() || '/' || $2 || '/' || $3))",
                &[&CLASS, &lock.store.team(), &lock.request],
            )
            .await
            .map_err(|e| db_error("try an answer's delivery lock", e))?
            .get(0);
        Ok(got.then_some(lock))
    }

    async fn connect(store: &PgStore, id: RequestId) -> Result<Self, BackendError> {
        let client = store.dedicated().await.map_err(|e| {
            let mut error = BackendError::new(
                "store_unavailable",
                format!(
                    "cannot reach PostgreSQL at {}: {}",
                    store.shown(),
                    super::with_causes(&e)
                ),
            );
            error.connection_lost = true;
            error
        })?;
        Ok(Self {
            client,
            store: store.clone(),
            request: id.to_string(),
        })
    }

    /// Releases the lock now, so that whoever tries it next finds it free. If this fails the
    /// connection closes anyway, which releases it too.
    pub(super) async fn release(self) {
        let _ = self
            .store
            .bounded(async {
            self.client
                .execute(
                    "SELECT pg_advisory_unlock($1, hashtext(current_schema() || '/' || $2 || '/' || $3))",
                    &[&CLASS, &self.store.team(), &self.request],
                )
                .await
                .map_err(|e| db_error("release an answer's delivery lock", e))
        })
            .await;
    }
}
