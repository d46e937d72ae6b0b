//! A timing run, not a test of behaviour: ignored by default. Run it in release mode with
//! `cargo test --release -p troupe --test all mailbox::bench -- --ignored --nocapture`.
//! It prints the disk's own durable-write rate, the send rate, and the claim+ack rate over the
//! first and the last 10% of a 10,000-message drain (claim cost must not grow with the backlog).

use std::time::Instant;

use troupe::store::durable;
use troupe::store::mailbox::{MailboxState, MailboxStore};

use super::{agent, Fixture};

const MESSAGES: usize = 10_000;

fn rate(n: usize, since: Instant) -> f64 {
    n as f64 / since.elapsed().as_secs_f64()
}

#[tokio::test]
#[ignore = "timing run; see the module doc"]
async fn drain_10k_timing() {
    let fx = Fixture::new();
    let baseline_dir = fx.dir.path().join("baseline");
    std::fs::create_dir(&baseline_dir).unwrap();
    let sample = fx.msg("alice", 0).to_json_bytes();
    let start = Instant::now();
    for i in 0..1000 {
        durable::create_new(&baseline_dir.join(format!("{i}.json")), &sample).unwrap();
    }
    let disk = rate(1000, start);

    let store = fx.store();
    let messages: Vec<_> = (0..MESSAGES)
        .map(|i| fx.msg("alice", (i % 100) as i64))
        .collect();
    let start = Instant::now();
    for m in &messages {
        store.send(m).await.unwrap();
    }
    let sends = rate(MESSAGES, start);

    // A fresh instance, so the first claim pays for the one listing of 10,000 files.
    let store = fx.store();
    let alice = agent("alice");
    let tenth = MESSAGES / 10;
    let mut rates = Vec::new();
    let mut claim_us = Vec::new();
    let start = Instant::now();
    let first = store.claim(&alice).await.unwrap().unwrap();
    let first_claim_ms = start.elapsed().as_secs_f64() * 1000.0;
    store.ack(&alice, &first).await.unwrap();
    for chunk in 0..10 {
        let n = if chunk == 0 { tenth - 1 } else { tenth };
        let start = Instant::now();
        let mut claiming = std::time::Duration::ZERO;
        for _ in 0..n {
            let claim_start = Instant::now();
            let m = store.claim(&alice).await.unwrap().unwrap();
            claiming += claim_start.elapsed();
            store.ack(&alice, &m).await.unwrap();
        }
        rates.push(rate(n, start));
        claim_us.push(claiming.as_secs_f64() * 1e6 / n as f64);
    }
    assert_eq!(store.claim(&alice).await.unwrap(), None);
    assert_eq!(
        store.counts(&alice).await.unwrap().get(MailboxState::Done),
        MESSAGES
    );
    println!("disk durable create_new: {disk:.0}/s");
    println!("send: {sends:.0}/s ({:.0}% of disk)", 100.0 * sends / disk);
    println!("first claim (lists 10,000 files): {first_claim_ms:.1} ms");
    println!(
        "claim+ack first 10%: {:.0}/s ({:.0}% of disk), last 10%: {:.0}/s ({:.0}% of disk)",
        rates[0],
        100.0 * rates[0] / disk,
        rates[9],
        100.0 * rates[9] / disk
    );
    println!(
        "claim alone (mean): first 10% {:.0} µs, last 10% {:.0} µs",
        claim_us[0], claim_us[9]
    );
}
