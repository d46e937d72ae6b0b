//! The kinds of a shared team whose tables can be huge — done and quarantined messages, events,
//! audit lines —
//! decided by SQL that gives what [`decide`](crate::store::retention::decide) would, without
//! reading every row into memory; and usage, compacted (`usage_compact.rs`).
//!
//! **Why the SQL is `decide`.** `decide` sorts a kind's items newest first, adds up their bytes
//! in that order (each item's own bytes included), and lets an item go when it is older than
//! the cutoff or when the sum so far passes the size. Neither kind here has items a rule must
//! keep (`needed`), except the events of live processes, handled below. So:
//! - *age*: the row's time `< cutoff`, as `decide`'s `at < cut`;
//! - *size*: the running sum in the same order (`sum(bytes) OVER (ORDER BY time DESC, key
//!   DESC)`) only grows, so the rows past the size are exactly those at or after the first row
//!   whose sum passes it (the **boundary**) in that order: `(time, key) <= boundary`. The
//!   boundary is found once; rows written meanwhile are newer, so they only make it keep more.
//!
//! Ties in time are ordered by key here and by arrival in `decide`: a size rule may pick
//! another one of two rows of the same millisecond. Messages are timed by their creation
//! (done) or quarantine (quarantined): the table keeps no time of the ack.
//!
//! **Events** are a stream: ids are handed out as events are written, so the table's order is
//! their time order and the rows that go are a prefix of it. They are walked in id order a page
//! ([`BATCH`]) at a time, each row's `at` read from its line; the walk stops at the first row
//! the rule keeps, and each page's rows that go are deleted in one statement by their ids
//! (not as a range: an id is handed out at insert, so a row inside the range may commit after
//! the page was read, unseen). A live process's rows are never removed and do not stop the
//! walk. Where processes'
//! clocks disagree an older event may follow a newer one: the walk stops at the newer, keeping
//! more than `decide` would, never less. The audit table is walked the same way (its rows are
//! the file's lines, each with its `"at"`); no process's audit lines are kept for it.
//!
//! Removing a done message's row also forgets its id: a message sent again with that id after
//! the row is gone is taken as new (the file store, once its `done/` file is removed, does the
//! same). Ids are UUIDs sent once; a repeat is a redelivery within seconds, not after the
//! retention age.

use super::retention::{bytes_of, Live, PgState, BATCH};
use super::usage_compact;
use crate::store::retention::{Kind, Report, Sweep, WITHIN_AGE, WITHIN_SIZE};
use crate::store::BackendError;

/// Why a per-day usage total is kept: it stands for the old rows.
pub use crate::store::retention::needed::USAGE_TOTALS;

/// A table pruned as a stream: rows with ids in time order and the time in each `line`'s
/// `"at"`, with the `host` and `pid` of the process that wrote them.
#[derive(Clone, Copy)]
struct Stream {
    kind: Kind,
    table: &'static str,
}

impl Stream {
    const EVENTS: Stream = Stream {
        kind: Kind::Events,
        table: "troupe_events",
    };
    const AUDIT: Stream = Stream {
        kind: Kind::Audit,
        table: "troupe_audit",
    };
}

/// Adds `items` of `bytes` to `tally`.
fn removed(report: &mut Report, kind: Kind, items: u64, bytes: u64) {
    report.removed_many(kind, items, bytes);
}

fn kept(report: &mut Report, kind: Kind, why: &str, items: u64, bytes: u64) {
    report.kept_many(kind, why, items, bytes);
}

/// The reason a row the rule keeps is kept, as `decide` gives it.
fn within(sweep: &Sweep, kind: Kind) -> &'static str {
    let rule = sweep.policy.rule(kind);
    if rule.size.is_some() && rule.age.is_none() {
        WITHIN_SIZE
    } else {
        WITHIN_AGE
    }
}

fn size_of(sweep: &Sweep, kind: Kind) -> Option<i64> {
    sweep
        .policy
        .rule(kind)
        .size
        .map(|s| i64::try_from(s).unwrap_or(i64::MAX))
}

impl PgState {
    /// Done (`Kind::Messages`) or quarantined (`Kind::Quarantine`) messages.
    pub(super) async fn kept_messages(
        &self,
        kind: Kind,
        sweep: &Sweep,
        report: &mut Report,
    ) -> Result<(), BackendError> {
        let (state, at) = match kind {
            Kind::Quarantine => ("quarantine", "coalesce(quarantined_ms, created_ms)"),
            _ => ("done", "created_ms"),
        };
        let team = self.store.team();
        let cut: Option<i64> = sweep.cutoff(kind).map(|t| t.unix_millis());
        let mut boundary: (Option<i64>, Option<String>, Option<uuid::Uuid>) = (None, None, None);
        if let Some(size) = size_of(sweep, kind) {
            let rows = self
                .rows(
                    "size the team's kept messages",
                    &format!(
                        "SELECT t, agent, id FROM (
                             SELECT {at} AS t, agent, id,
                                    sum(octet_length(body)) OVER (ORDER BY {at} DESC, agent DESC, id DESC) AS used
                               FROM troupe_messages_kept WHERE team = $1 AND state = $2) s
                          WHERE used > $3 ORDER BY t DESC, agent DESC, id DESC LIMIT 1"
                    ),
                    &[&team, &state, &size],
                )
                .await?;
            if let Some(row) = rows.first() {
                boundary = (Some(row.get(0)), Some(row.get(1)), Some(row.get(2)));
            }
        }
        let goes = format!(
            "(($3::bigint IS NOT NULL AND {at} < $3)
              OR ($4::bigint IS NOT NULL AND ({at}, agent, id) <= ($4::bigint, $5::text, $6::uuid)))"
        );
        let (b_at, b_agent, b_id) = &boundary;
        let counts = self
            .rows(
                "count the team's kept messages",
                &format!(
                    "SELECT count(*) FILTER (WHERE {goes}),
                            coalesce(sum(octet_length(body)) FILTER (WHERE {goes}), 0)::bigint,
                            count(*) FILTER (WHERE NOT {goes}),
                            coalesce(sum(octet_length(body)) FILTER (WHERE NOT {goes}), 0)::bigint
                       FROM troupe_messages_kept WHERE team = $1 AND state = $2"
                ),
                &[&team, &state, &cut, b_at, b_agent, b_id],
            )
            .await?;
        let Some(counts) = counts.first() else {
            return Ok(());
        };
        kept(
            report,
            kind,
            within(sweep, kind),
            bytes_of(counts, 2),
            bytes_of(counts, 3),
        );
        if sweep.dry_run {
            removed(report, kind, bytes_of(counts, 0), bytes_of(counts, 1));
            return Ok(());
        }
        let limit = BATCH as i64;
        loop {
            let gone = self
                .rows(
                    "remove kept messages",
                    &format!(
                        "DELETE FROM troupe_messages_kept k
                          USING (SELECT agent, id FROM troupe_messages_kept
                                  WHERE team = $1 AND state = $2 AND {goes} LIMIT $7) d
                          WHERE k.team = $1 AND k.agent = d.agent AND k.id = d.id AND k.state = $2
                         RETURNING octet_length(k.body)::bigint"
                    ),
                    &[&team, &state, &cut, b_at, b_agent, b_id, &limit],
                )
                .await?;
            let bytes = gone.iter().map(|r| bytes_of(r, 0)).sum::<u64>();
            removed(report, kind, gone.len() as u64, bytes);
            if gone.len() < BATCH {
                return Ok(());
            }
        }
    }

    /// Events past the rule, a page of the stream at a time (see the module doc).
    pub(super) async fn events(
        &self,
        sweep: &Sweep,
        report: &mut Report,
        live: &Live,
    ) -> Result<(), BackendError> {
        self.stream(Stream::EVENTS, sweep, report, live).await
    }

    /// Audit lines past the rule: a stream like the events (ids handed out as lines are
    /// written, each line's time in its `"at"`), of which no process's lines are kept.
    pub(super) async fn audit(
        &self,
        sweep: &Sweep,
        report: &mut Report,
    ) -> Result<(), BackendError> {
        self.stream(Stream::AUDIT, sweep, report, &Live::default())
            .await
    }

    /// The rows of `stream` past the rule, a page at a time, but those of `live` processes.
    async fn stream(
        &self,
        stream: Stream,
        sweep: &Sweep,
        report: &mut Report,
        live: &Live,
    ) -> Result<(), BackendError> {
        let Stream { kind, table } = stream;
        let team = self.store.team();
        let (hosts, pids) = (live.hosts(), live.pids());
        const LIVE: &str = "(host, pid) IN (SELECT * FROM unnest($2::text[], $3::int[]))";
        let totals = self
            .rows(
                "count the team's stream rows",
                &format!(
                    "SELECT count(*) FILTER (WHERE {LIVE}),
                            coalesce(sum(octet_length(line)) FILTER (WHERE {LIVE}), 0)::bigint,
                            count(*) FILTER (WHERE NOT {LIVE}),
                            coalesce(sum(octet_length(line)) FILTER (WHERE NOT {LIVE}), 0)::bigint
                       FROM {table} WHERE team = $1"
                ),
                &[&team, &hosts, &pids],
            )
            .await?;
        let Some(totals) = totals.first() else {
            return Ok(());
        };
        kept(
            report,
            kind,
            crate::store::retention::needed::LIVE_RUN,
            bytes_of(totals, 0),
            bytes_of(totals, 1),
        );
        let (others, others_bytes) = (bytes_of(totals, 2), bytes_of(totals, 3));
        let cut = sweep.cutoff(kind);
        let mut boundary: Option<i64> = None;
        if let Some(size) = size_of(sweep, kind) {
            let rows = self
                .rows(
                    "size the team's stream",
                    &format!(
                        "SELECT id FROM (
                             SELECT id, sum(octet_length(line)) OVER (ORDER BY id DESC) AS used
                               FROM {table} WHERE team = $1) s
                          WHERE used > $2 ORDER BY id DESC LIMIT 1"
                    ),
                    &[&team, &size],
                )
                .await?;
            boundary = rows.first().map(|r| r.get(0));
        }
        let (mut gone, mut gone_bytes) = (0u64, 0u64);
        let mut after: i64 = 0;
        let limit = BATCH as i64;
        loop {
            let page = self
                .rows(
                    "read the team's stream",
                    &format!(
                        "SELECT id, substring(left(line, 512) FROM '\"at\":\"([^\"]+)\"'),
                                octet_length(line)::bigint, host, pid
                           FROM {table} WHERE team = $1 AND id > $2 ORDER BY id LIMIT $3"
                    ),
                    &[&team, &after, &limit],
                )
                .await?;
            let (mut last, mut stop) = (None, false);
            let (mut ids, mut bytes) = (Vec::new(), 0u64);
            for row in &page {
                let id: i64 = row.get(0);
                if live.processes.contains(&(row.get(3), row.get(4))) {
                    last = Some(id);
                    continue;
                }
                let at = row
                    .get::<_, Option<&str>>(1)
                    .and_then(|at| troupe_wire::UtcTime::parse(at).ok());
                let old = matches!((cut, at), (Some(cut), Some(at)) if at < cut);
                let big = boundary.is_some_and(|b| id <= b);
                if !(old || big) {
                    stop = true;
                    break;
                }
                last = Some(id);
                ids.push(id);
                bytes += bytes_of(row, 2);
            }
            let mut n = ids.len() as u64;
            if !ids.is_empty() && !sweep.dry_run {
                // The rows read, by id: a row of the range that committed after the page was
                // read (its id was handed out before) was not looked at, and stays.
                let deleted = self
                    .rows(
                        "remove old stream rows",
                        &format!(
                            "DELETE FROM {table} WHERE team = $1 AND id = ANY($2)
                             RETURNING octet_length(line)::bigint"
                        ),
                        &[&team, &ids],
                    )
                    .await?;
                n = deleted.len() as u64;
                bytes = deleted.iter().map(|r| bytes_of(r, 0)).sum();
            }
            gone += n;
            gone_bytes = gone_bytes.saturating_add(bytes);
            if let Some(last) = last {
                after = last;
            }
            if stop || page.len() < BATCH {
                break;
            }
        }
        removed(report, kind, gone, gone_bytes);
        kept(
            report,
            kind,
            within(sweep, kind),
            others.saturating_sub(gone),
            others_bytes.saturating_sub(gone_bytes),
        );
        Ok(())
    }

    /// Usage rows older than the rule's age, compacted into per-day totals (never removed: the
    /// team's totals stay what they were). A size rule does not apply to usage.
    pub(super) async fn usage(
        &self,
        sweep: &Sweep,
        report: &mut Report,
    ) -> Result<(), BackendError> {
        let kind = Kind::Usage;
        let Some(cut) = sweep.cutoff(kind) else {
            return Ok(());
        };
        let done = usage_compact::compact(&self.store, cut, sweep.dry_run).await?;
        removed(report, kind, done.rows_removed, done.bytes_removed);
        kept(report, kind, WITHIN_AGE, done.recent.0, done.recent.1);
        kept(report, kind, USAGE_TOTALS, done.totals.0, done.totals.1);
        Ok(())
    }
}
