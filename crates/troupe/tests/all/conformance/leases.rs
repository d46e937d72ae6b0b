//! PostgreSQL only: leased claims and fencing tokens, recovery of expired leases, wakeups by
//! LISTEN/NOTIFY, schema versions, and teams sharing one database.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;
use troupe::error::ErrorCode;
use troupe::store::mailbox::{AckOutcome, MailboxState, MailboxStore};
use troupe::store::postgres::testing::TestDb;
use troupe::store::postgres::wake::{listen, Wake};
use troupe::store::postgres::{PgStore, SCHEMA_VERSION};
use troupe::wire::{AgentName, Content, MailboxMessage, MessageId, OrdinaryKind, OrdinaryMessage};

use super::{block_on, Backend, Stores};
use crate::mailbox::{agent, at};

fn message(n: u128, to: &str) -> MailboxMessage {
    MailboxMessage::Ordinary(OrdinaryMessage {
        id: MessageId::from_uuid(uuid::Uuid::from_u128((0x4000 << 64) | (0x8000 << 48) | n))
            .unwrap(),
        sender: AgentName::lead(),
        recipient: agent(to),
        kind: OrdinaryKind::Message,
        content: Content::parse("work").unwrap(),
        created_at_utc: at(n as i64),
    })
}

fn pg() -> Option<Stores> {
    Stores::new(Backend::Postgres)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_taken_over_and_the_old_holders_ack_is_refused() {
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    // The first worker pauses past its (zero) lease; the second takes the message over.
    let paused = s.pg_mailbox(&store, Duration::ZERO);
    let other = s.pg_mailbox(&store, Duration::from_secs(60));
    paused.send(&message(1, "alice")).await.unwrap();
    let m = paused.claim(&agent("alice")).await.unwrap().unwrap();
    let taken = other.claim(&agent("alice")).await.unwrap().unwrap();
    assert_eq!(taken, m);
    // Every completion by the paused worker is fenced off.
    for refused in [
        paused.ack(&agent("alice"), &m).await.map(|_| ()),
        paused.release(&agent("alice"), m.id()).await,
        paused
            .quarantine(&agent("alice"), m.id(), "late")
            .await
            .map(|_| ()),
    ] {
        assert_eq!(refused.unwrap_err().code(), "mailbox_lease_lost");
    }
    let counts = other.counts(&agent("alice")).await.unwrap();
    assert_eq!((counts.processing, counts.done), (1, 0));
    assert_eq!(
        other.ack(&agent("alice"), &m).await.unwrap(),
        AckOutcome::Acked
    );
    // Once done, the late holder's retried ack sees the same message done: no second effect.
    assert_eq!(
        paused.ack(&agent("alice"), &m).await.unwrap(),
        AckOutcome::AlreadyDone
    );
    assert_eq!(other.counts(&agent("alice")).await.unwrap().done, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_only_grow_and_an_untaken_expired_claim_is_still_its_holders() {
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let holder = s.pg_mailbox(&store, Duration::ZERO);
    for n in 1..=3 {
        holder.send(&message(n, "alice")).await.unwrap();
    }
    let mut fences = Vec::new();
    for _ in 0..3 {
        let m = holder.claim(&agent("alice")).await.unwrap().unwrap();
        let fence =
            s.db.as_ref()
                .unwrap()
                .query_text(&format!(
                    "SELECT fence::text FROM troupe_messages WHERE id = '{}'",
                    m.id()
                ))
                .unwrap()
                .unwrap();
        fences.push(fence.parse::<i64>().unwrap());
        // Expired (lease zero) but nobody took it: the token still matches.
        assert_eq!(
            holder.ack(&agent("alice"), &m).await.unwrap(),
            AckOutcome::Acked
        );
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_releases_expired_leases_only() {
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let dead = s.pg_mailbox(&store, Duration::ZERO);
    let live = s.pg_mailbox(&store, Duration::from_secs(60));
    dead.send(&message(1, "alice")).await.unwrap();
    dead.send(&message(2, "alice")).await.unwrap();
    // The live claim first: a zero lease would let it take the dead one's message.
    let held = live.claim(&agent("alice")).await.unwrap().unwrap();
    let lost = dead.claim(&agent("alice")).await.unwrap().unwrap();
    assert_ne!(lost.id(), held.id());
    let report = s.mailbox().recover(&agent("alice")).await.unwrap();
    assert_eq!(report.released, vec![lost.id()]);
    let counts = live.counts(&agent("alice")).await.unwrap();
    assert_eq!((counts.ready, counts.processing), (1, 1));
    assert_eq!(
        live.ack(&agent("alice"), &held).await.unwrap(),
        AckOutcome::Acked
    );
}

#[test]
fn a_send_wakes_a_listener_after_its_row_is_visible() {
    let Some(s) = pg() else { return };
    let (runtime, mut rx, stop) = listening(s.pg.as_ref().unwrap());
    runtime.block_on(async {
        assert_eq!(rx.recv().await, Some(Wake::Rescan));
        let mailbox = s.mailbox();
        mailbox.send(&message(1, "alice")).await.unwrap();
        assert_eq!(rx.recv().await, Some(Wake::Agent("alice".into())));
        // What the wake announced is there to claim.
        assert!(mailbox.claim(&agent("alice")).await.unwrap().is_some());
        // A release wakes too (the message is claimable again).
        mailbox
            .release(&agent("alice"), message(1, "alice").id())
            .await
            .unwrap();
        assert_eq!(rx.recv().await, Some(Wake::Agent("alice".into())));
    });
    stop.cancel();
}

/// A runtime, and a listener on `store`'s team channel with its receiver and stop token.
fn listening(
    store: &PgStore,
) -> (
    tokio::runtime::Runtime,
    tokio::sync::mpsc::UnboundedReceiver<Wake>,
    CancellationToken,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    listen(store, tx, stop.clone());
    (runtime, rx, stop)
}

/// Board changes that may give someone work wake every process of the team (so idle teammates
/// on other hosts look at the board without polling); a claim and a renewal wake nobody.
#[test]
fn board_changes_that_free_work_wake_the_team_and_claims_do_not() {
    let Some(s) = pg() else { return };
    let (runtime, mut rx, stop) = listening(s.pg.as_ref().unwrap());
    let board = s.board_with_lease(std::time::Duration::from_secs(30));
    let board_wake = Some(Wake::Agent(troupe::store::postgres::BOARD_WAKE.into()));
    runtime.block_on(async {
        assert_eq!(rx.recv().await, Some(Wake::Rescan));
        let task = board
            .create(troupe::store::tasks::NewTask {
                subject: "t".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(rx.recv().await, board_wake);
        let lease = board
            .claim(&task.id, &agent("alice"))
            .await
            .unwrap()
            .lease
            .unwrap();
        board
            .renew(&task.id, &agent("alice"), &lease.token)
            .await
            .unwrap();
        board
            .release(&task.id, &agent("alice"), &lease.token, "stopping")
            .await
            .unwrap();
        // The next wake is the release's: the claim and the renewal sent none.
        assert_eq!(rx.recv().await, board_wake);
        assert!(rx.try_recv().is_err());
        let lease = board
            .claim(&task.id, &agent("bob"))
            .await
            .unwrap()
            .lease
            .unwrap();
        board
            .complete(&task.id, &agent("bob"), &lease.token)
            .await
            .unwrap();
        assert_eq!(rx.recv().await, board_wake);
    });
    stop.cancel();
}

#[test]
fn a_schema_newer_than_the_binary_is_refused_and_migrating_twice_is_a_no_op() {
    let Some(db) = TestDb::create() else { return };
    let first = db.store("t");
    drop(first);
    let _again = db.store("t");
    assert_eq!(
        db.query_text("SELECT count(*)::text FROM troupe_schema")
            .unwrap(),
        Some(SCHEMA_VERSION.to_string()),
        "one row per migration, each applied once"
    );
    db.execute(&format!(
        "INSERT INTO troupe_schema (version) VALUES ({})",
        SCHEMA_VERSION + 1
    ))
    .unwrap();
    let err = PgStore::connect_in_schema(&db.url(), "t", None)
        .err()
        .expect("a newer schema was accepted");
    assert_eq!(err.code(), "store_schema_newer");
    assert!(err.to_string().contains("upgrade troupe"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teams_sharing_a_database_never_see_each_others_messages() {
    let Some(s) = pg() else { return };
    let db = s.db.as_ref().unwrap();
    let a = s.pg_mailbox(&db.store("team-a"), Duration::from_secs(60));
    let b = s.pg_mailbox(&db.store("team-b"), Duration::from_secs(60));
    a.send(&message(1, "alice")).await.unwrap();
    // The same id in another team is another message.
    b.send(&message(1, "alice")).await.unwrap();
    assert!(b.claim(&agent("alice")).await.unwrap().is_some());
    assert_eq!(b.claim(&agent("alice")).await.unwrap(), None);
    assert_eq!(a.counts(&agent("alice")).await.unwrap().ready, 1);
    assert_eq!(
        b.list(&agent("alice"), MailboxState::Processing)
            .await
            .unwrap()
            .len(),
        1
    );
    let _ = Arc::new(());
}

#[test]
fn an_unreachable_server_is_a_clear_error_with_a_stable_code() {
    let err = PgStore::connect_in_schema("postgres://troupe@127.0.0.1:1/none", "t", None)
        .err()
        .expect("connected to nothing");
    assert_eq!(err.code(), "store_unavailable");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}

/// The lead pauses past the lease of a shutdown response it claimed, another lead process takes
/// the message over: the paused one's consume + ack is refused as a whole — the request is not
/// resolved by a holder that can no longer ack — and the new holder resolves it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consume_and_ack_by_a_holder_that_lost_the_lease_changes_nothing() {
    use crate::protocol::support::{answer, mid, shutdown_of};
    use troupe::store::response_ack::ResponseAckError;
    use troupe::wire::RequestStatus;
    let Some(s) = pg() else { return };
    let request = s.protocol().create(shutdown_of("alice")).await.unwrap();
    let paused = s.claiming_mailbox(Duration::ZERO);
    let other = s.claiming_mailbox(Duration::from_secs(60));
    let lead = AgentName::lead();
    let yes = answer(&request, mid(9), true);
    paused
        .port()
        .send(&MailboxMessage::Protocol(yes.clone()))
        .await
        .unwrap();
    let m = paused.port().claim(&lead).await.unwrap().unwrap();
    assert_eq!(other.port().claim(&lead).await.unwrap().unwrap(), m);
    let err = s
        .response_ack(&paused)
        .consume_and_ack(&lead, &m, &yes)
        .await
        .unwrap_err();
    assert!(matches!(err, ResponseAckError::Ack(_)), "{err:?}");
    assert_eq!(err.code(), "mailbox_lease_lost");
    assert_eq!(
        s.protocol()
            .get(request.id())
            .await
            .unwrap()
            .unwrap()
            .stored_status(),
        RequestStatus::Pending,
        "the late holder resolved the request"
    );
    let (consumed, acked) = s
        .response_ack(&other)
        .consume_and_ack(&lead, &m, &yes)
        .await
        .unwrap();
    assert!(!consumed.replayed);
    assert_eq!(acked, AckOutcome::Acked);
    assert_eq!(
        s.protocol()
            .get(request.id())
            .await
            .unwrap()
            .unwrap()
            .stored_status(),
        RequestStatus::Approved
    );
}

/// A consumer draining a backlog has its claims made in batches: it still gets every message
/// once, oldest first, and the rows claimed ahead are its own (processing) until handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_backlog_comes_in_order_once_through_claims_made_ahead() {
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let consumer = s.pg_mailbox(&store, Duration::from_secs(60));
    let sent: Vec<MailboxMessage> = (1..=40).map(|n| message(n, "alice")).collect();
    for m in &sent {
        consumer.send(m).await.unwrap();
    }
    let mut got = Vec::new();
    let mut most_processing = 0;
    while let Some(m) = consumer.claim(&agent("alice")).await.unwrap() {
        most_processing =
            most_processing.max(consumer.counts(&agent("alice")).await.unwrap().processing);
        assert_eq!(
            consumer.ack(&agent("alice"), &m).await.unwrap(),
            AckOutcome::Acked
        );
        got.push(m);
    }
    assert_eq!(got, sent);
    assert!(most_processing > 1, "no claims were made ahead");
    let counts = consumer.counts(&agent("alice")).await.unwrap();
    assert_eq!((counts.ready, counts.processing, counts.done), (0, 0, 40));
}

/// A store that sent ten messages to alice and claimed and acked the first five, the fifth
/// claim taking the other five ahead (still processing, its own); and the ten.
async fn five_handled_five_ahead(
    s: &Stores,
    store: &PgStore,
) -> (troupe::store::postgres::PgMailboxStore, Vec<MailboxMessage>) {
    let first = s.pg_mailbox(store, Duration::from_secs(60));
    let sent: Vec<MailboxMessage> = (1..=10).map(|n| message(n, "alice")).collect();
    for m in &sent {
        first.send(m).await.unwrap();
    }
    for m in &sent[..5] {
        assert_eq!(
            first.claim(&agent("alice")).await.unwrap().as_ref(),
            Some(m)
        );
        first.ack(&agent("alice"), m).await.unwrap();
    }
    assert_eq!(first.counts(&agent("alice")).await.unwrap().processing, 5);
    (first, sent)
}

/// Claims and acks alice's messages until there are none; what it got, in order.
async fn drain(mailbox: &dyn MailboxStore) -> Vec<MailboxMessage> {
    let mut taken = Vec::new();
    while let Some(m) = mailbox.claim(&agent("alice")).await.unwrap() {
        assert_eq!(
            mailbox.ack(&agent("alice"), &m).await.unwrap(),
            AckOutcome::Acked
        );
        taken.push(m);
    }
    taken
}

/// A row claimed ahead and not handed out within half the lease is never handed out by that
/// store: its lease runs out in the database and another holder gets it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_claimed_ahead_and_left_too_long_goes_to_the_next_holder_only() {
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let (first, sent) = five_handled_five_ahead(&s, &store).await;
    // Half the lease passes before the caller claims again.
    s.clock.advance_millis(30_001);
    assert_eq!(first.claim(&agent("alice")).await.unwrap(), None);
    // Their leases run out (in the database's time); another holder takes them, in order.
    s.db.as_ref()
        .unwrap()
        .execute("UPDATE troupe_messages SET lease_until = clock_timestamp() - interval '1 second'")
        .unwrap();
    let next = s.pg_mailbox(&store, Duration::from_secs(60));
    let taken = drain(&next).await;
    assert_eq!(taken, sent[5..].to_vec());
    assert_eq!(first.claim(&agent("alice")).await.unwrap(), None);
    assert_eq!(next.counts(&agent("alice")).await.unwrap().done, 10);
}

/// Four consumers (each its own store, as four processes) drain one backlog with claims made
/// ahead: every message is done exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_consumers_with_claims_made_ahead_finish_each_message_once() {
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let sender = s.pg_mailbox(&store, Duration::from_secs(60));
    for n in 1..=200 {
        sender.send(&message(n, "alice")).await.unwrap();
    }
    let consumers: Vec<_> = (0..4)
        .map(|_| s.pg_mailbox(&store, Duration::from_secs(60)))
        .collect();
    let handled = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for consumer in &consumers {
            let handled = &handled;
            scope.spawn(move || {
                block_on(async move {
                    while let Some(m) = consumer.claim(&agent("alice")).await.unwrap() {
                        assert_eq!(
                            consumer.ack(&agent("alice"), &m).await.unwrap(),
                            AckOutcome::Acked
                        );
                        handled.lock().unwrap().push(m.id());
                    }
                })
            });
        }
    });
    let mut handled = handled.into_inner().unwrap();
    handled.sort();
    handled.dedup();
    assert_eq!(handled.len(), 200);
    assert_eq!(sender.counts(&agent("alice")).await.unwrap().done, 200);
}

/// The team's shared event stream: every process's events in one order, each `seq` replaced
/// by its position; an event copied twice (a retried insert) is there once; teams apart.
#[tokio::test]
async fn the_shared_event_stream_keeps_every_processs_events_once_in_one_order() {
    use troupe::store::events::{EventListener, EventLog, EventSink};
    use troupe::store::postgres::events::{PgEventMirror, PgEvents};
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let open = |run: &str| {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".troupe")).unwrap();
        let log = EventLog::open(
            &troupe::layout::Layout::new(ws.path()),
            Arc::new(s.clock.clone()),
            run.into(),
            troupe::secrets::Redactor::default(),
        )
        .unwrap();
        (ws, log)
    };
    let (_a_dir, lead) = open("run-lead");
    let (_b_dir, worker) = open("run-worker");
    let lead_mirror = PgEventMirror::start(&store);
    let worker_mirror = PgEventMirror::start(&store);
    lead.subscribe(lead_mirror.clone() as Arc<dyn EventListener>);
    worker.subscribe(worker_mirror.clone() as Arc<dyn EventListener>);
    lead.emit("lead", "run_started", serde_json::Map::new());
    lead_mirror.close();
    let copied = worker.record("writer", "run_started", serde_json::Map::new());
    worker_mirror.close();
    // The same event again (a retry after a lost answer): nothing is added.
    let again = PgEventMirror::start(&store);
    again.event(&copied);
    again.close();
    let events = PgEvents::new(store.clone()).after(0, 100).await.unwrap();
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.run_id.as_str(), e.agent.as_str()))
        .collect();
    assert_eq!(seen, [("run-lead", "lead"), ("run-worker", "writer")]);
    assert!(events[0].seq < events[1].seq);
    // Both files started at seq 1; the shared stream's positions are its own.
    assert_eq!(copied.seq, 1);
    assert_eq!(
        PgEvents::new(store.clone())
            .after(events[0].seq, 100)
            .await
            .unwrap(),
        events[1..].to_vec()
    );
    let other_team = s.db.as_ref().unwrap().store("team-b");
    assert_eq!(
        PgEvents::new(other_team).after(0, 100).await.unwrap(),
        vec![]
    );
}

/// A store that goes away (its worker stops) gives back the rows it claimed ahead: the next
/// holder takes them at once, without waiting for their leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_claimed_ahead_are_given_back_when_the_store_goes_away() {
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let (first, sent) = five_handled_five_ahead(&s, &store).await;
    drop(first);
    let next = s.pg_mailbox(&store, Duration::from_secs(60));
    assert_eq!(next.counts(&agent("alice")).await.unwrap().ready, 5);
    let mut taken = Vec::new();
    while let Some(m) = next.claim(&agent("alice")).await.unwrap() {
        next.ack(&agent("alice"), &m).await.unwrap();
        taken.push(m);
    }
    assert_eq!(taken, sent[5..].to_vec());
}

/// A shared team's token usage adds up every process's records (each also in its own file),
/// with the file's meaning: overall, per agent, runs, and the latest run.
#[tokio::test]
async fn the_teams_usage_adds_up_every_processs_records() {
    use troupe::store::postgres::usage::PgUsage;
    use troupe::store::team_copy::{CopyTo, TeamCopy};
    use troupe::store::usage::{read_totals, TokenCounts, UsageLog, UsageRecord};
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    use crate::state::usage::record;
    let process = || {
        let ws = tempfile::tempdir().unwrap();
        let log = UsageLog::open(
            &troupe::layout::Layout::new(ws.path()),
            Arc::new(s.clock.clone()),
        )
        .with_copy(CopyTo::to(
            Some(Arc::new(PgUsage::new(store.clone())) as Arc<dyn TeamCopy<UsageRecord>>),
            "the team's usage misses it",
        ));
        (ws, log)
    };
    let (lead_ws, lead) = process();
    let (worker_ws, worker) = process();
    lead.append(&record("run-lead", "lead", 10, 5))
        .await
        .unwrap();
    worker
        .append(&record("run-worker", "writer", 100, 50))
        .await
        .unwrap();
    lead.append(&record("run-lead", "lead", 1, 1))
        .await
        .unwrap();
    let totals = PgUsage::new(store.clone()).totals().await.unwrap();
    let counts = |p: u64, c: u64| TokenCounts {
        prompt_tokens: p,
        completion_tokens: c,
        total_tokens: p + c,
        ..TokenCounts::default()
    };
    assert_eq!(totals.total, counts(111, 56));
    assert_eq!(totals.agents["lead"], counts(11, 6));
    assert_eq!(totals.agents["writer"], counts(100, 50));
    assert_eq!(totals.runs, 2);
    let latest = totals.latest_run.unwrap();
    assert_eq!(
        (latest.run_id.as_str(), latest.counts),
        ("run-lead", counts(11, 6))
    );
    // Each process's own file keeps its records.
    let lead_file = read_totals(&troupe::layout::Layout::new(lead_ws.path()).usage_log()).unwrap();
    let worker_file =
        read_totals(&troupe::layout::Layout::new(worker_ws.path()).usage_log()).unwrap();
    assert_eq!(
        lead_file.total.total_tokens + worker_file.total.total_tokens,
        167
    );
    // Another team adds up to nothing.
    let theirs = PgUsage::new(s.db.as_ref().unwrap().store("team-b"))
        .totals()
        .await
        .unwrap();
    assert_eq!(theirs.total, TokenCounts::default());
    assert_eq!((theirs.runs, theirs.latest_run), (0, None));
}

/// A call whose counts troupe estimated (its server reported none) is told apart in the team's
/// usage as in the file's: in the totals' `estimated_tokens` and in the record read back.
#[tokio::test]
async fn the_teams_usage_tells_estimated_tokens_apart() {
    use troupe::store::postgres::usage::PgUsage;
    use troupe::store::team_copy::TeamCopy;
    let Some(s) = pg() else { return };
    let usage = PgUsage::new(s.pg.clone().unwrap());
    use crate::state::usage::record;
    usage.copy(&record("run-1", "lead", 10, 5)).await.unwrap();
    let estimated = troupe::store::usage::UsageRecord {
        estimated: true,
        ..record("run-1", "writer", 100, 20)
    };
    usage.copy(&estimated).await.unwrap();
    let totals = usage.totals().await.unwrap();
    assert_eq!(totals.total.total_tokens, 135);
    assert_eq!(totals.total.estimated_tokens, 120);
    assert_eq!(totals.agents["lead"].estimated_tokens, 0);
    assert_eq!(totals.agents["writer"].estimated_tokens, 120);
    let read: Vec<bool> = usage
        .records_after(0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, r)| r.estimated)
        .collect();
    assert_eq!(read, [false, true]);
}

/// A shared team's audit: each process's decisions copied, line for line, after its own file's
/// append, in one team-wide order.
#[tokio::test]
async fn the_teams_audit_holds_every_processs_decisions_as_their_files_do() {
    use troupe::permissions::{AuditEntry, AuditSink, JsonlAuditSink};
    use troupe::store::postgres::audit::PgAudit;
    use troupe::store::team_copy::{AuditLine, CopyTo, TeamCopy};
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let sink = |ws: &std::path::Path| {
        JsonlAuditSink::open(&troupe::layout::Layout::new(ws), Arc::new(s.clock.clone()))
            .unwrap()
            .with_copy(CopyTo::to(
                Some(Arc::new(PgAudit::new(store.clone())) as Arc<dyn TeamCopy<AuditLine>>),
                "the team's audit misses it",
            ))
    };
    let entry = |agent: &str, tool: &str, allowed: bool| AuditEntry {
        agent: agent.parse().unwrap(),
        tool: tool.into(),
        allowed,
        rule: "default".into(),
        reason: "test".into(),
        input_digest: "0123456789abcdef".into(),
        sandbox: None,
    };
    let (lead_ws, worker_ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (lead, worker) = (sink(lead_ws.path()), sink(worker_ws.path()));
    lead.record(entry("lead", "spawn_teammate", true))
        .await
        .unwrap();
    worker
        .record(entry("writer", "write_file", false))
        .await
        .unwrap();
    let rows = PgAudit::new(store.clone()).after(0, 10).await.unwrap();
    let seen: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.agent.as_str(), r.tool.as_str(), r.decision.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("lead", "spawn_teammate", "allow"),
            ("writer", "write_file", "deny")
        ]
    );
    let file =
        std::fs::read_to_string(troupe::layout::Layout::new(worker_ws.path()).audit_log()).unwrap();
    assert_eq!(file, format!("{}\n", rows[1].line));
}

/// A shared team's job records: each process's copies, read back as the files are (by start
/// time), a finished record replacing its running one; a row that is not a record is an error
/// naming it.
#[tokio::test]
async fn the_teams_job_records_are_every_processs_and_checked_like_files() {
    use troupe::jobs::record::{read_all_shared, write_and_copy, JobId, JobRecord, JobState};
    use troupe::jobs::JobEnd;
    use troupe::store::postgres::jobs::PgJobs;
    use troupe::store::team_copy::{CopyTo, JobLine, TeamCopy};
    let Some(s) = pg() else { return };
    let store = s.pg.clone().unwrap();
    let jobs = Arc::new(PgJobs::new(store.clone()));
    let copy = CopyTo::to(
        Some(jobs.clone() as Arc<dyn TeamCopy<JobLine>>),
        "the team's job list misses it",
    );
    let record = |n: u128, command: &str, start: i64| JobRecord {
        id: JobId::from_uuid(uuid::Uuid::from_u128((0x4000 << 64) | (0x8000 << 48) | n)).unwrap(),
        agent: AgentName::lead(),
        command: command.into(),
        started_at_utc: at(start),
        state: JobState::Running,
    };
    let (a_ws, b_ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let later = record(1, "make test", 20);
    let earlier = record(2, "make lint", 10);
    write_and_copy(&troupe::layout::Layout::new(a_ws.path()), &copy, &later)
        .await
        .unwrap();
    write_and_copy(&troupe::layout::Layout::new(b_ws.path()), &copy, &earlier)
        .await
        .unwrap();
    let finished = JobRecord {
        state: JobState::Finished {
            end: JobEnd::Completed,
            exit_code: Some(0),
            finished_at_utc: at(30),
            output_tail: "ok\n".into(),
        },
        ..later.clone()
    };
    write_and_copy(&troupe::layout::Layout::new(a_ws.path()), &copy, &finished)
        .await
        .unwrap();
    assert_eq!(
        read_all_shared(jobs.as_ref()).await.unwrap(),
        vec![earlier, finished]
    );
    s.db.as_ref()
        .unwrap()
        .execute(
            "INSERT INTO troupe_jobs (team, id, host, record) VALUES \
             ('team-a', '00000000-0000-4000-8000-0000000000ee', 'h', 'not json')",
        )
        .unwrap();
    let err = read_all_shared(jobs.as_ref()).await.unwrap_err();
    assert_eq!(err.code(), "job_record_corrupt");
    assert!(err.to_string().contains("0000000000ee"), "{err}");
}

#[test]
fn the_raw_commit_figure_commits_what_it_counts() {
    // The benchmark's yardstick (`troupe-bench pg` `raw_commits_per_s`): every insert it
    // counts is committed, by as many connections as asked.
    let Some(db) = TestDb::create() else { return };
    let rate = db.raw_commits_per_s(3, 40).unwrap();
    assert!(rate > 0.0, "{rate}");
    assert_eq!(
        db.query_text("SELECT count(*)::text FROM raw_commits")
            .unwrap(),
        Some("120".to_owned())
    );
}
