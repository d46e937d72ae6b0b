//! The longrun suite (SPEC §9): the lead's runner driven through many scripted tool turns whose
//! results are large (1–80 KB), with a small context window, the real dispatcher and base tools,
//! real artifacts and the scripted model's built-in summariser. It measures what is sent.
//!
//! Each turn is a person's prompt, one `read_file` call of a blob, its result, and a short
//! answer: two requests per turn. `bytes_sent_total_uncompacted` is what the same conversation
//! would have sent with no compaction at all — every result whole in every later request —
//! computed from the messages, not run (a server would have refused it long before the end).
//! `cache_prefix_share` is the part of all bytes sent (summary requests included) that a
//! provider's prompt cache could reuse: for each turn request, the bytes that are a
//! byte-identical prefix of the agent's previous turn request (`context::shared_prefix` on
//! `context::cache_bytes`); `bytes_sent_uncached` is the rest, what a provider bills uncached.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::agent::context::{cache_bytes, sent_bytes, shared_prefix, ContextBudget};
use troupe::agent::observer::CompactionReport;
use troupe::agent::{RunObserver, Runner};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::layout::Layout;
use troupe::model::{ChatMessage, ModelRequest, ModelResponse, ScriptedModel, ToolCall};
use troupe::permissions::hooks::Hooks;
use troupe::permissions::{AutoApproval, JsonlAuditSink, PermissionPolicy};
use troupe::store::artifacts::ArtifactStore;
use troupe::tools::shell::ShellTool;
use troupe::tools::{base_tools, Dispatcher, ToolRegistry};
use troupe::wire::AgentName;

use crate::result::BenchResult;

/// Distinct blobs the turns read, in turn.
const BLOBS: usize = 64;

/// Counts compactions.
#[derive(Default)]
struct Compactions(Mutex<usize>);

impl RunObserver for Compactions {
    fn compacted(&self, _agent: &AgentName, _report: &CompactionReport) {
        if let Ok(mut n) = self.0.lock() {
            *n += 1;
        }
    }
}

/// The turn requests' bytes a prompt cache could reuse (see the module docs).
#[derive(Default)]
struct PrefixShare {
    /// The previous turn request, as a cache sees it.
    previous: Vec<u8>,
    /// Bytes of each request that are a prefix of the one before, summed.
    shared: usize,
}

impl PrefixShare {
    fn record(&mut self, request: &ModelRequest) {
        let bytes = cache_bytes(request);
        self.shared += shared_prefix(&self.previous, &bytes);
        self.previous = bytes;
    }
}

/// A deterministic size in 1..=80 KB for blob `i` (a small LCG: the same sizes on every run).
fn blob_size(i: usize) -> usize {
    let x = (i as u64)
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    1_024 + (x >> 33) as usize % (80 * 1_024 - 1_024 + 1)
}

fn blob_content(i: usize, size: usize) -> String {
    let line = format!("blob {i}: the quick brown fox jumps over the lazy dog 0123456789\n");
    line.repeat(size / line.len() + 1)[..size].to_owned()
}

pub fn run(dir: &Path, turns: usize, window_tokens: u32) -> BenchResult<Value> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let ws = workspace.path();
    let mut blobs = Vec::with_capacity(BLOBS);
    for i in 0..BLOBS {
        let content = blob_content(i, blob_size(i));
        std::fs::write(ws.join(format!("blob-{i}.txt")), &content).map_err(|e| e.to_string())?;
        blobs.push(content);
    }

    // Sizes of the turn requests as sent, in order.
    let sent: Arc<Mutex<Vec<usize>>> = Arc::default();
    let recorded = sent.clone();
    let prefix: Arc<Mutex<PrefixShare>> = Arc::default();
    let prefix_recorded = prefix.clone();
    let model = Arc::new(ScriptedModel::from_fn(move |request: &ModelRequest| {
        if let Ok(mut sizes) = recorded.lock() {
            sizes.push(sent_bytes(&request.messages, &request.tools));
        }
        if let Ok(mut prefix) = prefix_recorded.lock() {
            prefix.record(request);
        }
        let last = request.messages.last();
        Ok(match last {
            Some(ChatMessage::User { content }) => {
                let blob = content
                    .rsplit("blob-")
                    .next()
                    .and_then(|n| n.trim_end_matches(".txt").parse::<usize>().ok())
                    .unwrap_or(0);
                let call = ToolCall::new(
                    format!("call_{}", uuid::Uuid::new_v4().simple()),
                    "read_file",
                    json!({"path": format!("blob-{blob}.txt")}).to_string(),
                );
                ModelResponse::tool_calls(vec![call], "scripted")
            }
            _ => ModelResponse::text("Read it.", "scripted"),
        })
    }));

    let layout = Layout::new(ws);
    let audit = JsonlAuditSink::open(&layout, Arc::new(SystemClock)).map_err(|e| e.to_string())?;
    let mut registry = ToolRegistry::new();
    for tool in base_tools(ShellTool::new()) {
        registry.register(tool).map_err(|e| e.to_string())?;
    }
    let dispatcher = Dispatcher::new(
        Arc::new(registry),
        PermissionPolicy::default_policy(Arc::new(AutoApproval), Arc::new(audit)),
        Hooks::new(),
    );
    let lead = AgentName::lead();
    let compactions = Arc::new(Compactions::default());
    let budget = ContextBudget::for_model("bench", Some(window_tokens));
    let mut runner = Runner::new(
        lead.clone(),
        "You are lead, reading blobs.",
        model.clone(),
        Arc::new(dispatcher),
        ws,
        compactions.clone(),
    )
    .with_context(
        budget,
        Some(ArtifactStore::new(&layout, &lead, Arc::new(RandomIds))),
    );
    let tools = runner.tools().to_vec();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let cancel = CancellationToken::new();
    // What an uncompacted conversation would send: its size so far, grown message by message.
    let mut uncompacted_size = sent_bytes(
        &[ChatMessage::system(runner.history().system_prompt())],
        &tools,
    );
    let mut uncompacted_total = 0usize;
    let mut failed_turns = 0usize;
    let mut per_turn_max = Vec::with_capacity(turns);
    for turn in 0..turns {
        let blob = turn % BLOBS;
        let prompt = format!("Step {turn}: read blob-{blob}.txt");
        let before = sent.lock().map(|s| s.len()).unwrap_or(0);
        let outcome = runtime.block_on(runner.run_user_turn(prompt.clone(), &cancel));
        if outcome.is_err() {
            failed_turns += 1;
        }
        let sizes = sent
            .lock()
            .map(|s| s[before..].to_vec())
            .unwrap_or_default();
        per_turn_max.push(sizes.iter().copied().max().unwrap_or(0));
        // The same turn, uncompacted: the prompt, the call, the whole result, the answer.
        let call = ToolCall::new(
            "call_0123456789abcdef0123456789abcdef",
            "read_file",
            json!({"path": format!("blob-{blob}.txt")}).to_string(),
        );
        let added = [
            ChatMessage::user(prompt),
            ChatMessage::Assistant(troupe::model::AssistantMessage::tool_calls(vec![
                call.clone()
            ])),
            ChatMessage::tool_result(call.id, blobs[blob].clone()),
            ChatMessage::Assistant(troupe::model::AssistantMessage::text("Read it.")),
        ];
        let size_of = |m: &ChatMessage| serde_json::to_vec(m).map_or(0, |b| b.len() + 1);
        uncompacted_size += size_of(&added[0]);
        uncompacted_total += uncompacted_size;
        uncompacted_size += size_of(&added[1]) + size_of(&added[2]);
        uncompacted_total += uncompacted_size;
        uncompacted_size += size_of(&added[3]);
    }
    let sizes = sent.lock().map(|s| s.clone()).unwrap_or_default();
    let summaries: usize = model
        .side_requests()
        .iter()
        .map(|r| sent_bytes(&r.messages, &r.tools))
        .sum();
    let mut sorted = sizes.clone();
    sorted.sort_unstable();
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    let max = sorted.last().copied().unwrap_or(0);
    let window_max = |from: usize, to: usize| {
        per_turn_max
            .get(from.min(per_turn_max.len())..to.min(per_turn_max.len()))
            .and_then(|s| s.iter().copied().max())
            .unwrap_or(0)
    };
    let total: usize = sizes.iter().sum::<usize>() + summaries;
    let compactions = compactions.0.lock().map(|n| *n).unwrap_or(0);
    let shared = prefix.lock().map(|p| p.shared).unwrap_or(0);
    let cache_prefix_share = if total == 0 {
        0.0
    } else {
        (shared as f64 / total as f64 * 1000.0).round() / 1000.0
    };
    Ok(json!({
        "suite": "longrun",
        "turns": turns,
        "context_window_tokens": window_tokens,
        "budget_bytes": budget.budget_bytes,
        "requests": sizes.len(),
        "request_bytes_p50": p50,
        "request_bytes_max": max,
        "request_bytes_max_turns_100_200": window_max(100, 200),
        "request_bytes_max_turns_400_500": window_max(400, 500),
        "compactions": compactions,
        "summary_request_bytes_total": summaries,
        "artifact_bytes": dir_bytes(&layout.artifacts_dir(&lead)),
        "bytes_sent_total": total,
        "bytes_sent_total_uncompacted": uncompacted_total,
        "sent_ratio": if uncompacted_total == 0 { 0.0 } else { crate::stats::round2(total as f64 / uncompacted_total as f64 * 1000.0) / 1000.0 },
        "cache_prefix_share": cache_prefix_share,
        "bytes_sent_uncached": total - shared,
        "failed_turns": failed_turns,
    }))
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
