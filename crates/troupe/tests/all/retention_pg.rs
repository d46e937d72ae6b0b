//! `troupe gc` on a shared team (`PgState`, issue 45): a team's tables filled through the real
//! adapters with an injected clock, then pruned — what the rules allow goes, what a pending
//! request, a live run or a current conversation needs stays with its reason, a dry run changes
//! nothing, usage totals stay the same, and a gc beside writers loses nothing they wrote after
//! the cutoff. Real PostgreSQL; skipped with a notice where none can be reached.

use std::time::Duration;

use pretty_assertions::assert_eq;
use troupe::clock::Clock;
use troupe::jobs::record::{JobEnd, JobId, JobRecord, JobState};
use troupe::store::artifacts::{ArtifactCopy, ArtifactKey};
use troupe::store::events::EventListener;
use troupe::store::postgres::retention::{PgState, LATEST_PLAN};
use troupe::store::postgres::testing::TestDb;
use troupe::store::postgres::PgTranscriptLog;
use troupe::store::recordings::RecordingLine;
use troupe::store::retention::{needed, Kind, Policy, Prune, Report, Rule, Sweep, WITHIN_AGE};
use troupe::store::team_copy::TeamCopy;
use troupe::store::usage::UsageRecord;
use troupe::wire::{AgentName, MessageId, UtcTime};

use crate::conformance::{Backend, Stores};
use crate::mailbox::{agent, block_on, message};
use crate::protocol::support::{answer, mid, plan_of, shutdown_of};

const DAY_MS: i64 = 24 * 3600 * 1000;
const TEAM: &str = "team-a";
const TABLES: [&str; 8] = [
    "troupe_messages_kept",
    "troupe_requests",
    "troupe_transcripts",
    "troupe_artifacts",
    "troupe_events",
    "troupe_jobs",
    "troupe_recordings",
    "troupe_usage",
];

fn days(n: u64) -> Rule {
    Rule {
        age: Some(Duration::from_secs(n * 24 * 3600)),
        size: None,
    }
}

/// The default policy, with conversations and usage kept 30 days (not 90), so that the test's
/// 40 days make them old.
fn policy() -> Policy {
    let mut policy = Policy::default();
    policy.set(Kind::Transcripts, days(30));
    policy.set(Kind::Usage, days(30));
    policy
}

fn rows(db: &TestDb, table: &str) -> u64 {
    db.query_text(&format!(
        "SELECT count(*) FROM {table} WHERE team = '{TEAM}'"
    ))
    .unwrap()
    .unwrap()
    .parse()
    .unwrap()
}

fn all_rows(db: &TestDb) -> Vec<(&'static str, u64)> {
    TABLES.iter().map(|t| (*t, rows(db, t))).collect()
}

fn mid_of(n: u64) -> MessageId {
    MessageId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap()
}

fn usage(at: UtcTime, run: &str, prompt: u64) -> UsageRecord {
    UsageRecord {
        at: at.to_string(),
        run_id: run.into(),
        agent: "lead".into(),
        model: "m-1".into(),
        purpose: "turn".into(),
        prompt_tokens: prompt,
        completion_tokens: 1,
        total_tokens: prompt + 1,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    }
}

fn job(n: u64, started: UtcTime, finished: Option<UtcTime>) -> (uuid::Uuid, String) {
    let id = format!("00000000-0000-4000-a000-{n:012x}");
    let record = JobRecord {
        id: JobId::parse(&id).unwrap(),
        agent: agent("lead"),
        command: "sleep 1".into(),
        started_at_utc: started,
        state: match finished {
            None => JobState::Running,
            Some(at) => JobState::Finished {
                end: JobEnd::Completed,
                exit_code: Some(0),
                finished_at_utc: at,
                output_tail: "done".into(),
            },
        },
    };
    let text = String::from_utf8(record.to_json_bytes()).unwrap();
    (uuid::Uuid::parse_str(&id).unwrap(), text)
}

fn event(seq: u64, at: UtcTime, run: &str) -> troupe::wire::Event {
    troupe::wire::Event {
        seq,
        at,
        run_id: run.into(),
        agent: "lead".into(),
        kind: "assistant_text".into(),
        fields: serde_json::Map::from_iter([("text".to_owned(), serde_json::json!("hello"))]),
    }
}

/// What the team's tables hold once filled (see [`fill`]).
struct Filled {
    named_artifact: String,
    unnamed_artifact: String,
}

/// Fills the team's tables at the clock's time (old), then 40 days later (recent).
async fn fill(s: &Stores) -> Filled {
    let pg = s.pg.clone().unwrap();
    let old = s.clock.now();
    let alice = agent("alice");
    let mailbox = s.mailbox();
    for n in 1..=3 {
        mailbox
            .send(&message(mid_of(n), "alice", old, "work"))
            .await
            .unwrap();
    }
    for n in 1..=3 {
        let m = mailbox.claim(&alice).await.unwrap().unwrap();
        if n < 3 {
            mailbox.ack(&alice, &m).await.unwrap();
        } else {
            mailbox
                .quarantine(&alice, m.id(), "unreadable")
                .await
                .unwrap();
        }
    }

    let protocol = s.protocol();
    let shutdown = protocol.create(shutdown_of("alice")).await.unwrap();
    protocol
        .consume_response(&answer(&shutdown, mid(1), true))
        .await
        .unwrap();
    let plan = protocol.create(plan_of("alice")).await.unwrap();
    protocol
        .consume_response(&answer(&plan, mid(2), true))
        .await
        .unwrap();
    protocol.create(plan_of("bob")).await.unwrap();

    let artifacts = troupe::store::postgres::artifacts::PgArtifacts::new(pg.clone());
    let named = "11111111-1111-4111-8111-111111111111.txt";
    let unnamed = "22222222-2222-4222-8222-222222222222.txt";
    for name in [named, unnamed] {
        let key = ArtifactKey::parse("lead", name).unwrap();
        artifacts
            .copy(&key, b"head of a large result", 40_000)
            .await;
    }
    let transcript = PgTranscriptLog::new(pg.clone(), "lead");
    transcript
        .append(br#"{"old":"conversation"}"#)
        .await
        .unwrap();
    assert_eq!(transcript.set_aside().await.unwrap(), Some(1));
    transcript
        .append(format!(r#"{{"result":".troupe/artifacts/lead/{named}"}}"#).as_bytes())
        .await
        .unwrap();

    let jobs = troupe::store::postgres::jobs::PgJobs::new(pg.clone());
    for (n, finished) in [(1, Some(old)), (2, None)] {
        let (id, text) = job(n, old, finished);
        jobs.put(id, &text).await.unwrap();
    }

    let recordings = troupe::store::postgres::recordings::PgRecordings::new(pg.clone());
    let lines = [
        ("run-ended", 0, r#"{"type":"start"}"#),
        ("run-ended", 1, r#"{"type":"end","at":"x"}"#),
        ("run-crashed", 0, r#"{"type":"start"}"#),
    ];
    for (run, line_no, line) in lines {
        recordings
            .copy(&RecordingLine {
                run: run.into(),
                line_no,
                line: line.into(),
            })
            .await
            .unwrap();
    }

    let usage_copy = troupe::store::postgres::usage::PgUsage::new(pg.clone());
    for (n, run) in [(10, "run-1"), (20, "run-1"), (30, "run-2"), (40, "run-1")] {
        usage_copy.copy(&usage(old, run, n)).await.unwrap();
    }

    let mirror = troupe::store::postgres::events::PgEventMirror::start(&pg);
    for seq in 1..=5 {
        mirror.event(&event(seq, old, "run-1"));
    }

    // The rows whose time is the server's are made as old as the rest.
    let old_secs = old.unix_millis() / 1000;
    for table in [
        "troupe_transcripts",
        "troupe_artifacts",
        "troupe_recordings",
    ] {
        s.db.as_ref()
            .unwrap()
            .execute(&format!("UPDATE {table} SET at = to_timestamp({old_secs})"))
            .unwrap();
    }

    // 40 days on: recent state.
    s.clock.advance_millis(40 * DAY_MS);
    let now = s.clock.now();
    mailbox
        .send(&message(mid_of(4), "alice", now, "recent"))
        .await
        .unwrap();
    let m = mailbox.claim(&alice).await.unwrap().unwrap();
    mailbox.ack(&alice, &m).await.unwrap();
    let shutdown = protocol.create(shutdown_of("carol")).await.unwrap();
    protocol
        .consume_response(&answer(&shutdown, mid(3), true))
        .await
        .unwrap();
    let (id, text) = job(3, now, Some(now));
    jobs.put(id, &text).await.unwrap();
    usage_copy.copy(&usage(now, "run-3", 7)).await.unwrap();
    for seq in 6..=7 {
        mirror.event(&event(seq, now, "run-3"));
    }
    mirror.close();
    Filled {
        named_artifact: named.into(),
        unnamed_artifact: unnamed.into(),
    }
}

fn kept(report: &Report, kind: Kind, why: &str) -> u64 {
    report
        .kinds
        .get(&kind)
        .and_then(|k| k.kept.get(why))
        .map_or(0, |t| t.items)
}

fn removed(report: &Report, kind: Kind) -> u64 {
    report.kinds.get(&kind).map_or(0, |k| k.removed.items)
}

async fn gc(state: &PgState, s: &Stores, dry_run: bool) -> Report {
    let sweep = Sweep {
        policy: policy(),
        now: s.clock.now(),
        dry_run,
    };
    let mut report = Report::new(dry_run);
    state.prune(&sweep, &mut report).await.unwrap();
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_team_is_pruned_by_the_rules_and_keeps_what_is_needed() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let db = s.db.as_ref().unwrap();
    let filled = fill(&s).await;
    let state = PgState::new(s.pg.clone().unwrap());
    let usage = s.usage();
    let (totals, buckets) = (
        usage.totals().await.unwrap(),
        usage.buckets(None).await.unwrap(),
    );

    let before = all_rows(db);
    let dry = gc(&state, &s, true).await;
    assert_eq!(all_rows(db), before, "a dry run changes nothing");

    let report = gc(&state, &s, false).await;
    for kind in [
        Kind::Messages,
        Kind::Quarantine,
        Kind::Requests,
        Kind::Transcripts,
        Kind::Artifacts,
        Kind::Events,
        Kind::Jobs,
        Kind::Recordings,
        Kind::Usage,
    ] {
        assert_eq!(
            removed(&dry, kind),
            removed(&report, kind),
            "{kind}: dry = real"
        );
    }
    let counts: Vec<(Kind, u64)> = [
        Kind::Messages,
        Kind::Quarantine,
        Kind::Requests,
        Kind::Transcripts,
        Kind::Artifacts,
        Kind::Events,
        Kind::Jobs,
        Kind::Recordings,
        Kind::Usage,
    ]
    .into_iter()
    .map(|k| (k, removed(&report, k)))
    .collect();
    assert_eq!(
        counts,
        vec![
            (Kind::Messages, 2),
            (Kind::Quarantine, 0),
            (Kind::Requests, 1),
            (Kind::Transcripts, 1),
            (Kind::Artifacts, 1),
            (Kind::Events, 5),
            (Kind::Jobs, 1),
            (Kind::Recordings, 2),
            (Kind::Usage, 2),
        ],
        "{report:#?}"
    );
    assert_eq!(kept(&report, Kind::Messages, WITHIN_AGE), 1);
    assert_eq!(
        kept(&report, Kind::Quarantine, WITHIN_AGE),
        1,
        "kept 90 days"
    );
    assert_eq!(kept(&report, Kind::Requests, needed::PENDING_REQUEST), 1);
    assert_eq!(kept(&report, Kind::Requests, LATEST_PLAN), 1);
    assert_eq!(kept(&report, Kind::Requests, WITHIN_AGE), 1);
    assert_eq!(kept(&report, Kind::Transcripts, needed::CURRENT), 1);
    assert_eq!(kept(&report, Kind::Artifacts, needed::CONVERSATION), 1);
    assert_eq!(kept(&report, Kind::Jobs, needed::UNFINISHED_JOB), 1);
    assert_eq!(kept(&report, Kind::Jobs, WITHIN_AGE), 1);
    assert_eq!(kept(&report, Kind::Events, WITHIN_AGE), 2);

    assert_eq!(
        all_rows(db),
        vec![
            ("troupe_messages_kept", 2),
            ("troupe_requests", 3),
            ("troupe_transcripts", 1),
            ("troupe_artifacts", 1),
            ("troupe_events", 2),
            ("troupe_jobs", 2),
            ("troupe_recordings", 0),
            ("troupe_usage", 3),
        ]
    );
    assert_eq!(
        db.query_text("SELECT name FROM troupe_artifacts").unwrap(),
        Some(filled.named_artifact.clone())
    );
    assert_ne!(filled.named_artifact, filled.unnamed_artifact);
    assert_eq!(
        usage.totals().await.unwrap(),
        totals,
        "usage totals unchanged"
    );
    assert_eq!(usage.buckets(None).await.unwrap(), buckets);
    assert_eq!(
        db.query_text("SELECT string_agg(calls::text, ',' ORDER BY id) FROM troupe_usage")
            .unwrap(),
        Some("1,3,1".into()),
        "run-2's row, run-1's three as one in the place of its last, the recent row"
    );
    // The plan gate still finds alice's approved plan.
    let protocol = s.protocol();
    let alice = AgentName::parse("alice").unwrap();
    assert!(protocol.latest_plan_of(&alice).await.unwrap().is_some());

    let again = gc(&state, &s, false).await;
    assert_eq!(again.removed_total().items, 0, "{again:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recording_and_events_of_a_live_run_are_kept() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.clone().unwrap();
    let db = s.db.as_ref().unwrap();
    let old = s.clock.now();
    let recordings = troupe::store::postgres::recordings::PgRecordings::new(pg.clone());
    for run in ["run-dead", "run-live"] {
        recordings
            .copy(&RecordingLine {
                run: run.into(),
                line_no: 0,
                line: r#"{"type":"start"}"#.into(),
            })
            .await
            .unwrap();
        db.execute(&format!(
            "UPDATE troupe_recordings SET at = to_timestamp({}) WHERE run_id = '{run}'",
            old.unix_millis() / 1000 + if run == "run-live" { 60 } else { 0 }
        ))
        .unwrap();
    }
    let mirror = troupe::store::postgres::events::PgEventMirror::start(&pg);
    for seq in 1..=3 {
        mirror.event(&event(seq, old, "run-live"));
    }
    mirror.close();
    // This process is the team's lead, alive.
    let roster = troupe::store::postgres::PgRoster::new(
        pg.clone(),
        "lead-holder",
        troupe::store::postgres::TEAMMATE_LEASE,
    );
    roster.register("lead").await.unwrap();
    s.clock.advance_millis(40 * DAY_MS);

    let report = gc(&PgState::new(pg.clone()), &s, false).await;
    assert_eq!(removed(&report, Kind::Recordings), 1, "{report:#?}");
    assert_eq!(kept(&report, Kind::Recordings, needed::LIVE_RUN), 1);
    assert_eq!(kept(&report, Kind::Events, needed::LIVE_RUN), 3);
    assert_eq!(removed(&report, Kind::Events), 0);
    assert_eq!(
        db.query_text("SELECT string_agg(DISTINCT run_id, ',') FROM troupe_recordings")
            .unwrap(),
        Some("run-live".into())
    );
    assert_eq!(rows(db, "troupe_events"), 3);
}

#[test]
fn a_gc_beside_writers_loses_nothing_written_after_the_cutoff() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.clone().unwrap();
    let start = s.clock.now();
    // Old state for the gc to work on: done messages and usage rows of 40 days ago.
    let mailbox = s.mailbox();
    let bob = agent("bob");
    let usage_copy = troupe::store::postgres::usage::PgUsage::new(pg.clone());
    block_on(async {
        for n in 0..300 {
            let m = message(mid_of(10_000 + n), "bob", start, "old");
            mailbox.send(&m).await.unwrap();
            let m = mailbox.claim(&bob).await.unwrap().unwrap();
            mailbox.ack(&bob, &m).await.unwrap();
            usage_copy.copy(&usage(start, "run-old", 1)).await.unwrap();
        }
    });
    s.clock.advance_millis(40 * DAY_MS);
    let now = s.clock.now();
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let mailbox = s.mailbox();
            let usage_copy = troupe::store::postgres::usage::PgUsage::new(pg.clone());
            std::thread::spawn(move || {
                let agent = agent(&format!("writer-{w}"));
                block_on(async {
                    for n in 0..100 {
                        let id = mid_of(w * 1_000 + n);
                        let m = message(id, agent.as_str(), now, "new");
                        mailbox.send(&m).await.unwrap();
                        let m = mailbox.claim(&agent).await.unwrap().unwrap();
                        mailbox.ack(&agent, &m).await.unwrap();
                        // Old and new usage rows both: compaction must keep every token.
                        let at = if n % 2 == 0 { start } else { now };
                        usage_copy.copy(&usage(at, "run-w", 2)).await.unwrap();
                    }
                })
            })
        })
        .collect();
    let state = PgState::new(pg.clone());
    let mut removed_messages = 0;
    block_on(async {
        for _ in 0..5 {
            let report = gc(&state, &s, false).await;
            removed_messages += removed(&report, Kind::Messages);
        }
    });
    for w in writers {
        w.join().unwrap();
    }
    block_on(async {
        let report = gc(&state, &s, false).await;
        removed_messages += removed(&report, Kind::Messages);
    });
    assert_eq!(removed_messages, 300, "the old ones, and only those");
    let db = s.db.as_ref().unwrap();
    assert_eq!(
        rows(db, "troupe_messages_kept"),
        300,
        "every new message done"
    );
    let totals = block_on(s.usage().totals());
    assert_eq!(totals.unwrap().total.prompt_tokens, 300 + 3 * 100 * 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gc_cut_midway_is_finished_by_the_next() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.clone().unwrap();
    let db = s.db.as_ref().unwrap();
    let transcript = PgTranscriptLog::new(pg.clone(), "lead");
    for n in 0..2_500 {
        transcript
            .append(format!(r#"{{"n":{n}}}"#).as_bytes())
            .await
            .unwrap();
    }
    transcript.set_aside().await.unwrap();
    transcript.append(br#"{"current":true}"#).await.unwrap();
    let old = s.clock.now().unix_millis() / 1000;
    db.execute(&format!(
        "UPDATE troupe_transcripts SET at = to_timestamp({old}) WHERE generation = 1"
    ))
    .unwrap();
    // What a gc killed after its first batch leaves: part of the conversation gone.
    db.execute("DELETE FROM troupe_transcripts WHERE generation = 1 AND seq IN (SELECT seq FROM troupe_transcripts WHERE generation = 1 ORDER BY seq LIMIT 1000)")
        .unwrap();
    assert_eq!(rows(db, "troupe_transcripts"), 1_501);
    s.clock.advance_millis(40 * DAY_MS);
    let report = gc(&PgState::new(pg.clone()), &s, false).await;
    assert_eq!(removed(&report, Kind::Transcripts), 1);
    assert_eq!(
        rows(db, "troupe_transcripts"),
        1,
        "only the current conversation"
    );
    assert_eq!(
        transcript.read().await.unwrap(),
        b"{\"current\":true}\n".to_vec()
    );
}

fn day(n: u32) -> UtcTime {
    UtcTime::parse(&format!("2026-07-{n:02}T00:00:00.000Z")).unwrap()
}

/// Everything the team's usage readers give: totals, and buckets since each day boundary.
async fn usage_readings(usage: &dyn troupe::store::usage::TeamUsage) -> Vec<String> {
    let mut out = vec![format!("{:?}", usage.totals().await.unwrap())];
    out.push(format!("{:?}", usage.buckets(None).await.unwrap()));
    for n in 9..18 {
        out.push(format!("{:?}", usage.buckets(Some(day(n))).await.unwrap()));
    }
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(6))]

    /// The team's totals and buckets are the same after its usage rows are compacted.
    #[test]
    fn usage_reads_the_same_after_compaction(
        calls in proptest::collection::vec(
            (10u32..16, 0u32..24, 0usize..3, 0usize..2, 0u64..1000, proptest::bool::ANY),
            1..80,
        ),
        cut_day in 9u32..18,
    ) {
        let Some(s) = Stores::new(Backend::Postgres) else {
            return Ok(());
        };
        let pg = s.pg.clone().unwrap();
        block_on(async {
            let copy = troupe::store::postgres::usage::PgUsage::new(pg.clone());
            for (d, hour, run, model, prompt, estimated) in &calls {
                let mut record = usage(
                    UtcTime::parse(&format!("2026-07-{d:02}T{hour:02}:00:00.000Z")).unwrap(),
                    ["run-1", "run-2", "run-3"][*run],
                    *prompt,
                );
                record.model = ["m-1", "m-2"][*model].into();
                record.estimated = *estimated;
                copy.copy(&record).await.unwrap();
            }
            let usage = s.usage();
            let before = usage_readings(usage.as_ref()).await;
            let dry = troupe::store::postgres::usage_compact::compact(&pg, day(cut_day), true)
                .await
                .unwrap();
            let done = troupe::store::postgres::usage_compact::compact(&pg, day(cut_day), false)
                .await
                .unwrap();
            assert_eq!(dry.rows_removed, done.rows_removed);
            assert_eq!(usage_readings(usage.as_ref()).await, before);
            let again = troupe::store::postgres::usage_compact::compact(&pg, day(cut_day), false)
                .await
                .unwrap();
            assert_eq!(again.rows_removed, 0);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usage_group_larger_than_a_batch_is_compacted_in_steps_into_its_last_row() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.clone().unwrap();
    let db = s.db.as_ref().unwrap();
    let copy = troupe::store::postgres::usage::PgUsage::new(pg.clone());
    for n in 0..2_500u64 {
        copy.copy(&usage(day(10), "run-1", n % 7)).await.unwrap();
    }
    copy.copy(&usage(day(20), "run-2", 1)).await.unwrap();
    let usage = s.usage();
    let before = usage_readings(usage.as_ref()).await;
    let last = db
        .query_text("SELECT max(id) FROM troupe_usage WHERE run_id = 'run-1'")
        .unwrap();
    let done = troupe::store::postgres::usage_compact::compact(&pg, day(15), false)
        .await
        .unwrap();
    assert_eq!(done.rows_removed, 2_499);
    assert_eq!(usage_readings(usage.as_ref()).await, before);
    assert_eq!(
        db.query_text("SELECT id || ':' || calls FROM troupe_usage WHERE run_id = 'run-1'")
            .unwrap(),
        last.map(|id| format!("{id}:2500"))
    );
}

/// The SQL that decides for the large tables (done messages, events) gives what `decide` gives
/// on the same rows, with an age and a size at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_of_the_large_tables_decides_as_decide_does() {
    use troupe::store::retention::{decide, Candidate};
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.clone().unwrap();
    let db = s.db.as_ref().unwrap();
    let start = s.clock.now();
    let hour = 3_600_000;
    let mailbox = s.mailbox();
    let dave = agent("dave");
    let mirror = troupe::store::postgres::events::PgEventMirror::start(&pg);
    for i in 0..24i64 {
        let at = UtcTime::from_unix_millis(start.unix_millis() + i * hour).unwrap();
        let text = "x".repeat(1 + (i as usize * 37) % 200);
        let m = message(mid_of(500 + i as u64), "dave", at, &text);
        mailbox.send(&m).await.unwrap();
        let m = mailbox.claim(&dave).await.unwrap().unwrap();
        mailbox.ack(&dave, &m).await.unwrap();
        let mut e = event(i as u64 + 1, at, "run-1");
        e.fields.insert("text".into(), serde_json::json!(text));
        mirror.event(&e);
    }
    mirror.close();
    s.clock.advance_millis(24 * hour);
    let mut policy = Policy::default();
    let rule = Rule {
        age: Some(Duration::from_secs(18 * 3600)),
        size: Some(1_500),
    };
    policy.set(Kind::Messages, rule);
    policy.set(Kind::Events, rule);
    let sweep = Sweep {
        policy,
        now: s.clock.now(),
        dry_run: true,
    };
    let mut report = Report::new(true);
    PgState::new(pg.clone())
        .prune(&sweep, &mut report)
        .await
        .unwrap();

    for (kind, sql) in [
        (
            Kind::Messages,
            "SELECT string_agg(created_ms || ' ' || octet_length(body), ',' ORDER BY created_ms)
               FROM troupe_messages_kept",
        ),
        (
            Kind::Events,
            "SELECT string_agg((line::jsonb->>'at') || ' ' || octet_length(line), ',' ORDER BY id)
               FROM troupe_events",
        ),
    ] {
        let rows = db.query_text(sql).unwrap().unwrap();
        let candidates: Vec<Candidate<()>> = rows
            .split(',')
            .map(|row| {
                let (at, bytes) = row.split_once(' ').unwrap();
                let at = match at.parse::<i64>() {
                    Ok(ms) => UtcTime::from_unix_millis(ms).unwrap(),
                    Err(_) => UtcTime::parse(at).unwrap(),
                };
                Candidate {
                    item: (),
                    at,
                    bytes: bytes.parse().unwrap(),
                    needed: None,
                }
            })
            .collect();
        let mut expected = Report::new(true);
        for (_, bytes) in decide(kind, &sweep, candidates, &mut expected) {
            expected.removed(kind, bytes);
        }
        assert_eq!(report.kinds[&kind], expected.kinds[&kind], "{kind}");
        let removed = expected.kinds[&kind].removed.items;
        assert!(
            removed > 6 && removed < 24,
            "{kind}: both rules at work ({removed})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_rows_past_the_age_go_page_by_page_and_the_rest_stay() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let db = s.db.as_ref().unwrap();
    let now = s.clock.now().unix_millis();
    // 2,500 decisions 40 days old (more than a page of gc), then 3 of today.
    let line = |ms: i64, n: u32| {
        let at = UtcTime::from_unix_millis(ms).unwrap();
        format!(r#"{{"at":"{at}","agent":"lead","tool":"shell","decision":"allow","n":{n}}}"#)
    };
    let insert = |ms: i64, from: u32, to: u32| {
        let values: Vec<String> = (from..to)
            .map(|n| {
                format!(
                    "('{TEAM}', 'lead', 'shell', 'allow', 'h', 1, '{}')",
                    line(ms, n)
                )
            })
            .collect();
        db.execute(&format!(
            "INSERT INTO troupe_audit (team, agent, tool, decision, host, pid, line) VALUES {}",
            values.join(", ")
        ))
        .unwrap();
    };
    insert(now - 40 * DAY_MS, 0, 2_500);
    insert(now, 2_500, 2_503);
    let state = PgState::new(s.pg.clone().unwrap());
    let sweep = |dry_run| Sweep {
        policy: policy(),
        now: s.clock.now(),
        dry_run,
    };
    let mut dry_sweep = sweep(true);
    dry_sweep.policy.set(Kind::Audit, days(30));
    let mut dry = Report::new(true);
    state.prune(&dry_sweep, &mut dry).await.unwrap();
    assert_eq!(removed(&dry, Kind::Audit), 2_500);
    assert_eq!(rows(db, "troupe_audit"), 2_503, "a dry run changes nothing");

    let mut real = dry_sweep.clone();
    real.dry_run = false;
    let mut report = Report::new(false);
    state.prune(&real, &mut report).await.unwrap();
    assert_eq!(removed(&report, Kind::Audit), 2_500);
    assert_eq!(report.kinds[&Kind::Audit].kept[WITHIN_AGE].items, 3);
    assert_eq!(rows(db, "troupe_audit"), 3);
    let left = db
        .query_text("SELECT string_agg(line, '|' ORDER BY id) FROM troupe_audit")
        .unwrap()
        .unwrap();
    assert_eq!(
        left,
        [line(now, 2_500), line(now, 2_501), line(now, 2_502)].join("|")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_go_a_batch_at_a_time_and_the_board_still_loads() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let db = s.db.as_ref().unwrap();
    let board = s.board();
    let worker = agent("alice");
    let done = board
        .create(troupe::store::tasks::NewTask {
            subject: "done".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let token = board
        .claim(&done.id, &worker)
        .await
        .unwrap()
        .lease
        .unwrap()
        .token;
    board.complete(&done.id, &worker, &token).await.unwrap();
    // 2,500 more finished tasks like it (more than two batches of gc), then one still open.
    db.execute(&format!(
        "INSERT INTO troupe_tasks (team, id, status, owner, body)
         SELECT t.team, u.id, t.status, t.owner, replace(t.body, t.id::text, u.id::text)
           FROM troupe_tasks t,
                (SELECT gen_random_uuid() AS id FROM generate_series(1, 2500)) u
          WHERE t.team = '{TEAM}' AND t.id = '{}'",
        done.id
    ))
    .unwrap();
    board
        .create(troupe::store::tasks::NewTask {
            subject: "open".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rows(db, "troupe_tasks"), 2_502);
    s.clock.advance_millis(40 * DAY_MS);

    let dry = gc(&PgState::new(s.pg.clone().unwrap()), &s, true).await;
    assert_eq!(removed(&dry, Kind::Tasks), 2_501);
    assert_eq!(rows(db, "troupe_tasks"), 2_502, "a dry run changes nothing");
    let report = gc(&PgState::new(s.pg.clone().unwrap()), &s, false).await;
    assert_eq!(removed(&report, Kind::Tasks), 2_501);
    assert_eq!(
        report.kinds[&Kind::Tasks].kept[needed::UNFINISHED_TASK].items,
        1
    );
    let left = board.list().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].subject, "open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_conversation_s_history_before_its_last_compaction_is_set_aside() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let pg = s.pg.clone().unwrap();
    let db = s.db.as_ref().unwrap();
    let transcript = PgTranscriptLog::new(pg.clone(), "lead");
    // 2,500 lines of history (about 300 KB, more than two batches), a compaction, what follows.
    let filler = "x".repeat(100);
    for n in 0..2_500 {
        transcript
            .append(format!(r#"{{"n":{n},"text":"{filler}"}}"#).as_bytes())
            .await
            .unwrap();
    }
    transcript
        .append(br#"{"compaction":{"summary":"so far"}}"#)
        .await
        .unwrap();
    transcript.append(br#"{"after":1}"#).await.unwrap();
    let state = PgState::new(pg.clone());
    let dry = gc(&state, &s, true).await;
    assert_eq!(
        rows(db, "troupe_transcripts"),
        2_502,
        "a dry run changes nothing"
    );
    assert_eq!(removed(&dry, Kind::Transcripts), 0);

    let report = gc(&state, &s, false).await;
    assert_eq!(
        removed(&report, Kind::Transcripts),
        0,
        "set aside, not yet old"
    );
    assert_eq!(
        transcript.read().await.unwrap(),
        b"{\"compaction\":{\"summary\":\"so far\"}}\n{\"after\":1}\n".to_vec(),
        "the conversation loads from its last compaction"
    );
    let aside = db
        .query_text("SELECT count(*) || '/' || min(generation) || '/' || max(generation) FROM troupe_transcripts WHERE generation > 0")
        .unwrap()
        .unwrap();
    assert_eq!(aside, "2500/1/1", "the history is one earlier conversation");
    // Once old, the history goes as an earlier conversation does.
    let old = s.clock.now().unix_millis() / 1000;
    db.execute(&format!(
        "UPDATE troupe_transcripts SET at = to_timestamp({old}) WHERE generation = 1"
    ))
    .unwrap();
    s.clock.advance_millis(40 * DAY_MS);
    let later = gc(&state, &s, false).await;
    assert_eq!(removed(&later, Kind::Transcripts), 1);
    assert_eq!(rows(db, "troupe_transcripts"), 2);
    // Too little before the boundary: nothing moves.
    transcript
        .append(br#"{"compaction":{"summary":"again"}}"#)
        .await
        .unwrap();
    gc(&state, &s, false).await;
    assert_eq!(rows(db, "troupe_transcripts"), 3);
    assert!(transcript
        .read()
        .await
        .unwrap()
        .starts_with(b"{\"compaction\":{\"summary\":\"so far\"}}"));
}

/// One counter of `pg_stat_user_tables` for one of the schema's tables.
fn table_stat(db: &TestDb, table: &str, column: &str) -> u64 {
    db.query_text(&format!(
        "SELECT {column} FROM pg_stat_user_tables \
          WHERE schemaname = current_schema() AND relname = '{table}'"
    ))
    .unwrap()
    .unwrap()
    .parse()
    .unwrap()
}

/// Manual vacuums of a table (autovacuum's are counted apart).
fn vacuums(db: &TestDb, table: &str) -> u64 {
    table_stat(db, table, "vacuum_count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gc_vacuums_the_tables_whose_dead_rows_pass_a_fifth_of_the_live_ones() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let db = s.db.as_ref().unwrap();
    let at = s.clock.now();
    let audit_rows = |from: u32, to: u32| {
        let values: Vec<String> = (from..to)
            .map(|n| {
                let line = format!(
                    r#"{{"at":"{at}","agent":"lead","tool":"shell","decision":"allow","n":{n}}}"#
                );
                format!("('{TEAM}', 'lead', 'shell', 'allow', 'h', 1, '{line}')")
            })
            .collect();
        format!(
            "INSERT INTO troupe_audit (team, agent, tool, decision, host, pid, line) VALUES {};",
            values.join(", ")
        )
    };
    // troupe_audit: 1,000 rows deleted, 10 live (past the rule); troupe_jobs: 10 deleted
    // (under its floor). The statistics are flushed before the answer comes back.
    db.execute(&format!(
        "{} DELETE FROM troupe_audit WHERE id > (SELECT min(id) + 9 FROM troupe_audit); \
         INSERT INTO troupe_jobs (team, id, host, record) \
           SELECT '{TEAM}', gen_random_uuid(), 'h', '{{}}' FROM generate_series(1, 10); \
         DELETE FROM troupe_jobs; SELECT pg_stat_force_next_flush();",
        audit_rows(0, 1_010),
    ))
    .unwrap();
    assert_eq!(rows(db, "troupe_audit"), 10);
    let dead = |table: &str| table_stat(db, table, "n_dead_tup");
    assert_eq!((dead("troupe_audit"), dead("troupe_jobs")), (1_000, 10));

    let state = PgState::new(s.pg.clone().unwrap());
    gc(&state, &s, true).await;
    assert_eq!(
        (vacuums(db, "troupe_audit"), vacuums(db, "troupe_jobs")),
        (0, 0),
        "a dry run vacuums nothing"
    );
    gc(&state, &s, false).await;
    assert_eq!(
        (vacuums(db, "troupe_audit"), vacuums(db, "troupe_jobs")),
        (1, 0),
        "only the table past the rule is vacuumed"
    );
    // How many of the dead rows the vacuum could free depends on the oldest transaction open
    // on the server (other tests' run beside this one); that it ran is what gc decides.
    assert_eq!(rows(db, "troupe_audit"), 10, "nothing live went");
}
