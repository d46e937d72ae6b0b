//! Archived requests are read back from `archive.jsonl`, not kept in memory: a line changed on
//! disk after it was indexed is noticed, replays of archived requests survive a reopen, and an
//! instance reads what another instance archived.

use std::io::{Seek, SeekFrom, Write};

use pretty_assertions::assert_eq;
use troupe::store::protocol::{JsonProtocolStore, ProtocolStore, COMPACT_ABOVE};
use troupe::wire::ProtocolRequest;

use super::support::*;

/// Resolves enough requests, then writes once more so that they are compacted; returns them.
async fn archived_batch(fx: &Fixture, store: &JsonProtocolStore) -> Vec<ProtocolRequest> {
    let resolved = resolve_many(fx, store, COMPACT_ABOVE as u64 + 1, 0).await;
    fx.clock.advance_millis(1);
    store.create(shutdown_of("bob")).await.unwrap();
    let archived: Vec<_> = fx.archive_lines().iter().map(|r| r.id()).collect();
    assert_eq!(
        archived,
        resolved.iter().map(|r| r.id()).collect::<Vec<_>>()
    );
    let in_state = fx.state_requests();
    assert!(resolved
        .iter()
        .all(|r| in_state.iter().all(|s| s["id"] != r.id().to_string())));
    resolved
}

/// The byte offset of `request`'s line in the archive, and the line.
fn line_of(fx: &Fixture, request: &ProtocolRequest) -> (u64, Vec<u8>) {
    let bytes = fx.archive_bytes().unwrap();
    let mut offset = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let parsed: ProtocolRequest = serde_json::from_slice(line).unwrap();
        if parsed.id() == request.id() {
            return (offset as u64, line.to_vec());
        }
        offset += line.len();
    }
    panic!("{} is not archived", request.id());
}

/// Overwrites bytes in place, keeping the file's length (nothing looks appended).
fn overwrite(fx: &Fixture, offset: u64, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(fx.archive_path())
        .unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

#[tokio::test]
async fn get_reads_an_archived_request_from_the_file() {
    let fx = Fixture::new();
    let store = fx.store();
    let archived = archived_batch(&fx, &store).await;
    let target = &archived[5];
    let neighbour = &archived[6];
    assert_eq!(store.get(target.id()).await.unwrap(), Some(target.clone()));
    let (offset, line) = line_of(&fx, target);
    let len_before = fx.archive_bytes().unwrap().len();

    // Same length, still valid JSON of a resolved request, but another id.
    let id = target.id().to_string();
    let other = format!(
        "{}{}",
        &id[..id.len() - 1],
        if id.ends_with('f') { 'e' } else { 'f' }
    );
    let needle = format!("\"id\":\"{id}\"");
    let text = String::from_utf8(line.clone()).unwrap();
    assert!(text.contains(&needle), "{text}");
    let other_id = text
        .replacen(&needle, &format!("\"id\":\"{other}\""), 1)
        .into_bytes();
    assert!(serde_json::from_slice::<ProtocolRequest>(&other_id).is_ok());
    // Same length, not JSON at all.
    let mut garbage = vec![b'#'; line.len() - 1];
    garbage.push(b'\n');
    for changed in [other_id, garbage] {
        assert_eq!(changed.len(), line.len());
        overwrite(&fx, offset, &changed);
        assert_eq!(fx.archive_bytes().unwrap().len(), len_before);
        // The instance indexed the line before it changed: only a read from disk can notice.
        let err = store.get(target.id()).await.unwrap_err();
        assert_eq!(code::<()>(&Err(err)), "protocol_state_corrupt");
        let replay = answer(target, mid(5), true);
        assert_eq!(
            code(&store.consume_response(&replay).await),
            "protocol_state_corrupt"
        );
        assert_eq!(
            code(&store.validate_response(&replay).await),
            "protocol_state_corrupt"
        );
        assert_eq!(code(&store.list().await), "protocol_state_corrupt");
        // Other lines are untouched and still read.
        assert_eq!(
            store.get(neighbour.id()).await.unwrap(),
            Some(neighbour.clone())
        );
    }
    // Put the original line back: the reads succeed again (nothing stale was cached).
    overwrite(&fx, offset, &line);
    assert_eq!(store.get(target.id()).await.unwrap(), Some(target.clone()));
    assert!(
        store
            .consume_response(&answer(target, mid(5), true))
            .await
            .unwrap()
            .replayed
    );
    assert_eq!(store.list().await.unwrap().len(), archived.len() + 1);
}

#[tokio::test]
async fn an_archived_request_replays_after_a_reopen() {
    let fx = Fixture::new();
    let archived = {
        let store = fx.store();
        archived_batch(&fx, &store).await
    };
    let store = fx.store();
    for (i, request) in archived.iter().enumerate() {
        let same = answer(request, mid(i as u64), true);
        let validated = store.validate_response(&same).await.unwrap();
        assert!(validated.replayed);
        assert_eq!(&validated.request, request);
        let consumed = store.consume_response(&same).await.unwrap();
        assert!(consumed.replayed, "{i}");
        assert_eq!(&consumed.request, request);
    }
    let duplicate = answer(&archived[0], mid(999_999), true);
    assert_eq!(
        code(&store.consume_response(&duplicate).await),
        "protocol_state_error"
    );
    // Nothing was written by the replays.
    assert_eq!(fx.archive_lines().len(), archived.len());
}

#[tokio::test]
async fn an_instance_reads_what_another_instance_archived() {
    let fx = Fixture::new();
    let reader = fx.store();
    let first = archived_batch(&fx, &reader).await;
    // Another instance (as another process would) archives a second batch behind its back.
    let writer = fx.store();
    let second = resolve_many(&fx, &writer, COMPACT_ABOVE as u64 + 1, 1_000).await;
    fx.clock.advance_millis(1);
    writer.create(shutdown_of("carol")).await.unwrap();
    let archived_ids: Vec<_> = fx.archive_lines().iter().map(|r| r.id()).collect();
    assert!(second
        .iter()
        .take(5)
        .all(|r| archived_ids.contains(&r.id())));
    for request in first.iter().chain(second.iter().take(5)) {
        assert_eq!(
            reader.get(request.id()).await.unwrap(),
            Some(request.clone())
        );
    }
    let all = reader.list().await.unwrap();
    assert_eq!(all, writer.list().await.unwrap());
    assert_eq!(all.len(), first.len() + second.len() + 2);
    // And the reader's own next compaction appends after the writer's lines, not over them.
    let third = resolve_many(&fx, &reader, COMPACT_ABOVE as u64 + 1, 2_000).await;
    fx.clock.advance_millis(1);
    reader.create(shutdown_of("dave")).await.unwrap();
    for request in first.iter().chain(&second).chain(&third) {
        assert_eq!(
            writer.get(request.id()).await.unwrap(),
            Some(request.clone())
        );
        assert_eq!(
            reader.get(request.id()).await.unwrap(),
            Some(request.clone())
        );
    }
    assert_eq!(
        fx.store().list().await.unwrap(),
        reader.list().await.unwrap()
    );
}
