//! Answers are single (SPEC §6) at the store: `answer` records the one answer to a request in
//! `answers/<request-id>.json` and delivers it under the store's locks; every other answer is
//! refused before anything is written; a record whose delivery was interrupted is finished, once.
//! Racing processes are in `concurrency`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use pretty_assertions::assert_eq;
use troupe::ids::SequentialIds;
use troupe::store::protocol::{Delivery, ProtocolStore};
use troupe::wire::{MailboxMessage, MessageId, ProtocolMessage, ProtocolRequest};

use super::support::*;

/// A mailbox stand-in: keeps what was delivered, refuses a second copy of an id (as mailbox
/// `send` does), and fails on demand.
#[derive(Default)]
struct Postbox {
    delivered: Mutex<Vec<ProtocolMessage>>,
    attempts: Mutex<Vec<MessageId>>,
    failing: AtomicBool,
}

impl Postbox {
    fn deliver(&self, message: &ProtocolMessage) -> Result<Delivery, String> {
        self.attempts.lock().unwrap().push(message.id());
        if self.failing.load(Ordering::SeqCst) {
            return Err("disk full (injected)".to_owned());
        }
        let mut delivered = self.delivered.lock().unwrap();
        if delivered.iter().any(|m| m.id() == message.id()) {
            return Ok(Delivery::AlreadyThere);
        }
        delivered.push(message.clone());
        Ok(Delivery::Sent)
    }

    fn delivered(&self) -> Vec<ProtocolMessage> {
        self.delivered.lock().unwrap().clone()
    }

    fn attempts(&self) -> Vec<MessageId> {
        self.attempts.lock().unwrap().clone()
    }
}

fn record_path(fx: &Fixture, request: &ProtocolRequest) -> std::path::PathBuf {
    fx.layout
        .protocol_answers_dir()
        .join(format!("{}.json", request.id()))
}

fn record_bytes(fx: &Fixture, request: &ProtocolRequest) -> Option<Vec<u8>> {
    std::fs::read(record_path(fx, request)).ok()
}

fn bytes_of(message: &ProtocolMessage) -> Vec<u8> {
    MailboxMessage::Protocol(message.clone()).to_json_bytes()
}

#[tokio::test]
async fn one_answer_is_recorded_then_delivered_and_every_other_is_refused() {
    let fx = Fixture::new();
    let store = fx.store();
    let postbox = Postbox::default();
    let request = store.create(plan_of("alice")).await.unwrap();
    let state = fx.state_bytes();

    let first = answer(&request, mid(1), true);
    assert_eq!(
        store
            .answer(&first, &|m: &ProtocolMessage| postbox.deliver(m))
            .await
            .unwrap(),
        Delivery::Sent
    );
    assert_eq!(postbox.delivered(), vec![first.clone()]);
    // The record is the response message itself; the request is untouched (still pending: the
    // recipient consumes the answer when it reads it).
    assert_eq!(record_bytes(&fx, &request), Some(bytes_of(&first)));
    assert_eq!(fx.state_bytes(), state);

    for (n, approved) in [(2, true), (3, false)] {
        let refused = store
            .answer(
                &answer(&request, mid(n), approved),
                &|m: &ProtocolMessage| postbox.deliver(m),
            )
            .await;
        assert_eq!(code(&refused), "protocol_state_error");
        assert_eq!(
            refused.unwrap_err().to_string(),
            format!(
                "protocol request {} was already answered (approved) by lead in message {}; a \
                 request takes one answer",
                request.id(),
                mid(1)
            )
        );
    }
    // Refusals wrote nothing: they only checked that the first answer is delivered.
    assert_eq!(postbox.delivered(), vec![first.clone()]);
    assert_eq!(postbox.attempts(), [mid(1), mid(1), mid(1)]);
    assert_eq!(record_bytes(&fx, &request), Some(bytes_of(&first)));
    assert_eq!(fx.state_bytes(), state);

    // Sending the recorded message itself again is harmless.
    assert_eq!(
        store
            .answer(&first, &|m: &ProtocolMessage| postbox.deliver(m))
            .await
            .unwrap(),
        Delivery::AlreadyThere
    );
    // Once consumed, the request refuses other answers the same way.
    store.consume_response(&first).await.unwrap();
    let late = store
        .answer(&answer(&request, mid(4), false), &|m: &ProtocolMessage| {
            postbox.deliver(m)
        })
        .await;
    assert_eq!(code(&late), "protocol_state_error");
    assert!(late
        .unwrap_err()
        .to_string()
        .contains("already answered (approved)"));
    assert_eq!(postbox.delivered(), [first]);
}

#[tokio::test]
async fn a_request_resolved_without_a_record_refuses_other_answers() {
    // A workspace from before answer records, or a response written by hand.
    let fx = Fixture::new();
    let store = fx.store();
    let postbox = Postbox::default();
    let request = store.create(shutdown_of("alice")).await.unwrap();
    let consumed = answer(&request, mid(1), true);
    store.consume_response(&consumed).await.unwrap();
    let refused = store
        .answer(&answer(&request, mid(2), true), &|m: &ProtocolMessage| {
            postbox.deliver(m)
        })
        .await;
    assert_eq!(code(&refused), "protocol_state_error");
    assert!(refused.unwrap_err().to_string().contains(&format!(
        "already answered (approved) by alice in message {}",
        mid(1)
    )),);
    assert_eq!(postbox.attempts(), Vec::<MessageId>::new());
    assert_eq!(record_bytes(&fx, &request), None);
}

#[tokio::test]
async fn answers_that_do_not_fit_write_nothing() {
    let fx = Fixture::new();
    let store = fx.store();
    let postbox = Postbox::default();
    let request = store.create(plan_of("alice")).await.unwrap();
    let wrong_sender = response(
        &request,
        mid(1),
        request.kind().response_message_kind(),
        &name("bob"),
        request.sender(),
        true,
    );
    assert_eq!(
        code(
            &store
                .answer(&wrong_sender, &|m: &ProtocolMessage| postbox.deliver(m))
                .await
        ),
        "protocol_mismatch"
    );
    let wrong_kind = response(
        &request,
        mid(2),
        troupe::wire::ProtocolMessageKind::ShutdownResponse,
        request.target(),
        request.sender(),
        true,
    );
    assert_eq!(
        code(
            &store
                .answer(&wrong_kind, &|m: &ProtocolMessage| postbox.deliver(m))
                .await
        ),
        "protocol_mismatch"
    );
    // Registered in another workspace only.
    let elsewhere = Fixture::new()
        .store_with_ids(Arc::new(SequentialIds::with_prefix(7)))
        .create(plan_of("alice"))
        .await
        .unwrap();
    let unknown = answer(&elsewhere, mid(3), true);
    assert_eq!(
        code(
            &store
                .answer(&unknown, &|m: &ProtocolMessage| postbox.deliver(m))
                .await
        ),
        "protocol_not_found"
    );
    fx.clock.set(request.expires_at_utc());
    assert_eq!(
        code(
            &store
                .answer(&answer(&request, mid(4), true), &|m: &ProtocolMessage| {
                    postbox.deliver(m)
                })
                .await
        ),
        "protocol_expired"
    );
    assert_eq!(postbox.attempts(), Vec::<MessageId>::new());
    assert!(!fx.layout.protocol_answers_dir().exists());
}

#[tokio::test]
async fn an_undelivered_answer_stays_recorded_and_is_finished_once() {
    let fx = Fixture::new();
    let store = fx.store();
    let postbox = Postbox::default();
    let first = store.create(plan_of("alice")).await.unwrap();
    let second = store.create(plan_of("bob")).await.unwrap();

    postbox.failing.store(true, Ordering::SeqCst);
    let answers = [answer(&first, mid(1), true), answer(&second, mid(2), false)];
    for message in &answers {
        let failed = store
            .answer(message, &|m: &ProtocolMessage| postbox.deliver(m))
            .await;
        assert_eq!(code(&failed), "protocol_delivery_error");
        assert!(failed
            .unwrap_err()
            .to_string()
            .contains("is recorded but could not be delivered (disk full (injected))"));
    }
    postbox.failing.store(false, Ordering::SeqCst);
    assert_eq!(postbox.delivered(), Vec::new());

    // The first: another answer is refused, and the refusal finishes the recorded one.
    let refused = store
        .answer(&answer(&first, mid(3), false), &|m: &ProtocolMessage| {
            postbox.deliver(m)
        })
        .await;
    assert!(refused.unwrap_err().to_string().contains(&format!(
        "already answered (approved) by lead in message {}",
        mid(1)
    )));
    assert_eq!(postbox.delivered(), [answers[0].clone()]);

    // The second: the next start delivers it; and only once, however often it runs.
    let started = fx.store();
    assert_eq!(
        started
            .deliver_recorded_answers(&|m: &ProtocolMessage| postbox.deliver(m))
            .await
            .unwrap(),
        [answers[1].clone()]
    );
    assert_eq!(
        started
            .deliver_recorded_answers(&|m: &ProtocolMessage| postbox.deliver(m))
            .await
            .unwrap(),
        Vec::new()
    );
    assert_eq!(postbox.delivered(), answers);
    // Consumed requests are no longer looked at.
    for message in &answers {
        store.consume_response(message).await.unwrap();
    }
    let before = postbox.attempts().len();
    started
        .deliver_recorded_answers(&|m: &ProtocolMessage| postbox.deliver(m))
        .await
        .unwrap();
    assert_eq!(postbox.attempts().len(), before);
}

#[tokio::test]
async fn a_failed_record_write_leaves_no_record_and_sends_nothing() {
    let fx = Fixture::new();
    let files = Arc::new(FailingFiles::default());
    let store = fx.store_with_files(files.clone());
    let postbox = Postbox::default();
    let request = store.create(plan_of("alice")).await.unwrap();
    files.fail_answer.store(true, Ordering::SeqCst);
    let failed = store
        .answer(&answer(&request, mid(1), true), &|m: &ProtocolMessage| {
            postbox.deliver(m)
        })
        .await;
    assert_eq!(code(&failed), "storage_error");
    assert_eq!(record_bytes(&fx, &request), None);
    assert_eq!(postbox.attempts(), Vec::<MessageId>::new());
    // Nothing stands in the way of the answer that follows.
    files.fail_answer.store(false, Ordering::SeqCst);
    let second = answer(&request, mid(2), false);
    assert_eq!(
        store
            .answer(&second, &|m: &ProtocolMessage| postbox.deliver(m))
            .await
            .unwrap(),
        Delivery::Sent
    );
    assert_eq!(postbox.delivered(), [second]);
}

#[tokio::test]
async fn a_bad_answer_record_is_reported_never_trusted() {
    let fx = Fixture::new();
    let store = fx.store();
    let postbox = Postbox::default();
    let request = store.create(plan_of("alice")).await.unwrap();
    let other = store.create(plan_of("bob")).await.unwrap();
    let path = record_path(&fx, &request);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();

    let foreign = bytes_of(&answer(&other, mid(9), true));
    for bytes in [&b"{not json"[..], &foreign] {
        std::fs::write(&path, bytes).unwrap();
        let refused = store
            .answer(&answer(&request, mid(1), true), &|m: &ProtocolMessage| {
                postbox.deliver(m)
            })
            .await;
        assert_eq!(code(&refused), "protocol_state_corrupt");
        assert_eq!(
            code(
                &store
                    .deliver_recorded_answers(&|m: &ProtocolMessage| postbox.deliver(m))
                    .await
            ),
            "protocol_state_corrupt"
        );
    }
    // A FIFO in its place is refused without blocking; so is a symlink.
    std::fs::remove_file(&path).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let refused = store
        .answer(&answer(&request, mid(1), true), &|m: &ProtocolMessage| {
            postbox.deliver(m)
        })
        .await;
    assert!(refused.unwrap_err().to_string().contains("FIFO"));
    std::fs::remove_file(&path).unwrap();
    let elsewhere = fx.layout.workspace().join("elsewhere.json");
    std::fs::write(&elsewhere, bytes_of(&answer(&request, mid(9), true))).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let refused = store
        .answer(&answer(&request, mid(1), true), &|m: &ProtocolMessage| {
            postbox.deliver(m)
        })
        .await;
    assert!(refused.unwrap_err().to_string().contains("symbolic link"));
    assert_eq!(postbox.attempts(), Vec::<MessageId>::new());
}

#[tokio::test]
async fn threads_on_several_instances_race_to_answer_and_one_is_sent() {
    let fx = Fixture::new();
    let stores = [Arc::new(fx.store()), Arc::new(fx.store())];
    let postbox = Arc::new(Postbox::default());
    for round in 0..4u64 {
        let request = stores[0].create(plan_of("alice")).await.unwrap();
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8u64)
            .map(|i| {
                let (store, barrier, postbox) = (
                    stores[(i % 2) as usize].clone(),
                    barrier.clone(),
                    postbox.clone(),
                );
                let message = answer(&request, mid(round * 100 + i), i % 2 == 0);
                thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    barrier.wait();
                    runtime
                        .block_on(store.answer(&message, &|m: &ProtocolMessage| postbox.deliver(m)))
                })
            })
            .collect();
        let codes: Vec<&str> = handles
            .into_iter()
            .map(|h| code(&h.join().unwrap()))
            .collect();
        assert_eq!(codes.iter().filter(|c| **c == "ok").count(), 1, "{codes:?}");
        assert!(
            codes
                .iter()
                .all(|c| *c == "ok" || *c == "protocol_state_error"),
            "{codes:?}"
        );
        let sent: Vec<_> = postbox
            .delivered()
            .into_iter()
            .filter(|m| m.request_id() == request.id())
            .collect();
        assert_eq!(sent.len(), 1);
        assert_eq!(record_bytes(&fx, &request), Some(bytes_of(&sent[0])));
    }
}
