//! Approval providers: auto, deny, and the terminal prompt with injected I/O.

use std::io::Cursor;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::permissions::approval::NO_TERMINAL_GUIDANCE;
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, AutoApproval, DenyApproval, SaveAllow,
    TerminalApproval,
};
use troupe::tools::Effect;
use troupe::wire::AgentName;

use super::SharedOutput;

fn ask<'a>(agent: &'a AgentName, args: &'a serde_json::Value) -> ApprovalRequest<'a> {
    ApprovalRequest {
        agent,
        tool: "write_file",
        effect: Effect::Write,
        arguments: args,
        reason: "write tools need approval",
        suggestion: None,
        sandbox: None,
        preview: None,
        person_only: false,
    }
}

#[tokio::test]
async fn auto_allows_and_deny_refuses() {
    let agent = AgentName::lead();
    let args = json!({});
    assert!(AutoApproval.approve(&ask(&agent, &args)).await.approved);
    assert_eq!(
        DenyApproval.approve(&ask(&agent, &args)).await,
        ApprovalAnswer::deny("write tools are refused in this run (--approval deny)")
    );
}

#[tokio::test]
async fn terminal_prompt_names_agent_tool_and_arguments() {
    let agent = AgentName::parse("alice").unwrap();
    let args = json!({"path": "notes.md", "content": "hi"});
    for (typed, approved) in [
        ("y\n", true),
        ("yes\n", true),
        ("n\n", false),
        ("\n", false),
        ("", false),
        ("maybe\n", false),
    ] {
        let out = SharedOutput::default();
        let provider = TerminalApproval::with_io(
            Box::new(Cursor::new(typed.as_bytes().to_vec())),
            Box::new(out.clone()),
            true,
        );
        let answer = provider.approve(&ask(&agent, &args)).await;
        assert_eq!(answer.approved, approved, "typed {typed:?}");
        let prompt = out.text();
        assert!(
            prompt.contains("agent alice wants to run write_file (write)"),
            "{prompt}"
        );
        assert!(
            prompt.contains(r#"{"path":"notes.md","content":"hi"}"#),
            "{prompt}"
        );
        assert!(prompt.contains("Allow? [y/N] "), "{prompt}");
    }
}

/// The four answers with a suggestion: yes once, always, save (through the saver), no with an
/// optional reason that ends up in the denial.
#[tokio::test]
async fn terminal_prompt_offers_always_save_and_a_reason_for_no() {
    let agent = AgentName::lead();
    let args = json!({"command": "cargo test --all"});
    let request = ApprovalRequest {
        agent: &agent,
        tool: "shell",
        effect: Effect::Execute,
        arguments: &args,
        reason: "execute tools need approval",
        suggestion: Some("shell(cargo test:*)"),
        sandbox: None,
        preview: None,
        person_only: false,
    };
    let saved = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let saver: SaveAllow = {
        let saved = saved.clone();
        std::sync::Arc::new(move |entry: &str| {
            saved.lock().unwrap().push(entry.to_owned());
            Ok("troupe.toml".to_owned())
        })
    };
    let cases: [(&str, ApprovalAnswer); 6] = [
        ("y\n", ApprovalAnswer::approve("approved at the terminal")),
        (
            "a\n",
            ApprovalAnswer::approve_always(
                "approved at the terminal; shell(cargo test:*) allowed for this run",
                "shell(cargo test:*)",
            ),
        ),
        (
            "s\n",
            ApprovalAnswer::approve_always(
                "approved at the terminal; shell(cargo test:*) allowed for this run and saved to troupe.toml",
                "shell(cargo test:*)",
            ),
        ),
        ("n\n\n", ApprovalAnswer::deny("refused at the terminal")),
        (
            "n\nuse cargo nextest instead\n",
            ApprovalAnswer::deny("refused at the terminal: use cargo nextest instead"),
        ),
        ("\nnot now\n", ApprovalAnswer::deny("refused at the terminal: not now")),
    ];
    for (typed, expected) in cases {
        let out = SharedOutput::default();
        let provider = TerminalApproval::with_io(
            Box::new(Cursor::new(typed.as_bytes().to_vec())),
            Box::new(out.clone()),
            true,
        )
        .with_saver(saver.clone());
        assert_eq!(
            provider.approve(&request).await,
            expected,
            "typed {typed:?}"
        );
        let prompt = out.text();
        assert!(
            prompt.contains("[y]es once / [a]lways allow shell(cargo test:*) this run / [s]ave shell(cargo test:*) to troupe.toml / [N]o\nAllow? [y/a/s/N] "),
            "{prompt}"
        );
        assert_eq!(
            prompt.contains("Reason for the agent (optional, Enter to skip): "),
            !expected.approved,
            "{prompt}"
        );
    }
    assert_eq!(
        *saved.lock().unwrap(),
        vec!["shell(cargo test:*)".to_owned()]
    );
}

#[tokio::test]
async fn terminal_without_a_terminal_denies_with_guidance_and_reads_nothing() {
    let agent = AgentName::lead();
    let args = json!({});
    let out = SharedOutput::default();
    let provider = TerminalApproval::with_io(
        Box::new(Cursor::new(b"y\n".to_vec())),
        Box::new(out.clone()),
        false,
    );
    let answer = provider.approve(&ask(&agent, &args)).await;
    assert_eq!(answer, ApprovalAnswer::deny(NO_TERMINAL_GUIDANCE));
    assert_eq!(
        NO_TERMINAL_GUIDANCE,
        "no terminal to ask; rerun with --approval auto to allow write/execute tools, or --approval deny"
    );
    assert_eq!(out.text(), "");
}

/// Input that never comes: a read blocks until the test ends (like a person who never answers).
struct NeverAnswers(std::sync::mpsc::Receiver<()>);

impl std::io::Read for NeverAnswers {
    fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        let _ = self.0.recv();
        Ok(0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_waiting_for_an_answer_is_denied_when_cancelled_and_later_ones_at_once() {
    let agent = AgentName::parse("alice").unwrap();
    let args = json!({"path": "notes.md"});
    let (_keep_blocking, never) = std::sync::mpsc::channel();
    let out = SharedOutput::default();
    let cancel = tokio_util::sync::CancellationToken::new();
    let provider = std::sync::Arc::new(
        TerminalApproval::with_io(
            Box::new(std::io::BufReader::new(NeverAnswers(never))),
            Box::new(out.clone()),
            true,
        )
        .with_cancel(cancel.clone()),
    );
    let asking = {
        let provider = provider.clone();
        tokio::spawn(async move {
            let agent = AgentName::parse("alice").unwrap();
            let args = json!({"path": "notes.md"});
            provider.approve(&ask(&agent, &args)).await
        })
    };
    // The prompt is on the terminal and its read is blocked; nothing will ever be typed.
    while !out.text().ends_with("Allow? [y/N] ") {
        tokio::task::yield_now().await;
    }
    cancel.cancel();
    let answer = asking.await.unwrap();
    assert_eq!(
        answer,
        ApprovalAnswer::deny("interrupted before an answer; treated as no")
    );
    // Later calls are denied without a prompt (the blocked read still holds the terminal).
    let later = provider.approve(&ask(&agent, &args)).await;
    assert_eq!(
        later,
        ApprovalAnswer::deny("interrupted before an answer; treated as no")
    );
    assert_eq!(out.text().matches("Allow?").count(), 1);
}

#[test]
fn a_persons_answer_says_where_it_was_given() {
    use troupe::permissions::{person_answer, PersonReply};
    assert_eq!(
        person_answer(PersonReply::No(String::new()), None, "acp"),
        ApprovalAnswer::deny("refused in the editor")
    );
    assert_eq!(
        person_answer(PersonReply::No("not now".into()), None, "mcp"),
        ApprovalAnswer::deny("refused by the MCP client: not now")
    );
    assert_eq!(
        person_answer(PersonReply::Once, None, "terminal"),
        ApprovalAnswer::approve("approved at the terminal")
    );
}
