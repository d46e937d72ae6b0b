//! Micro-compaction (under pressure only, in batches, sticky) and the request size estimate.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::agent::context::{
    next_batch, sent_bytes, sent_messages, ContextBudget, MicroPolicy, CLEARED_TOOL_RESULT,
    KEEP_PERCENT, KEEP_RECENT_EXCHANGES, MIN_BATCH_PERCENT, MIN_CLEARABLE_RESULT_BYTES,
    TARGET_PERCENT, TRIGGER_PERCENT,
};
use troupe::model::{ChatMessage, ToolSpec};

use super::Built;

fn results(messages: &[ChatMessage]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// A policy with round numbers: trigger 50,000 bytes, target 25,000, batches of 10,000 or more,
/// recent exchanges kept whole within 25,000.
fn policy() -> MicroPolicy {
    MicroPolicy {
        trigger_bytes: 50_000,
        target_bytes: 25_000,
        min_batch_bytes: 10_000,
        keep_bytes: 25_000,
    }
}

#[test]
fn the_constants_and_the_policy_of_a_budget() {
    assert_eq!(
        (
            TRIGGER_PERCENT,
            TARGET_PERCENT,
            MIN_BATCH_PERCENT,
            KEEP_PERCENT
        ),
        (50, 25, 10, 25)
    );
    assert_eq!(
        (MIN_CLEARABLE_RESULT_BYTES, KEEP_RECENT_EXCHANGES),
        (1_024, 3)
    );
    assert!(CLEARED_TOOL_RESULT.len() < MIN_CLEARABLE_RESULT_BYTES);
    assert_eq!(
        MicroPolicy::for_budget(&ContextBudget::for_window(32_768)),
        MicroPolicy {
            trigger_bytes: 49_150,
            target_bytes: 24_575,
            min_batch_bytes: 9_830,
            keep_bytes: 24_575,
        }
    );
}

#[test]
fn under_the_trigger_nothing_is_cleared_however_old() {
    // Ten exchanges of 4 KB: 40 KB, under the 50 KB trigger.
    let mut built = Built::new().person("go");
    for n in 0..10 {
        built = built.exchange(&format!("x{n}"), 1, 4_000);
    }
    assert!(sent_bytes(&built.messages, &[]) < 50_000);
    assert_eq!(next_batch(&built.messages, &[], 0, &policy()), None);
    assert_eq!(sent_messages(&built.messages, 0), built.messages);
}

#[test]
fn past_the_trigger_the_oldest_large_results_are_cleared_down_to_the_target() {
    // Small results are never cleared; large ones oldest first, until the request is under
    // the target; the last three exchanges stay whole.
    let built = Built::new()
        .person("go")
        .exchange("small", 2, 900)
        .exchange("a", 1, 10_000)
        .say("thinking")
        .exchange("b", 2, 10_000)
        .input("an event")
        .exchange("c", 1, 10_000)
        .exchange("d", 1, 3_000)
        .exchange("e", 1, 3_000)
        .exchange("f", 1, 3_000);
    let before = sent_bytes(&built.messages, &[]);
    assert!(before > 50_000, "{before}");
    let count = next_batch(&built.messages, &[], 0, &policy()).expect("a batch");
    let sent = sent_messages(&built.messages, count);
    let (big, small, last) = ("r".repeat(10_000), "r".repeat(900), "r".repeat(3_000));
    // Clearing a, b_0 and b_1 is enough: c stays whole.
    assert_eq!(count, 3);
    assert_eq!(
        results(&sent),
        vec![
            small.as_str(),
            &small,
            CLEARED_TOOL_RESULT,
            CLEARED_TOOL_RESULT,
            CLEARED_TOOL_RESULT,
            &big,
            &last,
            &last,
            &last
        ]
    );
    assert!(
        sent_bytes(&sent, &[]) <= 25_000,
        "{}",
        sent_bytes(&sent, &[])
    );
    // Everything but the cleared results is byte-identical, calls included.
    assert_eq!(sent.len(), built.messages.len());
    for (before, after) in built.messages.iter().zip(&sent) {
        if !matches!(before, ChatMessage::Tool { .. }) {
            assert_eq!(before, after);
        }
    }
    // The last three exchanges are never cleared, however far past the trigger.
    let everything = next_batch(
        &built.messages,
        &[],
        0,
        &MicroPolicy {
            target_bytes: 0,
            ..policy()
        },
    );
    assert_eq!(everything, Some(4));
}

#[test]
fn results_under_a_kilobyte_are_never_cleared_even_far_past_the_trigger() {
    let mut built = Built::new().person("go");
    for n in 0..80 {
        built = built.exchange(&format!("x{n}"), 1, MIN_CLEARABLE_RESULT_BYTES - 1);
    }
    assert!(sent_bytes(&built.messages, &[]) > 80_000);
    assert_eq!(next_batch(&built.messages, &[], 0, &policy()), None);
    assert_eq!(sent_messages(&built.messages, 1_000), built.messages);
}

#[test]
fn a_batch_too_small_to_be_worth_a_cache_miss_is_not_made() {
    // Past the trigger, but the only clearable result outside the last three exchanges frees
    // under 10 KB: nothing is cleared (past the budget, summary compaction takes over).
    let mut built = Built::new().person("go");
    for n in 0..40 {
        built = built.exchange(&format!("small{n}"), 1, MIN_CLEARABLE_RESULT_BYTES - 1);
    }
    let built = built
        .exchange("a", 1, 5_000)
        .exchange("b", 1, 4_000)
        .exchange("c", 1, 4_000)
        .exchange("d", 1, 4_000);
    assert!(sent_bytes(&built.messages, &[]) > 50_000);
    assert_eq!(next_batch(&built.messages, &[], 0, &policy()), None);
}

#[test]
fn recent_exchanges_are_kept_whole_only_while_they_fit_in_the_target() {
    // The last exchange is kept whatever its size; the two before it only while the kept
    // ones fit in the 25 KB target. Kept results past the target would leave every batch
    // short of it and bring the next batch (and the next cache miss) a turn later.
    let built = Built::new()
        .person("go")
        .exchange("a", 1, 12_000)
        .exchange("b", 1, 12_000)
        .exchange("c", 1, 12_000)
        .exchange("d", 1, 30_000);
    let everything = MicroPolicy {
        trigger_bytes: 0,
        target_bytes: 0,
        min_batch_bytes: 0,
        ..policy()
    };
    // d alone passes the target: a, b and c may all be cleared, d stays.
    assert_eq!(next_batch(&built.messages, &[], 0, &everything), Some(3));
    let sent = sent_messages(&built.messages, 3);
    assert_eq!(results(&sent)[3], "r".repeat(30_000));
    // With d at 6 KB, c fits beside it (18 KB together) but b would not (30 KB): a and b go.
    let built = Built::new()
        .person("go")
        .exchange("a", 1, 12_000)
        .exchange("b", 1, 12_000)
        .exchange("c", 1, 12_000)
        .exchange("d", 1, 6_000);
    assert_eq!(next_batch(&built.messages, &[], 0, &everything), Some(2));
    let built = Built::new()
        .person("go")
        .exchange("a", 1, 40_000)
        .exchange("b", 1, 7_000)
        .exchange("c", 1, 7_000)
        .exchange("d", 1, 7_000);
    // Three small recent exchanges (21 KB) are all kept: only a goes.
    assert_eq!(next_batch(&built.messages, &[], 0, &everything), Some(1));
}

#[test]
fn cleared_results_stay_cleared_and_requests_only_grow_at_their_end_between_batches() {
    // 4 KB results, one exchange at a time; the count is kept as the history would keep it.
    let mut built = Built::new().person("go");
    let mut cleared = 0;
    let mut previous = sent_messages(&built.messages, cleared);
    let mut batches = Vec::new();
    for step in 0..60 {
        built = built.exchange(&format!("x{step}"), 1 + step % 2, 4_000);
        if let Some(count) = next_batch(&built.messages, &[], cleared, &policy()) {
            assert!(count > cleared);
            cleared = count;
            batches.push(step);
        }
        let sent = sent_messages(&built.messages, cleared);
        assert!(sent_bytes(&sent, &[]) <= 50_000 + 2 * 8_200, "step {step}");
        let appended = sent[..previous.len()] == previous[..];
        assert_eq!(appended, batches.last() != Some(&step), "step {step}");
        previous = sent;
    }
    // Each batch clears from about 50 KB down toward 25 KB: the first ones five steps (of 6 KB
    // on average) apart, never two in a row. They come closer as placeholders add up (in the
    // runner a summary compaction ends that).
    assert!(batches.len() >= 8, "{batches:?}");
    assert!(batches.windows(2).all(|w| w[1] - w[0] >= 2), "{batches:?}");
    assert!(
        batches.windows(2).take(4).all(|w| w[1] - w[0] >= 4),
        "{batches:?}"
    );
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
