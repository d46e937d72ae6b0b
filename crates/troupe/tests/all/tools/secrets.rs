//! The API key never reaches the model through a tool: every result of the dispatch path is
//! redacted, output and files cut by a cap are cut where no piece of the key is left, and a
//! background job's output tail (its record, its completion) is redacted too.

use std::fs;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::secrets::Redactor;
use troupe::tools::shell::ShellTool;
use troupe::wire::AgentName;

use super::{base_dispatcher, lead_ctx};
use crate::jobs::Fixture;

const KEY: &str = "sk-proj-Zq8vL2mN4xR7tY1uW3eP5";

/// No piece of the key longer than 8 characters (its `sk-proj-` prefix is public).
pub fn assert_no_piece_of_the_key(text: &str) {
    for len in 9..=KEY.len() {
        for start in 0..=KEY.len() - len {
            let piece = &KEY[start..start + len];
            assert!(
                !text.contains(piece),
                "leaks {piece:?} of the key in:\n{text}"
            );
        }
    }
}

async fn call(
    workspace: &std::path::Path,
    shell: ShellTool,
    tool: &str,
    args: serde_json::Value,
) -> (String, bool) {
    let (dispatcher, _) = base_dispatcher(shell);
    let dispatcher = dispatcher.with_redactor(Redactor::new([KEY]));
    let outcome = dispatcher
        .dispatch(&lead_ctx(workspace), tool, &args.to_string())
        .await;
    (outcome.content, outcome.is_error)
}

#[tokio::test]
async fn tool_results_and_errors_never_hold_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::write(
        ws.join(".env"),
        format!("OPENAI_MODEL=m\nOPENAI_API_KEY={KEY}\n"),
    )
    .unwrap();

    let (content, is_error) =
        call(ws, ShellTool::new(), "read_file", json!({"path": ".env"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        ("OPENAI_MODEL=m\nOPENAI_API_KEY=[redacted]\n", false)
    );
    let (content, _) = call(
        ws,
        ShellTool::new(),
        "shell",
        json!({"command": "cat .env"}),
    )
    .await;
    assert_eq!(
        content,
        "OPENAI_MODEL=m\nOPENAI_API_KEY=[redacted]\n[exit code: 0]"
    );
    // Errors too: a path that is the key, a failing command that prints it.
    let (content, is_error) = call(ws, ShellTool::new(), "read_file", json!({"path": KEY})).await;
    assert!(is_error);
    assert_eq!(content, "Error [not_found]: [redacted]: no such file");
    let (content, is_error) = call(
        ws,
        ShellTool::new().with_timeout(std::time::Duration::from_millis(300)),
        "shell",
        json!({"command": format!("echo {KEY}; sleep 5")}),
    )
    .await;
    assert!(
        is_error && content.starts_with("Error [timeout]"),
        "{content}"
    );
    assert!(content.contains("[redacted]"), "{content}");
    assert_no_piece_of_the_key(&content);
}

#[tokio::test]
async fn a_key_cut_by_the_shell_output_cap_leaves_no_piece() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 200;
    // Wherever the key falls around the end of the kept head or the start of the kept tail,
    // no piece of it survives.
    for pad in (cap / 2 - KEY.len())..=(cap / 2) {
        let command = format!(
            "printf '%0{pad}d' 0; printf '{KEY}'; printf '%0500d' 0; printf '{KEY}'; printf '%0{pad}d' 0"
        );
        let (content, _) = call(
            dir.path(),
            ShellTool::new().with_output_cap(cap),
            "shell",
            json!({ "command": command }),
        )
        .await;
        assert!(content.contains("[Output truncated"), "{content}");
        assert_no_piece_of_the_key(&content);
    }
}

#[tokio::test]
async fn a_key_cut_by_the_read_file_cap_leaves_no_piece() {
    let dir = tempfile::tempdir().unwrap();
    let max = troupe::tools::read_file::MAX_READ_BYTES;
    for before in (max - KEY.len())..=max {
        let mut text = "a".repeat(before);
        text.push_str(KEY);
        text.push_str("bbb");
        fs::write(dir.path().join("f.txt"), &text).unwrap();
        let (content, is_error) = call(
            dir.path(),
            ShellTool::new(),
            "read_file",
            json!({"path": "f.txt"}),
        )
        .await;
        assert!(!is_error);
        assert_no_piece_of_the_key(&content);
        assert!(content.ends_with("page on with `offset` and `limit` (lines), or use shell tools]"));
    }
}

#[tokio::test]
async fn a_background_job_printing_the_key_records_it_redacted() {
    let mut fx = Fixture::with(|s| s.with_redactor(Redactor::new([KEY])).with_output_cap(100));
    fs::write(fx.path(".env"), format!("OPENAI_API_KEY={KEY}\n")).unwrap();
    let id = fx
        .supervisor
        .submit(AgentName::lead(), "cat .env", fx.workspace())
        .await
        .unwrap();
    let completion = fx.next_completion().await;
    assert_eq!(completion.output_tail, "OPENAI_API_KEY=[redacted]\n");
    assert_eq!(
        fx.record_json(id)["output_tail"],
        json!("OPENAI_API_KEY=[redacted]\n")
    );
    // The tail starts inside the key: the piece is dropped, not shown.
    fs::write(fx.path("key.txt"), KEY).unwrap();
    for after in 60..=100 {
        let command = format!("cat key.txt; printf '%0{after}d' 0");
        let id = fx
            .supervisor
            .submit(AgentName::lead(), &command, fx.workspace())
            .await
            .unwrap();
        let completion = fx.next_completion().await;
        assert_no_piece_of_the_key(&completion.output_tail);
        assert_no_piece_of_the_key(&fx.record_json(id).to_string());
    }
}
