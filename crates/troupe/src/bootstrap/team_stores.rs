//! The one bundle of a team's stores for the commands that look at a team or write into it from
//! outside a run ([`TeamStores`]: the inspector, `troupe send`, the views): built here from the
//! store choice, on the workspace's files (opened so that reading creates nothing) or on a
//! shared team's database (which must already hold troupe's schema: nothing is created).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::agent::transcript::FileTranscripts;
use crate::clock::Clock;
use crate::cron::CronStore;
use crate::ids::IdGenerator;
use crate::inspect::TeamStores;
use crate::jobs::record::{FileJobList, TeamJobList};
use crate::layout::Layout;
use crate::store::document::FileDocument;
use crate::store::events::stream::FileEvents;
use crate::store::mailbox::FileMailboxStore;
use crate::store::memory::MemoryStore;
use crate::store::postgres::document::PgDocument;
use crate::store::postgres::events::PgEvents;
use crate::store::postgres::jobs::PgJobs;
use crate::store::postgres::memory::PgMemory;
use crate::store::postgres::recordings::PgRecordings;
use crate::store::postgres::usage::PgUsage;
use crate::store::postgres::{PgMailboxStore, PgProtocolStore, PgRoster, PgStore, PgTaskBoard};
use crate::store::protocol::LazyJsonProtocolStore;
use crate::store::recordings::FileRecordings;
use crate::store::roster::FileRosterReader;
use crate::store::tasks::FileTaskBoard;
use crate::store::usage_groups::FileUsage;
use crate::store::BackendError;

use super::options::StoreChoice;
use super::shared::PgTranscripts;

/// The stores of the team `store` names, for `workspace`: its files, or its database (connected
/// now, changing nothing). `holder` names this process in the database (`inspect:<pid>`).
pub(super) async fn open(
    workspace: &Path,
    store: &StoreChoice,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    holder: &str,
) -> Result<TeamStores, BackendError> {
    Ok(match store {
        StoreChoice::Files => on_files(&Layout::new(workspace), clock, ids),
        StoreChoice::Postgres(options) => {
            let pg = PgStore::connect_existing(&options.url, &options.team).await?;
            on_database(pg, clock, ids, holder, options.lease)
        }
    })
}

/// A workspace's stores, on its files.
pub(super) fn on_files(
    layout: &Layout,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
) -> TeamStores {
    TeamStores {
        mailbox: Arc::new(FileMailboxStore::new(layout, clock.clone())),
        protocol: Arc::new(LazyJsonProtocolStore::new(
            layout,
            clock.clone(),
            ids.clone(),
        )),
        roster: Arc::new(FileRosterReader::open(layout)),
        board: Arc::new(FileTaskBoard::new(layout, clock, ids)),
        usage: Arc::new(FileUsage::open(layout)),
        cron: CronStore::on(Arc::new(FileDocument::cron(layout))),
        jobs: Arc::new(FileJobList(layout.clone())),
        events: Arc::new(FileEvents::new(layout)),
        transcripts: Arc::new(FileTranscripts(layout.clone())),
        memory: MemoryStore::open(layout),
        recordings: Arc::new(FileRecordings(layout.clone())),
    }
}

/// A shared team's stores, on the database `pg` is connected to; `holder` and `lease` are
/// this process's as a holder of the team's roster.
pub(super) fn on_database(
    pg: PgStore,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    holder: &str,
    lease: Duration,
) -> TeamStores {
    TeamStores {
        mailbox: Arc::new(PgMailboxStore::new(
            pg.clone(),
            clock.clone(),
            holder,
            Duration::ZERO,
        )),
        protocol: Arc::new(PgProtocolStore::new(pg.clone(), clock.clone(), ids.clone())),
        board: Arc::new(PgTaskBoard::new(pg.clone(), clock, ids)),
        usage: Arc::new(PgUsage::new(pg.clone())),
        cron: CronStore::on(Arc::new(PgDocument::new(
            pg.clone(),
            crate::cron::store::CRON_DOCUMENT,
        ))),
        jobs: Arc::new(TeamJobList(Arc::new(PgJobs::new(pg.clone())))),
        events: Arc::new(PgEvents::new(pg.clone())),
        transcripts: Arc::new(PgTranscripts::new(pg.clone(), holder)),
        memory: MemoryStore::on(Arc::new(PgMemory::new(pg.clone()))),
        recordings: Arc::new(PgRecordings::new(pg.clone())),
        roster: Arc::new(PgRoster::new(pg, holder, lease)),
    }
}
