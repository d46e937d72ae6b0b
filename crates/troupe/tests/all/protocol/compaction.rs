//! The archive: `state.json` stays small, nothing is lost or reordered, replays still work, and
//! the leftovers of a crash (a request in both files, a torn last line) are handled.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::store::protocol::{ProtocolError, ProtocolStore, COMPACT_ABOVE};
use troupe::wire::{ProtocolRequest, RequestId};

use super::support::*;

fn ids(requests: &[ProtocolRequest]) -> Vec<RequestId> {
    requests.iter().map(|r| r.id()).collect()
}

fn assert_archive_is_clean(fx: &Fixture) {
    let bytes = fx.archive_bytes().unwrap_or_default();
    assert!(bytes.is_empty() || bytes.ends_with(b"\n"), "torn tail left");
    let lines = fx.archive_lines();
    let unique: HashSet<_> = lines.iter().map(|r| r.id()).collect();
    assert_eq!(unique.len(), lines.len(), "a request archived twice");
    assert!(lines.iter().all(|r| !r.is_pending()));
}

#[tokio::test]
async fn many_resolutions_keep_state_small_and_everything_visible() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut expected = Vec::new();
    let early_pending = store.create(shutdown_of("dave")).await.unwrap();
    expected.push(early_pending.clone());
    fx.clock.advance_millis(1);
    let alice_plan = store.create(plan_of("alice")).await.unwrap();
    let alice_plan = store
        .consume_response(&answer(&alice_plan, mid(100_000), true))
        .await
        .unwrap()
        .request;
    expected.push(alice_plan.clone());
    let mut bob_latest = None;
    for i in 0..300u64 {
        fx.clock.advance_millis(1);
        let new = if i.is_multiple_of(10) {
            plan_of("bob")
        } else {
            shutdown_of("alice")
        };
        let request = store.create(new).await.unwrap();
        let resolved = store
            .consume_response(&answer(&request, mid(i), !i.is_multiple_of(3)))
            .await
            .unwrap()
            .request;
        if i.is_multiple_of(10) {
            bob_latest = Some(resolved.clone());
        }
        expected.push(resolved);
        let in_state = fx.state_requests().len();
        assert!(
            in_state <= COMPACT_ABOVE + 4,
            "state.json holds {in_state} requests after {i} round trips"
        );
    }
    assert!(fx.archive_lines().len() > 250);
    assert_archive_is_clean(&fx);
    // The pending request and both latest plans are still in state.json.
    let state_ids: Vec<String> = fx
        .state_requests()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    for kept in [&early_pending, &alice_plan, bob_latest.as_ref().unwrap()] {
        assert!(
            state_ids.contains(&kept.id().to_string()),
            "{} left state.json",
            kept.id()
        );
    }
    for reader in [&store, &fx.store()] {
        assert_eq!(ids(&reader.list().await.unwrap()), ids(&expected));
        assert_eq!(reader.list().await.unwrap(), expected);
        assert_eq!(
            reader.latest_plan_of(&name("alice")).await.unwrap(),
            Some(alice_plan.clone())
        );
        assert_eq!(
            reader.latest_plan_of(&name("bob")).await.unwrap(),
            bob_latest.clone()
        );
        assert_eq!(reader.pending().await.unwrap(), vec![early_pending.clone()]);
        // An archived request: readable, its response replays, another response is a duplicate.
        let archived = &expected[3];
        assert!(!state_ids.contains(&archived.id().to_string()));
        assert_eq!(
            reader.get(archived.id()).await.unwrap(),
            Some(archived.clone())
        );
        let same = answer(archived, mid(1), true);
        let replay = reader.consume_response(&same).await.unwrap();
        assert!(replay.replayed);
        assert_eq!(&replay.request, archived);
        assert_eq!(
            code(
                &reader
                    .consume_response(&answer(archived, mid(99_999), true))
                    .await
            ),
            "protocol_state_error"
        );
    }
}

#[tokio::test]
async fn creation_order_survives_compaction_with_equal_times() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut expected = Vec::new();
    // A pending request, then resolved ones created in the same millisecond.
    expected.push(store.create(shutdown_of("dave")).await.unwrap());
    expected.extend(resolve_in_same_ms(&store, 40, 0).await);
    // A later millisecond where many requests share one time across several batches.
    fx.clock.advance_millis(1);
    expected.extend(resolve_in_same_ms(&store, 3 * COMPACT_ABOVE as u64, 1000).await);
    fx.clock.advance_millis(1);
    expected.push(store.create(shutdown_of("erin")).await.unwrap());
    assert!(fx.archive_lines().len() >= 2 * COMPACT_ABOVE);
    assert_eq!(ids(&store.list().await.unwrap()), ids(&expected));
    assert_eq!(ids(&fx.store().list().await.unwrap()), ids(&expected));
}

async fn resolve_in_same_ms(store: &dyn ProtocolStore, n: u64, base: u64) -> Vec<ProtocolRequest> {
    let mut resolved = Vec::new();
    for i in 0..n {
        let request = store.create(shutdown_of("alice")).await.unwrap();
        resolved.push(
            store
                .consume_response(&answer(&request, mid(base + i), true))
                .await
                .unwrap()
                .request,
        );
    }
    resolved
}

#[tokio::test]
async fn clock_backwards_counts_archived_requests() {
    let fx = Fixture::new();
    let store = fx.store();
    let early = store.create(shutdown_of("bob")).await.unwrap();
    let resolved = resolve_many(&fx, &store, COMPACT_ABOVE as u64 + 1, 0).await;
    // Resolving the early request compacts every later one: the latest creation now lives
    // only in the archive, and state.json's newest request is older.
    store
        .consume_response(&answer(&early, mid(500), true))
        .await
        .unwrap();
    assert_eq!(fx.state_requests().len(), 1);
    let latest = resolved.last().unwrap();
    assert!(fx.archive_lines().iter().any(|r| r.id() == latest.id()));
    fx.clock.set(latest.created_at_utc());
    fx.clock.advance_millis(-1);
    let before = fx.state_bytes();
    for store in [store, fx.store()] {
        match store.create(shutdown_of("carol")).await {
            Err(ProtocolError::ClockBackwards { latest: at, .. }) => {
                assert_eq!(at, latest.created_at_utc())
            }
            other => panic!("expected ClockBackwards, got {other:?}"),
        }
    }
    assert_eq!(fx.state_bytes(), before);
}

#[tokio::test]
async fn a_crash_between_append_and_replace_leaves_identical_copies_that_load() {
    let fx = Fixture::new();
    let files = Arc::new(FailingFiles::default());
    let store = fx.store_with_files(files.clone());
    let resolved = resolve_many(&fx, &store, COMPACT_ABOVE as u64 + 1, 0).await;
    assert_eq!(fx.archive_bytes(), None, "not compacted yet");
    // The next write appends the batch, then its state replace fails: the crash window.
    files.fail_replace.store(true, Ordering::SeqCst);
    fx.clock.advance_millis(1);
    let before = fx.state_bytes();
    assert_eq!(
        code(&store.create(shutdown_of("bob")).await),
        "storage_error"
    );
    assert_eq!(fx.state_bytes(), before);
    assert_eq!(ids(&fx.archive_lines()), ids(&resolved));
    // Both copies are loaded once, by this store and by a fresh one.
    assert_eq!(store.list().await.unwrap(), resolved);
    assert_eq!(fx.store().list().await.unwrap(), resolved);
    // The next compaction drops them from state.json without appending them again.
    files.fail_replace.store(false, Ordering::SeqCst);
    let appends = files.appends.load(Ordering::SeqCst);
    let bob = store.create(shutdown_of("bob")).await.unwrap();
    assert_eq!(
        files.appends.load(Ordering::SeqCst),
        appends,
        "nothing new to append"
    );
    assert_eq!(fx.state_requests().len(), 1);
    assert_eq!(ids(&fx.archive_lines()), ids(&resolved));
    let mut expected = resolved.clone();
    expected.push(bob);
    assert_eq!(fx.store().list().await.unwrap(), expected);
}

#[tokio::test]
async fn a_request_in_both_files_written_by_hand_is_read_once() {
    let fx = Fixture::new();
    let store = fx.store();
    let resolved = resolve_many(&fx, &store, 5, 0).await;
    let pending = store.create(shutdown_of("bob")).await.unwrap();
    // Simulate the crash: the first three resolved requests were appended, state not replaced.
    let lines: Vec<u8> = resolved[..3]
        .iter()
        .flat_map(|r| {
            let mut line = serde_json::to_vec(r).unwrap();
            line.push(b'\n');
            line
        })
        .collect();
    std::fs::write(fx.archive_path(), &lines).unwrap();
    let mut expected = resolved.clone();
    expected.push(pending);
    assert_eq!(fx.store().list().await.unwrap(), expected);
    assert_eq!(store.list().await.unwrap(), expected);
    assert!(
        store
            .consume_response(&answer(&resolved[0], mid(0), true))
            .await
            .unwrap()
            .replayed
    );
}

#[tokio::test]
async fn a_torn_last_line_is_ignored_then_cut_by_the_next_writer() {
    let fx = Fixture::new();
    let store = fx.store();
    let first = resolve_many(&fx, &store, COMPACT_ABOVE as u64 + 1, 0).await;
    fx.clock.advance_millis(1);
    store.create(shutdown_of("bob")).await.unwrap(); // compacts `first`
    assert_eq!(fx.archive_lines().len(), first.len());
    // A crash in the middle of the next batch's append: half a line, no newline.
    let in_state = store.list().await.unwrap().last().cloned().unwrap();
    let line = serde_json::to_vec(&in_state).unwrap();
    let mut bytes = fx.archive_bytes().unwrap();
    bytes.extend_from_slice(&line[..line.len() / 2]);
    std::fs::write(fx.archive_path(), &bytes).unwrap();
    let fresh = fx.store();
    assert_eq!(fresh.list().await.unwrap(), store.list().await.unwrap());
    // More compactions: the torn bytes are cut before appending, nothing is lost.
    let second = resolve_many(&fx, &fresh, COMPACT_ABOVE as u64 + 1, 1000).await;
    fx.clock.advance_millis(1);
    fresh.create(shutdown_of("carol")).await.unwrap();
    assert_archive_is_clean(&fx);
    let all = fx.store().list().await.unwrap();
    assert_eq!(all.len(), first.len() + second.len() + 2);
}

#[tokio::test]
async fn a_failed_archive_append_does_not_fail_the_write() {
    let fx = Fixture::new();
    let files = Arc::new(FailingFiles::default());
    let store = fx.store_with_files(files.clone());
    let resolved = resolve_many(&fx, &store, COMPACT_ABOVE as u64 + 1, 0).await;
    files.fail_append.store(true, Ordering::SeqCst);
    fx.clock.advance_millis(1);
    let bob = store.create(shutdown_of("bob")).await.unwrap();
    assert_eq!(
        fx.state_requests().len(),
        resolved.len() + 1,
        "not compacted"
    );
    assert_archive_is_clean(&fx);
    files.fail_append.store(false, Ordering::SeqCst);
    store
        .consume_response(&answer(&bob, mid(900), true))
        .await
        .unwrap();
    assert!(fx.state_requests().len() <= 1);
    assert_archive_is_clean(&fx);
    assert_eq!(fx.store().list().await.unwrap().len(), resolved.len() + 1);
}

#[tokio::test]
async fn a_transition_whose_write_failed_never_reaches_the_archive() {
    // With either count, the failing consume below is a write that may compact.
    for others in [COMPACT_ABOVE as u64, COMPACT_ABOVE as u64 + 1] {
        let fx = Fixture::new();
        let files = Arc::new(FailingFiles::default());
        let store = fx.store_with_files(files.clone());
        let bob = store.create(shutdown_of("bob")).await.unwrap();
        resolve_many(&fx, &store, others, 0).await;
        files.fail_replace.store(true, Ordering::SeqCst);
        let msg = answer(&bob, mid(777), true);
        assert_eq!(code(&store.consume_response(&msg).await), "storage_error");
        assert!(fx.archive_lines().iter().all(|r| r.id() != bob.id()));
        let fresh = fx.store();
        assert!(fresh.get(bob.id()).await.unwrap().unwrap().is_pending());
        files.fail_replace.store(false, Ordering::SeqCst);
        assert!(!store.consume_response(&msg).await.unwrap().replayed);
    }
}
