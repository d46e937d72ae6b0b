//! Output over the shell's cap is reported truthfully (issue 23): it is streamed, as it is read,
//! to an artifact that holds all of it (to a bound), the result's first line says how many bytes
//! the command printed, how many the artifact holds and how many were dropped, and what lands
//! in the artifact is redacted. Real child processes; no sleeps.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use troupe::agent::context::ContextBudget;
use troupe::agent::{NullObserver, Runner};
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::model::{ChatMessage, ScriptedModel};
use troupe::process::{GroupChild, Stop, OUTPUT_CAP};
use troupe::secrets::Redactor;
use troupe::store::artifacts::ArtifactStore;
use troupe::tools::shell::ShellTool;
use troupe::tools::shell_output::ShellOutput;
use troupe::tools::ToolContext;
use troupe::wire::AgentName;

use super::{base_dispatcher, lead_ctx};

/// Prints `n` bytes of `x`, then `END\n`.
fn xs_then_end(n: usize) -> String {
    format!("head -c {n} /dev/zero | tr '\\0' x; echo END")
}

fn artifacts(workspace: &Path) -> ArtifactStore {
    ArtifactStore::new(
        &Layout::new(workspace),
        &AgentName::lead(),
        Arc::new(SequentialIds::new()),
    )
}

fn ctx_with_artifacts(workspace: &Path) -> ToolContext {
    lead_ctx(workspace).with_artifacts(Some(artifacts(workspace)))
}

/// Every entry of the lead's artifacts folder (temp files included).
fn artifact_files(workspace: &Path) -> Vec<String> {
    let dir = Layout::new(workspace).artifacts_dir(&AgentName::lead());
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The workspace-relative artifact path the first line names.
fn named_artifact(first_line: &str) -> String {
    let start = first_line.find(".troupe/artifacts/").expect(first_line);
    let end = start + first_line[start..].find(".txt").expect(first_line) + 4;
    first_line[start..end].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_printing_far_more_than_the_cap_is_kept_whole_and_the_first_line_says_so() {
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path();
    let (dispatcher, _) = base_dispatcher(ShellTool::new());
    let dispatcher = Arc::new(dispatcher);
    let model = ScriptedModel::new()
        .tool_call("shell", json!({"command": xs_then_end(5_000_000)}))
        .text("done");
    let mut runner = Runner::new(
        AgentName::lead(),
        "You are lead.",
        Arc::new(model),
        dispatcher.clone(),
        ws,
        Arc::new(NullObserver),
    )
    .with_context(ContextBudget::for_window(1_000_000), Some(artifacts(ws)));
    runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    let result = runner
        .history()
        .messages()
        .iter()
        .find_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();

    // (a) The first line the model sees: printed, held, dropped.
    let first_line = result.lines().next().unwrap();
    let path = named_artifact(first_line);
    let printed = 5_000_000 + 4;
    assert!(
        first_line.starts_with(&format!(
            "[Output truncated: the command printed {printed} bytes; {path} holds all {printed} \
             of them, 0 bytes dropped."
        )),
        "{first_line}"
    );
    // The rest: the start and the end of the output, small enough to stay in the conversation.
    assert!(result.len() < 5_000, "{}", result.len());
    assert!(result.ends_with("xxxxEND\n[exit code: 0]"), "{result}");
    // (b) The artifact holds the whole output, byte for byte, and it is the only one.
    let kept = fs::read(ws.join(&path)).unwrap();
    assert_eq!(kept.len(), printed);
    assert!(kept[..printed - 4].iter().all(|b| *b == b'x'));
    assert!(kept.ends_with(b"xEND\n"));
    assert_eq!(artifact_files(ws).len(), 1, "{:?}", artifact_files(ws));
    // read_file opens it: its first 200,000 bytes, and the note says how to read on.
    let ctx = ToolContext::new(AgentName::lead(), ws);
    let read = dispatcher
        .dispatch(&ctx, "read_file", &json!({"path": path}).to_string())
        .await;
    assert!(!read.is_error, "{}", read.content);
    assert!(read.content.starts_with(&"x".repeat(200_000)));
    assert!(
        read.content.ends_with(&format!(
            "[cut at 200000 of {printed} bytes; page on with `offset` and `limit` (lines), or \
             use shell tools]"
        )),
        "{}",
        &read.content[200_000..]
    );
    // And shell tools read its end.
    let tail = dispatcher
        .dispatch(
            &ctx,
            "shell",
            &json!({"command": format!("tail -c 8 {path}")}).to_string(),
        )
        .await;
    assert_eq!(tail.content, "xxxxEND\n[exit code: 0]");
}

#[tokio::test]
async fn past_the_bound_the_artifact_stops_and_the_rest_is_counted_as_dropped() {
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path();
    let (dispatcher, _) = base_dispatcher(ShellTool::new().with_artifact_limit(100_000));
    // 300,000 bytes of numbered lines, 8 bytes each: `0000000\n`, `0000001\n`, …
    let command = "seq -f '%07g' 0 37499";
    let outcome = dispatcher
        .dispatch(
            &ctx_with_artifacts(ws),
            "shell",
            &json!({ "command": command }).to_string(),
        )
        .await;
    let first_line = outcome.content.lines().next().unwrap();
    let path = named_artifact(first_line);
    assert_eq!(
        first_line,
        format!(
            "[Output truncated: the command printed 300000 bytes; {path} holds the first 100000 \
             of them, 200000 bytes dropped (an artifact keeps at most 100000 bytes). read_file \
             opens it (200000 bytes at a time; `offset` skips lines, `limit` caps them); shell \
             tools (tail -c, grep, sed -n) read it too. Shown here: the start and the end of the \
             output.]"
        )
    );
    // The end shown is the end of the output, past what the artifact keeps.
    assert!(
        outcome.content.ends_with("0037499\n[exit code: 0]"),
        "{}",
        outcome.content
    );
    let expected: String = (0..12_500).map(|i| format!("{i:07}\n")).collect();
    assert_eq!(fs::read_to_string(ws.join(&path)).unwrap(), expected);
    // Under read_file's cap, read_file returns all of it.
    let read = dispatcher
        .dispatch(
            &lead_ctx(ws),
            "read_file",
            &json!({"path": path}).to_string(),
        )
        .await;
    assert_eq!(read.content, expected);
    assert_eq!(artifact_files(ws).len(), 1);
}

#[tokio::test]
async fn output_up_to_the_cap_is_shown_as_before_and_makes_no_artifact() {
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path();
    let (dispatcher, _) = base_dispatcher(ShellTool::new());
    let run = |command: String| {
        let dispatcher = &dispatcher;
        async move {
            dispatcher
                .dispatch(
                    &ctx_with_artifacts(ws),
                    "shell",
                    &json!({ "command": command }).to_string(),
                )
                .await
                .content
        }
    };
    assert_eq!(run("echo hi".to_owned()).await, "hi\n[exit code: 0]");
    assert_eq!(
        run(format!("head -c {OUTPUT_CAP} /dev/zero | tr '\\0' y")).await,
        format!("{}\n[exit code: 0]", "y".repeat(OUTPUT_CAP))
    );
    assert_eq!(artifact_files(ws), Vec::<String>::new());
}

#[tokio::test]
async fn without_artifacts_the_first_line_says_the_rest_was_dropped() {
    let workspace = tempfile::tempdir().unwrap();
    let (dispatcher, _) = base_dispatcher(ShellTool::new());
    let outcome = dispatcher
        .dispatch(
            &lead_ctx(workspace.path()),
            "shell",
            &json!({"command": xs_then_end(100_000)}).to_string(),
        )
        .await;
    let printed = 100_004;
    let dropped = printed - OUTPUT_CAP;
    let (first_line, rest) = outcome.content.split_once('\n').unwrap();
    assert_eq!(
        first_line,
        format!(
            "[Output truncated: the command printed {printed} bytes; no artifact holds them \
             (this agent keeps no artifacts), so the {dropped} bytes not shown here were dropped.]"
        )
    );
    let half = OUTPUT_CAP / 2;
    assert_eq!(
        rest,
        format!(
            "{}\n[… {dropped} bytes not shown …]\n{}END\n[exit code: 0]",
            "x".repeat(half),
            "x".repeat(half - 4)
        )
    );
}

#[tokio::test]
async fn output_is_streamed_to_the_artifact_and_memory_stays_at_the_cap() {
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path();
    let mut output = ShellOutput::new(
        OUTPUT_CAP,
        &Redactor::default(),
        Some(artifacts(ws)),
        troupe::tools::shell_output::ARTIFACT_LIMIT_BYTES,
    );
    GroupChild::spawn(&xs_then_end(5_000_000), ws)
        .unwrap()
        .run(&mut output, None, &CancellationToken::new(), Stop::Kill)
        .await
        .unwrap();
    // The output was written as it came: never more than the cap held for the file.
    assert!(
        output.peak_pending() <= OUTPUT_CAP,
        "{}",
        output.peak_pending()
    );
    let text = output.render().await;
    let path = named_artifact(text.lines().next().unwrap());
    assert_eq!(fs::metadata(ws.join(path)).unwrap().len(), 5_000_004);
}

const KEY: &str = "sk-proj-Zq8vL2mN4xR7tY1uW3eP5";

#[tokio::test]
async fn the_artifact_is_redacted_even_where_a_read_splits_the_key() {
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path();
    let (dispatcher, _) = base_dispatcher(ShellTool::new());
    let dispatcher = dispatcher.with_redactor(Redactor::new([KEY]));
    // Keys at every offset around the pipe reads' 8,192-byte chunks (and beyond the cap).
    let command = format!(
        "for i in $(seq 0 60); do printf '%0*d' $((8192 - 30 + i)) 0; printf '{KEY}'; done"
    );
    let outcome = dispatcher
        .dispatch(
            &ctx_with_artifacts(ws),
            "shell",
            &json!({ "command": command }).to_string(),
        )
        .await;
    super::secrets::assert_no_piece_of_the_key(&outcome.content);
    let path = named_artifact(outcome.content.lines().next().unwrap());
    let kept = fs::read_to_string(ws.join(path)).unwrap();
    super::secrets::assert_no_piece_of_the_key(&kept);
    assert_eq!(kept.matches("[redacted]").count(), 61);
    let zeros: usize = (0..61).map(|i| 8192 - 30 + i).sum();
    assert_eq!(kept.len(), zeros + 61 * "[redacted]".len());
}
