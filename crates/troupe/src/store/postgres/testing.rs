//! A database of one's own for tests: a fresh schema on the test server, dropped afterwards.
//!
//! The server is `TROUPE_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`, the
//! development and CI machines' PostgreSQL). Where it cannot be reached, [`TestDb::create`]
//! returns `None` after printing one notice per test binary, so `cargo test` stays green on a
//! machine without PostgreSQL — unless `TROUPE_TEST_PG_REQUIRED=1` (as `.ci/run` sets), which
//! turns the skip into a failure.

use std::sync::Once;

use tokio_postgres::NoTls;

use super::PgStore;
use crate::store::BackendError;

/// The test server unless `TROUPE_TEST_PG_URL` names another.
pub const DEFAULT_TEST_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

static NOTICE: Once = Once::new();

/// A schema created for one test; dropped (with everything in it) when this value is.
pub struct TestDb {
    url: String,
    schema: String,
}

impl TestDb {
    /// A new schema, or `None` (with a notice) when the server cannot be reached.
    pub fn create() -> Option<Self> {
        let url = std::env::var("TROUPE_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_TEST_URL.into());
        let schema = format!("troupe_test_{}", uuid::Uuid::new_v4().simple());
        match run_sql(&url, &format!("CREATE SCHEMA {schema}")) {
            Ok(()) => Some(Self { url, schema }),
            Err(e) => {
                if std::env::var("TROUPE_TEST_PG_REQUIRED").is_ok_and(|v| v == "1") {
                    panic!("TROUPE_TEST_PG_REQUIRED=1 but PostgreSQL at {url} is unreachable: {e}");
                }
                NOTICE.call_once(|| {
                    eprintln!(
                        "notice: PostgreSQL at {url} is unreachable ({e}); the PostgreSQL tests \
                         are skipped (set TROUPE_TEST_PG_URL to run them)"
                    );
                });
                None
            }
        }
    }

    /// A store of `team` in this schema.
    pub fn store(&self, team: &str) -> PgStore {
        match PgStore::connect_in_schema(&self.url, team, Some(&self.schema)) {
            Ok(store) => store,
            Err(e) => panic!("connect to the test schema {}: {e}", self.schema),
        }
    }

    /// The URL of the server with this schema as the search path: what a `troupe` process
    /// under test is given with `--store`.
    pub fn url(&self) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!(
            "{}{separator}options=-csearch_path%3D{}",
            self.url, self.schema
        )
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs SQL in this schema (tests that plant rows or read them back).
    pub fn execute(&self, sql: &str) -> Result<(), BackendError> {
        run_sql(
            &self.url,
            &format!("SET search_path = {}; {sql}", self.schema),
        )
    }

    /// One value of a query in this schema, as text.
    pub fn query_text(&self, sql: &str) -> Result<Option<String>, BackendError> {
        let url = self.url.clone();
        let sql = format!("SET search_path = {}; {sql}", self.schema);
        on_a_thread(move || async move {
            let client = connect(&url).await?;
            let messages = client
                .simple_query(&sql)
                .await
                .map_err(|e| BackendError::new("store_error", e.to_string()))?;
            for message in messages {
                if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
                    return Ok(row.get(0).map(str::to_owned));
                }
            }
            Ok(None)
        })
    }
}

impl TestDb {
    /// What the server allows, for comparison: `clients` connections, each committing
    /// `per_client` single-row inserts (one transaction each, durable commits as troupe's
    /// own) into a scratch table of this schema, all at once; commits per second over the
    /// whole span. The client side is as thin as it gets (one async task per connection), so
    /// the figure is the server's and the machine's.
    pub fn raw_commits_per_s(
        &self,
        clients: usize,
        per_client: usize,
    ) -> Result<f64, BackendError> {
        self.execute(
            "CREATE TABLE IF NOT EXISTS raw_commits (id bigserial PRIMARY KEY, body text)",
        )?;
        let url = self.url();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| BackendError::new("storage_error", e.to_string()))?;
        runtime.block_on(async move {
            let mut connected = Vec::with_capacity(clients);
            for _ in 0..clients {
                connected.push(connect(&url).await?);
            }
            let start = std::time::Instant::now();
            let tasks: Vec<_> = connected
                .into_iter()
                .map(|client| {
                    tokio::spawn(async move {
                        let insert = client
                            .prepare("INSERT INTO raw_commits (body) VALUES ($1)")
                            .await?;
                        for _ in 0..per_client {
                            client.execute(&insert, &[&"x"]).await?;
                        }
                        Ok::<_, tokio_postgres::Error>(())
                    })
                })
                .collect();
            for task in tasks {
                task.await
                    .map_err(|e| BackendError::new("storage_error", e.to_string()))?
                    .map_err(|e| BackendError::new("store_error", e.to_string()))?;
            }
            let elapsed = start.elapsed().as_secs_f64().max(f64::MIN_POSITIVE);
            Ok((clients * per_client) as f64 / elapsed)
        })
    }
}

impl TestDb {
    /// Begins a transaction in this schema, runs `sql` in it (a test takes a lock that way: a
    /// starting gate), and keeps it open, on a thread of its own, until the returned value is
    /// dropped.
    pub fn hold(&self, sql: &str) -> Result<HeldTransaction, BackendError> {
        let url = self.url.clone();
        let sql = format!("SET search_path = {}; BEGIN; {sql}", self.schema);
        let (ready, started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready.send(Err(BackendError::new("storage_error", e.to_string())));
                    return;
                }
            };
            let client = runtime.block_on(async {
                let client = connect(&url).await?;
                client
                    .batch_execute(&sql)
                    .await
                    .map_err(|e| BackendError::new("store_error", e.to_string()))?;
                Ok(client)
            });
            let client = match client {
                Ok(client) => client,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            let _ = released.recv();
            let _ = runtime.block_on(client.batch_execute("COMMIT"));
        });
        started.recv().unwrap_or_else(|_| {
            Err(BackendError::new("storage_error", "the SQL thread stopped"))
        })?;
        Ok(HeldTransaction {
            release: Some(release),
            thread: Some(thread),
        })
    }
}

/// An open transaction of [`TestDb::hold`]; committed (its locks released) when dropped.
pub struct HeldTransaction {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for HeldTransaction {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = run_sql(
            &self.url,
            &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema),
        );
    }
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, BackendError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| BackendError::new("invalid_arguments", format!("{e}")))?;
    config.connect_timeout(std::time::Duration::from_secs(3));
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| BackendError::new("store_unavailable", e.to_string()))?;
    tokio::spawn(connection);
    Ok(client)
}

fn run_sql(url: &str, sql: &str) -> Result<(), BackendError> {
    let url = url.to_owned();
    let sql = sql.to_owned();
    on_a_thread(move || async move {
        let client = connect(&url).await?;
        client
            .batch_execute(&sql)
            .await
            .map_err(|e| BackendError::new("store_error", e.to_string()))
    })
}

/// Runs a future on a current-thread runtime of a thread of its own (callable from anywhere,
/// async tests included).
fn on_a_thread<T, F, Fut>(f: F) -> Result<T, BackendError>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, BackendError>>,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BackendError::new("storage_error", e.to_string()))?;
        runtime.block_on(f())
    })
    .join()
    .unwrap_or_else(|_| {
        Err(BackendError::new(
            "storage_error",
            "the SQL thread panicked",
        ))
    })
}
