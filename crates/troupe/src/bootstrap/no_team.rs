//! The adapters of the commands that work on a team without running one: the read-only views
//! ([`inspector`], [`inspector_with`]), `troupe review` ([`PlanReview`]) and `troupe send`
//! ([`send_as_user`]) — on files, or on a shared team's database, which must already hold
//! troupe's schema.

use std::sync::Arc;
use std::time::Duration;

use troupe_wire::{AgentName, TeamRoster};

use crate::clock::{Clock, SystemClock};
use crate::ids::{IdGenerator, RandomIds};
use crate::inspect::{roster_error, InspectError, Inspector};
use crate::layout::Layout;
use crate::store::mailbox::FileMailboxStore;
use crate::store::protocol::{JsonProtocolStore, ProtocolStore};
use crate::store::roster::{FileRosterReader, RosterReader};
use crate::team::{NoTeamObserver, Postman, ProtocolRuntime};

use super::options::{BootstrapError, StoreChoice};

/// A person's message (sender `user`) to `to`, in the team `store` names: the workspace's files,
/// or a shared team's database (which must hold troupe's schema: nothing is created). The
/// one path of `troupe send`, the web page and the terminal view, on the system clock and
/// random ids.
pub async fn send_as_user(
    workspace: &std::path::Path,
    store: &StoreChoice,
    to: &AgentName,
    text: &str,
) -> Result<troupe_wire::MessageId, crate::send::SendError> {
    let (clock, stores) = command_stores(workspace, store, "send").await?;
    crate::send::send_to_team(
        stores.roster.as_ref(),
        stores.mailbox.as_ref(),
        clock.as_ref(),
        &RandomIds,
        to,
        text,
    )
    .await
}

/// The stores a command that runs no team works on: the system clock, random ids, and this
/// process named `<what>:<pid>` in a shared team's database.
pub(super) async fn command_stores(
    workspace: &std::path::Path,
    store: &StoreChoice,
    what: &str,
) -> Result<(Arc<dyn Clock>, crate::inspect::TeamStores), crate::store::BackendError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let holder = format!("{what}:{}", std::process::id());
    let stores = super::team_stores::open(
        workspace,
        store,
        clock.clone(),
        Arc::new(RandomIds),
        &holder,
    )
    .await?;
    Ok((clock, stores))
}

/// The read-only views of a team: [`inspector`]'s on files, or — for a team shared through
/// PostgreSQL — its mailboxes, requests, roster and workers from the database (which must
/// already hold troupe's schema: inspection changes nothing).
pub async fn inspector_with(
    workspace: &std::path::Path,
    store: &StoreChoice,
) -> Result<Inspector, BootstrapError> {
    let (clock, stores) = command_stores(workspace, store, "inspect").await?;
    Ok(Inspector::on(Layout::new(workspace), clock, stores))
}

/// The read-only views of a workspace (`troupe status`, `requests`, `mailbox`, `jobs`, `tasks`,
/// `cron`), on the system clock.
pub fn inspector(workspace: &std::path::Path) -> Inspector {
    inspector_on_files(Layout::new(workspace), Arc::new(SystemClock))
}

/// The read-only views of the workspace of `layout`, on `clock`.
pub fn inspector_on_files(layout: Layout, clock: Arc<dyn Clock>) -> Inspector {
    let stores = super::team_stores::on_files(&layout, clock.clone(), Arc::new(RandomIds));
    Inspector::on(layout, clock, stores)
}

/// `troupe review`: answering a plan request as the lead from outside a run — the protocol
/// store, a postman on the file mailboxes (it wakes nobody: the running team's watch sees the
/// answer arrive), and the roster from `team.json` for the "is its sender still there" rule.
pub struct PlanReview {
    pub store: Arc<dyn ProtocolStore>,
    pub protocol: Arc<ProtocolRuntime>,
    /// The team's roster: `team.json`, or a shared team's, read from its database.
    roster: Arc<dyn RosterReader>,
}

impl PlanReview {
    /// Opens the workspace's protocol store; `None` when it has no protocol requests.
    pub fn open(workspace: &std::path::Path) -> Result<Option<Self>, BootstrapError> {
        let layout = Layout::new(workspace);
        if !layout.protocol_dir().is_dir() {
            return Ok(None);
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ids: Arc<dyn IdGenerator> = Arc::new(RandomIds);
        let store: Arc<dyn ProtocolStore> = Arc::new(JsonProtocolStore::open(
            &layout,
            clock.clone(),
            ids.clone(),
        )?);
        let postman = Arc::new(Postman::new(
            Arc::new(FileMailboxStore::new(&layout, clock.clone())),
            clock,
            ids,
            Arc::new(NoTeamObserver),
        ));
        // The TTL is unused: a review only answers existing requests.
        let protocol = Arc::new(ProtocolRuntime::new(
            store.clone(),
            postman,
            Duration::from_secs(300),
        ));
        Ok(Some(Self {
            store,
            protocol,
            roster: Arc::new(FileRosterReader::open(&layout)),
        }))
    }

    /// [`Self::open`] for the team `store` names: a shared team's protocol store, mailboxes
    /// (the answer's insert wakes the running team through its NOTIFY) and roster are its
    /// database's, which must already hold troupe's schema.
    pub async fn open_with(
        workspace: &std::path::Path,
        store: &StoreChoice,
    ) -> Result<Option<Self>, BootstrapError> {
        let StoreChoice::Postgres(options) = store else {
            return crate::sync::blocking(|| Self::open(workspace));
        };
        let pg =
            crate::store::postgres::PgStore::connect_existing(&options.url, &options.team).await?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ids: Arc<dyn IdGenerator> = Arc::new(RandomIds);
        let holder = format!("review:{}", std::process::id());
        let protocol_store: Arc<dyn ProtocolStore> = Arc::new(
            crate::store::postgres::PgProtocolStore::new(pg.clone(), clock.clone(), ids.clone()),
        );
        let postman = Arc::new(Postman::new(
            Arc::new(crate::store::postgres::PgMailboxStore::new(
                pg.clone(),
                clock.clone(),
                &holder,
                options.lease,
            )),
            clock,
            ids,
            Arc::new(NoTeamObserver),
        ));
        let protocol = Arc::new(ProtocolRuntime::new(
            protocol_store.clone(),
            postman,
            Duration::from_secs(300),
        ));
        Ok(Some(Self {
            store: protocol_store,
            protocol,
            roster: Arc::new(crate::store::postgres::PgRoster::new(
                pg,
                &holder,
                options.lease,
            )),
        }))
    }

    /// The roster as `team.json` (or a shared team's database) has it now (read when asked:
    /// the run may change it).
    pub async fn roster(&self) -> Result<TeamRoster, InspectError> {
        Ok(TeamRoster {
            version: TeamRoster::VERSION,
            teammates: self.roster.teammates().await.map_err(roster_error)?,
        })
    }
}
