//! Load-time invariant violations: every one is `protocol_state_corrupt`, at open and on a store
//! already open, and the file is left exactly as it was (never repaired).

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::store::protocol::{ProtocolError, ProtocolStore};

use super::support::*;

/// A store with a pending shutdown (lead → alice) then, 1 s later, an approved plan (alice → lead).
async fn valid_state(fx: &Fixture) -> Value {
    let store = fx.store();
    store.create(shutdown_of("alice")).await.unwrap();
    fx.clock.advance_millis(1000);
    let plan = store.create(plan_of("alice")).await.unwrap();
    store
        .consume_response(&answer(&plan, mid(1), true))
        .await
        .unwrap();
    serde_json::from_slice(&fx.state_bytes().unwrap()).unwrap()
}

fn mutated(base: &Value, change: impl Fn(&mut Value)) -> Vec<u8> {
    let mut value = base.clone();
    change(&mut value);
    serde_json::to_vec_pretty(&value).unwrap()
}

async fn assert_corrupt(fx: &Fixture, good: &[u8], why: &str, bytes: &[u8]) {
    std::fs::write(fx.state_path(), good).unwrap();
    let open = fx.store();
    std::fs::write(fx.state_path(), bytes).unwrap();
    let at_open = fx.try_store();
    assert!(
        matches!(at_open, Err(ProtocolError::Corrupt { .. })),
        "{why}: open gave {:?}",
        at_open.map(|_| ())
    );
    assert_eq!(
        code(&open.list().await),
        "protocol_state_corrupt",
        "{why}: list"
    );
    assert_eq!(
        code(&open.latest_plan_of(&name("alice")).await),
        "protocol_state_corrupt",
        "{why}: latest_plan_of"
    );
    assert_eq!(
        code(&open.create(shutdown_of("bob")).await),
        "protocol_state_corrupt",
        "{why}: create"
    );
    assert_eq!(
        fx.state_bytes().as_deref(),
        Some(bytes),
        "{why}: the file was rewritten"
    );
}

#[tokio::test]
async fn every_broken_invariant_of_state_json_is_corrupt() {
    let fx = Fixture::new();
    let base = valid_state(&fx).await;
    let good = fx.state_bytes().unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "sender = target",
            mutated(&base, |v| v["requests"][0]["target"] = json!("lead")),
        ),
        (
            "sender not a slug",
            mutated(&base, |v| v["requests"][0]["sender"] = json!("Lead")),
        ),
        (
            "pending with a resolution",
            mutated(&base, |v| {
                v["requests"][0]["resolution"] = v["requests"][1]["resolution"].clone()
            }),
        ),
        (
            "approved with approved: false",
            mutated(&base, |v| {
                v["requests"][1]["resolution"]["approved"] = json!(false)
            }),
        ),
        (
            "approved without resolution",
            mutated(&base, |v| v["requests"][1]["resolution"] = Value::Null),
        ),
        (
            "resolved_at = expires",
            mutated(&base, |v| {
                v["requests"][1]["resolution"]["resolved_at_utc"] =
                    v["requests"][1]["expires_at_utc"].clone()
            }),
        ),
        (
            "resolved_at before created",
            mutated(&base, |v| {
                v["requests"][1]["resolution"]["resolved_at_utc"] =
                    json!("2026-07-30T08:00:00.999Z")
            }),
        ),
        (
            "stored status expired",
            mutated(&base, |v| v["requests"][0]["status"] = json!("expired")),
        ),
        (
            "duplicate ids",
            mutated(&base, |v| {
                v["requests"][1]["id"] = v["requests"][0]["id"].clone()
            }),
        ),
        (
            "out of creation order",
            mutated(&base, |v| {
                let requests = v["requests"].as_array_mut().unwrap();
                requests.swap(0, 1);
            }),
        ),
        (
            "unknown key at the top",
            mutated(&base, |v| v["extra"] = json!(1)),
        ),
        (
            "unknown key in a request",
            mutated(&base, |v| v["requests"][0]["note"] = json!("x")),
        ),
        (
            "unknown key in a resolution",
            mutated(&base, |v| v["requests"][1]["resolution"]["by"] = json!("x")),
        ),
        (
            "missing key",
            mutated(&base, |v| {
                v["requests"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("expires_at_utc");
            }),
        ),
        ("wrong version", mutated(&base, |v| v["version"] = json!(2))),
        (
            "version as a string",
            mutated(&base, |v| v["version"] = json!("1")),
        ),
        (
            "non-canonical id",
            mutated(&base, |v| {
                let simple = v["requests"][0]["id"].as_str().unwrap().replace('-', "");
                v["requests"][0]["id"] = json!(simple)
            }),
        ),
        (
            "time without milliseconds",
            mutated(&base, |v| {
                v["requests"][0]["created_at_utc"] = json!("2026-07-30T08:00:00Z")
            }),
        ),
        (
            "blank content",
            mutated(&base, |v| v["requests"][0]["content"] = json!("  ")),
        ),
        (
            "requests not an array",
            mutated(&base, |v| v["requests"] = json!({})),
        ),
        ("truncated file", good[..good.len() - 7].to_vec()),
        ("empty file", Vec::new()),
        ("not json", b"garbage".to_vec()),
    ];
    for (why, bytes) in cases {
        assert_corrupt(&fx, &good, why, &bytes).await;
    }
    // The unmodified file still loads: the cases above fail for their own reason.
    std::fs::write(fx.state_path(), &good).unwrap();
    assert_eq!(fx.store().list().await.unwrap().len(), 2);
}

fn archive_line(request: &troupe::wire::ProtocolRequest) -> Vec<u8> {
    let mut line = serde_json::to_vec(request).unwrap();
    line.push(b'\n');
    line
}

#[tokio::test]
async fn archive_lines_that_break_a_rule_are_corrupt() {
    let fx = Fixture::new();
    let store = fx.store();
    let pending = store.create(shutdown_of("alice")).await.unwrap();
    let resolved = store.create(shutdown_of("bob")).await.unwrap();
    let resolved = store
        .consume_response(&answer(&resolved, mid(1), true))
        .await
        .unwrap()
        .request;
    let other = store.create(shutdown_of("carol")).await.unwrap();
    let other = store
        .consume_response(&answer(&other, mid(2), false))
        .await
        .unwrap()
        .request;
    let differing = resolved
        .clone()
        .resolved(troupe::wire::Resolution {
            message_id: mid(9),
            approved: true,
            content: content("Approved"),
            resolved_at_utc: resolved.created_at_utc(),
        })
        .unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a pending request", archive_line(&pending)),
        (
            "a copy that differs from state.json",
            archive_line(&differing),
        ),
        (
            "an id archived twice",
            [archive_line(&other), archive_line(&other)].concat(),
        ),
        ("a complete line that is not JSON", b"{\"id\":\n".to_vec()),
        ("an empty line", b"\n".to_vec()),
    ];
    for (why, bytes) in cases {
        std::fs::write(fx.archive_path(), &bytes).unwrap();
        let opened = fx.try_store();
        assert!(
            matches!(opened, Err(ProtocolError::Corrupt { .. })),
            "{why}: {:?}",
            opened.map(|_| ())
        );
        assert_eq!(fx.archive_bytes(), Some(bytes), "{why}: archive rewritten");
    }
}
