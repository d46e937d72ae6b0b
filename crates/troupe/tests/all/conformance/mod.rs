//! One contract, two backends: the store tests written once, generic over the port, run against
//! the file store and PostgreSQL (each PostgreSQL test in a schema of its own, created and
//! dropped by the test; skipped with one notice where no server can be reached).
//!
//! - `mailbox`: every transition and refusal of the mailbox port, threads racing to claim.
//! - `protocol`: create, consume exactly once, replays, refusals, answers are single, races.
//! - `cron`: the lead's durable cron jobs and the document port under them, a workspace's file
//!   or a shared team's document.
//! - `memory`: the memory records, a workspace's folder or a shared team's rows.
//! - `roster`: a running team's roster and the roster as inspection reads it.
//! - `jobs`: the background job records as the views read them.
//! - `events`: the team's event stream as read: positions, before and after, a reader going on,
//!   wakeups.
//! - `usage`: the team's token usage as read: totals, sums per day, records as they arrive.
//! - `recordings`: the runs' recordings as replay reads them, written by the recorder.
//! - `tasks`: the task board's rules, durability, claims raced by instances of their own.
//! - `leases` (PostgreSQL only): leased claims, fencing tokens, recovery of expired leases,
//!   wakeups, schema versions, teams sharing a database.
//! - `artifacts` (PostgreSQL only): an artifact written in one workspace read in another of
//!   the team, the copy's bound, names that are never fetched.

mod artifacts;
mod cron;
mod events;
mod jobs;
mod leases;
mod mailbox;
mod memory;
mod protocol;
mod recordings;
mod roster;
mod tasks;
mod usage;

use std::sync::Arc;
use std::time::Duration;

use tempfile::TempDir;
use troupe::clock::ManualClock;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxStore};
use troupe::store::postgres::testing::TestDb;
use troupe::store::postgres::{
    PgMailboxStore, PgProtocolStore, PgResponseAck, PgStore, PgTaskBoard, DEFAULT_LEASE,
};
use troupe::store::protocol::{JsonProtocolStore, ProtocolStore};
use troupe::store::response_ack::{InTurn, ResponseAck};
use troupe::store::tasks::{FileTaskBoard, TaskBoard};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    File,
    Postgres,
}

/// The stores of one team on one backend, with a manual clock and sequential ids.
pub struct Stores {
    _dir: TempDir,
    pub layout: Layout,
    pub db: Option<TestDb>,
    pub pg: Option<PgStore>,
    pub clock: ManualClock,
    pub ids: Arc<SequentialIds>,
    holders: std::sync::atomic::AtomicUsize,
}

impl Stores {
    /// `None` when the backend is PostgreSQL and no server can be reached (notice printed).
    pub fn new(backend: Backend) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let (db, pg) = match backend {
            Backend::File => (None, None),
            Backend::Postgres => {
                let db = TestDb::create()?;
                let pg = db.store("team-a");
                (Some(db), Some(pg))
            }
        };
        Some(Self {
            _dir: dir,
            layout,
            db,
            pg,
            clock: ManualClock::at_spec_epoch(),
            ids: Arc::new(SequentialIds::new()),
            holders: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// A new mailbox store instance (for PostgreSQL: a holder of its own, default lease).
    pub fn mailbox(&self) -> Arc<dyn MailboxStore> {
        self.mailbox_with_lease(DEFAULT_LEASE)
    }

    /// A new instance whose claims are leased for `lease` (ignored by the file store, whose
    /// claims last until the run lock's holder recovers them).
    pub fn mailbox_with_lease(&self, lease: Duration) -> Arc<dyn MailboxStore> {
        match &self.pg {
            None => Arc::new(FileMailboxStore::new(
                &self.layout,
                Arc::new(self.clock.clone()),
            )),
            Some(pg) => Arc::new(self.pg_mailbox(pg, lease)),
        }
    }

    pub fn pg_mailbox(&self, pg: &PgStore, lease: Duration) -> PgMailboxStore {
        let n = self
            .holders
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        PgMailboxStore::new(
            pg.clone(),
            Arc::new(self.clock.clone()),
            &format!("holder-{n}"),
            lease,
        )
    }

    pub fn protocol(&self) -> Arc<dyn ProtocolStore> {
        match &self.pg {
            None => Arc::new(
                JsonProtocolStore::open(
                    &self.layout,
                    Arc::new(self.clock.clone()),
                    self.ids.clone(),
                )
                .unwrap(),
            ),
            Some(pg) => Arc::new(PgProtocolStore::new(
                pg.clone(),
                Arc::new(self.clock.clone()),
                self.ids.clone(),
            )),
        }
    }
}

impl Stores {
    /// The consume + ack of protocol responses over `mailbox` (which must be the instance that
    /// claims) and a protocol store: one transaction on PostgreSQL, one after the other on files.
    pub fn response_ack(&self, mailbox: &Mailbox) -> Arc<dyn ResponseAck> {
        match (mailbox, &self.pg) {
            (Mailbox::Pg(pg_mailbox), Some(pg)) => Arc::new(PgResponseAck::new(
                pg.clone(),
                pg_mailbox.clone(),
                Arc::new(PgProtocolStore::new(
                    pg.clone(),
                    Arc::new(self.clock.clone()),
                    self.ids.clone(),
                )),
            )),
            _ => Arc::new(InTurn {
                mailbox: mailbox.port(),
                protocol: self.protocol(),
            }),
        }
    }

    /// A mailbox instance that can also finish responses in one transaction.
    pub fn claiming_mailbox(&self, lease: Duration) -> Mailbox {
        match &self.pg {
            None => Mailbox::File(self.mailbox()),
            Some(pg) => Mailbox::Pg(Arc::new(self.pg_mailbox(pg, lease))),
        }
    }

    /// A new cron store instance over this team's durable jobs.
    pub fn cron(&self) -> troupe::cron::CronStore {
        troupe::cron::CronStore::on(self.cron_document())
    }

    /// A new instance of this team's document of durable cron jobs.
    pub fn cron_document(&self) -> Arc<dyn troupe::store::document::TeamDocument> {
        match &self.pg {
            None => Arc::new(troupe::store::document::FileDocument::cron(&self.layout)),
            Some(pg) => Arc::new(troupe::store::postgres::document::PgDocument::new(
                pg.clone(),
                troupe::cron::store::CRON_DOCUMENT,
            )),
        }
    }

    /// A new memory store instance over this team's records.
    pub fn memory(&self) -> troupe::store::memory::MemoryStore {
        match &self.pg {
            None => troupe::store::memory::MemoryStore::open(&self.layout),
            Some(pg) => troupe::store::memory::MemoryStore::on(Arc::new(
                troupe::store::postgres::memory::PgMemory::new(pg.clone()),
            )),
        }
    }

    /// A new instance of this team's roster, as a running team keeps it (opened as a run
    /// opens it: a teammate left running by a process that is gone comes back idle).
    pub async fn roster_records(&self) -> Arc<dyn troupe::store::roster_records::RosterRecords> {
        let clock = Arc::new(self.clock.clone());
        match &self.pg {
            None => Arc::new(
                troupe::store::roster_records::FileRoster::load(&self.layout, clock).unwrap(),
            ),
            Some(pg) => Arc::new(
                troupe::store::roster_records::LeasedRecords::open(
                    clock,
                    Arc::new(self.pg_roster(pg)),
                )
                .await
                .unwrap(),
            ),
        }
    }

    /// This team's roster as the commands that look at a team read it.
    pub fn roster_reader(&self) -> Arc<dyn troupe::store::roster::RosterReader> {
        match &self.pg {
            None => Arc::new(troupe::store::roster::FileRosterReader::open(&self.layout)),
            Some(pg) => Arc::new(self.pg_roster(pg)),
        }
    }

    fn pg_roster(&self, pg: &PgStore) -> troupe::store::postgres::PgRoster {
        let n = self
            .holders
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        troupe::store::postgres::PgRoster::new(
            pg.clone(),
            &format!("holder-{n}"),
            troupe::store::postgres::TEAMMATE_LEASE,
        )
    }

    /// This team's background job records as the views read them.
    pub fn job_list(&self) -> Arc<dyn troupe::jobs::record::JobList> {
        match &self.pg {
            None => Arc::new(troupe::jobs::record::FileJobList(self.layout.clone())),
            Some(pg) => Arc::new(troupe::jobs::record::TeamJobList(Arc::new(
                troupe::store::postgres::jobs::PgJobs::new(pg.clone()),
            ))),
        }
    }

    /// This team's event stream as read.
    pub fn events(&self) -> Arc<dyn troupe::store::events::stream::EventStream> {
        match &self.pg {
            None => Arc::new(troupe::store::events::stream::FileEvents::new(&self.layout)),
            Some(pg) => Arc::new(troupe::store::postgres::events::PgEvents::new(pg.clone())),
        }
    }

    /// This team's token usage as read.
    pub fn usage(&self) -> Arc<dyn troupe::store::usage::TeamUsage> {
        match &self.pg {
            None => Arc::new(troupe::store::usage_groups::FileUsage::open(&self.layout)),
            Some(pg) => Arc::new(troupe::store::postgres::usage::PgUsage::new(pg.clone())),
        }
    }

    /// Records `record` as a process of this team does: appended to the workspace's log, or
    /// copied to the team's table.
    pub async fn record_usage(&self, record: &troupe::store::usage::UsageRecord) {
        use troupe::store::team_copy::TeamCopy;
        match &self.pg {
            None => {
                troupe::store::usage::UsageLog::open(&self.layout, Arc::new(self.clock.clone()))
                    .append(record)
                    .await
                    .unwrap()
            }
            Some(pg) => troupe::store::postgres::usage::PgUsage::new(pg.clone())
                .copy(record)
                .await
                .unwrap(),
        }
    }

    /// A new task board instance over this team's board.
    pub fn board(&self) -> Arc<dyn TaskBoard> {
        self.board_with_lease(troupe::store::tasks::DEFAULT_LEASE)
    }

    /// A new board instance whose claims last `lease` unless renewed.
    pub fn board_with_lease(&self, lease: Duration) -> Arc<dyn TaskBoard> {
        match &self.pg {
            None => Arc::new(
                FileTaskBoard::new(&self.layout, Arc::new(self.clock.clone()), self.ids.clone())
                    .with_lease(lease),
            ),
            Some(pg) => Arc::new(
                PgTaskBoard::new(pg.clone(), Arc::new(self.clock.clone()), self.ids.clone())
                    .with_lease(lease),
            ),
        }
    }
}

/// A mailbox instance with its concrete type where the one-transaction path needs it.
pub enum Mailbox {
    File(Arc<dyn MailboxStore>),
    Pg(Arc<PgMailboxStore>),
}

impl Mailbox {
    pub fn port(&self) -> Arc<dyn MailboxStore> {
        match self {
            Mailbox::File(m) => m.clone(),
            Mailbox::Pg(m) => m.clone(),
        }
    }
}

/// One test per backend: `both_async!(name)` runs `async fn name(Backend)` as `name::file` and
/// `name::postgres`, each on a runtime of its own.
macro_rules! both_async {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn file() {
                    super::$name(super::super::Backend::File).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name(super::super::Backend::Postgres).await
                }
            }
        )*
    };
}
pub(crate) use both_async;

/// Runs `f` to completion on a current-thread runtime of its own: for each thread of a test that
/// races real threads (a thread of a test's own runtime cannot block on another future).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}
