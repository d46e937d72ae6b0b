//! The tool-result budget and the artifact store.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::agent::context::{
    preview, ResultBudget, PERSIST_THRESHOLD_BYTES, PREVIEW_HEAD_BYTES, PREVIEW_TAIL_BYTES,
    TURN_BUDGET_BYTES,
};
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::store::artifacts::{ArtifactRef, ArtifactStore};
use troupe::tools::read_file::ReadFileTool;
use troupe::tools::{ToolContext, ToolHandler};
use troupe::wire::AgentName;

const FIRST_ID: &str = "00000000-0000-4000-8000-000000000001";

fn store(workspace: &std::path::Path) -> ArtifactStore {
    ArtifactStore::new(
        &Layout::new(workspace),
        &AgentName::lead(),
        Arc::new(SequentialIds::new()),
    )
}

/// `len` bytes of ASCII whose start and end differ, so a preview shows which it kept.
fn text(len: usize) -> String {
    (0..len)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect()
}

#[test]
fn constants_are_the_contracted_ones() {
    assert_eq!(PERSIST_THRESHOLD_BYTES, 30_000);
    assert_eq!(TURN_BUDGET_BYTES, 200_000);
    assert_eq!(PREVIEW_HEAD_BYTES, 2_000);
    assert_eq!(PREVIEW_TAIL_BYTES, 2_000);
}

#[tokio::test]
async fn a_result_of_exactly_the_threshold_enters_whole() {
    let workspace = tempfile::tempdir().unwrap();
    let mut budget = ResultBudget::new(store(workspace.path()));
    budget.start_batch();
    let content = text(PERSIST_THRESHOLD_BYTES);
    assert_eq!(budget.admit(content.clone()).await, content);
    assert_eq!(budget.batch_bytes(), PERSIST_THRESHOLD_BYTES);
    assert!(!workspace.path().join(".troupe/artifacts").exists());
}

#[tokio::test]
async fn a_result_one_byte_over_the_threshold_is_kept_whole_as_an_artifact_and_previewed() {
    let workspace = tempfile::tempdir().unwrap();
    let mut budget = ResultBudget::new(store(workspace.path()));
    budget.start_batch();
    let content = text(PERSIST_THRESHOLD_BYTES + 1);
    let shown = budget.admit(content.clone()).await;

    let relative = format!(".troupe/artifacts/lead/{FIRST_ID}.txt");
    let kept = std::fs::read_to_string(workspace.path().join(&relative)).unwrap();
    assert_eq!(kept, content);
    let (note, rest) = shown.split_once('\n').unwrap();
    assert_eq!(
        note,
        format!(
            "[Tool result too large for the conversation (30001 bytes): kept whole in \
             {relative}; read_file opens it (`limit` reads its first N lines). Preview of its \
             start and end:]"
        )
    );
    assert_eq!(rest, preview(&content, 2_000, 2_000));
    assert!(rest.starts_with(&content[..2_000]));
    assert!(rest.ends_with(&content[content.len() - 2_000..]));
    assert_eq!(
        budget.batch_bytes(),
        shown.len(),
        "a preview counts toward the batch"
    );
    assert_eq!(budget.artifact_bytes(), 30_001);
}

#[tokio::test]
async fn read_file_opens_the_artifact_named_in_the_preview() {
    let workspace = tempfile::tempdir().unwrap();
    let mut budget = ResultBudget::new(store(workspace.path()));
    let content = text(50_000);
    let shown = budget.admit(content.clone()).await;
    let path = shown
        .split_once("kept whole in ")
        .and_then(|(_, rest)| rest.split_once(';'))
        .map(|(path, _)| path.to_owned())
        .unwrap();
    let read = ReadFileTool
        .call(
            &ToolContext::new(AgentName::lead(), workspace.path()),
            json!({ "path": path }),
        )
        .await
        .unwrap();
    assert_eq!(read, content);
}

#[tokio::test]
async fn an_artifact_larger_than_read_file_shows_says_how_to_read_the_rest() {
    let workspace = tempfile::tempdir().unwrap();
    let mut budget = ResultBudget::new(store(workspace.path()));
    let shown = budget.admit(text(300_000)).await;
    assert!(
        shown.contains("read_file shows its first 200000 bytes"),
        "{shown:.300}"
    );
    assert!(shown.contains("use shell tools for the rest"));
}

#[tokio::test]
async fn at_most_200000_bytes_of_whole_results_enter_a_batch_and_a_new_batch_starts_afresh() {
    let workspace = tempfile::tempdir().unwrap();
    let mut budget = ResultBudget::new(store(workspace.path()));
    budget.start_batch();
    let result = text(25_000);
    // 8 × 25,000 = 200,000 exactly: all whole.
    for _ in 0..8 {
        assert_eq!(budget.admit(result.clone()).await, result);
    }
    assert_eq!(budget.batch_bytes(), TURN_BUDGET_BYTES);
    // The ninth would pass the budget: previewed, and its preview counted.
    let ninth = budget.admit(result.clone()).await;
    assert!(
        ninth.starts_with(
            "[Tool result past this turn's 200000-byte budget for tool results (25000 bytes): \
             kept whole in .troupe/artifacts/lead/"
        ),
        "{ninth:.300}"
    );
    assert_eq!(budget.batch_bytes(), TURN_BUDGET_BYTES + ninth.len());
    budget.start_batch();
    assert_eq!(budget.batch_bytes(), 0);
    assert_eq!(budget.admit(result.clone()).await, result);
}

#[tokio::test]
async fn a_result_no_larger_than_a_preview_enters_whole_even_past_the_batch_budget() {
    let workspace = tempfile::tempdir().unwrap();
    let mut budget = ResultBudget::new(store(workspace.path()));
    for _ in 0..8 {
        budget.admit(text(25_000)).await;
    }
    assert_eq!(budget.batch_bytes(), TURN_BUDGET_BYTES);
    let small = text(PREVIEW_HEAD_BYTES + PREVIEW_TAIL_BYTES);
    assert_eq!(budget.admit(small.clone()).await, small);
    let larger = text(PREVIEW_HEAD_BYTES + PREVIEW_TAIL_BYTES + 1);
    assert_ne!(budget.admit(larger.clone()).await, larger);
}

#[tokio::test]
async fn when_the_artifact_cannot_be_written_the_preview_says_so_and_the_run_goes_on() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(workspace.path().join(".troupe")).unwrap();
    // A file where the artifacts folder should be.
    std::fs::write(workspace.path().join(".troupe/artifacts"), "not a folder").unwrap();
    let mut budget = ResultBudget::new(store(workspace.path()));
    let content = text(40_000);
    let shown = budget.admit(content.clone()).await;
    assert!(
        shown.starts_with(
            "[Tool result too large for the conversation (40000 bytes); the full result could \
             not be kept ("
        ),
        "{shown:.300}"
    );
    assert!(shown.ends_with(&content[content.len() - 2_000..]));
    assert_eq!(
        shown.lines().count(),
        4,
        "one note line, head, omission, tail"
    );
    assert_eq!(budget.artifact_bytes(), 0);
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlinked_artifacts_folder_is_refused_not_followed() {
    let workspace = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(workspace.path().join(".troupe")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), workspace.path().join(".troupe/artifacts"))
        .unwrap();
    assert!(store(workspace.path()).write("x").await.is_err());
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn artifacts_are_named_by_the_id_generator_and_never_overwritten() {
    let workspace = tempfile::tempdir().unwrap();
    let first = store(workspace.path()).write("first").await.unwrap();
    assert_eq!(
        first,
        ArtifactRef {
            relative_path: format!(".troupe/artifacts/lead/{FIRST_ID}.txt"),
            bytes: 5,
        }
    );
    // A second store with a generator starting over (as a test re-run would) takes a new name.
    let second = store(workspace.path()).write("second").await.unwrap();
    assert_ne!(second.relative_path, first.relative_path);
    let read = |r: &ArtifactRef| std::fs::read_to_string(workspace.path().join(&r.relative_path));
    assert_eq!(read(&first).unwrap(), "first");
    assert_eq!(read(&second).unwrap(), "second");
}

#[test]
fn preview_keeps_exactly_head_and_tail_bytes_and_counts_the_rest() {
    let content = text(10_000);
    let shown = preview(&content, 2_000, 2_000);
    assert_eq!(
        shown,
        format!(
            "{}\n[… 6000 bytes omitted …]\n{}",
            &content[..2_000],
            &content[8_000..]
        )
    );
    assert_eq!(preview("short", 2, 3), "short");
    assert_eq!(preview("abcdefg", 2, 3), "ab\n[… 2 bytes omitted …]\nefg");
}

#[test]
fn preview_cuts_on_utf8_character_boundaries() {
    // 'é' is 2 bytes: an odd head or tail length falls inside a character.
    let content = "é".repeat(5_000);
    let shown = preview(&content, 2_001, 2_001);
    let (head, rest) = shown.split_once('\n').unwrap();
    let (omitted, tail) = rest.split_once('\n').unwrap();
    assert_eq!(
        head,
        "é".repeat(1_000),
        "the head stops before a cut character"
    );
    assert_eq!(
        tail,
        "é".repeat(1_000),
        "the tail starts after a cut character"
    );
    assert_eq!(omitted, "[… 6000 bytes omitted …]");
    // 4-byte characters too.
    let emoji = "🦀".repeat(2_000);
    let shown = preview(&emoji, 2_002, 2_002);
    assert!(shown.starts_with(&"🦀".repeat(500)));
    assert!(shown.ends_with(&"🦀".repeat(500)));
}
