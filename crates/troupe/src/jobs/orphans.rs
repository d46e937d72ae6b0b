//! Jobs that outlive the run that started them.
//!
//! A job runs in its own process group, so if troupe dies (SIGKILL, a crash, a power cut of the
//! terminal) the group can go on running. While a job runs, `.troupe/jobs/<id>.process` names its
//! group: the group id, the leader's start time (field 22 of `/proc/<pid>/stat`) and the boot id.
//! At the next start (under the run lock, so no live run owns the job), a record still `running`
//! is settled: if its group is provably the same one — same boot, and either the leader is alive
//! with the same start time, or the leader is gone but the group still exists (Linux does not
//! reuse a pid while a group of that id exists) — the group gets SIGTERM, then SIGKILL after a
//! grace; then the record says `cancelled`. A pid that was reused by an unrelated process fails
//! the start-time check and is left alone. The note is written just after the spawn (the pid is
//! not known before): a run killed in those few milliseconds leaves a job troupe cannot name,
//! and its record says so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use troupe_wire::{strict, UtcTime};

use super::record::{self, JobEnd, JobId, JobRecord, JobState};
use super::JobError;
use crate::layout::Layout;
use crate::process::signal_group;
use crate::store::durable;
use crate::store::read::{read_regular, Links, MAX_STATE_FILE_BYTES};

/// How long an orphaned group gets between SIGTERM and SIGKILL.
const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// Which process group a running job is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessRef {
    pub pgid: i32,
    pub start_ticks: u64,
    pub boot_id: String,
}

impl ProcessRef {
    /// The identity of the live process `pid` (as a group leader), if `/proc` can tell.
    pub fn of(pid: i32) -> Option<Self> {
        Some(Self {
            pgid: pid,
            start_ticks: start_ticks(pid)?,
            boot_id: boot_id()?,
        })
    }

    /// Whether the group this names is still there and is the same one.
    pub fn is_alive_and_ours(&self) -> bool {
        if boot_id().as_deref() != Some(self.boot_id.as_str()) {
            return false;
        }
        match start_ticks(self.pgid) {
            Some(ticks) => ticks == self.start_ticks,
            None => group_exists(self.pgid),
        }
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`; the command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

fn group_exists(pgid: i32) -> bool {
    // SAFETY: signal 0 to a process group only checks that it exists; nothing is sent.
    let rc = unsafe { libc::kill(-pgid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// `.troupe/jobs/<id>.process`
pub fn process_path(layout: &Layout, id: JobId) -> PathBuf {
    layout.jobs_dir().join(format!("{id}.process"))
}

/// Records which group a job that just started is.
pub fn remember(layout: &Layout, id: JobId, pgid: i32) -> Result<(), JobError> {
    let Some(process) = ProcessRef::of(pgid) else {
        return Ok(());
    };
    let bytes = serde_json::to_vec(&process).unwrap_or_default();
    durable::replace(&process_path(layout, id), &bytes)?;
    Ok(())
}

/// Drops the note once the job's final record is written.
pub fn forget(layout: &Layout, id: JobId) {
    let _ = std::fs::remove_file(process_path(layout, id));
}

/// Reads a job's process note: `Ok(None)` when there is none, an error (saying why) when it is
/// not a regular file — never blocking on a FIFO — or does not parse strictly.
fn read_note(path: &Path) -> Result<Option<ProcessRef>, String> {
    let Some(bytes) =
        read_regular(path, Links::Refuse, MAX_STATE_FILE_BYTES).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    strict::from_json_bytes(&bytes, "")
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Stops what is left of an orphaned job's group, if it is provably the job's. Returns what was
/// done, for the record.
pub fn stop_orphan(layout: &Layout, id: JobId) -> String {
    let path = process_path(layout, id);
    let note = match read_note(&path) {
        Err(why) => {
            tracing::warn!(job = %id, "unreadable process note: {why}");
            format!("troupe could not read its process note ({why}) and left its processes alone")
        }
        Ok(Some(p)) if p.is_alive_and_ours() => {
            signal_group(p.pgid, libc::SIGTERM);
            let deadline = Instant::now() + ORPHAN_GRACE;
            while group_exists(p.pgid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if group_exists(p.pgid) {
                signal_group(p.pgid, libc::SIGKILL);
            }
            format!(
                "its process group {} was still running and was terminated",
                p.pgid
            )
        }
        Ok(Some(_)) => "its processes were no longer running".to_owned(),
        Ok(None) => "troupe did not know its processes and left them alone".to_owned(),
    };
    forget(layout, id);
    note
}

/// Marks every record still `running` as `cancelled`: called at start, under the run lock, so any
/// such record was left by a run that is gone. What is left of its process group is stopped when
/// it is provably the job's (see [`stop_orphan`]). The settled records are copied to `copy`
/// (a shared team's job table) too. Returns the ids.
pub async fn settle_orphans(
    layout: &Layout,
    copy: &crate::store::team_copy::CopyTo<crate::store::team_copy::JobLine>,
    now: UtcTime,
) -> Result<Vec<JobId>, JobError> {
    let mut settled = Vec::new();
    // Reading the records and stopping what is left of their processes: off the async threads.
    for record in crate::sync::blocking(|| record::read_all(layout))? {
        if record.state != JobState::Running {
            continue;
        }
        let id = record.id;
        let what = crate::sync::blocking(|| stop_orphan(layout, id));
        let finished = JobRecord {
            state: JobState::Finished {
                end: JobEnd::Cancelled,
                exit_code: None,
                finished_at_utc: now.max(record.started_at_utc),
                output_tail: format!(
                    "(the troupe run that started this job ended while it ran; {what}; its \
                     output was not kept)"
                ),
            },
            ..record
        };
        record::write_and_copy(layout, copy, &finished).await?;
        settled.push(id);
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_identified_and_a_changed_start_time_is_not_ours() {
        let me = std::process::id() as i32;
        let Some(p) = ProcessRef::of(me) else { return }; // no /proc: nothing to check
        assert_eq!(p.pgid, me);
        let other = ProcessRef {
            start_ticks: p.start_ticks + 1,
            ..p.clone()
        };
        assert!(
            !other.is_alive_and_ours(),
            "a reused pid must not look like the job"
        );
        let rebooted = ProcessRef {
            boot_id: "another-boot".into(),
            ..p
        };
        assert!(!rebooted.is_alive_and_ours());
    }

    #[test]
    fn a_note_with_a_duplicate_key_or_that_is_a_fifo_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.process");
        std::fs::write(&path, br#"{"pgid":1,"start_ticks":2,"boot_id":"b"}"#).unwrap();
        assert_eq!(
            read_note(&path).unwrap(),
            Some(ProcessRef {
                pgid: 1,
                start_ticks: 2,
                boot_id: "b".into()
            })
        );
        std::fs::write(
            &path,
            br#"{"pgid":1,"start_ticks":2,"boot_id":"b","pgid":1}"#,
        )
        .unwrap();
        let why = read_note(&path).unwrap_err();
        assert!(why.contains("duplicate key \"pgid\""), "{why}");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read_note(&path).unwrap(), None);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let why = read_note(&path).unwrap_err();
        assert!(why.contains("not a regular file (a FIFO)"), "{why}");
    }
}
