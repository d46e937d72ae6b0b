//! A background job's identity, status and record file `.troupe/jobs/<job-id>.json`.
//!
//! The record is written durably when the job starts (`running`) and replaced once when it ends
//! (`completed`, `failed`, `cancelled` or `timed_out`). Its keys, in this order:
//!
//! ```json
//! {"id":"<uuid>","agent":"lead","command":"cargo test","status":"running|completed|failed|cancelled|timed_out",
//!  "exit_code":null|0,"started_at_utc":"…Z","finished_at_utc":null|"…Z","output_tail":null|"…"}
//! ```
//!
//! A running record has `exit_code`, `finished_at_utc` and `output_tail` null; a finished one
//! has `finished_at_utc ≥ started_at_utc` and an `output_tail`. A file that breaks this, has
//! unknown keys, or whose name is not `<id>.json`, is refused when read.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use troupe_wire::id::parse_canonical_uuid;
use troupe_wire::{strict, AgentName, UtcTime, WireError};
use uuid::Uuid;

use super::JobError;
use crate::ids::IdGenerator;
use crate::layout::Layout;
use crate::store::durable;
use crate::store::read::{read_regular, Links, MAX_STATE_FILE_BYTES};
use crate::store::team_copy::{CopyTo, JobLine, TeamJobs};

/// A canonical job id (UUID v4 or v7, like every id of SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(Uuid);

impl JobId {
    pub fn parse(raw: &str) -> Result<Self, WireError> {
        parse_canonical_uuid(raw, "job id").map(Self)
    }

    /// Wraps a UUID, refusing versions other than 4 and 7.
    pub fn from_uuid(uuid: Uuid) -> Result<Self, WireError> {
        Self::parse(&uuid.hyphenated().to_string())
    }

    /// The next id of `ids` (whose UUIDs are v4 or v7; a random v4 should one not be).
    pub fn from_generator(ids: &dyn IdGenerator) -> Self {
        Self::from_uuid(ids.next_uuid()).unwrap_or_else(|_| Self(Uuid::new_v4()))
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobEnd {
    /// Exited with code 0.
    Completed,
    /// Exited with another code, was killed by a signal troupe did not send, or could not be
    /// waited for.
    Failed,
    /// Stopped by `close` (the runtime shut down).
    Cancelled,
    /// Stopped because it ran past its time limit.
    TimedOut,
}

/// A record's status: running, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
        }
    }
}

impl From<JobEnd> for JobStatus {
    fn from(end: JobEnd) -> Self {
        match end {
            JobEnd::Completed => Self::Completed,
            JobEnd::Failed => Self::Failed,
            JobEnd::Cancelled => Self::Cancelled,
            JobEnd::TimedOut => Self::TimedOut,
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a job is still running, and if not, how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Running,
    Finished {
        end: JobEnd,
        /// `None` when the shell did not exit by itself (a signal, a timeout, a cancel).
        exit_code: Option<i32>,
        finished_at_utc: UtcTime,
        /// The end of the combined output, capped (see `CappedOutput::tail_only`).
        output_tail: String,
    },
}

/// One job's record file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub id: JobId,
    /// The agent whose `shell` call started the job.
    pub agent: AgentName,
    pub command: String,
    pub started_at_utc: UtcTime,
    pub state: JobState,
}

impl JobRecord {
    pub fn status(&self) -> JobStatus {
        match &self.state {
            JobState::Running => JobStatus::Running,
            JobState::Finished { end, .. } => (*end).into(),
        }
    }

    pub fn to_json_bytes(&self) -> Vec<u8> {
        // Serializing plain strings, numbers and nulls cannot fail.
        let mut bytes = serde_json::to_vec_pretty(&self.raw()).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Parses and checks a record (see the module doc for the invariants).
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, String> {
        let raw: RawRecord = strict::from_json_bytes(bytes, "").map_err(|e| e.to_string())?;
        raw.try_into()
    }

    fn raw(&self) -> RawRecord {
        let (exit_code, finished_at_utc, output_tail) = match &self.state {
            JobState::Running => (None, None, None),
            JobState::Finished {
                exit_code,
                finished_at_utc,
                output_tail,
                ..
            } => (
                *exit_code,
                Some(*finished_at_utc),
                Some(output_tail.clone()),
            ),
        };
        RawRecord {
            id: self.id,
            agent: self.agent.clone(),
            command: self.command.clone(),
            status: self.status(),
            exit_code,
            started_at_utc: self.started_at_utc,
            finished_at_utc,
            output_tail,
        }
    }
}

impl Serialize for JobRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw().serialize(s)
    }
}

/// The file's flat shape; [`JobRecord`] is what it means.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord {
    id: JobId,
    agent: AgentName,
    command: String,
    status: JobStatus,
    exit_code: Option<i32>,
    started_at_utc: UtcTime,
    finished_at_utc: Option<UtcTime>,
    output_tail: Option<String>,
}

impl TryFrom<RawRecord> for JobRecord {
    type Error = String;

    fn try_from(raw: RawRecord) -> Result<Self, String> {
        let end = match raw.status {
            JobStatus::Running => None,
            JobStatus::Completed => Some(JobEnd::Completed),
            JobStatus::Failed => Some(JobEnd::Failed),
            JobStatus::Cancelled => Some(JobEnd::Cancelled),
            JobStatus::TimedOut => Some(JobEnd::TimedOut),
        };
        let state = match (end, raw.exit_code, raw.finished_at_utc, raw.output_tail) {
            (None, None, None, None) => JobState::Running,
            (None, ..) => {
                return Err(
                    "a running job has no exit_code, finished_at_utc or output_tail".to_owned(),
                )
            }
            (Some(end), exit_code, Some(finished_at_utc), Some(output_tail)) => {
                if finished_at_utc < raw.started_at_utc {
                    return Err(format!(
                        "finished_at_utc {finished_at_utc} is before started_at_utc {}",
                        raw.started_at_utc
                    ));
                }
                JobState::Finished {
                    end,
                    exit_code,
                    finished_at_utc,
                    output_tail,
                }
            }
            (Some(_), ..) => {
                return Err(format!(
                    "a {} job needs finished_at_utc and output_tail",
                    raw.status
                ))
            }
        };
        Ok(Self {
            id: raw.id,
            agent: raw.agent,
            command: raw.command,
            started_at_utc: raw.started_at_utc,
            state,
        })
    }
}

/// `.troupe/jobs/<id>.json`
pub fn record_path(layout: &Layout, id: JobId) -> PathBuf {
    layout.jobs_dir().join(format!("{id}.json"))
}

/// Writes (or replaces) a record durably, creating `.troupe/jobs/` if needed.
pub fn write(layout: &Layout, record: &JobRecord) -> Result<(), JobError> {
    durable::ensure_real_dir(&layout.jobs_dir())?;
    durable::replace(&record_path(layout, record.id), &record.to_json_bytes())?;
    Ok(())
}

/// [`write`], then a copy to a shared team's table (reported once if it fails: the file has
/// the record).
pub async fn write_and_copy(
    layout: &Layout,
    copy: &CopyTo<JobLine>,
    record: &JobRecord,
) -> Result<(), JobError> {
    // A durable replace: off the async threads.
    crate::sync::blocking(|| write(layout, record))?;
    if copy.is_on() {
        let line = JobLine {
            id: record.id.0,
            record: String::from_utf8_lossy(&record.to_json_bytes()).into_owned(),
        };
        copy.copy(&line, &record_path(layout, record.id).display())
            .await;
    }
    Ok(())
}

/// Every record of a shared team (every host's), by start time then id; a row that is not a
/// record is [`JobError::Corrupt`] naming it.
pub async fn read_all_shared(jobs: &dyn TeamJobs) -> Result<Vec<JobRecord>, JobError> {
    let mut records = Vec::new();
    for (id, host, text) in jobs.all().await.map_err(JobError::Backend)? {
        let corrupt = |why: String| JobError::Corrupt {
            path: format!("troupe_jobs row {id} (host {host})"),
            why,
        };
        let record = JobRecord::from_json_bytes(text.as_bytes()).map_err(corrupt)?;
        if record.id.to_string() != id.hyphenated().to_string() {
            return Err(corrupt(format!("it holds job {}", record.id)));
        }
        records.push(record);
    }
    records.sort_by_key(|r| (r.started_at_utc, r.id));
    Ok(records)
}

/// Every background job's record of a team, as the commands that look at it read them: a
/// workspace's `.troupe/jobs/` ([`FileJobList`]) or every host's records copied to a
/// shared team ([`TeamJobList`]), by start time then id. Reading creates nothing.
#[async_trait::async_trait]
pub trait JobList: Send + Sync {
    async fn all(&self) -> Result<Vec<JobRecord>, JobError>;
}

/// The records of a workspace's `.troupe/jobs/`.
#[derive(Debug, Clone)]
pub struct FileJobList(pub Layout);

#[async_trait::async_trait]
impl JobList for FileJobList {
    async fn all(&self) -> Result<Vec<JobRecord>, JobError> {
        crate::sync::blocking(|| read_all(&self.0))
    }
}

/// The records every host of a shared team copied to it (see [`read_all_shared`]).
pub struct TeamJobList(pub std::sync::Arc<dyn TeamJobs>);

#[async_trait::async_trait]
impl JobList for TeamJobList {
    async fn all(&self) -> Result<Vec<JobRecord>, JobError> {
        read_all_shared(self.0.as_ref()).await
    }
}

/// Every record of the workspace, by start time then id. No `.troupe/jobs/` is no jobs (the
/// folder is not created). Temporary files of interrupted writes are skipped.
pub fn read_all(layout: &Layout) -> Result<Vec<JobRecord>, JobError> {
    let dir = layout.jobs_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(crate::store::IoError::new("list", &dir, e).into()),
    };
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| crate::store::IoError::new("list", &dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(durable::TEMP_PREFIX) || !name.ends_with(".json") {
            continue;
        }
        records.push(read_one(&entry.path(), &name)?);
    }
    records.sort_by_key(|r| (r.started_at_utc, r.id));
    Ok(records)
}

fn read_one(path: &Path, name: &str) -> Result<JobRecord, JobError> {
    let corrupt = |why: String| JobError::Corrupt {
        path: path.display().to_string(),
        why,
    };
    let bytes = read_regular(path, Links::Refuse, MAX_STATE_FILE_BYTES)?
        .ok_or_else(|| corrupt("the record vanished while the jobs were read".to_owned()))?;
    let record = JobRecord::from_json_bytes(&bytes).map_err(corrupt)?;
    if name != format!("{}.json", record.id) {
        return Err(corrupt(format!(
            "the file name does not match its id {}",
            record.id
        )));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> JobRecord {
        JobRecord {
            id: JobId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
            agent: AgentName::lead(),
            command: "make".to_owned(),
            started_at_utc: UtcTime::parse("2026-07-30T08:00:00.000Z").unwrap(),
            state: JobState::Running,
        }
    }

    #[test]
    fn records_round_trip() {
        let mut record = running();
        assert_eq!(
            JobRecord::from_json_bytes(&record.to_json_bytes()).unwrap(),
            record
        );
        record.state = JobState::Finished {
            end: JobEnd::Failed,
            exit_code: Some(2),
            finished_at_utc: UtcTime::parse("2026-07-30T08:00:01.000Z").unwrap(),
            output_tail: "oops\n".to_owned(),
        };
        let json: serde_json::Value = serde_json::from_slice(&record.to_json_bytes()).unwrap();
        assert_eq!(json["status"], "failed");
        assert_eq!(json["exit_code"], 2);
        assert_eq!(
            JobRecord::from_json_bytes(&record.to_json_bytes()).unwrap(),
            record
        );
    }

    #[test]
    fn inconsistent_records_are_refused() {
        let base = serde_json::to_value(running()).unwrap();
        let broken = |key: &str, value: serde_json::Value| {
            let mut v = base.clone();
            v[key] = value;
            JobRecord::from_json_bytes(&serde_json::to_vec(&v).unwrap())
        };
        assert!(broken("exit_code", 0.into()).is_err());
        assert!(broken("status", "completed".into()).is_err());
        assert!(broken("surprise", 1.into()).is_err());
        assert!(broken("id", "job-1".into()).is_err());
        let mut early = base.clone();
        early["status"] = "completed".into();
        early["finished_at_utc"] = "2026-07-30T07:59:59.999Z".into();
        early["output_tail"] = "".into();
        assert!(JobRecord::from_json_bytes(&serde_json::to_vec(&early).unwrap()).is_err());
        early["finished_at_utc"] = "2026-07-30T08:00:00.000Z".into();
        assert!(JobRecord::from_json_bytes(&serde_json::to_vec(&early).unwrap()).is_ok());
    }
}
