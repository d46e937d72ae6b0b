//! Scheduled prompts for the lead: the `schedule_cron` tool (SPEC §4.1, tool 14) and the
//! runtime that fires its jobs.
//!
//! A job is a five-field cron expression in an IANA time zone plus a prompt. When it is due, the
//! runtime delivers a [`CronWakeup`] into a channel; the driver turns each one into a lead
//! event. A **recurring** job stays and is planned again; a **one-shot** job fires once, at its
//! next match, and is removed. A **durable** job is kept in `.troupe/cron.json` and reloaded by
//! the next run; a non-durable one lives only as long as the runtime.
//!
//! # Layout
//!
//! - [`schedule`]: parsing expressions and zones, next fire times (pure; DST rules are there).
//! - [`store`]: `.troupe/cron.json`, the durable jobs (versioned JSON, atomic writes, a lock).
//! - [`runtime`]: [`CronRuntime`] — holds the jobs, sleeps until the next one is due, fires.
//! - [`tool`]: the `schedule_cron` tool handler.
//!
//! # Missed fires
//!
//! A job whose fire time passed while nothing was running it (troupe was not running, or the
//! process was suspended) fires **once** as soon as the runtime sees it — at start for a durable
//! job — with `scheduled_for_utc` the missed time; a recurring job is then planned from *now*,
//! so the missed slots are collapsed into that one fire rather than replayed one by one. A lead
//! that comes back after a week does not want seven copies of a daily prompt.
//!
//! **Architecture Invariant:** the runtime never polls. Its timer task sleeps until the
//! earliest fire time and is woken early only when a job is added or removed or the runtime
//! closes.

pub mod runtime;
pub mod schedule;
pub mod store;
pub mod tool;

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use troupe_wire::{Content, UtcTime};
use uuid::Uuid;

use crate::error::ErrorCode;

pub use runtime::{CronRuntime, ScheduleRequest, ScheduledJob};
pub use schedule::{CronSchedule, ScheduleError};
pub use store::{CronStore, CronStoreError};
pub use tool::ScheduleCronTool;

/// A job's id: a canonical lowercase hyphenated UUID (v4 or v7), like every id (SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CronJobId(Uuid);

impl CronJobId {
    pub fn parse(raw: &str) -> Result<Self, troupe_wire::WireError> {
        troupe_wire::id::parse_canonical_uuid(raw, "cron job id").map(Self)
    }

    /// Wraps a UUID, refusing versions other than 4 and 7.
    pub fn from_uuid(uuid: Uuid) -> Result<Self, troupe_wire::WireError> {
        Self::parse(&uuid.hyphenated().to_string())
    }

    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl fmt::Display for CronJobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl Serialize for CronJobId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0.hyphenated())
    }
}

impl<'de> Deserialize<'de> for CronJobId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// One scheduled job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronJob {
    pub id: CronJobId,
    pub schedule: CronSchedule,
    /// What the lead is told when the job fires.
    pub prompt: Content,
    /// Planned again after each fire; otherwise removed after its one fire.
    pub recurring: bool,
    /// Kept in `.troupe/cron.json` across runs; otherwise it lives only in this runtime.
    pub durable: bool,
    pub created_at_utc: UtcTime,
    /// When it fires next. May lie in the past for a durable job reloaded after downtime: it
    /// then fires once at start (see "Missed fires" above).
    pub next_fire_utc: UtcTime,
}

impl CronJob {
    pub fn view(&self) -> CronJobView {
        CronJobView {
            id: self.id,
            cron: self.schedule.expression().to_owned(),
            timezone: self.schedule.timezone().to_owned(),
            prompt: self.prompt.to_string(),
            recurring: self.recurring,
            durable: self.durable,
            next_fire_utc: self.next_fire_utc,
            next_fire_local: self.schedule.local_time(self.next_fire_utc),
        }
    }
}

/// A job as listed by `troupe cron --json` and the runtime: the documented JSON shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CronJobView {
    pub id: CronJobId,
    pub cron: String,
    pub timezone: String,
    pub prompt: String,
    pub recurring: bool,
    pub durable: bool,
    pub next_fire_utc: UtcTime,
    /// The same instant on the job's wall clock, with its offset.
    pub next_fire_local: String,
}

/// A due job, delivered to whoever turns it into a lead event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronWakeup {
    pub job_id: CronJobId,
    pub prompt: Content,
    /// The fire time the job was due at (earlier than `fired_at_utc` after a missed fire).
    pub scheduled_for_utc: UtcTime,
    pub fired_at_utc: UtcTime,
}

/// Why a cron operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("the prompt of a cron job must not be blank")]
    BlankPrompt,
    #[error(transparent)]
    Store(#[from] CronStoreError),
    #[error("the cron runtime is closed")]
    Closed,
    #[error("the cron timer needs a tokio runtime to run on")]
    NoRuntime,
}

impl ErrorCode for CronError {
    fn code(&self) -> &'static str {
        match self {
            Self::Schedule(e) => e.code(),
            Self::BlankPrompt => "invalid_arguments",
            Self::Store(e) => e.code(),
            Self::Closed => "cron_closed",
            Self::NoRuntime => "cron_no_runtime",
        }
    }
}
