//! Rough timings for the performance goals (run in release, by hand):
//! `cargo test --release -p troupe --test all protocol::timing -- --ignored --nocapture`.
//!
//! Goal: a create+consume round trip on a store holding 10,000 resolved requests costs at most
//! 2× the round trip on an empty store, and `latest_plan_of` has a p50 under 100 µs there.
//! The two stores' round trips are interleaved so that both see the same disk conditions (fsync
//! times vary a lot on a shared machine). A second run uses a write seam without fsync to show
//! the store's own (CPU) cost.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe::store::protocol::{DurableFiles, JsonProtocolStore, ProtocolFiles, ProtocolStore};
use troupe::store::IoError;

use super::support::*;

/// Writes without fsync: isolates the store's own cost from the disk's.
struct UnsyncedFiles;

impl ProtocolFiles for UnsyncedFiles {
    fn replace_state(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        let temp = path.with_extension("tmp");
        std::fs::write(&temp, bytes)
            .and_then(|()| std::fs::rename(&temp, path))
            .map_err(|e| IoError::new("write", path, e))
    }

    fn append_archive(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| IoError::new("append", path, e))
    }
}

async fn round_trip(fx: &Fixture, store: &JsonProtocolStore, i: u64) -> Duration {
    fx.clock.advance_millis(1);
    let started = Instant::now();
    let new = if i.is_multiple_of(10) {
        plan_of("bob")
    } else {
        shutdown_of("alice")
    };
    let request = store.create(new).await.unwrap();
    store
        .consume_response(&answer(&request, mid(i), true))
        .await
        .unwrap();
    started.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn mean(samples: &[Duration]) -> Duration {
    samples.iter().sum::<Duration>() / samples.len() as u32
}

async fn measure(label: &str, files: Arc<dyn ProtocolFiles>) {
    let full = Fixture::new();
    let store = full.store_with_files(files.clone());
    let started = Instant::now();
    for i in 0..10_000 {
        round_trip(&full, &store, i).await;
    }
    let fill = started.elapsed();
    let full_store = full.store_with_files(files.clone());
    let empty = Fixture::new();
    let empty_store = empty.store_with_files(files);
    let (mut on_empty, mut on_full) = (Vec::new(), Vec::new());
    for i in 0..300 {
        on_empty.push(round_trip(&empty, &empty_store, i).await);
        on_full.push(round_trip(&full, &full_store, 1_000_000 + i).await);
    }
    let mut plans: Vec<Duration> = Vec::new();
    for _ in 0..2000 {
        let started = Instant::now();
        let plan = full_store.latest_plan_of(&name("bob")).await.unwrap();
        assert!(plan.is_some());
        plans.push(started.elapsed());
    }
    let started = Instant::now();
    let all = full_store.list().await.unwrap();
    let list = started.elapsed();
    println!("[{label}] filling 10,000 round trips took {fill:?}");
    println!(
        "[{label}] round trip, empty store: mean {:?}, p50 {:?}",
        mean(&on_empty),
        median(on_empty.clone())
    );
    println!(
        "[{label}] round trip, 10,000 resolved: mean {:?}, p50 {:?}",
        mean(&on_full),
        median(on_full.clone())
    );
    println!(
        "[{label}] latest_plan_of at 10,000: p50 {:?}",
        median(plans)
    );
    println!("[{label}] list of {} requests: {list:?}", all.len());
    println!(
        "[{label}] state.json: {} bytes, archive: {} bytes",
        full.state_bytes().unwrap_or_default().len(),
        full.archive_bytes().unwrap_or_default().len()
    );
}

#[tokio::test]
#[ignore = "timing; run by hand in release mode"]
async fn round_trip_and_latest_plan_timings() {
    measure("durable", Arc::new(DurableFiles)).await;
    measure("no fsync", Arc::new(UnsyncedFiles)).await;
}
