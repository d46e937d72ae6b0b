//! `.troupe/usage.jsonl`: records appended and added up per agent and per run, a torn tail
//! ignored, a corrupt line named; and `RunUsage`, the sink a run's agents report to.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::agent::usage::{render_closing_line, thousands, NoUsage, RunUsage, UsageSink};
use troupe::clock::ManualClock;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::model::{ModelResponse, Purpose, Usage};
use troupe::store::usage::{read_totals, RunTotals, TokenCounts, UsageLog, UsageRecord};
use troupe::wire::AgentName;

pub fn record(run: &str, agent: &str, prompt: u64, completion: u64) -> UsageRecord {
    UsageRecord {
        at: "2026-07-30T08:00:00.000Z".to_owned(),
        run_id: run.to_owned(),
        agent: agent.to_owned(),
        model: "gpt-test".to_owned(),
        purpose: "turn".to_owned(),
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    }
}

fn counts(prompt: u64, completion: u64) -> TokenCounts {
    TokenCounts {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        ..TokenCounts::default()
    }
}

fn log(workspace: &std::path::Path) -> UsageLog {
    UsageLog::open(
        &Layout::new(workspace),
        Arc::new(ManualClock::at_spec_epoch()),
    )
}

fn usage_path(workspace: &std::path::Path) -> std::path::PathBuf {
    Layout::new(workspace).usage_log()
}

fn answer(prompt: u64, completion: u64) -> ModelResponse {
    ModelResponse {
        usage: Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            ..Usage::default()
        }),
        ..ModelResponse::text("ok", "gpt-answered")
    }
}

fn agent(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

#[tokio::test]
async fn appended_records_add_up_per_agent_per_run_and_overall() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    for r in [
        record("run-1", "lead", 100, 10),
        record("run-1", "writer", 50, 5),
        record("run-2", "lead", 1000, 20),
        record("run-2", "lead", 200, 2),
    ] {
        log.append(&r).await.unwrap();
    }

    let totals = read_totals(log.path()).unwrap();

    assert_eq!(totals.total, counts(1350, 37));
    assert_eq!(
        totals.agents.into_iter().collect::<Vec<_>>(),
        vec![
            ("lead".to_owned(), counts(1300, 32)),
            ("writer".to_owned(), counts(50, 5))
        ]
    );
    assert_eq!(totals.runs, 2);
    assert_eq!(
        totals.latest_run,
        Some(RunTotals {
            run_id: "run-2".to_owned(),
            counts: counts(1200, 22)
        })
    );
    // One JSON line each, in the documented shape.
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(text.lines().count(), 4);
    assert_eq!(
        text.lines().next().unwrap(),
        r#"{"at":"2026-07-30T08:00:00.000Z","run_id":"run-1","agent":"lead","model":"gpt-test","purpose":"turn","prompt_tokens":100,"completion_tokens":10,"total_tokens":110}"#
    );
}

#[test]
fn a_missing_log_is_zero_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = usage_path(dir.path());

    let totals = read_totals(&path).unwrap();

    assert_eq!(totals, Default::default());
    assert_eq!(totals.runs, 0);
    assert!(!path.exists());
    assert!(!dir.path().join(".troupe").exists());
}

#[tokio::test]
async fn a_torn_last_line_is_ignored_and_cut_by_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    log.append(&record("run-1", "lead", 10, 1)).await.unwrap();
    let mut bytes = std::fs::read(log.path()).unwrap();
    bytes.extend_from_slice(br#"{"at":"2026-07-30T08:00:00.000Z","run_id":"run-1","ag"#);
    std::fs::write(log.path(), &bytes).unwrap();

    assert_eq!(read_totals(log.path()).unwrap().total, counts(10, 1));

    log.append(&record("run-1", "lead", 5, 5)).await.unwrap();
    assert_eq!(read_totals(log.path()).unwrap().total, counts(15, 6));
    super::assert_clean_jsonl(log.path());
}

#[tokio::test]
async fn a_corrupt_line_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    log.append(&record("run-1", "lead", 10, 1)).await.unwrap();
    let mut text = std::fs::read_to_string(log.path()).unwrap();
    text.push_str("{\"not\": \"a record\"}\n");
    text.push_str(&serde_json::to_string(&record("run-1", "lead", 1, 1)).unwrap());
    text.push('\n');
    std::fs::write(log.path(), &text).unwrap();

    let error = read_totals(log.path()).unwrap_err();

    assert_eq!(error.code(), "storage_error");
    let message = error.to_string();
    assert!(message.contains("usage.jsonl"), "{message}");
    assert!(message.contains("line 2"), "{message}");
}

#[test]
fn a_duplicate_key_is_a_corrupt_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = usage_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let line = serde_json::to_vec(&record("run-1", "lead", 10, 1)).unwrap();
    let mut bytes = super::with_duplicate(&line, "total_tokens", "999999");
    bytes.push(b'\n');
    std::fs::write(&path, bytes).unwrap();

    let message = read_totals(&path).unwrap_err().to_string();

    assert!(message.contains("line 1"), "{message}");
    assert!(message.contains("duplicate key"), "{message}");
}

#[tokio::test]
async fn run_usage_logs_each_response_and_sums_this_run_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let usage = RunUsage::new("run-7", log(dir.path()));
    usage
        .record(&AgentName::lead(), Purpose::Turn, &answer(1200, 34))
        .await;
    usage
        .record(&agent("writer"), Purpose::Summary, &answer(300, 20))
        .await;
    usage
        .record(&AgentName::lead(), Purpose::Turn, &answer(34, 22))
        .await;
    // No usage reported: nothing recorded, nothing counted.
    usage
        .record(
            &AgentName::lead(),
            Purpose::Turn,
            &ModelResponse::text("no usage", "gpt-test"),
        )
        .await;

    assert_eq!(usage.run_total(), 1610);
    assert_eq!(
        usage.per_agent(),
        vec![
            (
                AgentName::lead(),
                Usage {
                    prompt_tokens: 1234,
                    completion_tokens: 56,
                    total_tokens: 1290,
                    ..Usage::default()
                }
            ),
            (
                agent("writer"),
                Usage {
                    prompt_tokens: 300,
                    completion_tokens: 20,
                    total_tokens: 320,
                    ..Usage::default()
                }
            ),
        ]
    );
    let lines = super::assert_clean_jsonl(&usage_path(dir.path()));
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[1],
        serde_json::json!({"at": "2026-07-30T08:00:00.000Z", "run_id": "run-7",
            "agent": "writer", "model": "gpt-answered", "purpose": "summary",
            "prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320})
    );
    assert_eq!(
        render_closing_line(&usage.per_agent()),
        "tokens: lead 1,234 in / 56 out · writer 300 in / 20 out · total 1,610"
    );
}

#[test]
fn run_usage_counts_every_record_from_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let usage = Arc::new(RunUsage::new("run-1", log(dir.path())));
    let threads: Vec<_> = ["lead", "alice", "bob", "carol"]
        .into_iter()
        .map(|name| {
            let usage = usage.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    for _ in 0..50 {
                        usage
                            .record(&agent(name), Purpose::Turn, &answer(3, 1))
                            .await;
                    }
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }

    assert_eq!(usage.run_total(), 4 * 50 * 4);
    assert_eq!(usage.per_agent().len(), 4);
    let totals = read_totals(&usage_path(dir.path())).unwrap();
    assert_eq!(totals.total, counts(600, 200));
    assert_eq!(totals.agents["bob"], counts(150, 50));
    assert_eq!(totals.runs, 1);
}

#[tokio::test]
async fn a_log_that_cannot_be_written_still_counts_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    // `.troupe` is a file: the log cannot be created under it.
    std::fs::write(dir.path().join(".troupe"), "not a folder").unwrap();
    let usage = RunUsage::new("run-1", log(dir.path()));

    usage
        .record(&AgentName::lead(), Purpose::Turn, &answer(10, 5))
        .await;

    assert_eq!(usage.run_total(), 15);
    assert_eq!(usage.per_agent().len(), 1);
}

#[tokio::test]
async fn no_usage_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sink: &dyn UsageSink = &NoUsage;
    sink.record(&AgentName::lead(), Purpose::Turn, &answer(10, 5))
        .await;
    assert_eq!(sink.run_total(), 0);
    assert_eq!(sink.per_agent(), vec![]);
    assert!(!usage_path(dir.path()).exists());
}

#[test]
fn closing_line_and_thousands() {
    assert_eq!(render_closing_line(&[]), "tokens: none reported");
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
    assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
}
