//! The event stream of a real run (SPEC §10): `troupe demo` writes `.troupe/events.jsonl` with a
//! gapless `seq`, one `run_id`, and every kind its scenario goes through — each with the fields
//! the renderers rely on.

use std::collections::BTreeSet;

use troupe::store::events::{kinds, read};

use super::support::troupe;

#[test]
fn the_demo_writes_every_kind_of_its_scenario_with_a_gapless_seq() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let ran = troupe(&ws, &["demo", "--workspace", ws.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let events = read::read_all(&ws.join(".troupe/events.jsonl")).unwrap();

    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let runs: BTreeSet<&str> = events.iter().map(|e| e.run_id.as_str()).collect();
    assert_eq!(runs.len(), 1, "one run");
    assert!(
        events.windows(2).all(|w| w[0].at <= w[1].at),
        "times only grow"
    );

    let seen: BTreeSet<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    for kind in [
        kinds::RUN_STARTED,
        kinds::MODEL_CALL_STARTED,
        kinds::MODEL_CALL_FINISHED,
        kinds::ASSISTANT_TEXT,
        kinds::TOOL_STARTED,
        kinds::TOOL_FINISHED,
        kinds::MESSAGE_SENT,
        kinds::MESSAGE_CLAIMED,
        kinds::MESSAGE_ACKED,
        kinds::REQUEST_CREATED,
        kinds::REQUEST_ANSWERED,
        kinds::REQUEST_CONSUMED,
        kinds::APPROVAL_ASKED,
        kinds::APPROVAL_ANSWERED,
        kinds::JOB_STARTED,
        kinds::JOB_ENDED,
        kinds::TEAMMATE_SPAWNED,
        kinds::TEAMMATE_STATUS,
    ] {
        assert!(seen.contains(kind), "{kind} missing; seen {seen:?}");
    }
    assert!(seen.iter().all(|k| kinds::ALL.contains(k)), "{seen:?}");
    assert_eq!(events[0].kind, kinds::RUN_STARTED);
    assert!(events[0]
        .str("prompt")
        .unwrap()
        .starts_with("Have a teammate"));
    let last = events.last().unwrap();
    assert_eq!(
        last.kind,
        kinds::RUN_ENDED,
        "the run's end closes the stream"
    );
    assert_eq!(
        (last.u64("exit_code"), last.str("outcome")),
        (Some(0), Some("done"))
    );
    assert!(last.str("answer").unwrap().contains("has shut down"));

    // The plan gate's denial, with its rule and reason, before any handler ran.
    let denied = events
        .iter()
        .find(|e| e.kind == kinds::TOOL_FINISHED && e.str("outcome") == Some("denied"))
        .expect("the demo's denied write");
    assert_eq!(denied.agent, "writer");
    assert_eq!(denied.str("tool"), Some("write_file"));
    assert_eq!(denied.str("rule"), Some("plan_gate"));
    assert!(denied.str("denial_reason").unwrap().contains("pending"));
    // Every finished tool call has its start, earlier, under the same call id and agent.
    for finished in events.iter().filter(|e| e.kind == kinds::TOOL_FINISHED) {
        let started = events.iter().find(|e| {
            e.kind == kinds::TOOL_STARTED
                && e.agent == finished.agent
                && e.str("call_id") == finished.str("call_id")
        });
        assert!(
            started.is_some_and(|s| s.seq < finished.seq),
            "{finished:?}"
        );
    }
    // Model calls carry what the terminal and the web view show.
    let call = events
        .iter()
        .find(|e| e.kind == kinds::MODEL_CALL_FINISHED)
        .unwrap();
    assert_eq!(call.str("model"), Some("troupe-demo"));
    assert_eq!(call.u64("attempts"), Some(1));
    assert!(call.fields.contains_key("latency_ms"));
    // The lead's words are there.
    assert!(events.iter().any(|e| e.kind == kinds::ASSISTANT_TEXT
        && e.agent == "lead"
        && e.str("text").is_some_and(|t| t.contains("has shut down"))));
    // Both protocols: a plan approved, a shutdown answered.
    let consumed: Vec<_> = events
        .iter()
        .filter(|e| e.kind == kinds::REQUEST_CONSUMED)
        .map(|e| (e.str("protocol").unwrap(), e.str("status").unwrap()))
        .collect();
    assert_eq!(
        consumed,
        [("plan_approval", "approved"), ("shutdown", "approved")]
    );
}
