//! The protocol store port's contract (SPEC §5, §6), on both backends.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::store::mailbox::AckOutcome;
use troupe::store::protocol::{Delivery, ProtocolStore};
use troupe::store::response_ack::ResponseAckError;
use troupe::wire::{MailboxMessage, ProtocolMessage, ProtocolMessageKind, RequestStatus};

use super::{block_on, both_async, Backend, Stores};
use crate::protocol::support::{
    announce, answer, code, mid, name, plan_of, response, shutdown_of, with_ttl,
};

both_async!(
    requests_are_registered_and_listed_in_creation_order,
    a_response_is_consumed_exactly_once_and_replayed_unchanged,
    mismatched_responses_change_nothing,
    the_window_closes_and_the_clock_may_not_go_back,
    an_answer_is_single_and_an_interrupted_delivery_is_finished_once,
    threads_racing_to_consume_resolve_a_request_once,
    threads_racing_to_answer_send_one_answer,
    an_answer_in_delivery_is_left_to_its_writer_and_finished_once_it_is_gone,
    a_response_is_consumed_and_its_message_acked_together,
    a_refused_response_is_neither_consumed_nor_acked,
);

async fn requests_are_registered_and_listed_in_creation_order(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.protocol();
    let a = store.create(shutdown_of("alice")).await.unwrap();
    s.clock.advance_millis(5);
    let p1 = store.create(plan_of("alice")).await.unwrap();
    let p2 = store.create(plan_of("alice")).await.unwrap();
    let b = store.create(plan_of("bob")).await.unwrap();
    assert_eq!(store.get(a.id()).await.unwrap(), Some(a.clone()));
    let listed: Vec<_> = store.list().await.unwrap().iter().map(|r| r.id()).collect();
    assert_eq!(listed, vec![a.id(), p1.id(), p2.id(), b.id()]);
    assert_eq!(store.pending().await.unwrap().len(), 4);
    // The latest plan by creation order, ties by registration.
    assert_eq!(
        store
            .latest_plan_of(&name("alice"))
            .await
            .unwrap()
            .map(|r| r.id()),
        Some(p2.id())
    );
    assert_eq!(store.latest_plan_of(&name("carol")).await.unwrap(), None);
    // A request message must carry what was registered.
    store
        .validate_request(&announce(&p1, mid(1)))
        .await
        .unwrap();
    // Another process sees the same (a second instance over the same backend).
    assert_eq!(
        s.protocol().list().await.unwrap(),
        store.list().await.unwrap()
    );
}

async fn a_response_is_consumed_exactly_once_and_replayed_unchanged(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.protocol();
    let request = store.create(plan_of("alice")).await.unwrap();
    let yes = answer(&request, mid(1), true);
    let checked = store.validate_response(&yes).await.unwrap();
    assert!(!checked.replayed);
    assert!(store.get(request.id()).await.unwrap().unwrap().is_pending());
    let consumed = store.consume_response(&yes).await.unwrap();
    assert!(!consumed.replayed);
    assert_eq!(consumed.request.stored_status(), RequestStatus::Approved);
    // The same message again: a replay, the stored result, nothing changed.
    let replay = store.consume_response(&yes).await.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.request, consumed.request);
    // Another message: a duplicate, refused.
    let no = answer(&request, mid(2), false);
    assert_eq!(
        code(&store.consume_response(&no).await),
        "protocol_state_error"
    );
    assert_eq!(
        store.get(request.id()).await.unwrap().unwrap(),
        consumed.request
    );
    assert!(store.pending().await.unwrap().is_empty());
}

async fn mismatched_responses_change_nothing(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.protocol();
    let shutdown = store.create(shutdown_of("alice")).await.unwrap();
    let plan = store.create(plan_of("bob")).await.unwrap();
    // A shutdown answer to a plan request: the wrong kind.
    let wrong_kind = crate::protocol::support::response(
        &plan,
        mid(1),
        shutdown.kind().response_message_kind(),
        plan.target(),
        plan.sender(),
        true,
    );
    assert_eq!(
        code(&store.consume_response(&wrong_kind).await),
        "protocol_mismatch"
    );
    // From the wrong party.
    let forged = crate::protocol::support::response(
        &shutdown,
        mid(2),
        shutdown.kind().response_message_kind(),
        &name("mallory"),
        shutdown.sender(),
        true,
    );
    assert_eq!(
        code(&store.consume_response(&forged).await),
        "protocol_mismatch"
    );
    assert_eq!(
        code(
            &store
                .answer(&forged, &|_: &ProtocolMessage| Ok(Delivery::Sent))
                .await
        ),
        "protocol_mismatch"
    );
    // An unknown request.
    let other = Stores::new(backend).unwrap();
    for _ in 0..10 {
        troupe::ids::IdGenerator::request_id(other.ids.as_ref());
    }
    let elsewhere = other.protocol().create(shutdown_of("zed")).await.unwrap();
    assert_eq!(
        code(
            &store
                .consume_response(&answer(&elsewhere, mid(3), true))
                .await
        ),
        "protocol_not_found"
    );
    assert_eq!(store.pending().await.unwrap().len(), 2);
}

async fn the_window_closes_and_the_clock_may_not_go_back(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.protocol();
    let request = store
        .create(with_ttl(shutdown_of("alice"), Duration::from_millis(100)))
        .await
        .unwrap();
    s.clock.advance_millis(100);
    let late = answer(&request, mid(1), true);
    assert_eq!(
        code(&store.consume_response(&late).await),
        "protocol_expired"
    );
    assert_eq!(
        code(
            &store
                .answer(&late, &|_: &ProtocolMessage| Ok(Delivery::Sent))
                .await
        ),
        "protocol_expired"
    );
    assert!(store.get(request.id()).await.unwrap().unwrap().is_pending());
    s.clock.set(request.created_at_utc());
    s.clock.advance_millis(-1);
    assert_eq!(
        code(&store.create(plan_of("bob")).await),
        "protocol_clock_error"
    );
}

async fn an_answer_is_single_and_an_interrupted_delivery_is_finished_once(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.protocol();
    let request = store.create(plan_of("alice")).await.unwrap();
    let delivered = Mutex::new(Vec::<ProtocolMessage>::new());
    let failing = std::sync::atomic::AtomicBool::new(true);
    let deliver = |m: &ProtocolMessage| {
        if failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("mailbox down (injected)".to_owned());
        }
        let mut d = delivered.lock().unwrap();
        if d.iter().any(|x| x.id() == m.id()) {
            return Ok(Delivery::AlreadyThere);
        }
        d.push(m.clone());
        Ok(Delivery::Sent)
    };
    let first = answer(&request, mid(1), true);
    // Recorded, not delivered: that answer is *the* answer now.
    assert_eq!(
        code(&store.answer(&first, &deliver).await),
        "protocol_delivery_error"
    );
    failing.store(false, std::sync::atomic::Ordering::SeqCst);
    let second = answer(&request, mid(2), false);
    let refused = store.answer(&second, &deliver).await;
    assert_eq!(code(&refused), "protocol_state_error");
    // The refusal finished the first answer's delivery, once.
    assert_eq!(delivered.lock().unwrap().clone(), vec![first.clone()]);
    assert_eq!(
        store.deliver_recorded_answers(&deliver).await.unwrap(),
        Vec::<ProtocolMessage>::new()
    );
    // Sending the recorded message again is allowed and changes nothing.
    assert_eq!(
        store.answer(&first, &deliver).await.unwrap(),
        Delivery::AlreadyThere
    );
    assert_eq!(delivered.lock().unwrap().len(), 1);

    // A run start delivers a recorded answer whose delivery never happened.
    let other = store.create(plan_of("bob")).await.unwrap();
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let lone = answer(&other, mid(3), true);
    assert_eq!(
        code(&store.answer(&lone, &deliver).await),
        "protocol_delivery_error"
    );
    failing.store(false, std::sync::atomic::Ordering::SeqCst);
    let finished = s
        .protocol()
        .deliver_recorded_answers(&deliver)
        .await
        .unwrap();
    assert_eq!(finished, vec![lone.clone()]);
    assert_eq!(delivered.lock().unwrap().len(), 2);
}

async fn threads_racing_to_consume_resolve_a_request_once(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let request = s.protocol().create(plan_of("alice")).await.unwrap();
    let stores: Vec<Arc<dyn ProtocolStore>> = (0..4).map(|_| s.protocol()).collect();
    let barrier = Barrier::new(8);
    let wins = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let store = stores[t as usize % 4].clone();
            let (barrier, wins, request) = (&barrier, &wins, &request);
            scope.spawn(move || {
                let message = answer(request, mid(100 + t), t % 2 == 0);
                barrier.wait();
                if let Ok(consumed) = block_on(store.consume_response(&message)) {
                    assert!(!consumed.replayed);
                    wins.lock().unwrap().push(message.id());
                }
            });
        }
    });
    let wins = wins.lock().unwrap().clone();
    assert_eq!(wins.len(), 1, "winners: {wins:?}");
    let resolved = s.protocol().get(request.id()).await.unwrap().unwrap();
    assert_eq!(resolved.resolution().map(|r| r.message_id), Some(wins[0]));
}

async fn threads_racing_to_answer_send_one_answer(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let request = s.protocol().create(plan_of("alice")).await.unwrap();
    let stores: Vec<Arc<dyn ProtocolStore>> = (0..4).map(|_| s.protocol()).collect();
    let barrier = Barrier::new(8);
    let delivered = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let store = stores[t as usize % 4].clone();
            let (barrier, delivered, request) = (&barrier, &delivered, &request);
            scope.spawn(move || {
                let message = answer(request, mid(200 + t), true);
                barrier.wait();
                let _ = block_on(store.answer(&message, &|m: &ProtocolMessage| {
                    let mut d = delivered.lock().unwrap();
                    if d.iter().any(|x: &ProtocolMessage| x.id() == m.id()) {
                        return Ok(Delivery::AlreadyThere);
                    }
                    d.push(m.clone());
                    Ok(Delivery::Sent)
                }));
            });
        }
    });
    assert_eq!(delivered.lock().unwrap().len(), 1);
}

/// A mailbox for these tests: delivers each message id once, and says who delivered what.
#[derive(Default)]
struct Mailbox(Mutex<Vec<(&'static str, ProtocolMessage)>>);

impl Mailbox {
    fn deliver(&self, by: &'static str, m: &ProtocolMessage) -> Result<Delivery, String> {
        let mut d = self.0.lock().unwrap();
        if d.iter().any(|(_, x)| x.id() == m.id()) {
            return Ok(Delivery::AlreadyThere);
        }
        d.push((by, m.clone()));
        Ok(Delivery::Sent)
    }

    fn delivered(&self) -> Vec<(&'static str, ProtocolMessage)> {
        self.0.lock().unwrap().clone()
    }
}

/// How many processes or threads wait for the file store's protocol lock (`/proc/locks`).
fn waiting_for_protocol_lock(s: &Stores) -> usize {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(s.layout.protocol_lock()).unwrap().ino();
    std::fs::read_to_string("/proc/locks")
        .unwrap()
        .lines()
        .filter(|l| l.contains("-> FLOCK") && l.contains(&format!(":{inode} ")))
        .count()
}

/// Answerer A recorded its answer and is delivering it (held there) when B answers: B is
/// refused and delivers nothing — the answer is A's to deliver, and A is alive. On PostgreSQL B
/// returns while A is still held; on files B waits for the protocol lock A holds across its
/// delivery. Then A dies before its message is written: the next answerer finishes the
/// delivery, once, and a run's start finds nothing left.
async fn an_answer_in_delivery_is_left_to_its_writer_and_finished_once_it_is_gone(
    backend: Backend,
) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let request = s.protocol().create(plan_of("alice")).await.unwrap();
    let (store_a, store_b, store_c) = (s.protocol(), s.protocol(), s.protocol());
    let first = answer(&request, mid(1), true);
    let mailbox = Mailbox::default();
    let (mid_delivery, held) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    // A delivery is `Sync`: the receiving end is shared behind a lock.
    let released = Mutex::new(released);
    std::thread::scope(|scope| {
        let a_answer = &first;
        let released = &released;
        let a = scope.spawn(move || {
            block_on(store_a.answer(a_answer, &|_: &ProtocolMessage| {
                mid_delivery.send(()).unwrap();
                released.lock().unwrap().recv().unwrap();
                // A dies here, before its message is written.
                Err("killed mid-delivery (injected)".to_owned())
            }))
        });
        held.recv().unwrap();
        let b = scope.spawn(|| {
            block_on(async {
                let deliver = |m: &ProtocolMessage| mailbox.deliver("b", m);
                let refused = store_b
                    .answer(&answer(&request, mid(2), false), &deliver)
                    .await;
                (refused, store_b.deliver_recorded_answers(&deliver).await)
            })
        });
        let (refused, started) = if backend == Backend::Postgres {
            let b = b.join().unwrap();
            release.send(()).unwrap();
            b
        } else {
            while waiting_for_protocol_lock(&s) == 0 {
                std::thread::yield_now();
            }
            release.send(()).unwrap();
            b.join().unwrap()
        };
        assert_eq!(code(&refused), "protocol_state_error", "{refused:?}");
        if backend == Backend::Postgres {
            assert_eq!(started.unwrap(), Vec::<ProtocolMessage>::new());
        }
        assert_eq!(code(&a.join().unwrap()), "protocol_delivery_error");
    });
    // A is gone: the next answerer delivers A's answer, once — C on PostgreSQL (B had left it
    // to A); on files B itself, whose turn came only after A had died.
    let deliver = |m: &ProtocolMessage| mailbox.deliver("c", m);
    let refused = store_c
        .answer(&answer(&request, mid(3), true), &deliver)
        .await;
    assert_eq!(code(&refused), "protocol_state_error");
    let finisher = if backend == Backend::Postgres {
        "c"
    } else {
        "b"
    };
    assert_eq!(mailbox.delivered(), vec![(finisher, first.clone())]);
    assert_eq!(
        store_c.deliver_recorded_answers(&deliver).await.unwrap(),
        Vec::<ProtocolMessage>::new()
    );
    assert_eq!(mailbox.delivered().len(), 1);
}

/// The lead claims a shutdown response: the consume and the ack finish it together, and a
/// retry (a redelivery after a lost answer) is a replay that acks nothing twice.
async fn a_response_is_consumed_and_its_message_acked_together(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let request = s.protocol().create(shutdown_of("alice")).await.unwrap();
    let mailbox = s.claiming_mailbox(Duration::from_secs(60));
    let finish = s.response_ack(&mailbox);
    let lead = troupe::wire::AgentName::lead();
    let yes = answer(&request, mid(7), true);
    mailbox
        .port()
        .send(&MailboxMessage::Protocol(yes.clone()))
        .await
        .unwrap();
    let claimed = mailbox.port().claim(&lead).await.unwrap().unwrap();
    let (consumed, acked) = finish.consume_and_ack(&lead, &claimed, &yes).await.unwrap();
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
    let counts = mailbox.port().counts(&lead).await.unwrap();
    assert_eq!((counts.processing, counts.done), (0, 1));
    let (again, acked) = finish.consume_and_ack(&lead, &claimed, &yes).await.unwrap();
    assert!(again.replayed);
    assert_eq!(acked, AckOutcome::AlreadyDone);
    assert_eq!(mailbox.port().counts(&lead).await.unwrap().done, 1);
}

/// A response that does not pair with its request (here: a plan response to a shutdown) is
/// refused by the consume; the message stays claimed (for the caller to quarantine) and the
/// request pending.
async fn a_refused_response_is_neither_consumed_nor_acked(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let request = s.protocol().create(shutdown_of("alice")).await.unwrap();
    let mailbox = s.claiming_mailbox(Duration::from_secs(60));
    let finish = s.response_ack(&mailbox);
    let lead = troupe::wire::AgentName::lead();
    let wrong = response(
        &request,
        mid(8),
        ProtocolMessageKind::PlanApprovalResponse,
        &name("alice"),
        &lead,
        true,
    );
    mailbox
        .port()
        .send(&MailboxMessage::Protocol(wrong.clone()))
        .await
        .unwrap();
    let claimed = mailbox.port().claim(&lead).await.unwrap().unwrap();
    let err = finish
        .consume_and_ack(&lead, &claimed, &wrong)
        .await
        .unwrap_err();
    assert!(matches!(err, ResponseAckError::Consume(_)), "{err:?}");
    assert_eq!(err.code(), "protocol_mismatch");
    assert_eq!(
        s.protocol()
            .get(request.id())
            .await
            .unwrap()
            .unwrap()
            .stored_status(),
        RequestStatus::Pending
    );
    assert_eq!(mailbox.port().counts(&lead).await.unwrap().processing, 1);
}

/// PostgreSQL: a writer whose connection ends mid-delivery (its process killed, its host gone)
/// leaves its delivery lock behind no more than a dead run leaves `run.lock`: the server drops
/// it, and the next answerer finishes the delivery, once.
#[test]
fn a_writer_whose_connection_died_mid_delivery_has_its_answer_finished_once() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let db = s.db.as_ref().unwrap();
    let request = block_on(s.protocol().create(plan_of("alice"))).unwrap();
    let (store_a, store_c) = (s.protocol(), s.protocol());
    let first = answer(&request, mid(1), true);
    let mailbox = Mailbox::default();
    let (mid_delivery, held) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    // The connection holding the delivery lock of this request (class 4, keyed by
    // schema/team/request), ended as a killed process's would be.
    let kill_the_writers_connection = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_locks
          WHERE locktype = 'advisory' AND classid = 4 AND objsubid = 2 AND granted
            AND objid::bigint = (hashtext('{}/team-a/{}')::bigint + 4294967296) % 4294967296",
        db.schema(),
        request.id()
    );
    // A delivery is `Sync`: the receiving end is shared behind a lock.
    let released = Mutex::new(released);
    std::thread::scope(|scope| {
        let a_answer = &first;
        let released = &released;
        let a = scope.spawn(move || {
            block_on(store_a.answer(a_answer, &|_: &ProtocolMessage| {
                mid_delivery.send(()).unwrap();
                released.lock().unwrap().recv().unwrap();
                Err("killed mid-delivery (injected)".to_owned())
            }))
        });
        held.recv().unwrap();
        assert_eq!(
            db.query_text(&kill_the_writers_connection).unwrap(),
            Some("t".to_owned()),
            "the writer holds its delivery lock while it delivers"
        );
        // The server ends the session asynchronously: wait until its lock is gone.
        while db
            .query_text(&kill_the_writers_connection)
            .unwrap()
            .is_some()
        {
            std::thread::yield_now();
        }
        let deliver = |m: &ProtocolMessage| mailbox.deliver("c", m);
        let refused = block_on(store_c.answer(&answer(&request, mid(2), false), &deliver));
        assert_eq!(code(&refused), "protocol_state_error");
        assert_eq!(mailbox.delivered(), vec![("c", first.clone())]);
        assert_eq!(
            block_on(store_c.deliver_recorded_answers(&deliver)).unwrap(),
            Vec::<ProtocolMessage>::new()
        );
        release.send(()).unwrap();
        assert_eq!(code(&a.join().unwrap()), "protocol_delivery_error");
    });
    assert_eq!(mailbox.delivered().len(), 1);
}
