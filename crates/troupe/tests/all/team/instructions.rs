//! The project's instructions in every living system prompt (issue 42), as a Chat Completions
//! server on 127.0.0.1 (wiremock) receives them: the workspace's `AGENTS.md` for the lead and
//! the worktree's own copy for a worktree teammate, `CLAUDE.md` when it is alone, the 32 KiB cap
//! and its notice, `[context] files`, the other `AGENTS.md` files listed by path, and an edit
//! between two turns seen in the second turn's request.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use troupe::bootstrap::{build_team, SameModel, Team};
use troupe::model::config::ModelConfig;
use troupe::model::{OpenAiClient, RetryPolicy};
use troupe::settings::Settings;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::support::{call, drive, say, Convo, Fixture, Reply};
use crate::worktree::support::{git, init_repo};

type Script = Box<dyn Fn(&Convo<'_>) -> Reply + Send + Sync>;

/// Answers every request from `script`, given the request's conversation.
struct Answers(Script);

impl Respond for Answers {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let c = Convo(body["messages"].as_array().unwrap());
        let message = match (self.0)(&c) {
            Reply::Text(text) => json!({"role": "assistant", "content": text}),
            Reply::Call(tool, args) => json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": c.next_call_id(), "type": "function",
                    "function": {"name": tool, "arguments": args.to_string()}}]}),
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1_785_398_400,
            "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }))
    }
}

/// A model server answering from `script`, and a team on `f`'s workspace talking to it with
/// `settings` (the files' settings) in place.
async fn team_on_server(
    f: &Fixture,
    settings: Settings,
    script: impl Fn(&Convo<'_>) -> Reply + Send + Sync + 'static,
) -> (MockServer, Team) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Answers(Box::new(script)))
        .mount(&server)
        .await;
    let config = ModelConfig {
        base_url: format!("{}/v1", server.uri()),
        timeout: Duration::from_secs(10),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..ModelConfig::new("sk-test-0123456789abcdef", "gpt-test")
    };
    let client = Arc::new(OpenAiClient::new(&config).unwrap());
    let mut team_settings = f.settings(Arc::new(SameModel(client)));
    team_settings.settings = settings;
    let team = build_team(team_settings).await.unwrap();
    (server, team)
}

/// The system prompts the server received from the agent whose prompt starts `You are <who>`,
/// in order.
async fn prompts_of(server: &MockServer, who: &str) -> Vec<String> {
    let opening = format!("You are {who},");
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter_map(|body| body["messages"][0]["content"].as_str().map(str::to_owned))
        .filter(|system| system.starts_with(&opening))
        .collect()
}

/// The project instructions section of a system prompt (empty when there is none).
fn instructions_of(system: &str) -> &str {
    let Some(at) = system.find("## Project instructions\n") else {
        return "";
    };
    let rest = &system[at..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    rest[..end].trim_end()
}

/// A lead that answers at once.
fn answers_at_once(_: &Convo<'_>) -> Reply {
    say("Done.")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_md_reaches_the_lead_and_a_worktree_teammate_gets_its_worktrees_copy() {
    let f = Fixture::new();
    init_repo(&f.workspace);
    std::fs::write(
        f.workspace.join("AGENTS.md"),
        "Committed: run cargo test.\n",
    )
    .unwrap();
    std::fs::create_dir_all(f.workspace.join("crates/web")).unwrap();
    std::fs::write(f.workspace.join("crates/web/AGENTS.md"), "Web rules.\n").unwrap();
    git(&f.workspace, &["add", "AGENTS.md", "crates/web/AGENTS.md"]);
    git(&f.workspace, &["commit", "--quiet", "-m", "instructions"]);
    // The lead's checkout has an edit its teammate's worktree (made from HEAD) does not.
    std::fs::write(
        f.workspace.join("AGENTS.md"),
        "Lead's working copy: run cargo nextest.\n",
    )
    .unwrap();
    let (server, mut team) = team_on_server(&f, Settings::default(), |c| {
        if c.system().starts_with("You are lead") {
            if c.calls_named("spawn_teammate").is_empty() {
                return call(
                    "spawn_teammate",
                    json!({"name": "alice", "role": "tester", "prompt": "Say done.",
                           "isolation": "worktree"}),
                );
            }
            return say("Done.");
        }
        say("done")
    })
    .await;
    drive(&mut team, "Have alice say done.").await;
    team.close().await;

    let lead = prompts_of(&server, "lead").await;
    let alice = prompts_of(&server, "alice").await;
    assert!(!lead.is_empty() && !alice.is_empty());
    let lead_section = instructions_of(&lead[0]);
    assert!(
        lead_section.contains("### AGENTS.md\nLead's working copy: run cargo nextest."),
        "{}",
        lead[0]
    );
    assert!(
        lead_section.ends_with("\n- crates/web/AGENTS.md"),
        "{lead_section}"
    );
    let alice_section = instructions_of(&alice[0]);
    assert!(
        alice_section.contains("### AGENTS.md\nCommitted: run cargo test."),
        "{}",
        alice[0]
    );
    assert!(
        !alice_section.contains("Lead's working copy"),
        "{alice_section}"
    );
    assert!(
        alice_section.ends_with("\n- crates/web/AGENTS.md"),
        "{alice_section}"
    );
    // The section sits after the workspace and before the team.
    let order = [
        "## Tools",
        "## Workspace",
        "## Project instructions",
        "## Team",
    ];
    for prompt in [&lead[0], &alice[0]] {
        let at: Vec<usize> = order.iter().map(|s| prompt.find(s).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{prompt}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_md_is_shown_when_there_is_no_agents_md() {
    let f = Fixture::new();
    std::fs::write(f.workspace.join("CLAUDE.md"), "Claude's notes: be brief.\n").unwrap();
    let (server, mut team) = team_on_server(&f, Settings::default(), answers_at_once).await;
    drive(&mut team, "hi").await;
    team.close().await;
    let lead = prompts_of(&server, "lead").await;
    assert!(
        instructions_of(&lead[0]).ends_with("### CLAUDE.md\nClaude's notes: be brief."),
        "{}",
        lead[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_agents_md_is_cut_at_32_kib_with_a_notice_naming_the_file() {
    let f = Fixture::new();
    let text = format!(
        "START\n{}\nTHE END\n",
        "line of instructions\n".repeat(2_000)
    );
    std::fs::write(f.workspace.join("AGENTS.md"), &text).unwrap();
    let (server, mut team) = team_on_server(&f, Settings::default(), answers_at_once).await;
    drive(&mut team, "hi").await;
    team.close().await;
    let lead = prompts_of(&server, "lead").await;
    let section = instructions_of(&lead[0]);
    assert!(section.contains("### AGENTS.md\nSTART\n"), "{section}");
    assert!(!section.contains("THE END"));
    let notice = format!(
        "[AGENTS.md was cut here: {} of its {} bytes are not shown (the instructions shown are \
         capped at 32 KiB); read the rest with read_file on AGENTS.md]",
        text.len() - 32 * 1024,
        text.len()
    );
    assert!(
        section.ends_with(&notice),
        "{}",
        &section[section.len() - 300..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_files_are_shown_instead_and_a_missing_one_is_noted() {
    let f = Fixture::new();
    std::fs::write(f.workspace.join("AGENTS.md"), "Not this one.\n").unwrap();
    std::fs::create_dir_all(f.workspace.join("docs")).unwrap();
    std::fs::write(
        f.workspace.join("docs/CONVENTIONS.md"),
        "Name things plainly.\n",
    )
    .unwrap();
    std::fs::write(
        f.workspace.join("troupe.toml"),
        "[context]\nfiles = [\"docs/CONVENTIONS.md\", \"docs/MISSING.md\"]\n",
    )
    .unwrap();
    let settings = Settings::load(&f.workspace, None).unwrap();
    let (server, mut team) = team_on_server(&f, settings, answers_at_once).await;
    drive(&mut team, "hi").await;
    team.close().await;
    let lead = prompts_of(&server, "lead").await;
    let section = instructions_of(&lead[0]);
    assert!(
        section.ends_with(
            "### docs/CONVENTIONS.md\nName things plainly.\n\n(docs/MISSING.md is listed in \
             [context] files but does not exist: skipped)"
        ),
        "{section}"
    );
    assert!(!section.contains("Not this one."), "{section}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_between_two_turns_is_seen_in_the_second_request() {
    let f = Fixture::new();
    let agents = f.workspace.join("AGENTS.md");
    std::fs::write(&agents, "Version one.\n").unwrap();
    let (server, mut team) = team_on_server(&f, Settings::default(), answers_at_once).await;
    drive(&mut team, "first").await;
    std::fs::write(&agents, "Version two, edited between the turns.\n").unwrap();
    drive(&mut team, "second").await;
    team.close().await;
    let lead = prompts_of(&server, "lead").await;
    assert_eq!(lead.len(), 2, "one model call per turn");
    assert!(instructions_of(&lead[0]).ends_with("### AGENTS.md\nVersion one."));
    assert!(
        instructions_of(&lead[1])
            .ends_with("### AGENTS.md\nVersion two, edited between the turns."),
        "{}",
        lead[1]
    );
}
