//! The tool-call loop: tools offered, multi-step loops, denials, bad arguments, bounds,
//! cancellation at safe points, idempotent inputs.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::agent::TurnEnd;
use troupe::model::ChatMessage;
use troupe::permissions::{AutoApproval, DenyApproval};
use troupe::tools::testing::CountingTool;
use troupe::tools::Effect;

use super::{bodies, call, call_raw, lead, say, server};

#[tokio::test]
async fn the_lead_is_offered_the_base_tools_in_order_with_closed_schemas() {
    let server = server(vec![say("hi")]).await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    lead.runner
        .run_user_turn("hello", &CancellationToken::new())
        .await
        .unwrap();
    let body = &bodies(&server).await[0];
    let tools = body["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["shell", "read_file", "write_file", "edit_file", "glob"]
    );
    for tool in tools {
        assert_eq!(tool["type"], "function");
        let params = &tool["function"]["parameters"];
        assert_eq!(params["type"], "object", "{tool}");
        assert_eq!(params["additionalProperties"], false, "{tool}");
        assert!(tool["function"]["description"].as_str().unwrap().len() > 20);
    }
    assert_eq!(
        tools[0]["function"]["parameters"]["properties"]["run_in_background"]["type"],
        "boolean"
    );
    assert_eq!(
        tools[1]["function"]["parameters"]["required"],
        json!(["path"])
    );
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "You are lead."})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "hello"})
    );
}

#[tokio::test]
async fn a_multi_step_loop_runs_each_tool_and_sends_every_result_back() {
    let server = server(vec![
        call(
            "c1",
            "write_file",
            json!({"path": "notes/a.txt", "content": "alpha\nbeta\n"}),
        ),
        call(
            "c2",
            "edit_file",
            json!({"path": "notes/a.txt", "old_text": "beta", "new_text": "gamma"}),
        ),
        call("c3", "read_file", json!({"path": "notes/a.txt"})),
        say("The file now reads alpha, gamma."),
    ])
    .await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let outcome = lead
        .runner
        .run_user_turn("edit a file", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        outcome.end,
        TurnEnd::Answered("The file now reads alpha, gamma.".into())
    );
    assert_eq!((outcome.model_calls, outcome.tool_calls), (4, 3));
    let on_disk = std::fs::read_to_string(lead.workspace.path().join("notes/a.txt")).unwrap();
    assert_eq!(on_disk, "alpha\ngamma\n");

    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 4);
    // The last request carries the whole conversation: each call answered by its own id.
    let messages = bodies[3]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool"
        ]
    );
    assert_eq!(messages[3]["tool_call_id"], "c1");
    assert_eq!(messages[5]["tool_call_id"], "c2");
    assert_eq!(messages[7]["tool_call_id"], "c3");
    assert!(messages[7]["content"].as_str().unwrap().contains("gamma"));
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["name"],
        "write_file"
    );
}

#[tokio::test]
async fn a_denied_tool_never_reaches_its_handler_and_the_model_is_told() {
    let counting = Arc::new(CountingTool::new("deploy", Effect::Execute));
    let server = server(vec![
        call("c1", "deploy", json!({})),
        call("c2", "write_file", json!({"path": "x.txt", "content": "x"})),
        say("Both were denied."),
    ])
    .await;
    let mut lead = lead(&server, Arc::new(DenyApproval), vec![counting.clone()]);
    let outcome = lead
        .runner
        .run_user_turn("try", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Answered("Both were denied.".into()));
    assert_eq!(counting.calls(), 0);
    assert!(!lead.workspace.path().join("x.txt").exists());
    let bodies = bodies(&server).await;
    let results: Vec<&str> = bodies[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    for r in results {
        assert!(r.starts_with("Error [permission_denied]: "), "{r}");
    }
    // Both decisions are in the audit file.
    let audit = std::fs::read_to_string(lead.workspace.path().join(".troupe/audit.jsonl")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["tool"], "deploy");
    assert_eq!(lines[0]["decision"], "deny");
    assert_eq!(lines[1]["tool"], "write_file");
}

#[tokio::test]
async fn invalid_tool_arguments_go_back_to_the_model_and_the_loop_goes_on() {
    let server = server(vec![
        call_raw("c1", "read_file", "{\"path\": "),
        call("c2", "read_file", json!({"path": "a.txt", "limit": 0})),
        call("c3", "nonexistent_tool", json!({})),
        say("I give up."),
    ])
    .await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let outcome = lead
        .runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Answered("I give up.".into()));
    let bodies = bodies(&server).await;
    let tool_results: Vec<String> = bodies[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        tool_results[0].starts_with("Error [invalid_arguments]"),
        "{}",
        tool_results[0]
    );
    assert!(
        tool_results[1].starts_with("Error [invalid_arguments]"),
        "{}",
        tool_results[1]
    );
    assert!(
        tool_results[2].starts_with("Error [unknown_tool]"),
        "{}",
        tool_results[2]
    );
}

#[tokio::test]
async fn the_max_turns_bound_stops_a_model_that_never_answers() {
    let replies = (0..10)
        .map(|i| call(&format!("c{i}"), "glob", json!({"pattern": "*"})))
        .collect();
    let server = server(replies).await;
    let lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let mut runner = lead.runner.with_max_turns(3);
    let outcome = runner
        .run_user_turn("loop", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::MaxTurns { limit: 3 });
    assert_eq!(bodies(&server).await.len(), 3);
    // Every call that was made has its result: the history can be sent again as it is.
    let h = runner.history().messages();
    assert!(matches!(h.last(), Some(ChatMessage::Tool { .. })));
}

#[tokio::test]
async fn cancelled_before_the_model_call_sends_nothing() {
    let server = server(vec![say("never")]).await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = lead.runner.run_user_turn("hi", &cancel).await.unwrap();
    assert_eq!(outcome.end, TurnEnd::Cancelled);
    assert_eq!(bodies(&server).await.len(), 0);
}

#[tokio::test]
async fn cancelled_during_a_model_call_appends_nothing_half_done() {
    let slow = super::say("too late").set_delay(Duration::from_secs(30));
    let server = server(vec![slow]).await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    {
        let turn = lead.runner.run_user_turn("hi", &cancel);
        tokio::pin!(turn);
        loop {
            tokio::select! {
                outcome = &mut turn => {
                    assert_eq!(outcome.unwrap().end, TurnEnd::Cancelled);
                    break;
                }
                // Cancel once the request has reached the server (its record is the signal).
                () = tokio::task::yield_now() => {
                    if !trigger.is_cancelled() && !bodies(&server).await.is_empty() {
                        trigger.cancel();
                    }
                }
            }
        }
    }
    let history = lead.runner.history().messages();
    assert_eq!(history.len(), 2, "system + user only: {history:?}");
}

#[tokio::test]
async fn cancelled_between_tool_calls_answers_the_rest_as_cancelled() {
    // One model message asking for two tools; the first tool is a shell command that cancels
    // the turn by itself finishing — we cancel from the observer of the first result instead.
    let server = server(vec![completion_two_calls(), say("unused")]).await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let cancel = CancellationToken::new();
    // Cancel as soon as the first call's file exists: the runner checks between calls.
    let c2 = cancel.clone();
    let marker = lead.workspace.path().join("first.txt");
    let watch = tokio::spawn(async move {
        while !marker.exists() {
            tokio::task::yield_now().await;
        }
        c2.cancel();
    });
    let outcome = lead.runner.run_user_turn("two", &cancel).await.unwrap();
    watch.await.unwrap();
    assert_eq!(outcome.end, TurnEnd::Cancelled);
    let h = lead.runner.history().messages();
    let results: Vec<&str> = h
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "every call has a result: {h:?}");
    assert!(
        results[1].starts_with("Error [cancelled]"),
        "{}",
        results[1]
    );
    assert!(!lead.workspace.path().join("second.txt").exists());
    assert_eq!(bodies(&server).await.len(), 1);
}

fn completion_two_calls() -> wiremock::ResponseTemplate {
    super::completion(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "shell",
            "arguments": json!({"command": "echo 1 > first.txt; sleep 0.3"}).to_string()}},
        {"id": "b", "type": "function", "function": {"name": "write_file",
            "arguments": json!({"path": "second.txt", "content": "2"}).to_string()}}
    ]}))
}

#[tokio::test]
async fn a_redelivered_input_is_appended_once() {
    let server = server(vec![say("one"), say("two")]).await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    assert!(lead.runner.push_user_once("msg-1", "event one").await);
    assert!(!lead.runner.push_user_once("msg-1", "event one").await);
    lead.runner
        .run_turn(&CancellationToken::new())
        .await
        .unwrap();
    let users = bodies(&server).await[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 1);
}

#[tokio::test]
async fn a_model_failure_is_an_error_not_a_crash() {
    let server = server(vec![]).await; // every request gets a 500
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let err = lead
        .runner
        .run_user_turn("hi", &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(troupe::error::ErrorCode::code(&err), "model_server_error");
}
