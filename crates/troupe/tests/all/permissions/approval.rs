//! Approval providers: auto, deny, and the terminal prompt with injected I/O.

use std::io::Cursor;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::permissions::approval::NO_TERMINAL_GUIDANCE;
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, AutoApproval, DenyApproval, TerminalApproval,
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
        assert!(prompt.ends_with("Allow? [y/N] "), "{prompt}");
    }
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
