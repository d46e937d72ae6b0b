//! Micro-compaction and the request size estimate.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::agent::context::{
    micro_compact, sent_bytes, COMPACTED_TOOL_RESULT, KEEP_RECENT_EXCHANGES,
};
use troupe::model::{ChatMessage, ToolSpec};

use super::{exchange, Built};

fn results(messages: &[ChatMessage]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn results_older_than_the_last_three_exchanges_become_the_placeholder() {
    assert_eq!(KEEP_RECENT_EXCHANGES, 3);
    assert_eq!(
        COMPACTED_TOOL_RESULT,
        "[Earlier tool result compacted. Re-run if needed.]"
    );
    let history = Built::new()
        .person("go")
        .exchange("a", 2, 10)
        .say("thinking")
        .exchange("b", 1, 10)
        .exchange("c", 1, 10)
        .input("an event")
        .exchange("d", 3, 10)
        .exchange("e", 1, 10)
        .messages;
    let sent = micro_compact(&history);
    let r = "r".repeat(10);
    assert_eq!(
        results(&sent),
        vec![
            COMPACTED_TOOL_RESULT,
            COMPACTED_TOOL_RESULT,
            COMPACTED_TOOL_RESULT,
            &r,
            &r,
            &r,
            &r,
            &r
        ]
    );
    // Everything but the old results is byte-identical, calls included.
    assert_eq!(sent.len(), history.len());
    for (before, after) in history.iter().zip(&sent) {
        if !matches!(before, ChatMessage::Tool { .. }) {
            assert_eq!(before, after);
        }
    }
}

#[test]
fn three_exchanges_or_fewer_are_sent_unchanged() {
    let history = Built::new()
        .person("go")
        .exchange("a", 1, 10)
        .exchange("b", 1, 10)
        .exchange("c", 4, 10)
        .messages;
    assert_eq!(micro_compact(&history), history);
}

#[test]
fn a_result_already_compacted_stays_as_it_is() {
    let mut history = Built::new().person("go").messages;
    history.extend(exchange("a", 1, 0));
    history[3] = ChatMessage::tool_result("a_0", COMPACTED_TOOL_RESULT);
    for tag in ["b", "c", "d"] {
        history.extend(exchange(tag, 1, 5));
    }
    let sent = micro_compact(&history);
    assert_eq!(sent[3], history[3]);
    assert_eq!(
        micro_compact(&sent),
        sent,
        "compacting twice changes nothing more"
    );
}

#[test]
fn compaction_is_monotone_and_each_new_exchange_changes_only_one_older_exchange() {
    let mut history = Built::new().person("go").messages;
    let mut previous: Vec<ChatMessage> = micro_compact(&history);
    for step in 0..12 {
        history.extend(exchange(&format!("x{step}"), 1 + step % 3, 20));
        if step % 4 == 0 {
            history.push(ChatMessage::user(format!("more {step}")));
        }
        let sent = micro_compact(&history);
        // Every message sent before is sent again the same, except the results of the one
        // exchange that just fell out of the last three.
        let changed: Vec<usize> = (0..previous.len())
            .filter(|&i| previous[i] != sent[i])
            .collect();
        for &i in &changed {
            assert_eq!(
                sent[i],
                match &previous[i] {
                    ChatMessage::Tool { tool_call_id, .. } =>
                        ChatMessage::tool_result(tool_call_id, COMPACTED_TOOL_RESULT),
                    other => panic!("a non-result changed: {other:?}"),
                }
            );
        }
        if step >= KEEP_RECENT_EXCHANGES {
            let calls_of_that_exchange = 1 + (step - KEEP_RECENT_EXCHANGES) % 3;
            assert_eq!(changed.len(), calls_of_that_exchange, "step {step}");
            // The request prefix is stable up to the first changed message.
            assert!(changed.windows(2).all(|w| w[1] == w[0] + 1));
        } else {
            assert!(changed.is_empty());
        }
        previous = sent;
    }
}

#[test]
fn sent_bytes_is_the_json_length_of_messages_and_tools() {
    let messages = Built::new().person("héllo").exchange("a", 2, 100).messages;
    let tools = vec![ToolSpec {
        name: "read_file".to_owned(),
        description: "Read.".to_owned(),
        parameters: json!({"type": "object"}),
    }];
    assert_eq!(
        sent_bytes(&messages, &tools),
        serde_json::to_string(&messages).unwrap().len()
            + serde_json::to_string(&tools).unwrap().len()
    );
    assert_eq!(sent_bytes(&[], &[]), 4, "two empty arrays");
}
