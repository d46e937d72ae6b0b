//! Recovery and budgets in the runner: an answer cut off by the output limit is continued and
//! joined; a spent token or cost budget ends the turn before the next model call; the living system
//! prompt is refreshed before each call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use troupe::agent::prompt::SystemPromptSource;
use troupe::agent::runner::{CONTINUE_PROMPT, MAX_CONTINUATIONS};
use troupe::agent::{TurnEnd, UsageSink};
use troupe::model::{AssistantMessage, ChatMessage, ModelResponse, Purpose, Usage};
use troupe::permissions::AutoApproval;
use troupe::wire::AgentName;
use wiremock::ResponseTemplate;

use super::{bodies, completion, lead, server};

fn cut_off(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "length"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
}

#[tokio::test]
async fn a_cut_off_answer_is_continued_and_the_parts_joined() {
    let server = server(vec![
        cut_off("The quick brown "),
        cut_off("fox jumps "),
        completion(json!({"role": "assistant", "content": "over the dog."})),
    ])
    .await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let outcome = lead
        .runner
        .run_user_turn("tell me", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        outcome.end,
        TurnEnd::Answered("The quick brown fox jumps over the dog.".into())
    );
    // One model call for the turn; the continuations are part of it.
    assert_eq!(outcome.model_calls, 1);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    // Each continuation shows the text so far as the assistant's and asks to go on.
    let second = sent[1]["messages"].as_array().unwrap();
    assert_eq!(
        second[second.len() - 2],
        json!({"role": "assistant", "content": "The quick brown "})
    );
    assert_eq!(
        second[second.len() - 1],
        json!({"role": "user", "content": CONTINUE_PROMPT})
    );
    let third = sent[2]["messages"].as_array().unwrap();
    assert_eq!(
        third[third.len() - 2]["content"],
        "The quick brown fox jumps "
    );
    // The history holds one joined answer and no continuation prompt.
    let history = lead.runner.history().messages();
    assert_eq!(
        history.last().unwrap(),
        &ChatMessage::Assistant(AssistantMessage::text(
            "The quick brown fox jumps over the dog."
        ))
    );
    assert!(!history
        .iter()
        .any(|m| matches!(m, ChatMessage::User { content } if content == CONTINUE_PROMPT)));
}

#[tokio::test]
async fn continuation_stops_after_the_bound() {
    let mut replies: Vec<ResponseTemplate> = (0..=MAX_CONTINUATIONS)
        .map(|n| cut_off(&format!("part{n} ")))
        .collect();
    replies.push(completion(
        json!({"role": "assistant", "content": "never asked"}),
    ));
    let server = server(replies).await;
    let mut lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let outcome = lead
        .runner
        .run_user_turn("tell me", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        outcome.end,
        TurnEnd::Answered("part0 part1 part2 part3 ".into())
    );
    assert_eq!(bodies(&server).await.len(), 1 + MAX_CONTINUATIONS);
}

/// Counts tokens in memory, like a run's usage.
#[derive(Default)]
struct Meter {
    total: Mutex<u64>,
    records: AtomicUsize,
}

#[async_trait::async_trait]
impl UsageSink for Meter {
    async fn record(&self, _agent: &AgentName, purpose: Purpose, response: &ModelResponse) {
        assert_eq!(purpose, Purpose::Turn);
        if let Some(usage) = response.usage {
            *self.total.lock().unwrap() += usage.total_tokens;
            self.records.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn run_total(&self) -> u64 {
        *self.total.lock().unwrap()
    }
    fn per_agent(&self) -> Vec<(AgentName, Usage)> {
        Vec::new()
    }
}

#[tokio::test]
async fn a_spent_token_budget_ends_the_turn_before_the_next_call() {
    // Each answer costs 2 tokens (see `completion`); the budget is 4: two calls, then stop.
    let server = server(vec![
        super::call("c1", "glob", json!({"pattern": "*"})),
        super::call("c2", "glob", json!({"pattern": "*"})),
        super::call("c3", "glob", json!({"pattern": "*"})),
    ])
    .await;
    let meter = Arc::new(Meter::default());
    let lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let mut runner = lead.runner.with_usage(meter.clone(), Some(4));
    let outcome = runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::TokenBudget { limit: 4, used: 4 });
    assert_eq!(bodies(&server).await.len(), 2);
    assert_eq!(meter.records.load(Ordering::SeqCst), 2);
    // The history is consistent: both calls answered.
    let results = runner
        .history()
        .messages()
        .iter()
        .filter(|m| matches!(m, ChatMessage::Tool { .. }))
        .count();
    assert_eq!(results, 2);
}

/// A prompt whose input changes after its second render (a teammate spawned mid-turn).
struct Living {
    renders: AtomicUsize,
}

impl SystemPromptSource for Living {
    fn render(&self) -> String {
        match self.renders.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => "roster: nobody".into(),
            _ => "roster: writer".into(),
        }
    }
}

#[tokio::test]
async fn the_living_system_prompt_is_refreshed_before_each_call() {
    let server = server(vec![
        super::call("c1", "glob", json!({"pattern": "*"})),
        super::say("done"),
    ])
    .await;
    let living = Arc::new(Living {
        renders: AtomicUsize::new(0),
    });
    let lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let mut runner = lead.runner.with_system_prompt(living.clone());
    runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["messages"][0]["content"], "roster: nobody");
    assert_eq!(sent[1]["messages"][0]["content"], "roster: writer");
    assert_eq!(runner.history().system_prompt(), "roster: writer");
    // The rest of the conversation is unchanged by the new prompt.
    assert_eq!(
        sent[1]["messages"][1],
        json!({"role": "user", "content": "go"})
    );
}

#[tokio::test]
async fn a_spent_cost_budget_ends_the_turn_before_the_next_call() {
    use troupe::agent::usage::RunUsage;
    use troupe::clock::ManualClock;
    use troupe::layout::Layout;
    use troupe::prices::{Cost, Price, PriceTable};
    use troupe::store::usage::UsageLog;

    // Each answer is 1 prompt and 1 completion token of `gpt-test` (see `completion`): at
    // $1,000 per million each way, $0.002 a call; the budget is $0.004: two calls, then stop.
    let server = server(vec![
        super::call("c1", "glob", json!({"pattern": "*"})),
        super::call("c2", "glob", json!({"pattern": "*"})),
        super::call("c3", "glob", json!({"pattern": "*"})),
    ])
    .await;
    let log_dir = tempfile::tempdir().unwrap();
    let price = Price::from_usd_per_million(1_000.0, 1_000.0, 0.0, 0.0).unwrap();
    let usage = RunUsage::new(
        "run-1",
        UsageLog::open(
            &Layout::new(log_dir.path()),
            Arc::new(ManualClock::at_spec_epoch()),
        ),
    )
    .with_prices(PriceTable::with_overrides([("gpt-test", price)]));
    let limit = Cost::from_usd(0.004).unwrap();
    let lead = lead(&server, Arc::new(AutoApproval), vec![]);
    let mut runner = lead
        .runner
        .with_usage(Arc::new(usage), None)
        .with_cost_budget(Some(limit));
    let outcome = runner
        .run_user_turn("go", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::CostBudget { limit, used: limit });
    assert_eq!(bodies(&server).await.len(), 2);
    assert_eq!(
        outcome.end.stop_reason().unwrap(),
        "stopped: the run's cost budget of $0.0040 is spent ($0.0040 estimated)"
    );
}
