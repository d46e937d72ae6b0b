//! The memory queries and the `Memory` facade against the scripted model's side queues: strict
//! JSON answers, validated before anything is written.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::agent::memory::{Memory, MemoryQueries, Merge, CONSOLIDATE_AFTER_RECORDS};
use troupe::error::ErrorCode;
use troupe::model::{AssistantMessage, ChatMessage, Purpose, ScriptedModel, ToolCall};
use troupe::store::memory::{MemoryRecord, MemoryType};

use super::{record, store};

fn memory(model: &Arc<ScriptedModel>) -> (tempfile::TempDir, Memory) {
    let (dir, store) = store();
    let queries = MemoryQueries::new(Arc::clone(model) as Arc<dyn troupe::model::ModelClient>);
    (dir, Memory::new(store, queries))
}

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are the lead."),
        ChatMessage::user("Use tabs, never spaces. I review on a phone."),
        ChatMessage::Assistant(AssistantMessage::tool_calls(vec![ToolCall::new(
            "c1",
            "read_file",
            r#"{"path":"src/main.rs"}"#,
        )])),
        ChatMessage::tool_result("c1", "x".repeat(100_000)),
        ChatMessage::Assistant(AssistantMessage::text("Done.")),
    ]
}

fn record_json(name: &str) -> serde_json::Value {
    json!({"name": name, "type": "feedback", "description": "Indent with tabs", "body": "Tabs, never spaces.\n"})
}

#[tokio::test]
async fn extracted_records_are_written() {
    let answer = format!("```json\n{}\n```", json!([record_json("use-tabs")]));
    let model = Arc::new(ScriptedModel::new().side_text(Purpose::MemoryExtract, answer));
    let (_dir, memory) = memory(&model);
    let outcome = memory.remember(&conversation()).await.unwrap();
    assert_eq!(outcome.written, vec!["use-tabs".to_owned()]);
    assert_eq!(outcome.merged, 0);
    assert_eq!(
        memory.store().get("use-tabs").await.unwrap(),
        Some(
            MemoryRecord::new(
                "use-tabs",
                MemoryType::Feedback,
                "Indent with tabs",
                "Tabs, never spaces.\n"
            )
            .unwrap()
        )
    );
    // One tool-less call; the conversation went in bounded, without the system prompt.
    let requests = model.side_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].purpose, Purpose::MemoryExtract);
    assert!(requests[0].tools.is_empty());
    let sent = serde_json::to_string(&requests[0].messages).unwrap();
    assert!(sent.contains("Use tabs, never spaces."));
    assert!(!sent.contains("You are the lead."));
    assert!(
        sent.len() < 10_000,
        "tool results are cut: {} bytes",
        sent.len()
    );
}

#[tokio::test]
async fn the_conversation_sent_is_its_last_48_kib() {
    let model = Arc::new(ScriptedModel::new().side_text(Purpose::MemoryExtract, "```\n[]\n```"));
    let (_dir, memory) = memory(&model);
    let long = vec![
        ChatMessage::user(format!("START{}", "a".repeat(200_000))),
        ChatMessage::user("the latest words"),
    ];
    assert_eq!(
        memory.remember(&long).await.unwrap().written,
        Vec::<String>::new()
    );
    let sent = &model.side_requests()[0].messages;
    let ChatMessage::User { content } = &sent[1] else {
        panic!("{sent:?}")
    };
    assert!(content.len() <= 49 * 1024, "{} bytes", content.len());
    assert!(content.ends_with("the latest words"));
    assert!(!content.contains("START"));
}

#[tokio::test]
async fn an_extraction_replaces_a_record_of_the_same_name() {
    let model = Arc::new(ScriptedModel::new().side_text(
        Purpose::MemoryExtract,
        json!([record_json("use-tabs")]).to_string(),
    ));
    let (_dir, memory) = memory(&model);
    memory
        .store()
        .put(&record("use-tabs", "old\n"))
        .await
        .unwrap();
    memory.remember(&conversation()).await.unwrap();
    assert_eq!(
        memory.store().get("use-tabs").await.unwrap().unwrap().body,
        "Tabs, never spaces.\n"
    );
    // The existing catalog was shown, so the model can reuse the name.
    let sent = serde_json::to_string(&model.side_requests()[0].messages).unwrap();
    assert!(sent.contains("use-tabs (project)"), "{sent}");
}

#[tokio::test]
async fn an_empty_answer_writes_nothing() {
    let model = Arc::new(ScriptedModel::new().side_text(Purpose::MemoryExtract, "[]"));
    let (dir, memory) = memory(&model);
    let outcome = memory.remember(&conversation()).await.unwrap();
    assert_eq!(outcome.written, Vec::<String>::new());
    assert!(!dir.path().join(".troupe/memory").exists());
}

#[tokio::test]
async fn an_invalid_extraction_writes_nothing() {
    let mut oversized = record_json("big");
    oversized["body"] = json!("x".repeat(4097));
    let mut extra_key = record_json("extra");
    extra_key["tags"] = json!([]);
    let mut missing_key = record_json("missing");
    missing_key.as_object_mut().unwrap().remove("body");
    let mut bad_type = record_json("typed");
    bad_type["type"] = json!("secret");
    let answers = [
        "not json".to_owned(),
        "Here you go: []".to_owned(),
        "{}".to_owned(),
        "```json\n[]\n``` and more".to_owned(),
        json!([record_json("good"), record_json("../escape")]).to_string(),
        json!([record_json("good"), record_json("Bad Name")]).to_string(),
        json!([record_json("good"), oversized]).to_string(),
        json!([record_json("good"), extra_key]).to_string(),
        json!([record_json("good"), missing_key]).to_string(),
        json!([record_json("good"), bad_type]).to_string(),
        json!([record_json("good"), record_json("good")]).to_string(),
        r#"[{"name":"good","name":"good","type":"user","description":"d","body":""}]"#.to_owned(),
    ];
    for answer in answers {
        let model =
            Arc::new(ScriptedModel::new().side_text(Purpose::MemoryExtract, answer.clone()));
        let (dir, memory) = memory(&model);
        let err = memory.remember(&conversation()).await.unwrap_err();
        assert_eq!(err.code(), "memory_answer_invalid", "{answer}: {err}");
        assert!(!dir.path().join(".troupe/memory").exists(), "{answer}");
    }
}

#[tokio::test]
async fn selection_drops_unknown_names_and_keeps_at_most_five() {
    let answer = json!(["r3", "ghost", "r1", "r3", "r0", "r5", "r6", "r7", "r2"]).to_string();
    let model = Arc::new(ScriptedModel::new().side_text(Purpose::MemorySelect, answer));
    let (_dir, memory) = memory(&model);
    for i in 0..8 {
        memory
            .store()
            .put(&record(&format!("r{i}"), &format!("body {i}")))
            .await
            .unwrap();
    }
    let records = memory.relevant("fix the tabs").await.unwrap();
    let names: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["r3", "r1", "r0", "r5", "r6"]);
    assert_eq!(records[0], record("r3", "body 3"));
    // Only names, types and descriptions are shown to the selection, never the bodies.
    let requests = model.side_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].purpose, Purpose::MemorySelect);
    let sent = serde_json::to_string(&requests[0].messages).unwrap();
    assert!(sent.contains("r7 (project): what r7 is about"), "{sent}");
    assert!(!sent.contains("body 7"), "{sent}");
    assert!(sent.contains("fix the tabs"));
}

#[tokio::test]
async fn selection_on_an_empty_catalog_makes_no_call() {
    let model = Arc::new(ScriptedModel::new());
    let (_dir, memory) = memory(&model);
    assert_eq!(memory.relevant("anything").await.unwrap(), vec![]);
    assert_eq!(model.side_requests().len(), 0);
}

#[tokio::test]
async fn a_malformed_selection_is_an_error() {
    let model = Arc::new(ScriptedModel::new().side_text(Purpose::MemorySelect, r#"{"names":[]}"#));
    let (_dir, memory) = memory(&model);
    memory.store().put(&record("r1", "")).await.unwrap();
    let err = memory.relevant("x").await.unwrap_err();
    assert_eq!(err.code(), "memory_answer_invalid");
}

fn merge_answer(merge: &[&str], into: &str) -> serde_json::Value {
    json!({"merge": merge, "into": {"name": into, "type": "user", "description": "merged", "body": "all of it\n"}})
}

#[tokio::test]
async fn consolidation_merges_past_the_budget() {
    let answer = json!([
        merge_answer(&["r1", "r2", "r3"], "r-all"),
        merge_answer(&["r4", "r5"], "r4")
    ]);
    let model = Arc::new(
        ScriptedModel::new()
            .side_text(
                Purpose::MemoryExtract,
                json!([record_json("new-one")]).to_string(),
            )
            .side_text(Purpose::MemoryConsolidate, answer.to_string()),
    );
    let (_dir, memory) = memory(&model);
    for i in 0..CONSOLIDATE_AFTER_RECORDS {
        memory
            .store()
            .put(&record(&format!("r{i}"), ""))
            .await
            .unwrap();
    }
    let outcome = memory.remember(&conversation()).await.unwrap();
    assert_eq!(
        outcome,
        troupe::agent::memory::RememberOutcome {
            written: vec!["new-one".into()],
            merged: 2
        }
    );
    let names: Vec<String> = memory
        .store()
        .list()
        .await
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert!(names.contains(&"r-all".to_owned()) && names.contains(&"r4".to_owned()));
    for gone in ["r1", "r2", "r3", "r5"] {
        assert!(!names.contains(&gone.to_owned()), "{gone}");
    }
    assert_eq!(names.len(), CONSOLIDATE_AFTER_RECORDS + 1 - 3);
    assert_eq!(
        memory.store().get("r4").await.unwrap().unwrap().body,
        "all of it\n"
    );
    let purposes: Vec<Purpose> = model.side_requests().iter().map(|r| r.purpose).collect();
    assert_eq!(
        purposes,
        [Purpose::MemoryExtract, Purpose::MemoryConsolidate]
    );
}

#[tokio::test]
async fn no_consolidation_under_the_budget() {
    let model = Arc::new(ScriptedModel::new().side_text(Purpose::MemoryExtract, "[]"));
    let (_dir, memory) = memory(&model);
    for i in 0..CONSOLIDATE_AFTER_RECORDS {
        memory
            .store()
            .put(&record(&format!("r{i}"), ""))
            .await
            .unwrap();
    }
    assert_eq!(memory.remember(&conversation()).await.unwrap().merged, 0);
    assert_eq!(model.side_requests().len(), 1);
}

#[tokio::test]
async fn consolidate_returns_the_merges() {
    let catalog: Vec<MemoryRecord> = ["a", "b", "c"].iter().map(|n| record(n, "")).collect();
    let model = Arc::new(ScriptedModel::new().side_text(
        Purpose::MemoryConsolidate,
        json!([merge_answer(&["a", "b"], "a")]).to_string(),
    ));
    let queries = MemoryQueries::new(Arc::clone(&model) as Arc<dyn troupe::model::ModelClient>);
    let merges = queries.consolidate(&catalog).await.unwrap();
    assert_eq!(
        merges,
        vec![Merge {
            merge: vec!["a".into(), "b".into()],
            into: MemoryRecord::new("a", MemoryType::User, "merged", "all of it\n").unwrap(),
        }]
    );
}

#[tokio::test]
async fn invalid_merges_are_refused_and_nothing_changes() {
    let answers = [
        json!([merge_answer(&["r1", "ghost"], "r1")]),
        json!([merge_answer(&["r1"], "r1")]),
        json!([merge_answer(&["r1", "r1"], "r1")]),
        json!([
            merge_answer(&["r1", "r2"], "r1"),
            merge_answer(&["r2", "r3"], "r3")
        ]),
        json!([merge_answer(&["r1", "r2"], "r9")]),
        json!([
            merge_answer(&["r1", "r2"], "x"),
            merge_answer(&["r3", "r4"], "x")
        ]),
        json!([merge_answer(&["r1", "r2"], "../x")]),
        json!([{"merge": ["r1", "r2"], "into": record_json("x"), "why": "extra"}]),
    ];
    for answer in answers {
        let model = Arc::new(
            ScriptedModel::new()
                .side_text(Purpose::MemoryExtract, "[]")
                .side_text(Purpose::MemoryConsolidate, answer.to_string()),
        );
        let (_dir, memory) = memory(&model);
        for i in 0..=CONSOLIDATE_AFTER_RECORDS {
            memory
                .store()
                .put(&record(&format!("r{i}"), ""))
                .await
                .unwrap();
        }
        let before = memory.store().list().await.unwrap();
        let err = memory.remember(&conversation()).await.unwrap_err();
        assert_eq!(err.code(), "memory_answer_invalid", "{answer}: {err}");
        assert_eq!(memory.store().list().await.unwrap(), before, "{answer}");
    }
}

#[tokio::test]
async fn a_failed_model_call_is_an_error_of_its_own() {
    let model = Arc::new(ScriptedModel::new().side(
        Purpose::MemorySelect,
        Err(troupe::model::ModelError::Timeout {
            model: "m".into(),
            timeout: std::time::Duration::from_secs(1),
            attempts: 1,
        }),
    ));
    let (_dir, memory) = memory(&model);
    memory.store().put(&record("r1", "")).await.unwrap();
    assert_eq!(
        memory.relevant("x").await.unwrap_err().code(),
        "memory_model_failed"
    );
}

#[test]
fn the_prompt_section() {
    assert_eq!(Memory::render_for_prompt(&[]), "");
    let text = Memory::render_for_prompt(&[
        MemoryRecord::new(
            "use-tabs",
            MemoryType::Feedback,
            "Indent with tabs",
            "Tabs, never spaces.\n",
        )
        .unwrap(),
        record("deploy", "Friday freeze."),
    ]);
    assert!(text.starts_with("# Memory\n"), "{text}");
    assert!(
        text.contains("use-tabs (feedback): Indent with tabs\nTabs, never spaces.\n"),
        "{text}"
    );
    assert!(
        text.contains("deploy (project): what deploy is about\nFriday freeze.\n"),
        "{text}"
    );
}

/// The scripted model, its answers carrying token usage as a server would report it.
struct Reporting(Arc<ScriptedModel>);

#[async_trait::async_trait]
impl troupe::model::ModelClient for Reporting {
    async fn complete(
        &self,
        request: &troupe::model::ModelRequest,
    ) -> Result<troupe::model::ModelResponse, troupe::model::ModelError> {
        let mut response = self.0.complete(request).await?;
        response.usage = Some(troupe::model::Usage {
            prompt_tokens: 120,
            completion_tokens: 30,
            total_tokens: 150,
            ..Default::default()
        });
        Ok(response)
    }
}

/// A usage sink that keeps what it was told.
#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<(String, &'static str, u64)>>);

#[async_trait::async_trait]
impl troupe::agent::UsageSink for Recorded {
    async fn record(
        &self,
        agent: &troupe::wire::AgentName,
        purpose: Purpose,
        response: &troupe::model::ModelResponse,
    ) {
        let total = response.usage.map_or(0, |u| u.total_tokens);
        self.0
            .lock()
            .unwrap()
            .push((agent.to_string(), purpose.as_str(), total));
    }
    fn run_total(&self) -> u64 {
        0
    }
    fn per_agent(&self) -> Vec<(troupe::wire::AgentName, troupe::model::Usage)> {
        Vec::new()
    }
}

#[tokio::test]
async fn the_tokens_of_memory_calls_are_recorded_for_their_agent() {
    let answer = json!([record_json("use-tabs")]).to_string();
    let scripted = Arc::new(ScriptedModel::new().side_text(Purpose::MemoryExtract, answer));
    let sink = Arc::new(Recorded::default());
    let (_dir, store) = store();
    let queries = MemoryQueries::new(Arc::new(Reporting(scripted)))
        .with_usage(troupe::wire::AgentName::lead(), sink.clone());
    let memory = Memory::new(store, queries);
    memory.remember(&conversation()).await.unwrap();
    assert_eq!(
        *sink.0.lock().unwrap(),
        vec![("lead".to_owned(), "memory_extract", 150)]
    );
}
