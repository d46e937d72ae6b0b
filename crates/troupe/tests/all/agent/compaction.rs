//! Compaction in the runner's loop (SPEC §9), with the scripted model and real transcripts:
//! the budget triggers a summary and a transcript boundary the next run continues from; a
//! malformed summary is asked for once more, then the older part is dropped with a note; a
//! prompt-too-long refusal compacts and retries once; a large tool result becomes an artifact.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use troupe::agent::context::{ContextBudget, CLEARED_TOOL_RESULT, SUMMARY_HEADER};
use troupe::agent::transcript::{FileTranscript, Origin};
use troupe::agent::{NullObserver, Runner, TurnEnd};
use troupe::clock::ManualClock;
use troupe::error::ErrorCode;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::model::{ChatMessage, ModelClient, Purpose, ScriptedModel};
use troupe::permissions::hooks::Hooks;
use troupe::permissions::{AutoApproval, JsonlAuditSink, PermissionPolicy};
use troupe::store::artifacts::ArtifactStore;
use troupe::tools::shell::ShellTool;
use troupe::tools::{base_tools, Dispatcher, ToolRegistry};
use troupe::wire::AgentName;

struct Setup {
    workspace: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let workspace = tempfile::tempdir().unwrap();
        // A 6,000-byte file the scripted turns read again and again.
        std::fs::write(
            workspace.path().join("blob.txt"),
            "0123456789\n".repeat(545),
        )
        .unwrap();
        // An 891-byte one: results under 1 KB are never micro-compacted, so only a summary
        // brings a history of them back under the budget.
        std::fs::write(
            workspace.path().join("small.txt"),
            "0123456789\n".repeat(81),
        )
        .unwrap();
        Self { workspace }
    }

    /// The lead's runner on `model`, with a context window of `window` tokens, artifacts and
    /// its transcript.
    async fn runner(&self, model: Arc<dyn ModelClient>, window: u32) -> Runner {
        lead_runner(self.workspace.path(), model, window).await
    }

    fn transcript(&self) -> String {
        let path = Layout::new(self.workspace.path()).transcript(&AgentName::lead());
        std::fs::read_to_string(path).unwrap()
    }
}

/// `reads` calls of read_file on the blob, then an answer.
fn reading(reads: usize) -> ScriptedModel {
    reading_file("blob.txt", reads)
}

/// `reads` calls of read_file on `path`, then an answer.
fn reading_file(path: &str, reads: usize) -> ScriptedModel {
    let mut model = ScriptedModel::new();
    for _ in 0..reads {
        model = model.tool_call("read_file", json!({"path": path}));
    }
    model.text("Read it all.")
}

/// Sixteen reads of the small file: about 16 KB of results no micro-compaction may clear,
/// past a 4,096-token window's budget.
fn reading_small() -> ScriptedModel {
    reading_file("small.txt", 16)
}

fn tool_pairs_are_whole(messages: &[ChatMessage]) {
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message {
            ChatMessage::Tool { tool_call_id, .. } => {
                assert!(open.contains(tool_call_id), "a result without its call");
                open.retain(|id| id != tool_call_id);
            }
            ChatMessage::Assistant(a) => {
                assert!(open.is_empty(), "a call without its result");
                open = a.tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            _ => assert!(open.is_empty(), "a call without its result"),
        }
    }
}

/// The lead's runner in `ws` on `model`, with a context window of `window` tokens, the base
/// tools (approved), artifacts and its transcript (a second runner continues the first one's
/// conversation).
pub(super) async fn lead_runner(
    ws: &std::path::Path,
    model: Arc<dyn ModelClient>,
    window: u32,
) -> Runner {
    let layout = Layout::new(ws);
    let clock = Arc::new(ManualClock::at_spec_epoch());
    let audit = Arc::new(JsonlAuditSink::open(&layout, clock).unwrap());
    let mut registry = ToolRegistry::new();
    for tool in base_tools(ShellTool::new().with_timeout(Duration::from_secs(10))) {
        registry.register(tool).unwrap();
    }
    let dispatcher = Dispatcher::new(
        Arc::new(registry),
        PermissionPolicy::default_policy(Arc::new(AutoApproval), audit),
        Hooks::new(),
    );
    let lead = AgentName::lead();
    Runner::new(
        lead.clone(),
        "You are lead.",
        model,
        Arc::new(dispatcher),
        ws,
        Arc::new(NullObserver),
    )
    .with_context(
        ContextBudget::for_window(window),
        Some(ArtifactStore::new(
            &layout,
            &lead,
            Arc::new(SequentialIds::new()),
        )),
    )
    .with_transcript(Arc::new(FileTranscript::new(layout.transcript(&lead))))
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_budget_the_history_is_summarised_and_the_next_run_continues_from_it() {
    let setup = Setup::new();
    // 4,096 tokens: a budget of 12,288 bytes; each read adds about 1 KB that micro-compaction
    // may not clear.
    let model = Arc::new(reading_small());
    let mut runner = setup.runner(model.clone(), 4_096).await;
    let outcome = runner
        .run_user_turn(
            "read the small file sixteen times",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Answered("Read it all.".into()));
    // A summary was asked for, tool-less, and every request fitted the budget.
    let summaries = model.side_requests();
    assert!(!summaries.is_empty());
    assert!(summaries
        .iter()
        .all(|r| r.purpose == Purpose::Summary && r.tools.is_empty()));
    for request in model.requests() {
        let size = troupe::agent::context::sent_bytes(&request.messages, &request.tools);
        assert!(size <= 12_288, "a request of {size} bytes");
        tool_pairs_are_whole(&request.messages[1..]);
    }
    // The history: system, summary, the person's request verbatim, recent exchanges.
    let history = runner.history();
    assert!(
        matches!(&history.messages()[1], ChatMessage::User { content } if content.starts_with(SUMMARY_HEADER))
    );
    assert_eq!(history.origins()[1], Origin::Summary);
    assert!(history.messages().iter().any(
        |m| matches!(m, ChatMessage::User { content } if content == "read the small file sixteen times")
    ));
    // The transcript keeps every original line and a boundary.
    let text = setup.transcript();
    assert!(text.contains("\"compaction\""), "{text}");
    assert!(text.matches("\"name\":\"read_file\"").count() >= 6);
    // The next run loads from the boundary: the same compacted conversation.
    let compacted: Vec<ChatMessage> = history.messages()[1..].to_vec();
    drop(runner);
    let next = setup
        .runner(Arc::new(ScriptedModel::new().text("hi")), 4_096)
        .await;
    assert_eq!(next.history().messages()[1..], compacted[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_summary_is_asked_again_once() {
    let setup = Setup::new();
    let model = Arc::new(
        reading_small()
            .side_text(Purpose::Summary, "Here is a summary: it went well.")
            .side_text(
                Purpose::Summary,
                r#"{"current_goal": "read the blob", "key_findings": ["digits"],
                    "files_read_or_changed": ["blob.txt"], "remaining_work": [],
                    "user_constraints": []}"#,
            ),
    );
    let mut runner = setup.runner(model.clone(), 4_096).await;
    runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    // The first compaction asked twice and used the second, valid answer.
    let asked = model.side_requests();
    assert!(asked.len() >= 2);
    assert_eq!(asked[0], asked[1], "the same summary request, asked again");
    let text = setup.transcript();
    assert!(text.contains("Current goal: read the blob"), "{text}");
    assert!(!text.contains("\"kind\":\"dropped\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_malformed_summaries_drop_the_older_part_with_a_note_and_the_turn_goes_on() {
    let setup = Setup::new();
    let model = Arc::new(
        reading_small()
            .side_text(Purpose::Summary, "{\"current_goal\": \"x\"}")
            .side_text(Purpose::Summary, "not json at all"),
    );
    let mut runner = setup.runner(model.clone(), 4_096).await;
    let outcome = runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Answered("Read it all.".into()));
    let text = setup.transcript();
    let first = text.find("\"compaction\"").expect("a boundary");
    assert!(
        text[first..].starts_with("\"compaction\":{\"kind\":\"dropped\""),
        "{text}"
    );
    assert!(text.contains("[Earlier conversation dropped: the summary failed."));
    tool_pairs_are_whole(&runner.history().messages()[1..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_too_long_refusal_compacts_and_retries_once() {
    let setup = Setup::new();
    let model = Arc::new(
        ScriptedModel::new()
            .text("Read them all.")
            .with_max_request_bytes(30_000),
    );
    // Our own budget would never compact (a huge window); the server's window is 30,000
    // bytes, and the conversation so far (twenty 3 KB messages) is over it.
    let mut runner = setup.runner(model.clone(), 1_000_000).await;
    for n in 0..20 {
        runner
            .push_user_once(
                &format!("m-{n}"),
                format!("message {n}: {}", "y".repeat(3_000)),
            )
            .await;
    }
    let outcome = runner
        .run_user_turn("summarise the messages", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Answered("Read them all.".into()));
    // Refused once, compacted, answered: two turn requests.
    assert_eq!(model.requests().len(), 2);
    let retry = &model.requests()[1];
    assert!(troupe::agent::context::sent_bytes(&retry.messages, &retry.tools) <= 30_000);
    // The person's request survived verbatim.
    assert!(retry.messages.iter().any(
        |m| matches!(m, ChatMessage::User { content } if content == "summarise the messages")
    ));
    assert!(setup.transcript().contains("\"compaction\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_too_long_even_after_compaction_fails_the_turn_with_a_clear_error() {
    let setup = Setup::new();
    // Nothing fits: even the prompt alone is over the server's window.
    let model = Arc::new(reading(1).with_max_request_bytes(100));
    let mut runner = setup.runner(model.clone(), 1_000_000).await;
    let err = runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "model_context_too_long");
    assert!(err.to_string().contains("context"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_becomes_an_artifact_and_a_small_conversation_is_sent_whole() {
    let setup = Setup::new();
    std::fs::write(setup.workspace.path().join("big.txt"), "x".repeat(50_000)).unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .tool_call("read_file", json!({"path": "big.txt"}))
            .tool_call("read_file", json!({"path": "blob.txt"}))
            .tool_call("read_file", json!({"path": "blob.txt"}))
            .tool_call("read_file", json!({"path": "blob.txt"}))
            .text("done"),
    );
    let mut runner = setup.runner(model.clone(), 1_000_000).await;
    runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    // The large result: an artifact, kept whole; the history holds a preview naming it.
    let dir = Layout::new(setup.workspace.path()).artifacts_dir(&AgentName::lead());
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1);
    let artifact = files[0].as_ref().unwrap().path();
    assert!(std::fs::read_to_string(&artifact)
        .unwrap()
        .contains(&"x".repeat(50_000)));
    let preview = runner
        .history()
        .messages()
        .iter()
        .find_map(|m| match m {
            ChatMessage::Tool { content, .. } if content.contains(".troupe/artifacts/lead/") => {
                Some(content.clone())
            }
            _ => None,
        })
        .expect("a preview naming the artifact");
    assert!(preview.len() < 5_000, "{}", preview.len());
    // The last request, far under the trigger: every result as the history holds it.
    let last = model.requests().last().unwrap().clone();
    let results: Vec<&str> = last
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0], preview);
    assert!(results[1..].iter().all(|r| r.starts_with("0123456789")));
    assert!(results.iter().all(|r| *r != CLEARED_TOOL_RESULT));
}

/// A system prompt whose memory section is what the runner selected.
#[derive(Default)]
struct MemoryPrompt(std::sync::Mutex<String>);

impl troupe::agent::prompt::SystemPromptSource for MemoryPrompt {
    fn render(&self) -> String {
        format!("You are lead.\n{}", self.0.lock().unwrap())
    }
    fn set_memory(&self, section: String) {
        *self.0.lock().unwrap() = section;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_are_selected_before_a_turn_and_extracted_at_the_end_of_the_run() {
    use troupe::agent::memory::{Memory, MemoryQueries};
    use troupe::store::memory::{MemoryRecord, MemoryStore, MemoryType};
    let setup = Setup::new();
    let layout = Layout::new(setup.workspace.path());
    let store = MemoryStore::open(&layout);
    store
        .put(
            &MemoryRecord::new(
                "prefers-tabs",
                MemoryType::Feedback,
                "Tabs, never spaces",
                "Indent with tabs.",
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .text("Noted.")
            .side_text(Purpose::MemorySelect, r#"["prefers-tabs"]"#)
            .side_text(
                Purpose::MemoryExtract,
                r#"[{"name": "project-uses-make", "type": "project",
                     "description": "The project builds with make", "body": "Run make test."}]"#,
            ),
    );
    let prompt = Arc::new(MemoryPrompt::default());
    let memory = Arc::new(Memory::new(
        store.clone(),
        MemoryQueries::new(model.clone()),
    ));
    let mut runner = setup
        .runner(model.clone(), 1_000_000)
        .await
        .with_system_prompt(prompt.clone())
        .with_memory(memory, true);
    runner
        .run_user_turn("format the code", &CancellationToken::new())
        .await
        .unwrap();
    // The selected record was in the system prompt of the turn's request.
    let ChatMessage::System { content } = &model.requests()[0].messages[0] else {
        panic!("no system message")
    };
    assert!(
        content.contains("prefers-tabs") && content.contains("Indent with tabs."),
        "{content}"
    );
    // The end of the run: a new record from this run's conversation.
    runner.remember_run().await;
    let names: Vec<String> = store
        .list()
        .await
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["prefers-tabs", "project-uses-make"]);
    let extract = model
        .side_requests()
        .into_iter()
        .find(|r| r.purpose == Purpose::MemoryExtract)
        .unwrap();
    assert!(format!("{:?}", extract.messages).contains("format the code"));
}

/// A living prompt whose team section changes at every refresh (a teammate's step).
#[derive(Default)]
struct Stepping(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl troupe::agent::prompt::SystemPromptSource for Stepping {
    fn render(&self) -> String {
        "You are lead.".into()
    }
    fn changing(&self) -> Vec<troupe::agent::prompt::Section> {
        let step = self.0.load(std::sync::atomic::Ordering::SeqCst);
        vec![troupe::agent::prompt::Section {
            title: "Team".into(),
            entries: vec![troupe::agent::prompt::Entry {
                key: "t".into(),
                text: format!("- t (step {step})"),
                gone: "- t: gone".into(),
            }],
            empty: "(no teammates)".into(),
        }]
    }
    async fn refresh(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Issue 46 keeps what compaction promises (SPEC §9): the living prompt's notes reach the model
/// between compactions, but a compaction rebuilds the system prompt whole — with the team as
/// it is now — and keeps no note; no note is ever written to the transcript.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_rebuilds_the_system_prompt_whole_and_keeps_no_note() {
    use troupe::agent::prompt::is_note;
    let setup = Setup::new();
    let mut script = ScriptedModel::new().text("Hello.");
    for _ in 0..16 {
        script = script.tool_call("read_file", json!({"path": "small.txt"}));
    }
    let model = Arc::new(script.text("Read it all."));
    let source = Arc::new(Stepping::default());
    let mut runner = setup
        .runner(model.clone(), 4_096)
        .await
        .with_system_prompt(source.clone());
    let cancel = CancellationToken::new();
    runner.run_user_turn("hi", &cancel).await.unwrap();
    let outcome = runner
        .run_user_turn("read the small file sixteen times", &cancel)
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Answered("Read it all.".into()));
    assert!(!model.side_requests().is_empty(), "no compaction happened");

    let requests = model.requests();
    let system = |r: &troupe::model::ModelRequest| match &r.messages[0] {
        ChatMessage::System { content } => content.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        system(&requests[0]),
        "You are lead.\n\n## Team\n- t (step 1)"
    );
    // The second turn's first request: the same system message, a note before the prompt.
    let second = &requests[1];
    assert_eq!(system(second), system(&requests[0]));
    let notes: Vec<usize> = (0..second.messages.len())
        .filter(|&i| is_note(&second.messages[i]))
        .collect();
    assert_eq!(notes.len(), 1, "{:#?}", second.messages);
    assert!(matches!(&second.messages[notes[0] + 1],
        ChatMessage::User { content } if content == "read the small file sixteen times"));
    assert!(
        matches!(&second.messages[notes[0]], ChatMessage::User { content } if content.contains("- t (step 2)"))
    );
    // After the compaction: the system prompt is whole and current, and no note is kept.
    let after = requests
        .iter()
        .position(|r| {
            r.messages.iter().any(
                |m| matches!(m, ChatMessage::User { content } if content.starts_with(SUMMARY_HEADER)),
            )
        })
        .expect("a request after the compaction");
    let rebuilt = system(&requests[after]);
    assert_ne!(rebuilt, system(&requests[0]));
    assert!(
        rebuilt.starts_with("You are lead.\n\n## Team\n- t (step "),
        "{rebuilt}"
    );
    assert!(!requests[after].messages.iter().any(is_note));
    assert!(!runner.history().messages().iter().any(is_note));
    assert!(!setup.transcript().contains("<prompt-update>"));
}
