//! The composition of a shared team — one whose stores are shared through PostgreSQL
//! (`--store postgres://…`) by its lead and workers: which stores go to the database, the
//! teammate leases, wakeups from other processes, and the takeover of teammates whose worker is
//! gone.
//!
//! In the database: mailboxes, the protocol store, the roster (with teammate leases and the
//! worker registry), every agent's transcript, the task board, the lead's durable cron jobs and
//! the memory records — everything a worker on another host needs to run a teammate. In each
//! process's own workspace (`.troupe/`): its event stream, audit log, usage, background jobs
//! and artifacts, as in a run on files, each copied to the database as well (`TeamCopy`, the
//! event mirror, the artifact copy: an artifact's first 8 MiB), so that the team's views cover
//! every process and a worker in another workspace can make the artifacts a teammate's history
//! names.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use crate::agent::transcript::{LinesTranscript, Transcript, TranscriptLines, Transcripts};
use crate::clock::Clock;
use crate::store::postgres::wake::{self, Wake};
use crate::store::postgres::{
    lead_lock, LeadLock, PgMailboxStore, PgProtocolStore, PgRoster, PgStore, PgTaskBoard,
    PgTranscriptLog, BOARD_WAKE, TEAMMATE_LEASE,
};
use crate::team::TeamRuntime;

use super::options::{BootstrapError, PgOptions};

/// What a process holds of a shared team.
pub(super) struct PgParts {
    pub store: PgStore,
    pub roster: Arc<PgRoster>,
    pub holder: String,
    pub lease: Duration,
    /// The lead's lock (only a lead takes it), held while this value lives.
    pub _lead_lock: Option<LeadLock>,
}

/// A running lead of the team holds its lead lock.
fn lead_busy(options: &PgOptions, store: &PgStore) -> BootstrapError {
    BootstrapError::Busy {
        holder: format!(
            "a lead of team {:?} runs on {} (another --team key gives another team)",
            options.team,
            store.shown()
        ),
    }
}

/// Connects (migrating the schema) and registers this process; a lead also takes the team's
/// lead lock, refusing a second lead (`Busy`).
pub(super) async fn open(options: &PgOptions, role: &str) -> Result<PgParts, BootstrapError> {
    let store = PgStore::connect(&options.url, &options.team).await?;
    let lead_lock = if role == "lead" {
        match lead_lock(&store).await? {
            Some(lock) => Some(lock),
            None => return Err(lead_busy(options, &store)),
        }
    } else {
        None
    };
    let holder = format!(
        "{}:{}:{}",
        crate::store::postgres::roster::hostname(),
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let roster = Arc::new(PgRoster::new(store.clone(), &holder, options.lease));
    roster.register(role).await?;
    Ok(PgParts {
        store,
        roster,
        holder,
        lease: options.lease,
        _lead_lock: lead_lock,
    })
}

/// What `troupe compact --store` holds of a shared team while it compacts a conversation.
pub(super) struct Compaction {
    pub store: PgStore,
    /// The agent's conversation in the database (a teammate's appends fenced by the lease).
    pub transcript: Arc<dyn Transcript>,
    /// The team's lead lock: no lead runs (or starts) while the conversation is compacted.
    _lead_lock: LeadLock,
}

/// Connects to a team troupe already set up and takes its lead lock (`Busy` while a lead
/// runs, as a lead that finds another is refused); for a teammate, also refuses while a worker
/// holds its lease. Nothing is registered: compacting is no worker.
pub(super) async fn open_to_compact(
    options: &PgOptions,
    agent: &AgentName,
) -> Result<Compaction, BootstrapError> {
    let store = PgStore::connect_existing(&options.url, &options.team).await?;
    let Some(lock) = lead_lock(&store).await? else {
        return Err(lead_busy(options, &store));
    };
    let holder = format!(
        "compact:{}:{}",
        crate::store::postgres::roster::hostname(),
        std::process::id()
    );
    if !agent.is_lead() {
        let roster = PgRoster::new(store.clone(), &holder, options.lease);
        let held = roster
            .holders()
            .await?
            .into_iter()
            .find(|h| h.name == agent.as_str() && h.live && h.holder.is_some());
        if let Some(held) = held {
            return Err(BootstrapError::Busy {
                holder: format!(
                    "the worker {} runs {agent} of team {:?}",
                    held.holder.unwrap_or_default(),
                    options.team
                ),
            });
        }
    }
    let transcript = PgTranscripts(store.clone(), holder).open(agent);
    Ok(Compaction {
        store,
        transcript,
        _lead_lock: lock,
    })
}

impl PgParts {
    /// The team's document of the lead's durable cron jobs.
    pub fn cron_document(&self) -> Arc<dyn crate::store::document::TeamDocument> {
        Arc::new(crate::store::postgres::document::PgDocument::new(
            self.store.clone(),
            crate::cron::store::CRON_DOCUMENT,
        ))
    }

    pub fn mailbox(&self, clock: Arc<dyn Clock>) -> PgMailboxStore {
        PgMailboxStore::new(self.store.clone(), clock, &self.holder, self.lease)
    }

    pub fn protocol(
        &self,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn crate::ids::IdGenerator>,
    ) -> PgProtocolStore {
        PgProtocolStore::new(self.store.clone(), clock, ids)
    }

    /// The team's task board: every worker's teammates claim from the same board.
    pub fn board(
        &self,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn crate::ids::IdGenerator>,
    ) -> PgTaskBoard {
        PgTaskBoard::new(self.store.clone(), clock, ids)
    }

    pub fn transcripts(&self) -> Arc<dyn Transcripts> {
        Arc::new(PgTranscripts(self.store.clone(), self.holder.clone()))
    }

    /// Forwards wakeups from other processes to `runtime` until the guard drops; after a lost
    /// connection, everyone is woken (a rescan). In a worker, also looks for teammates whose
    /// lease ran out every half lease: that is how a dead worker's teammates are taken over.
    pub fn wakeups(&self, runtime: &TeamRuntime, takeover: bool) -> WakeGuard {
        let stop = CancellationToken::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        wake::listen(&self.store, tx, stop.clone());
        let forward = runtime.clone();
        let forward_stop = stop.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = rx.recv() => next,
                    () = forward_stop.cancelled() => return,
                };
                let Some(next) = next else { return };
                match next {
                    Wake::Agent(name) if name == BOARD_WAKE => forward.board_changed().await,
                    Wake::Agent(name) => {
                        if let Ok(agent) = AgentName::parse(&name) {
                            forward.wake(&agent);
                        }
                    }
                    Wake::Rescan => {
                        forward.wake_all().await;
                        forward.board_changed().await;
                    }
                }
            }
        });
        // Every process looks again at every look: a worker for teammates whose lease ran out,
        // every process for messages whose wake was lost (a sender killed between its commit and
        // its wake: see `store/postgres/notify.rs`).
        let runtime = runtime.clone();
        let look_stop = stop.clone();
        let every = takeover_look(self.lease);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = look_stop.cancelled() => return,
                }
                if runtime.is_closing() {
                    return;
                }
                if takeover {
                    runtime.wake_all().await;
                } else {
                    runtime.look_again().await;
                }
            }
        });
        WakeGuard(stop)
    }

    /// Frees this process's leases and leaves the worker registry (a clean exit).
    pub async fn leave(&self) {
        if let Err(e) = self.roster.deregister().await {
            tracing::warn!("could not leave the team's workers cleanly: {e}");
        }
    }
}

/// Stops the wakeups when dropped.
pub struct WakeGuard(CancellationToken);

impl Drop for WakeGuard {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Transcripts in the database; a teammate's appends are fenced by this process's holder id.
pub(super) struct PgTranscripts(PgStore, String);

impl PgTranscripts {
    /// The team's transcripts; a teammate's appends are fenced by `holder`.
    pub(super) fn new(store: PgStore, holder: &str) -> Self {
        Self(store, holder.to_owned())
    }
}

struct PgLines(PgTranscriptLog);

#[async_trait::async_trait]
impl TranscriptLines for PgLines {
    async fn append_line(&self, line: &[u8]) -> Result<(), String> {
        self.0.append(line).await.map_err(|e| e.to_string())
    }

    async fn read_lines(&self) -> Result<Vec<u8>, String> {
        self.0.read().await.map_err(|e| e.to_string())
    }

    fn describe(&self) -> String {
        format!("the transcript of {} in PostgreSQL", self.0.agent())
    }
}

#[async_trait::async_trait]
impl Transcripts for PgTranscripts {
    fn open(&self, agent: &AgentName) -> Arc<dyn Transcript> {
        let log = PgTranscriptLog::new(self.0.clone(), agent.as_str());
        let log = if agent.is_lead() {
            log
        } else {
            log.fenced_by(&self.1)
        };
        Arc::new(LinesTranscript(PgLines(log)))
    }

    async fn set_aside(&self, agent: &AgentName) -> Result<Option<PathBuf>, crate::store::IoError> {
        let log = PgTranscriptLog::new(self.0.clone(), agent.as_str());
        log.set_aside()
            .await
            .map(|generation| {
                generation.map(|g| PathBuf::from(format!("postgres:transcripts/{agent}/{g}")))
            })
            .map_err(|e| {
                crate::store::IoError::new(
                    "set aside",
                    std::path::Path::new("the transcript in PostgreSQL"),
                    std::io::Error::other(e.to_string()),
                )
            })
    }
}

/// How often a worker looks for teammates whose lease ran out: a tenth of the lease, at most a
/// second, so a dead worker's teammate is taken over within its lease plus that. (A look is one
/// query per teammate the roster holds.)
pub fn takeover_look(lease: Duration) -> Duration {
    (lease / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// The longest a dead worker's teammate waits to be taken over, for a lease of `lease`.
pub fn takeover_bound(lease: Duration) -> Duration {
    lease + takeover_look(lease)
}

/// The lease of a shared team's claims unless `TROUPE_LEASE` says otherwise.
pub const DEFAULT_SHARED_LEASE: Duration = TEAMMATE_LEASE;

/// Where the records a process keeps locally are copied (a shared team's tables, or nowhere):
/// the one choice for audit lines, usage records, job records and artifacts.
pub(super) mod copies {
    use std::sync::Arc;

    use crate::store::artifacts::{ArtifactCopy, FilesOnly};
    use crate::store::postgres::artifacts::PgArtifacts;
    use crate::store::postgres::audit::PgAudit;
    use crate::store::postgres::jobs::PgJobs;
    use crate::store::postgres::recordings::PgRecordings;
    use crate::store::postgres::usage::PgUsage;
    use crate::store::postgres::PgStore;
    use crate::store::recordings::RecordingLine;
    use crate::store::team_copy::{AuditLine, CopyTo, JobLine, TeamCopy};
    use crate::store::usage::UsageRecord;

    pub fn audit(pg: Option<&PgStore>) -> CopyTo<AuditLine> {
        let target = pg.map(|s| Arc::new(PgAudit::new(s.clone())) as Arc<dyn TeamCopy<AuditLine>>);
        CopyTo::to(target, "the team's audit misses this decision")
    }

    pub fn usage(pg: Option<&PgStore>) -> CopyTo<UsageRecord> {
        let target =
            pg.map(|s| Arc::new(PgUsage::new(s.clone())) as Arc<dyn TeamCopy<UsageRecord>>);
        CopyTo::to(target, "the team's usage totals miss this record")
    }

    pub fn recordings(pg: Option<&PgStore>) -> CopyTo<RecordingLine> {
        let target =
            pg.map(|s| Arc::new(PgRecordings::new(s.clone())) as Arc<dyn TeamCopy<RecordingLine>>);
        CopyTo::to(target, "the team's recordings miss this line")
    }

    pub fn jobs(pg: Option<&PgStore>) -> CopyTo<JobLine> {
        let target = pg.map(|s| Arc::new(PgJobs::new(s.clone())) as Arc<dyn TeamCopy<JobLine>>);
        CopyTo::to(target, "the team's job list misses this record")
    }

    /// Where the agents' artifacts and the background jobs' whole outputs are copied.
    pub fn artifacts(pg: Option<&PgStore>) -> Arc<dyn ArtifactCopy> {
        match pg {
            Some(store) => Arc::new(PgArtifacts::new(store.clone())),
            None => Arc::new(FilesOnly),
        }
    }
}
