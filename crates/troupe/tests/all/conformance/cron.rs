//! The lead's durable cron jobs on both backends: what one runtime schedules, the next one
//! (another run, on files; another lead process, in a shared team's database) loads as it was;
//! a removed job is gone; a document that is not a cron store is a clear error naming it.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use tokio::sync::mpsc::unbounded_channel;
use troupe::cron::CronRuntime;
use troupe::error::ErrorCode;
use troupe::ids::SequentialIds;

use super::{both_async, Backend, Stores};
use crate::cron::request;

both_async!(
    durable_jobs_outlive_the_runtime_that_scheduled_them,
    a_document_is_read_whole_and_changed_only_by_a_change_that_succeeds,
);

async fn runtime(s: &Stores, prefix: u16) -> CronRuntime {
    let (tx, _rx) = unbounded_channel();
    CronRuntime::open_store(
        s.cron(),
        Arc::new(s.clock.clone()),
        Arc::new(SequentialIds::with_prefix(prefix)),
        tx,
    )
    .await
    .unwrap()
}

async fn durable_jobs_outlive_the_runtime_that_scheduled_them(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let first = runtime(&s, 1).await;
    let daily = first
        .schedule(request("30 2 * * *", "Europe/Berlin", true, true))
        .await
        .unwrap();
    let once = first
        .schedule(request("0 9 * * *", "UTC", false, true))
        .await
        .unwrap();
    first
        .schedule(request("*/5 * * * *", "UTC", true, false))
        .await
        .unwrap();
    drop(first);
    let second = runtime(&s, 2).await;
    let mut ids: Vec<_> = second.jobs().iter().map(|j| (j.id, j.durable)).collect();
    ids.sort();
    let mut want = vec![(daily.id, true), (once.id, true)];
    want.sort();
    assert_eq!(ids, want, "only the durable jobs, as they were");
    assert!(second.remove(once.id).await.unwrap());
    let stored: Vec<_> = s
        .cron()
        .load()
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(stored, vec![daily.id]);
}

/// A document that is not a cron store stops the lead from starting with a clear error, and
/// is never overwritten by a change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_document_that_does_not_parse_is_refused_naming_it() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    s.db.as_ref()
        .unwrap()
        .execute(
            "INSERT INTO troupe_documents (team, name, text) VALUES ('team-a', 'cron', '{\"version\": 9, \"jobs\": []}')",
        )
        .unwrap();
    let err = s.cron().load().await.unwrap_err();
    assert_eq!(err.code(), "cron_state_corrupt");
    assert!(
        err.to_string().contains("troupe_documents \"cron\""),
        "{err}"
    );
    assert!(err.to_string().contains("version 9"), "{err}");
    let (tx, _rx) = unbounded_channel();
    assert!(CronRuntime::open_store(
        s.cron(),
        Arc::new(s.clock.clone()),
        Arc::new(SequentialIds::new()),
        tx
    )
    .await
    .is_err());
}

/// The `TeamDocument` port itself: no document until the first change; a change sees the current
/// bytes and replaces them whole; a refused change writes nothing and says why.
async fn a_document_is_read_whole_and_changed_only_by_a_change_that_succeeds(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let doc = s.cron_document();
    assert_eq!(doc.read().await.unwrap(), None);
    assert!(!s.layout.cron_file().exists(), "reading creates nothing");
    doc.update(Box::new(|current| {
        assert_eq!(current, None);
        Ok(b"first".to_vec())
    }))
    .await
    .unwrap()
    .unwrap();
    assert_eq!(doc.read().await.unwrap(), Some(b"first".to_vec()));
    doc.update(Box::new(|current| {
        assert_eq!(current, Some(b"first".to_vec()));
        Ok(b"second".to_vec())
    }))
    .await
    .unwrap()
    .unwrap();
    let refused = doc
        .update(Box::new(|_| Err("no".to_owned())))
        .await
        .unwrap();
    assert_eq!(refused, Err("no".to_owned()));
    assert_eq!(
        s.cron_document().read().await.unwrap(),
        Some(b"second".to_vec())
    );
    assert!(doc.place().contains("cron"), "{}", doc.place());
}
