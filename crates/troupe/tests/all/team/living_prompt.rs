//! The living system prompt (SPEC §9): the lead's prompt shows the roster and the pending
//! requests in a fixed order; as they change, notes of what changed are appended and the
//! system message stays byte-identical (issue 46).

use serde_json::json;
use troupe::model::ChatMessage;

use super::support::{
    call, drive_in_background, finish, plan_request_events, say, Fixture, Models, TestModel,
};

fn system_of(model: &TestModel, n: usize) -> String {
    match &model.requests()[n - 1].messages[0] {
        ChatMessage::System { content } => content.clone(),
        other => panic!("not a system message: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leads_prompt_follows_the_roster_and_the_pending_requests() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "writer", "role": "writes the notes", "prompt": "Plan first."}),
            );
        }
        let plans = plan_request_events(c);
        if plans.len() > c.calls_named("review_plan").len() {
            return call(
                "review_plan",
                json!({"request_id": plans[0]["request_id"], "approve": true}),
            );
        }
        say("Noted.")
    });
    let writer = TestModel::new(&f.signal, |c| {
        if c.last_is_tool_result() {
            say("Submitted.")
        } else if c.last_user().starts_with("Plan approved") {
            say("Thanks.")
        } else {
            call("submit_plan", json!({"plan": "Write NOTES.md."}))
        }
    });
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    finish(drive_in_background(team, "go")).await;

    let prompts: Vec<String> = (1..=lead.calls()).map(|n| system_of(&lead, n)).collect();
    // Before the spawn: nobody on the team, no requests.
    assert!(
        prompts[0].contains("## Team\n(no teammates)"),
        "{}",
        prompts[0]
    );
    assert!(!prompts[0].contains("## Pending requests"));
    // The fixed order of the sections.
    let order = ["You are lead", "## Tools", "## Workspace", "## Team"];
    let at: Vec<usize> = order.iter().map(|s| prompts[0].find(s).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", prompts[0]);
    // The system message stays byte-identical (the provider's cache keeps the prefix): the
    // changes reach the lead as notes of what changed.
    assert!(prompts.iter().all(|p| *p == prompts[0]));
    let notes_of = |request: &troupe::model::ModelRequest| -> Vec<String> {
        request
            .messages
            .iter()
            .filter(|m| troupe::agent::prompt::is_note(m))
            .map(|m| match m {
                ChatMessage::User { content } => content.clone(),
                _ => unreachable!(),
            })
            .collect()
    };
    // While the plan is pending the lead sees it, with the teammate on the roster.
    let requests = lead.requests();
    let reviewing = requests
        .iter()
        .position(|r| {
            r.messages.iter().any(|m| matches!(m, ChatMessage::User { content } if content.contains("plan_approval_request")))
        })
        .expect("the lead saw the plan request");
    let seen = notes_of(&requests[reviewing]).join("\n");
    assert!(seen.contains("- writer ("), "{seen}");
    assert!(seen.contains("writes the notes"), "{seen}");
    assert!(seen.contains("plan_approval"), "{seen}");
    assert!(
        seen.contains("from writer to lead: pending until"),
        "{seen}"
    );
    // After the review, a later note says the request is no longer pending.
    let last = notes_of(requests.last().unwrap());
    assert!(
        last.iter().any(|n| n.contains(": no longer pending")),
        "{last:#?}"
    );
    // The writer's prompt names it, its role and the lead's team.
    let writer_prompt = system_of(&writer, 1);
    assert!(
        writer_prompt.starts_with("You are writer"),
        "{writer_prompt}"
    );
    assert!(
        writer_prompt.contains("## Tools\nshell, read_file, write_file, send_message, submit_plan")
    );
}

/// Every agent of a team gets the long-lived machinery, not only the lead: a teammate's and a
/// subagent's large results become artifacts (the subagent's under its caller's name) and
/// their models see previews.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teammates_and_subagents_keep_large_results_as_artifacts() {
    let f = Fixture::new();
    std::fs::write(f.workspace.join("big.txt"), "z".repeat(40_000)).unwrap();
    let lead = TestModel::new(&f.signal, |c| {
        // The lead's model also answers its subagent, which reads the file.
        if c.system().starts_with("You are a subagent") {
            return if c.last_is_tool_result() {
                say("It is 40,000 z's.")
            } else {
                call("read_file", json!({"path": "big.txt"}))
            };
        }
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "reader", "role": "reads", "prompt": "Read big.txt."}),
            );
        }
        if c.calls_named("task").is_empty() {
            return call("task", json!({"description": "Read big.txt and report."}));
        }
        say("Done.")
    });
    let reader = TestModel::new(&f.signal, |c| {
        if c.last_is_tool_result() {
            say("Read it.")
        } else {
            call("read_file", json!({"path": "big.txt"}))
        }
    });
    let team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("reader", &reader)],
        ))
        .await;
    finish(drive_in_background(team, "go")).await;

    for (agent, model) in [("reader", &reader), ("lead", &lead)] {
        let dir = f.workspace.join(".troupe/artifacts").join(agent);
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{agent}: {e}"))
            .collect();
        assert_eq!(files.len(), 1, "{agent}");
        let kept = std::fs::read_to_string(files[0].as_ref().unwrap().path()).unwrap();
        assert_eq!(kept.len(), 40_000, "{agent}: kept whole");
        // What the model saw: a preview naming the artifact, not the 40,000 bytes.
        let sent = model.requests();
        let preview = sent
            .iter()
            .flat_map(|r| r.messages.iter())
            .find_map(|m| match m {
                ChatMessage::Tool { content, .. } if content.contains(".troupe/artifacts/") => {
                    Some(content.clone())
                }
                _ => None,
            });
        let preview = preview.unwrap_or_else(|| panic!("{agent}'s model saw no preview"));
        assert!(preview.len() < 5_000, "{}", preview.len());
    }
}
