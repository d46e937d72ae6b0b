//! What runs leave behind, pruned for `PgState` (`retention.rs`): finished jobs' records and
//! the recordings of ended runs, each decided by [`decide`] over the team's few rows.

use troupe_wire::UtcTime;

use super::retention::{bytes_of, time_of_ms, Live, PgState, BATCH};
use crate::store::retention::{decide, needed, Candidate, Kind, Report, Sweep};
use crate::store::BackendError;

impl PgState {
    pub(super) async fn jobs(
        &self,
        sweep: &Sweep,
        report: &mut Report,
    ) -> Result<(), BackendError> {
        let kind = Kind::Jobs;
        let rows = self
            .rows(
                "read the team's jobs",
                "SELECT id, record FROM troupe_jobs WHERE team = $1",
                &[&self.store.team()],
            )
            .await?;
        let mut candidates = Vec::with_capacity(rows.len());
        for row in &rows {
            let text: &str = row.get(1);
            let (at, needed) = match job_end(text) {
                Some(JobEnd::Running(started)) => (started, Some(needed::UNFINISHED_JOB)),
                Some(JobEnd::Finished(finished)) => (finished, None),
                None => (sweep.now, Some(UNREADABLE_JOB)),
            };
            candidates.push(Candidate {
                item: row.get::<_, uuid::Uuid>(0),
                at,
                bytes: text.len() as u64,
                needed,
            });
        }
        let doomed = decide(kind, sweep, candidates, report);
        for chunk in doomed.chunks(BATCH) {
            if !sweep.dry_run {
                // A finished job's record never changes again: nothing to race.
                let ids: Vec<uuid::Uuid> = chunk.iter().map(|(id, _)| *id).collect();
                self.rows(
                    "remove finished jobs",
                    "DELETE FROM troupe_jobs WHERE team = $1 AND id = ANY($2) RETURNING id",
                    &[&self.store.team(), &ids],
                )
                .await?;
            }
            chunk
                .iter()
                .for_each(|(_, bytes)| report.removed(kind, *bytes));
        }
        Ok(())
    }

    pub(super) async fn recordings(
        &self,
        sweep: &Sweep,
        report: &mut Report,
        live: &Live,
    ) -> Result<(), BackendError> {
        let kind = Kind::Recordings;
        let rows = self
            .rows(
                "read the team's recordings",
                "SELECT run_id, (extract(epoch FROM max(at)) * 1000)::bigint,
                        coalesce(sum(octet_length(line)), 0)::bigint,
                        bool_or(line LIKE '{\"type\":\"end\"%'),
                        (array_agg(host ORDER BY line_no))[1],
                        run_id = (SELECT run_id FROM troupe_recordings
                                   WHERE team = $1 AND line_no = 0
                                   ORDER BY at DESC, run_id DESC LIMIT 1)
                   FROM troupe_recordings WHERE team = $1 GROUP BY run_id",
                &[&self.store.team()],
            )
            .await?;
        let candidates = rows
            .iter()
            .map(|row| {
                // Live: not ended, the newest recording, and a lead of its host is alive.
                let ended: bool = row.get(3);
                let host: String = row.get(4);
                let newest: bool = row.get::<_, Option<bool>>(5).unwrap_or(false);
                let is_live = !ended && newest && live.lead_hosts.contains(&host);
                Candidate {
                    item: row.get::<_, String>(0),
                    at: time_of_ms(row.get(1), sweep.now),
                    bytes: bytes_of(row, 2),
                    needed: is_live.then_some(needed::LIVE_RUN),
                }
            })
            .collect();
        for (run, bytes) in decide(kind, sweep, candidates, report) {
            if !sweep.dry_run {
                self.delete_recording(&run).await?;
            }
            report.removed(kind, bytes);
        }
        Ok(())
    }

    /// Deletes a recording, [`BATCH`] lines a statement, its last lines first: a recording
    /// cut midway by a kill keeps its start line, so the next gc still finds it whole enough
    /// to remove.
    async fn delete_recording(&self, run: &str) -> Result<(), BackendError> {
        let limit = BATCH as i64;
        loop {
            let gone = self
                .rows(
                    "remove a recording",
                    "DELETE FROM troupe_recordings
                      WHERE team = $1 AND run_id = $2
                        AND line_no IN (SELECT line_no FROM troupe_recordings
                                         WHERE team = $1 AND run_id = $2
                                         ORDER BY line_no DESC LIMIT $3)
                     RETURNING line_no",
                    &[&self.store.team(), &run, &limit],
                )
                .await?;
            if gone.len() < BATCH {
                return Ok(());
            }
        }
    }
}

/// Why a job whose record does not read is kept: gc does not remove on a guess.
pub const UNREADABLE_JOB: &str = "its record does not read";

/// A job record's state as gc needs it (the store reads the record's JSON itself: checking it
/// whole is the jobs module's, a layer above).
enum JobEnd {
    Running(UtcTime),
    Finished(UtcTime),
}

/// `status` and the times of a job record (`jobs::record`'s format); `None` if they do not read.
fn job_end(text: &str) -> Option<JobEnd> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let time = |key: &str| UtcTime::parse(value.get(key)?.as_str()?).ok();
    match value.get("status")?.as_str()? {
        "running" => Some(JobEnd::Running(time("started_at_utc")?)),
        _ => Some(JobEnd::Finished(time("finished_at_utc")?)),
    }
}
