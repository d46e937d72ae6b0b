//! The PostgreSQL backend (`--store postgres://…`, SPEC §11): the same store ports as the files
//! under `.troupe/`, in one database that several processes — a lead and `troupe worker`s on
//! other hosts — share. Several teams share one database by their **team key**: every row
//! carries it.
//!
//! # Why this shape
//!
//! - **Client**: `tokio-postgres` (the maintained async client of the `rust-postgres` project,
//!   pure Rust, LISTEN/NOTIFY through its connection's message stream) with `deadpool-postgres`
//!   (a small pool made for it: connections recycled, creation and wait time-outs). `sqlx` was
//!   not taken: its macros and drivers weigh far more on a 2-core build, and nothing here needs
//!   compile-time checked queries.
//! - **Async ports, connections on a runtime of its own.** Every adapter is async and awaits the
//!   pool on its caller's runtime. The pool's connections are opened and driven on a small
//!   runtime [`PgStore`] owns (`connect.rs`): a socket belongs to the runtime that made it, and a
//!   CLI command's or a test's runtime ends long before the pool lets go of a connection.
//!   Connecting is async too ([`PgStore::connect`]); only [`PgStore::connect_in_schema`], for
//!   tests and benchmark processes, waits for it from a thread that cannot await.
//! - **Time-outs**: every connection sets `statement_timeout` (30 s unless the URL's `options`
//!   set one); the pool waits at most 10 s for a free connection.
//!
//! # Layout
//!
//! - `mod.rs`: [`PgStore`] — the URL, the pool, its runtime, the team key, the error map.
//! - `connect.rs`: connections opened and driven on the store's runtime.
//! - `notify.rs`: wakes sent after their rows commit, in rounds.
//! - `schema.rs`: the embedded migrations, applied at start under an advisory lock.
//! - `wake.rs`: `LISTEN` on the team's channel, reconnecting with backoff; a lost connection
//!   is followed by a rescan, so no wake is lost.
//! - `mailbox.rs`: [`PgMailboxStore`] — leased claims with fencing tokens.
//! - `protocol.rs`: [`PgProtocolStore`] — the protocol store, each operation one transaction.
//! - `delivery_lock.rs`: the lock an answer's writer holds until its delivery returned, so that
//!   only an answer whose writer is gone is delivered by someone else.
//! - `roster.rs`: teammates and their worker leases; workers and their heartbeats.
//! - `transcript.rs`: agents' conversations.
//! - `artifacts.rs`: a copy of every artifact, for the workers of other workspaces.
//! - `retention.rs`: [`retention::PgState`], what `troupe gc --store` removes (issue 45);
//!   `retention_bulk.rs`: the same for huge tables as SQL; `retention_runs.rs`: jobs and
//!   recordings; `usage_compact.rs`: usage rows
//!   compacted into per-day totals; `retention_vacuum.rs`: the tables vacuumed after a pass.

pub mod artifacts;
pub mod audit;
mod connect;
mod delivery_lock;
pub mod document;
pub mod events;
pub mod jobs;
mod mailbox;
pub mod memory;
mod notify;
mod protocol;
pub mod recordings;
mod response_ack;
pub mod retention;
mod retention_bulk;
mod retention_runs;
mod retention_vacuum;
pub mod roster;
mod schema;
mod tasks;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod tls;
mod transcript;
pub mod usage;
pub mod usage_compact;
pub mod wake;

pub use crate::store::roster::WorkerRow;
pub use mailbox::{PgMailboxStore, DEFAULT_LEASE};
pub use protocol::PgProtocolStore;
pub use response_ack::PgResponseAck;
pub use roster::{lead_lock, LeadLock, Lease, PgRoster, TEAMMATE_LEASE};
pub use schema::SCHEMA_VERSION;
pub use tasks::{PgTaskBoard, BOARD_WAKE};
pub use transcript::PgTranscriptLog;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use sha2::{Digest, Sha256};
use tokio_postgres::NoTls;

use super::BackendError;

/// How long a query may run before the server cancels it, unless the URL sets its own.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a caller waits for a free pooled connection.
const POOL_WAIT: Duration = Duration::from_secs(10);
/// How long opening one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections per process.
const POOL_SIZE: usize = 8;
/// Pooled connections idle for longer than this are checked alive before reuse.
const IDLE_CHECK: Duration = Duration::from_millis(200);
/// How long a store call waits for an unreachable server to come back (a restart).
pub const OUTAGE_WAIT: Duration = Duration::from_secs(30);
/// Once the team is closing, how long any one store call may take (counted from the later of
/// its start and the close's): past it the server is taken as unreachable and the close goes
/// on without it — what it could not write is recovered by leases, as after a crash.
pub const CLOSING_WAIT: Duration = Duration::from_secs(3);

/// The stores whose changes are serialised per team by an advisory transaction lock.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lock {
    Protocol = 1,
    Tasks = 2,
    Documents = 3,
}

/// Begins a transaction holding `lock` of `team` (released by its commit or rollback): the
/// database's counterpart of a file store's mutex + lock file.
pub(crate) async fn locked<'a>(
    client: &'a mut deadpool_postgres::Object,
    team: &str,
    lock: Lock,
) -> Result<deadpool_postgres::Transaction<'a>, BackendError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| db_error("begin", e))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || '/' || $2))",
        &[&(lock as i32), &team],
    )
    .await
    .map_err(|e| db_error("lock the store", e))?;
    Ok(tx)
}

pub use super::is_postgres_url;

/// One process's connection to a team's stores in PostgreSQL. Cloning shares it.
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
}

/// The name of the threads of every store's own runtime.
pub(crate) const RUNTIME_THREAD: &str = "troupe-pg";

struct Shared {
    runtime: OwnRuntime,
    pool: Pool,
    /// Connections whose commits do not wait for the WAL flush: claims only.
    claim_pool: Pool,
    config: tokio_postgres::Config,
    /// TLS or not, as the URL's `sslmode` says.
    tls: tls::Tls,
    team: String,
    /// Where it is, without the password: for messages.
    shown: String,
    /// Whether calls wait out an unreachable server (not while first connecting: a wrong URL
    /// is said at once).
    wait_for_outages: std::sync::atomic::AtomicBool,
    /// Fired when the team starts closing (Ctrl-C, SIGTERM, the end of a run): from then on a
    /// store call gets at most [`CLOSING_WAIT`] (see [`PgStore::closing`]).
    closing: tokio_util::sync::CancellationToken,
    /// A call timed out while closing: the server is taken as unreachable, and every later
    /// call fails at once instead of waiting again.
    gave_up: std::sync::atomic::AtomicBool,
    /// Wakes for committed messages, sent in rounds (see `notify.rs`).
    notifier: Arc<notify::Notifier>,
}

/// The runtime the queries run on; shut down in the background when the store goes, so
/// dropping it inside an async context is fine.
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl PgStore {
    /// Connects to `url` for the team `team` and brings the schema up to date (refusing a
    /// database whose schema is newer than this binary knows).
    pub async fn connect(url: &str, team: &str) -> Result<Self, BackendError> {
        let store = Self::prepare(url, team, None)?;
        store.ready(true).await?;
        Ok(store)
    }

    /// Connects to a database troupe already set up, changing nothing (inspection): a
    /// database without troupe's schema, or with a newer one, is refused.
    pub async fn connect_existing(url: &str, team: &str) -> Result<Self, BackendError> {
        let store = Self::prepare(url, team, None)?;
        store.ready(false).await?;
        Ok(store)
    }

    /// [`Self::connect`] with every table in `schema` (which must exist), from a thread that
    /// cannot await (it waits on the store's own runtime): what the tests and the benchmarks'
    /// processes use, one schema each.
    pub fn connect_in_schema(
        url: &str,
        team: &str,
        schema: Option<&str>,
    ) -> Result<Self, BackendError> {
        let store = Self::prepare(url, team, schema)?;
        store.wait_on_own_runtime({
            let store = store.clone();
            async move { store.ready(true).await }
        })?;
        Ok(store)
    }

    /// The store for `url` and `team`, its runtime and pools made; nothing is connected yet.
    fn prepare(url: &str, team: &str, schema: Option<&str>) -> Result<Self, BackendError> {
        if team.trim().is_empty() {
            return Err(BackendError::new(
                "invalid_arguments",
                "the team key must not be blank",
            ));
        }
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            BackendError::new(
                "invalid_arguments",
                format!("the store URL is not a PostgreSQL URL: {e}"),
            )
        })?;
        let mut options = config.get_options().unwrap_or_default().to_owned();
        if !options.contains("statement_timeout") {
            options.push_str(&format!(
                " -c statement_timeout={}",
                STATEMENT_TIMEOUT.as_millis()
            ));
        }
        if let Some(schema) = schema {
            options.push_str(&format!(" -c search_path={schema}"));
        }
        config.options(options.trim());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("troupe");
        }
        let shown = show(&config);
        let tls = tls::Tls::of(&config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(RUNTIME_THREAD)
            .enable_all()
            .build()
            .map_err(|e| {
                BackendError::new("storage_error", format!("start the database runtime: {e}"))
            })?;
        let pool = build_pool(config.clone(), &tls, runtime.handle())?;
        // Claims commit without waiting for the WAL flush: a claim lost in a server crash leaves
        // its message ready, to be claimed again — what at-least-once allows, and what the file
        // store does too (its claim rename is not fsynced). Everything else commits durably.
        let mut claims_config = config.clone();
        claims_config.options(format!(
            "{} -c synchronous_commit=off",
            config.get_options().unwrap_or_default()
        ));
        let claim_pool = build_pool(claims_config, &tls, runtime.handle())?;
        let store = Self {
            shared: Arc::new(Shared {
                runtime: OwnRuntime(Some(runtime)),
                pool,
                claim_pool,
                config,
                tls,
                team: team.to_owned(),
                shown,
                wait_for_outages: std::sync::atomic::AtomicBool::new(false),
                closing: tokio_util::sync::CancellationToken::new(),
                gave_up: std::sync::atomic::AtomicBool::new(false),
                notifier: Arc::new(notify::Notifier::new()),
            }),
        };
        store.start_notifier();
        Ok(store)
    }

    /// Brings the schema up to date (`migrate`) or checks it, on the store's own runtime (its
    /// first connections are made there); from then on an outage is waited out.
    async fn ready(&self, migrate: bool) -> Result<(), BackendError> {
        let store = self.clone();
        let checked = self.handle().spawn(async move {
            if migrate {
                store.bounded(schema::migrate(&store)).await
            } else {
                store.bounded(schema::check(&store)).await
            }
        });
        checked.await.map_err(|_| {
            BackendError::new("store_unavailable", "the database runtime stopped")
        })??;
        self.shared
            .wait_for_outages
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The team key every row of this store carries.
    pub fn team(&self) -> &str {
        &self.shared.team
    }

    /// Host, port, database and user, never the password.
    pub fn shown(&self) -> &str {
        &self.shared.shown
    }

    /// How this store's connections are made (TLS or not).
    pub(crate) fn tls(&self) -> &tls::Tls {
        &self.shared.tls
    }

    /// A connection of its own, outside the pools, its driver on this store's runtime (for a
    /// session that must last: the lead's lock).
    pub(crate) async fn dedicated(&self) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let config = &self.shared.config;
        let handle = self.handle();
        match &self.shared.tls {
            tls::Tls::Off => {
                let (client, connection) = config.connect(NoTls).await?;
                handle.spawn(async move {
                    let _ = connection.await;
                });
                Ok(client)
            }
            tls::Tls::Required(connect) => {
                let (client, connection) = config.connect(connect.clone()).await?;
                handle.spawn(async move {
                    let _ = connection.await;
                });
                Ok(client)
            }
        }
    }

    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.shared.config
    }

    /// The `LISTEN`/`NOTIFY` channel of this team: derived from the key, so any key is safe.
    pub fn channel(&self) -> String {
        channel_of(&self.shared.team)
    }

    /// The team is closing: every store call in flight or to come gets at most
    /// [`CLOSING_WAIT`]; once one runs past it, the rest fail at once (`store_unavailable`).
    /// A reachable server answers well within it, so a normal close loses nothing.
    pub fn closing(&self) {
        self.shared.closing.cancel();
    }

    /// Waits for `future` from the calling thread, which cannot await: only for
    /// [`PgStore::connect_in_schema`]. `future` runs on the store's own runtime.
    fn wait_on_own_runtime<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T, BackendError>> + Send + 'static,
    ) -> Result<T, BackendError> {
        if self.given_up() {
            return Err(gave_up(&self.shared.shown));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let store = self.clone();
        self.handle().spawn(async move {
            let _ = tx.send(store.bounded(future).await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(BackendError::new(
                "store_unavailable",
                "the database runtime stopped",
            ))
        })
    }

    /// `future`, unless the team is closing and it takes longer than [`CLOSING_WAIT`] (then
    /// `store_unavailable`, and every later call fails at once: see [`PgStore::closing`]). Every
    /// adapter's call goes through it.
    pub(crate) async fn bounded<T>(
        &self,
        future: impl Future<Output = Result<T, BackendError>>,
    ) -> Result<T, BackendError> {
        let shared = &self.shared;
        if self.given_up() {
            return Err(gave_up(&shared.shown));
        }
        let bound = async {
            shared.closing.cancelled().await;
            tokio::time::sleep(CLOSING_WAIT).await;
        };
        tokio::select! {
            result = future => result,
            () = bound => {
                if !shared.gave_up.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(
                        "PostgreSQL at {} did not answer within {CLOSING_WAIT:?} while the team \
                         closed; closing without it",
                        shared.shown
                    );
                }
                Err(gave_up(&shared.shown))
            }
        }
    }

    /// A call ran past [`CLOSING_WAIT`] while the team closed: the server is taken as gone.
    pub(crate) fn given_up(&self) -> bool {
        self.shared
            .gave_up
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn notifier(&self) -> &Arc<notify::Notifier> {
        &self.shared.notifier
    }

    /// The store's runtime, for its own background tasks.
    pub(crate) fn handle(&self) -> tokio::runtime::Handle {
        match &self.shared.runtime.0 {
            Some(runtime) => runtime.handle().clone(),
            None => unreachable_runtime(),
        }
    }

    /// A connection for claims (commits that need not be durable; see `claim_pool`).
    pub(crate) async fn claim_client(&self) -> Result<deadpool_postgres::Object, BackendError> {
        self.get_from(&self.shared.claim_pool).await
    }

    /// A pooled connection, checked alive (a server restart leaves idle connections dead).
    /// While the server cannot be reached, waits with backoff (100 ms doubling to 2 s) for up
    /// to [`OUTAGE_WAIT`]: a restart of PostgreSQL is ridden out, a server that stays down is
    /// `store_unavailable`.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, BackendError> {
        self.get_from(&self.shared.pool).await
    }

    async fn get_from(&self, pool: &Pool) -> Result<deadpool_postgres::Object, BackendError> {
        let started = std::time::Instant::now();
        let mut backoff = Duration::from_millis(100);
        loop {
            let error = match pool.get().await {
                Ok(client) => return Ok(client),
                Err(e) => e,
            };
            if started.elapsed() + backoff > OUTAGE_WAIT
                || !self
                    .shared
                    .wait_for_outages
                    .load(std::sync::atomic::Ordering::Relaxed)
            {
                return Err(BackendError::new(
                    "store_unavailable",
                    format!(
                        "cannot reach PostgreSQL at {}: {}",
                        self.shared.shown,
                        with_causes(&error)
                    ),
                ));
            }
            tracing::debug!("waiting for PostgreSQL at {}: {error}", self.shared.shown);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }
}

/// A store call refused or cut because the server did not answer while the team closed.
fn gave_up(shown: &str) -> BackendError {
    BackendError::new(
        "store_unavailable",
        format!(
            "PostgreSQL at {shown} did not answer within {CLOSING_WAIT:?} while the team closed; \
             what this process could not write is recovered by the team's leases"
        ),
    )
}

/// An error and its causes, `outer: inner: …` (a TLS handshake failure says why only in its
/// source).
pub(crate) fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

/// A pool on `config`: connections the client saw close are replaced, and one idle for longer
/// than [`IDLE_CHECK`] is checked alive first (a server restart closes idle connections
/// without the client knowing yet; busy ones skip the round trip).
/// Its connections are opened, and driven, on `home` (see `connect.rs`).
fn build_pool(
    config: tokio_postgres::Config,
    tls: &tls::Tls,
    home: &tokio::runtime::Handle,
) -> Result<Pool, BackendError> {
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let home = home.clone();
    let manager = match tls {
        tls::Tls::Off => Manager::from_connect(
            config,
            connect::OnStoreRuntime { home, tls: NoTls },
            manager_config,
        ),
        tls::Tls::Required(connect) => Manager::from_connect(
            config,
            connect::OnStoreRuntime {
                home,
                tls: connect.clone(),
            },
            manager_config,
        ),
    };
    Pool::builder(manager)
        .max_size(POOL_SIZE)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(POOL_WAIT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .pre_recycle(deadpool_postgres::Hook::async_fn(|client, metrics| {
            let idle = metrics.last_used() > IDLE_CHECK;
            Box::pin(async move {
                if idle && client.simple_query("").await.is_err() {
                    return Err(deadpool_postgres::HookError::Message(
                        "the connection was closed while idle".into(),
                    ));
                }
                Ok(())
            })
        }))
        .build()
        .map_err(|e| BackendError::new("storage_error", format!("build the connection pool: {e}")))
}

/// The runtime is taken only in `Drop`, after which no method can be called.
fn unreachable_runtime() -> ! {
    panic!("the database runtime is only taken when the store is dropped")
}

// Advisory locks are taken on `hashtext(current_schema() || '/' || team)` with a class of their
// own (the `Lock` classes 1–3: the protocol store's, the task board's and the documents'
// transactions; 3 also, with the agent in the key, a transcript's set-aside; 4: an answer's
// delivery, with the request id in the key too; 5: the lead's lock, held for a whole run), so
// teams — and troupe installations in different schemas of one database — never share a lock,
// and no two kinds of lock of one team share a key.

/// The class of the lead's session lock: apart from every transaction lock's, so that a
/// running lead never blocks the team's task board (class 2).
pub(crate) const LEAD_LOCK_CLASS: i32 = 5;

/// `troupe_` and 16 hex digits of the key's SHA-256.
pub fn channel_of(team: &str) -> String {
    let digest = Sha256::digest(team.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("troupe_{hex}")
}

fn show(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or("(default database)");
    let user = config.get_user().unwrap_or("(default user)");
    format!("{host}:{port}/{db} as {user}")
}

/// A database error as troupe's stable codes: `store_timeout` for a cancelled statement,
/// `store_unavailable` for a lost or refused connection, `store_error` for the rest.
pub(crate) fn db_error(what: &str, e: tokio_postgres::Error) -> BackendError {
    let code = match e.code() {
        Some(state) if *state == tokio_postgres::error::SqlState::QUERY_CANCELED => "store_timeout",
        Some(state) if state.code().starts_with("08") || state.code().starts_with("57P") => {
            "store_unavailable"
        }
        Some(_) => "store_error",
        None if e.is_closed() => "store_unavailable",
        None => "store_unavailable",
    };
    let detail = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    };
    let mut error = BackendError::new(code, format!("{what}: {detail}"));
    error.connection_lost = code == "store_unavailable";
    error
}

/// How many times an operation that is safe to repeat is run again after its connection broke.
const RETRIES: u32 = 3;

/// Runs an operation again when its connection broke under it (a server restart), up to
/// [`RETRIES`] times: for operations whose repetition changes nothing that the first run may
/// have done (reads; claims, whose lost result only delays a message until its lease runs out;
/// fenced moves, which a repeat finds done; idempotent updates). `op` makes each attempt's
/// future afresh; the next attempt's connection waits for the server to be back
/// ([`PgStore::client`]).
pub(crate) async fn retrying<T, E, F>(mut op: impl FnMut() -> F) -> Result<T, E>
where
    E: ConnectionLost,
    F: Future<Output = Result<T, E>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if e.connection_lost() && attempt < RETRIES => {
                attempt += 1;
                tracing::info!("the database connection broke; trying again ({attempt})");
            }
            other => return other,
        }
    }
}

/// Errors that can say their connection broke.
pub(crate) trait ConnectionLost {
    fn connection_lost(&self) -> bool;
}

impl ConnectionLost for BackendError {
    fn connection_lost(&self) -> bool {
        self.connection_lost
    }
}

impl ConnectionLost for crate::store::mailbox::MailboxError {
    fn connection_lost(&self) -> bool {
        matches!(self, Self::Backend(e) if e.connection_lost)
    }
}

impl ConnectionLost for crate::store::tasks::TaskError {
    fn connection_lost(&self) -> bool {
        matches!(self, Self::Backend(e) if e.connection_lost)
    }
}

impl ConnectionLost for crate::store::protocol::ProtocolError {
    fn connection_lost(&self) -> bool {
        matches!(self, Self::Backend(e) if e.connection_lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_identifiers_whatever_the_key() {
        let channel = channel_of("a team; DROP TABLE x");
        assert!(channel.starts_with("troupe_"));
        assert_eq!(channel.len(), 7 + 16);
        assert!(channel[7..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(channel_of("a"), channel_of("b"));
    }

    #[test]
    fn only_postgres_urls_are_postgres() {
        assert!(is_postgres_url("postgres://127.0.0.1/test"));
        assert!(is_postgres_url("postgresql://u@h/db"));
        assert!(!is_postgres_url("file:///tmp"));
        assert!(!is_postgres_url("mysql://h/db"));
    }

    #[tokio::test]
    async fn a_blank_team_key_is_refused_before_connecting() {
        let Err(e) = PgStore::connect("postgres://127.0.0.1:1/x", " ").await else {
            panic!("a blank key was accepted");
        };
        assert_eq!(e.code, "invalid_arguments");
    }

    #[test]
    fn shown_urls_never_carry_the_password() {
        let config: tokio_postgres::Config = "postgres://alice:s3cret@db.example:6543/team"
            .parse()
            .unwrap();
        let shown = show(&config);
        assert_eq!(shown, "db.example:6543/team as alice");
        assert!(!shown.contains("s3cret"));
    }
}
