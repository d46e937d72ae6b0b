//! The team's token usage as read, on both backends (the `TeamUsage` port): a workspace's
//! `usage.jsonl` or every process's records in a shared team's table — the same totals,
//! the same sums per agent, model and day, and the records in order for a reader that folds them
//! as they arrive.

use pretty_assertions::assert_eq;
use troupe::store::usage::UsageRecord;

use super::{both_async, Backend, Stores};

both_async!(
    usage_reads_the_same_on_both_backends,
    a_follower_reads_each_record_once,
);

fn usage(at: &str, run: &str, agent: &str, prompt: u64, completion: u64) -> UsageRecord {
    UsageRecord {
        at: at.into(),
        run_id: run.into(),
        agent: agent.into(),
        model: "m-1".into(),
        purpose: "turn".into(),
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    }
}

async fn usage_reads_the_same_on_both_backends(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let port = s.usage();
    let empty = port.totals().await.unwrap();
    assert_eq!(empty.total.total_tokens, 0);
    assert_eq!(empty.runs, 0);
    assert!(port.records_after(0, 10).await.unwrap().is_empty());

    let records = [
        usage("2026-07-30T08:00:00.000Z", "run-1", "lead", 10, 5),
        usage("2026-07-30T09:00:00.000Z", "run-1", "alice", 20, 1),
        usage("2026-07-31T08:00:00.000Z", "run-2", "lead", 3, 2),
    ];
    for record in &records {
        s.record_usage(record).await;
    }
    let totals = port.totals().await.unwrap();
    assert_eq!(totals.total.total_tokens, 41);
    assert_eq!(totals.total.prompt_tokens, 33);
    assert_eq!(totals.runs, 2);
    assert_eq!(totals.agents["lead"].total_tokens, 20);
    assert_eq!(totals.agents["alice"].total_tokens, 21);

    let all = port.buckets(None).await.unwrap();
    let sum: u64 = all.buckets.values().map(|c| c.total_tokens).sum();
    assert_eq!(sum, 41);
    assert_eq!(all.buckets.len(), 3, "lead on two days, alice on one");
    let since = troupe_wire::UtcTime::parse("2026-07-31T00:00:00.000Z").unwrap();
    let recent = port.buckets(Some(since)).await.unwrap();
    let sum: u64 = recent.buckets.values().map(|c| c.total_tokens).sum();
    assert_eq!(sum, 5);

    let rows = port.records_after(0, 10).await.unwrap();
    assert_eq!(
        rows.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
        records.to_vec(),
        "every record, in order"
    );
    assert!(rows.windows(2).all(|w| w[0].0 < w[1].0), "row ids increase");
    let first = port.records_after(0, 1).await.unwrap();
    assert_eq!(first.len(), 1, "at most the limit");
    let rest = port.records_after(first[0].0, 10).await.unwrap();
    assert_eq!(rest.len(), 2, "after the first row");
    assert_eq!(rest[0].1, records[1]);
}

async fn read_new(
    port: &dyn troupe::store::usage::TeamUsage,
    cursor: &mut troupe::store::usage::UsageCursor,
) -> (troupe::store::usage::NewUsage, Vec<String>) {
    let mut seen = Vec::new();
    let outcome = port
        .read_new(cursor, &mut |record, at| {
            assert_eq!(at.to_string(), record.at);
            seen.push(format!("{}:{}", record.agent, record.total_tokens));
        })
        .await
        .unwrap();
    (outcome, seen)
}

async fn a_follower_reads_each_record_once(backend: Backend) {
    use troupe::store::usage::{NewUsage, UsageCursor};
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let port = s.usage();
    let mut cursor = UsageCursor::default();
    assert_eq!(
        read_new(&*port, &mut cursor).await,
        (NewUsage::Read, vec![])
    );
    s.record_usage(&usage("2026-07-30T08:00:00.000Z", "r", "lead", 10, 5))
        .await;
    s.record_usage(&usage("2026-07-30T08:00:01.000Z", "r", "alice", 1, 1))
        .await;
    assert_eq!(
        read_new(&*port, &mut cursor).await,
        (
            NewUsage::Read,
            vec!["lead:15".to_owned(), "alice:2".to_owned()]
        )
    );
    assert_eq!(read_new(&*port, &mut cursor).await.1, Vec::<String>::new());
    s.record_usage(&usage("2026-07-30T08:00:02.000Z", "r", "bob", 2, 2))
        .await;
    assert_eq!(read_new(&*port, &mut cursor).await.1, ["bob:4"]);
    if backend == Backend::File {
        // The log replaced by a shorter one: the follower is told to start again.
        std::fs::write(s.layout.usage_log(), b"").unwrap();
        assert_eq!(read_new(&*port, &mut cursor).await.0, NewUsage::Restarted);
        s.record_usage(&usage("2026-07-30T08:00:03.000Z", "r", "carol", 3, 3))
            .await;
        assert_eq!(read_new(&*port, &mut cursor).await.1, ["carol:6"]);
    }
}
