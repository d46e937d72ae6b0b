//! Read-only views of a workspace, for `troupe status`, `troupe requests`, `troupe mailbox`,
//! `troupe jobs` and `troupe cron`; and the lookup of a request id a person typed (a unique
//! prefix is enough), for `troupe review`.
//!
//! **API Boundary:** nothing here writes. Inspecting a workspace that has no `.troupe/` yet shows
//! an empty team; it does not create the folder. The views are `Serialize`, and their JSON is the
//! documented `--json` output of the CLI (docs/cli.md, "Inspecting a workspace").

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use troupe_wire::{
    AgentName, MailboxMessage, ProtocolRequest, RequestId, RequestStatus, TeamRoster,
    TeammateRecord, UtcTime, WireError,
};

use crate::clock::Clock;
use crate::cron::{CronJob, CronJobView, CronStore, CronStoreError};
use crate::error::ErrorCode;
use crate::jobs::record::JobList;
use crate::jobs::{JobError, JobRecord};
use crate::layout::Layout;
use crate::store::lock_probe::{self, LockState};
use crate::store::mailbox::{MailboxEntry, MailboxError, MailboxState, MailboxStore};
use crate::store::protocol::{ProtocolError, ProtocolStore};
use crate::store::roster::{RosterFileError, RosterReadError, RosterReader, WorkerRow};
use crate::store::tasks::{self, TaskBoard, TaskError, TaskStatus, TaskView};
use crate::store::usage::{UsageBuckets, UsageTotals};

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("no mailbox for agent {0} in this workspace")]
    UnknownAgent(AgentName),
    #[error("{path}: {source}")]
    CorruptTeam { path: String, source: WireError },
    #[error("read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Mailbox(#[from] MailboxError),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error(transparent)]
    Jobs(#[from] JobError),
    #[error(transparent)]
    Cron(#[from] CronStoreError),
    #[error(transparent)]
    Tasks(#[from] TaskError),
}

impl ErrorCode for InspectError {
    fn code(&self) -> &'static str {
        match self {
            Self::UnknownAgent(_) => "unknown_agent",
            Self::CorruptTeam { .. } => "team_state_corrupt",
            Self::Io { .. } => "storage_error",
            Self::Mailbox(e) => e.code(),
            Self::Protocol(e) => e.code(),
            Self::Jobs(e) => e.code(),
            Self::Cron(e) => e.code(),
            Self::Tasks(e) => e.code(),
        }
    }
}

/// A protocol request as shown to people: `status` is `expired` for a pending request past its
/// window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestView {
    pub id: String,
    pub kind: &'static str,
    pub sender: String,
    pub target: String,
    pub status: RequestStatus,
    pub content: String,
    pub created_at_utc: UtcTime,
    pub expires_at_utc: UtcTime,
    pub resolution: Option<ResolutionView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolutionView {
    pub message_id: String,
    pub approved: bool,
    pub content: String,
    pub resolved_at_utc: UtcTime,
}

impl RequestView {
    pub fn of(request: &ProtocolRequest, now: UtcTime) -> Self {
        Self {
            id: request.id().to_string(),
            kind: request.kind().as_str(),
            sender: request.sender().to_string(),
            target: request.target().to_string(),
            status: request.status_at(now),
            content: request.content().to_string(),
            created_at_utc: request.created_at_utc(),
            expires_at_utc: request.expires_at_utc(),
            resolution: request.resolution().map(|r| ResolutionView {
                message_id: r.message_id.to_string(),
                approved: r.approved,
                content: r.content.to_string(),
                resolved_at_utc: r.resolved_at_utc,
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MailboxSummary {
    pub agent: String,
    pub ready: usize,
    pub processing: usize,
    pub done: usize,
    pub quarantine: usize,
}

/// Whether a `troupe run` holds the workspace: whether the kernel's lock on `run.lock` is held,
/// not what the file says (see `store::lock_probe`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunView {
    pub active: bool,
    /// What the holder wrote into `run.lock` (pid and start time), when active. While a run that
    /// has just taken the lock has not written it yet, `pid N` of the locker.
    pub holder: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    pub workspace: String,
    pub run: RunView,
    pub teammates: Vec<TeammateRecord>,
    pub mailboxes: Vec<MailboxSummary>,
    pub pending_requests: Vec<RequestView>,
    /// Every background job's record (`.troupe/jobs/`), by start time.
    pub jobs: Vec<JobRecord>,
    pub tasks: TaskSummary,
    /// Token usage from `.troupe/usage.jsonl` (a shared team's: every process's, from its
    /// database): overall, per agent, the number of runs and the latest run's totals.
    pub usage: UsageTotals,
    /// In a team shared through PostgreSQL: every process of the team (the lead and
    /// `troupe worker`s), its last heartbeat and the teammates it holds. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<Vec<WorkerRow>>,
    /// Bytes of the workspace's `.troupe/` (`troupe gc` says what retention allows removing).
    pub state_bytes: u64,
}

/// How many tasks of the task board are in each status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TaskSummary {
    pub total: usize,
    pub pending: usize,
    pub in_progress: usize,
    pub completed: usize,
}

impl TaskSummary {
    pub fn of(views: &[TaskView]) -> Self {
        let count = |status| views.iter().filter(|v| v.task.status == status).count();
        Self {
            total: views.len(),
            pending: count(TaskStatus::Pending),
            in_progress: count(TaskStatus::InProgress),
            completed: count(TaskStatus::Completed),
        }
    }
}

/// One file of a mailbox listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MailboxEntryView {
    pub state: &'static str,
    pub file_name: String,
    /// The message, or null for a quarantined file that does not parse.
    pub message: Option<serde_json::Value>,
    /// The recorded quarantine reason, for unparseable quarantined files.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MailboxReport {
    pub agent: String,
    pub messages: Vec<MailboxEntryView>,
}

/// Read-only access to a team: its stores on either backend, and the workspace's run lock.
pub struct Inspector {
    layout: Layout,
    clock: Arc<dyn Clock>,
    stores: TeamStores,
}

/// A team's stores as inspection reads them, on the backend bootstrap chose: a workspace's files
/// (opened so that reading creates nothing) or a shared team's database.
pub struct TeamStores {
    pub mailbox: Arc<dyn MailboxStore>,
    pub protocol: Arc<dyn ProtocolStore>,
    pub roster: Arc<dyn RosterReader>,
    pub board: Arc<dyn TaskBoard>,
    /// The team's token usage (a shared team's: every process's).
    pub usage: Arc<dyn crate::store::usage::TeamUsage>,
    /// The lead's durable cron jobs.
    pub cron: CronStore,
    /// The background job records (a shared team's: every process's).
    pub jobs: Arc<dyn JobList>,
    /// The team's event stream (a shared team's: every process's, in the team's order).
    pub events: Arc<dyn crate::store::events::stream::EventStream>,
    /// The agents' conversations.
    pub transcripts: Arc<dyn crate::agent::transcript::Transcripts>,
    /// The team's memory records.
    pub memory: crate::store::memory::MemoryStore,
    /// The runs' recordings (replay).
    pub recordings: Arc<dyn crate::store::recordings::Recordings>,
}

impl Inspector {
    /// Inspection of the team `stores` hold; the run lock is the workspace's of `layout`.
    pub fn on(layout: Layout, clock: Arc<dyn Clock>, stores: TeamStores) -> Self {
        Self {
            layout,
            clock,
            stores,
        }
    }

    /// The stores it reads.
    pub fn stores(&self) -> &TeamStores {
        &self.stores
    }

    pub async fn status(&self) -> Result<StatusReport, InspectError> {
        let now = self.clock.now();
        let mut mailboxes = Vec::new();
        {
            let store = &self.stores.mailbox;
            for agent in store.agents().await? {
                let c = store.counts(&agent).await?;
                mailboxes.push(MailboxSummary {
                    agent: agent.to_string(),
                    ready: c.ready,
                    processing: c.processing,
                    done: c.done,
                    quarantine: c.quarantine,
                });
            }
        }
        let pending_requests = self
            .stores
            .protocol
            .pending()
            .await?
            .iter()
            .map(|r| RequestView::of(r, now))
            .collect();
        Ok(StatusReport {
            workspace: self.layout.workspace().display().to_string(),
            run: self.run_view()?,
            teammates: self.roster().await?.teammates,
            mailboxes,
            pending_requests,
            jobs: self.jobs().await?,
            tasks: TaskSummary::of(&self.tasks().await?),
            usage: self.usage().await?,
            workers: self.stores.roster.workers().await.map_err(backend)?,
            state_bytes: self.state_bytes().await?,
        })
    }

    /// The bytes under the workspace's `.troupe/`, walked on the blocking pool.
    async fn state_bytes(&self) -> Result<u64, InspectError> {
        let layout = self.layout.clone();
        let walked = crate::sync::offload("the state's size", move || {
            crate::gc::size::state_bytes(&layout)
        })
        .await
        .map_err(|e| InspectError::Io {
            path: self.layout.state_dir().display().to_string(),
            source: std::io::Error::other(e),
        })?;
        walked.map_err(|e| InspectError::Io {
            path: e.path.clone(),
            source: e.source,
        })
    }

    /// The token usage recorded in `.troupe/usage.jsonl` (a shared team's: every process's, from
    /// its database); zeros when there is none. Reading
    /// creates nothing.
    pub async fn usage(&self) -> Result<UsageTotals, InspectError> {
        self.stores.usage.totals().await.map_err(port)
    }

    /// The token usage recorded at or after `since` (all when `None`), summed per agent, model
    /// and day: from `.troupe/usage.jsonl` read a line at a time, or a shared team's database.
    /// Reading creates nothing.
    pub async fn usage_buckets(
        &self,
        since: Option<UtcTime>,
    ) -> Result<UsageBuckets, InspectError> {
        self.stores.usage.buckets(since).await.map_err(port)
    }

    /// Every background job's record, by start time then id; none when `.troupe/jobs/` does
    /// not exist.
    pub async fn jobs(&self) -> Result<Vec<JobRecord>, InspectError> {
        Ok(self.stores.jobs.all().await?)
    }

    /// Every task of the task board, in creation order, with its open blockers. Reading takes
    /// no lock and creates nothing.
    pub async fn tasks(&self) -> Result<Vec<TaskView>, InspectError> {
        let listed = self.stores.board.list().await?;
        Ok(tasks::views(&listed))
    }

    /// Every request (archived ones included), creation order, optionally one status only.
    pub async fn requests(
        &self,
        status: Option<RequestStatus>,
    ) -> Result<Vec<RequestView>, InspectError> {
        let now = self.clock.now();
        let store = &self.stores.protocol;
        // A pending request is never archived: asked for those only, the history is not read
        // (what `troupe watch` asks on every refresh, whatever the workspace's age).
        let requests = match status {
            Some(RequestStatus::Pending) => store.pending().await?,
            _ => store.list().await?,
        };
        Ok(requests
            .iter()
            .map(|r| RequestView::of(r, now))
            .filter(|v| status.is_none_or(|s| v.status == s))
            .collect())
    }

    /// One mailbox's messages (of `state`, else of every state), oldest first: by the time a
    /// message was sent, then its id.
    pub async fn mailbox(
        &self,
        agent: &AgentName,
        state: Option<MailboxState>,
    ) -> Result<MailboxReport, InspectError> {
        let store = &self.stores.mailbox;
        if !store.agents().await.is_ok_and(|a| a.contains(agent)) {
            return Err(InspectError::UnknownAgent(agent.clone()));
        }
        let states: Vec<MailboxState> = match state {
            Some(s) => vec![s],
            None => MailboxState::ALL.to_vec(),
        };
        let mut entries = Vec::new();
        for state in states {
            for entry in store.list(agent, state).await? {
                // Oldest first across the states: by the message's time, then its id (its file
                // name); a quarantined file that does not parse has no time and comes last.
                let sent = match &entry {
                    MailboxEntry::Message(message) => Some(message.created_at_utc()),
                    MailboxEntry::Invalid { .. } => None,
                };
                entries.push((sent.is_none(), sent, entry_view(state, entry)));
            }
        }
        entries.sort_by(|a, b| (a.0, a.1, &a.2.file_name).cmp(&(b.0, b.1, &b.2.file_name)));
        Ok(MailboxReport {
            agent: agent.to_string(),
            messages: entries.into_iter().map(|(_, _, view)| view).collect(),
        })
    }

    /// The durable cron jobs in `.troupe/cron.json` (a shared team's: in its database), soonest
    /// first; none when there is no file.
    /// Jobs scheduled with `durable: false` live only inside their run and are not listed.
    pub async fn cron_jobs(&self) -> Result<Vec<CronJobView>, InspectError> {
        let mut jobs: Vec<CronJobView> = self
            .stores
            .cron
            .load()
            .await?
            .iter()
            .map(CronJob::view)
            .collect();
        jobs.sort_by_key(|v| (v.next_fire_utc, v.id));
        Ok(jobs)
    }

    /// The roster in `team.json`; empty when there is none yet.
    pub async fn roster(&self) -> Result<TeamRoster, InspectError> {
        Ok(TeamRoster {
            version: TeamRoster::VERSION,
            teammates: self.stores.roster.teammates().await.map_err(roster_error)?,
        })
    }

    fn run_view(&self) -> Result<RunView, InspectError> {
        let path = self.layout.run_lock();
        let probed = lock_probe::probe(&path).map_err(|e| InspectError::Io {
            path: e.path,
            source: e.source,
        })?;
        let holder = match probed {
            None | Some((LockState::Free, _)) => None,
            // The file's text names the holder only if it names the process the kernel says
            // holds the lock: a run that has just taken it may not have written its own yet.
            Some((LockState::Held { pid }, text)) => Some(
                if text == format!("pid {pid}") || text.starts_with(&format!("pid {pid} ")) {
                    text
                } else {
                    format!("pid {pid}")
                },
            ),
            // No kernel lock table to ask (no /proc): the best left is the text's pid.
            Some((LockState::Unknown, text)) => Some(text).filter(|t| holder_is_alive(t)),
        };
        Ok(RunView {
            active: holder.is_some(),
            holder,
        })
    }
}

fn backend(e: crate::store::BackendError) -> InspectError {
    InspectError::Io {
        path: "the team's PostgreSQL database".into(),
        source: std::io::Error::other(format!("{e} [{}]", e.code)),
    }
}

fn port(e: crate::store::PortError) -> InspectError {
    match e {
        crate::store::PortError::Io(e) => InspectError::Io {
            path: e.path,
            source: e.source,
        },
        crate::store::PortError::Backend(e) => backend(e),
    }
}

/// A roster's read error as inspection reports it.
pub fn roster_error(e: RosterReadError) -> InspectError {
    match e {
        RosterReadError::File(e) => file_roster_error(e),
        RosterReadError::Backend(e) => backend(e),
    }
}

/// A `team.json` read error as inspection reports it.
pub fn file_roster_error(e: RosterFileError) -> InspectError {
    match e {
        RosterFileError::Io { path, source } => InspectError::Io { path, source },
        RosterFileError::Corrupt { path, source } => InspectError::CorruptTeam { path, source },
    }
}

fn entry_view(state: MailboxState, entry: MailboxEntry) -> MailboxEntryView {
    match entry {
        MailboxEntry::Message(message) => MailboxEntryView {
            state: state.as_str(),
            file_name: format!("{}.json", message.id()),
            message: serde_json::to_value(&message).ok(),
            reason: None,
        },
        MailboxEntry::Invalid { file_name, reason } => MailboxEntryView {
            state: state.as_str(),
            file_name,
            message: None,
            reason,
        },
    }
}

/// Reads `team.json` strictly; a missing file is an empty roster, anything but a regular file an
/// error (without blocking on a FIFO).
pub fn read_roster(path: &Path) -> Result<TeamRoster, InspectError> {
    crate::store::roster::read_file(path).map_err(file_roster_error)
}

/// Whether the process named by a holder line (`pid <n> …`) lives: the fallback where the kernel's
/// lock table cannot be read. (The kernel drops the lock with the process, but the file keeps
/// its last words, and the pid may be reused.)
fn holder_is_alive(holder: &str) -> bool {
    let pid = holder
        .strip_prefix("pid ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<i32>().ok());
    match pid {
        // SAFETY: kill with signal 0 only checks that the process exists; it sends nothing.
        Some(pid) if pid > 0 => unsafe { libc::kill(pid, 0) == 0 },
        _ => false,
    }
}

/// Messages as the CLI prints them in one line.
pub fn message_summary(message: &MailboxMessage) -> String {
    let mut line = format!(
        "{} {} {} -> {} [{}]",
        message.created_at_utc(),
        message.id(),
        message.sender(),
        message.recipient(),
        message.kind_str()
    );
    if let MailboxMessage::Protocol(p) = message {
        line.push_str(&format!(" request {}", p.request_id()));
        if let Some(approved) = p.approved() {
            line.push_str(if approved { " approved" } else { " rejected" });
        }
    }
    line
}

/// The fewest characters of a request id a person may type instead of the whole id.
pub const MIN_REQUEST_ID_PREFIX: usize = 8;

/// A request id as a person typed it (`troupe review`, `approve`, `deny`): a full id, or part
/// of one to look up — the short id shown everywhere (its last 8 hex digits, the random part;
/// any longer end of the id too), or, as before, a prefix of at least 8 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestIdInput {
    Full(RequestId),
    Prefix(String),
}

/// Why a typed request id does not name one request.
#[derive(Debug, thiserror::Error)]
pub enum RequestIdError {
    #[error(
        "{0:?} is not a request id nor the start of one (lowercase hexadecimal digits and hyphens)"
    )]
    NotAnId(String),
    #[error(
        "request id prefix {0:?} is too short: give at least {MIN_REQUEST_ID_PREFIX} characters"
    )]
    TooShort(String),
    #[error("no protocol request id starts or ends with {0}")]
    NotFound(String),
    #[error("request id {prefix} is ambiguous: it matches {}", candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

impl ErrorCode for RequestIdError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotAnId(_) | Self::TooShort(_) | Self::Ambiguous { .. } => "invalid_arguments",
            Self::NotFound(_) => "protocol_not_found",
            Self::Protocol(e) => e.code(),
        }
    }
}

impl RequestIdInput {
    /// Checks the form only (nothing is read): a canonical id, or at least
    /// [`MIN_REQUEST_ID_PREFIX`] characters of one. Ids are lowercase (SPEC §2), so an
    /// upper-case prefix is no prefix.
    pub fn parse(given: &str) -> Result<Self, RequestIdError> {
        if let Ok(id) = RequestId::parse(given) {
            return Ok(Self::Full(id));
        }
        let id_like = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-';
        if given.is_empty() || given.len() >= 36 || !given.bytes().all(id_like) {
            return Err(RequestIdError::NotAnId(given.to_owned()));
        }
        if given.len() < MIN_REQUEST_ID_PREFIX {
            return Err(RequestIdError::TooShort(given.to_owned()));
        }
        Ok(Self::Prefix(given.to_owned()))
    }

    /// The one request this names, like git's abbreviated ids: a part that ends or starts
    /// several requests' ids (archived ones included) is refused with the candidates, each
    /// with its short id. A full id is returned as it is, found or not (the caller reports a
    /// missing request).
    pub async fn resolve(&self, store: &dyn ProtocolStore) -> Result<RequestId, RequestIdError> {
        let prefix = match self {
            Self::Full(id) => return Ok(*id),
            Self::Prefix(prefix) => prefix,
        };
        let mut candidates: Vec<RequestId> = store
            .list()
            .await?
            .iter()
            .map(ProtocolRequest::id)
            .filter(|id| {
                let id = id.to_string();
                id.ends_with(prefix.as_str()) || id.starts_with(prefix.as_str())
            })
            .collect();
        match candidates.len() {
            0 => Err(RequestIdError::NotFound(prefix.clone())),
            1 => Ok(candidates.remove(0)),
            _ => Err(RequestIdError::Ambiguous {
                prefix: prefix.clone(),
                candidates: candidates
                    .iter()
                    .map(|id| format!("{} ({id})", id.short()))
                    .collect(),
            }),
        }
    }
}
