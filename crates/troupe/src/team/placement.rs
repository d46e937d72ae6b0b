//! Where a teammate may run: the one abstraction over a team in one process and a team spread
//! over processes (and hosts) through a database — the runtime asks it, never which backend
//! the team is on.
//!
//! - [`Here`]: the team on files. Its one process runs every teammate; the roster is
//!   `team.json`; a protocol response is consumed and its message acked one after the other.
//! - [`UnderLease`]: a **shared** team (`--store postgres://…`). A teammate runs only in
//!   the process holding its lease, taken before each run and checked at every safe point; the
//!   roster in the database is the truth about who is busy or failed, whichever process runs
//!   them; a response is consumed and acked in one transaction; the lead's `--require-plans`
//!   is written into each new teammate's record, since a worker elsewhere builds the teammate
//!   from its record alone.

use std::sync::Arc;

use troupe_wire::AgentName;

use super::error::TeamError;
use super::roster::Roster;
use crate::clock::Clock;
use crate::layout::Layout;
use crate::permissions::PermissionRule;
use crate::store::response_ack::ResponseAck;
use crate::store::roster::{Lease, LeasedRoster};

/// Whether this process may run a teammate now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// It runs here, as before.
    Here,
    /// It runs here from now on, after running elsewhere: a runner kept from before may be
    /// stale, so the next one is built from the durable transcript.
    Fresh,
    /// Not here (another process holds it, or this one runs no teammates).
    Elsewhere,
}

/// Where teammates run, as the team runtime sees it. Async: a shared team's answers come
/// from its database.
#[async_trait::async_trait]
pub trait Placement: Send + Sync {
    /// The team's roster, loaded where this placement keeps it.
    async fn open_roster(
        &self,
        layout: &Layout,
        clock: Arc<dyn Clock>,
    ) -> Result<Roster, TeamError>;
    /// Whether this process may run `name` now (taking its lease if need be).
    async fn claim(&self, name: &AgentName) -> Claim;
    /// Whether this process still may run `name` (asked at each safe point of its turns).
    async fn still_here(&self, name: &AgentName) -> bool;
    /// Whether other processes run teammates of this team too: then the roster, not this
    /// process's workers, says who is busy and who failed.
    fn spans_processes(&self) -> bool;
    /// How a protocol response is consumed and its message acked in one step, if the store
    /// can (else one after the other, in the turn).
    fn response_ack(&self) -> Option<Arc<dyn ResponseAck>>;
    /// Whether the lead's `--require-plans` is written into each new teammate's record.
    fn records_plan_rule(&self) -> bool;
    /// The rule that lets `name`'s tools have effects only while this process holds it, if
    /// teammates run under leases.
    fn lease_gate(&self, name: &AgentName) -> Option<Arc<dyn PermissionRule>>;
}

/// Every teammate runs in this process (a team on files).
#[derive(Debug, Default, Clone, Copy)]
pub struct Here;

#[async_trait::async_trait]
impl Placement for Here {
    async fn open_roster(
        &self,
        layout: &Layout,
        clock: Arc<dyn Clock>,
    ) -> Result<Roster, TeamError> {
        let records = crate::store::roster_records::FileRoster::open(layout, clock).await?;
        Ok(Roster::on(Arc::new(records)))
    }

    async fn claim(&self, _name: &AgentName) -> Claim {
        Claim::Here
    }

    async fn still_here(&self, _name: &AgentName) -> bool {
        true
    }

    fn spans_processes(&self) -> bool {
        false
    }

    fn response_ack(&self) -> Option<Arc<dyn ResponseAck>> {
        None
    }

    fn records_plan_rule(&self) -> bool {
        false
    }

    fn lease_gate(&self, _name: &AgentName) -> Option<Arc<dyn PermissionRule>> {
        None
    }
}

/// A teammate runs only in the process holding its lease (a shared team).
#[derive(Clone)]
pub struct UnderLease {
    pub roster: Arc<dyn LeasedRoster>,
    /// Whether this process runs teammates at all (`troupe run --no-local-workers`: no).
    pub local_workers: bool,
    /// The lead's `--require-plans`, recorded in each new teammate's record.
    pub require_plans: bool,
    /// Consumes a protocol response and acks its message in one transaction.
    pub response_ack: Arc<dyn ResponseAck>,
}

#[async_trait::async_trait]
impl Placement for UnderLease {
    async fn open_roster(
        &self,
        _layout: &Layout,
        clock: Arc<dyn Clock>,
    ) -> Result<Roster, TeamError> {
        Roster::open_leased(clock, self.roster.clone())
            .await
            .map_err(|e| TeamError::Invalid(format!("open the roster: {e}")))
    }

    async fn claim(&self, name: &AgentName) -> Claim {
        if !self.local_workers {
            return Claim::Elsewhere;
        }
        match self.roster.acquire(name).await {
            Ok(Lease::Kept) => Claim::Here,
            Ok(Lease::New) => Claim::Fresh,
            Ok(Lease::Taken) => Claim::Elsewhere,
            Err(e) => {
                tracing::warn!("could not lease teammate {name}: {e}");
                Claim::Elsewhere
            }
        }
    }

    async fn still_here(&self, name: &AgentName) -> bool {
        match self.roster.holds(name).await {
            Ok(holds) => holds,
            Err(e) => {
                tracing::warn!("could not check the lease of {name}: {e}");
                false
            }
        }
    }

    fn spans_processes(&self) -> bool {
        true
    }

    fn response_ack(&self) -> Option<Arc<dyn ResponseAck>> {
        Some(self.response_ack.clone())
    }

    fn records_plan_rule(&self) -> bool {
        self.require_plans
    }

    fn lease_gate(&self, name: &AgentName) -> Option<Arc<dyn PermissionRule>> {
        Some(Arc::new(super::lease_gate::LeaseGate::new(
            self.roster.clone(),
            name.clone(),
        )))
    }
}
