//! Over random well-formed histories: compaction never separates a tool call from its result,
//! never loses the latest request, and always starts with the system message.

use proptest::prelude::*;
use troupe::agent::context::{
    compacted, drop_oldest, plan, render_summary, sent_messages, Keep, Origin, Summary,
};
use troupe::model::{AssistantMessage, ChatMessage, ToolCall};

use super::{assert_well_formed, Built};

#[derive(Debug, Clone)]
enum Step {
    Person(String),
    Input(String),
    Text(String),
    /// One exchange: the sizes of its 1–4 results.
    Exchange(Vec<usize>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        "[a-z ]{0,40}".prop_map(Step::Person),
        "[a-z ]{0,40}".prop_map(Step::Input),
        "[a-z ]{0,40}".prop_map(Step::Text),
        prop::collection::vec(0usize..3_000, 1..=4).prop_map(Step::Exchange),
        prop::collection::vec(0usize..3_000, 1..=4).prop_map(Step::Exchange),
    ]
}

fn keep() -> impl Strategy<Value = Keep> {
    prop_oneof![
        (0usize..8).prop_map(Keep::Exchanges),
        (0usize..20_000).prop_map(Keep::Bytes),
    ]
}

fn build(steps: &[Step]) -> Built {
    let mut built = Built::new();
    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::Person(text) => built = built.person(&format!("person {n}: {text}")),
            Step::Input(text) => built = built.input(&format!("input {n}: {text}")),
            Step::Text(text) => built = built.say(text),
            Step::Exchange(sizes) => {
                let ids: Vec<String> = (0..sizes.len()).map(|c| format!("call_{n}_{c}")).collect();
                built
                    .messages
                    .push(ChatMessage::Assistant(AssistantMessage::tool_calls(
                        ids.iter()
                            .map(|id| ToolCall::new(id, "shell", "{}"))
                            .collect(),
                    )));
                built.origins.push(Origin::Runtime);
                for (id, size) in ids.iter().zip(sizes) {
                    built
                        .messages
                        .push(ChatMessage::tool_result(id, "r".repeat(*size)));
                    built.origins.push(Origin::Runtime);
                }
            }
        }
    }
    built
}

/// The latest person message (else the latest input), which every output must hold verbatim.
fn latest_request(built: &Built) -> Option<String> {
    let find = |wanted: Origin| {
        built.messages.iter().zip(&built.origins).rev().find_map(
            |(message, origin)| match message {
                ChatMessage::User { content } if *origin == wanted => Some(content.clone()),
                _ => None,
            },
        )
    };
    find(Origin::Person).or_else(|| find(Origin::Input))
}

fn check(output: &[ChatMessage], origins: Option<&[Origin]>, latest: &Option<String>) {
    assert!(matches!(output.first(), Some(ChatMessage::System { .. })));
    assert_well_formed(output);
    if let Some(origins) = origins {
        assert_eq!(origins.len(), output.len());
    }
    if let Some(latest) = latest {
        assert!(
            output
                .iter()
                .any(|m| matches!(m, ChatMessage::User { content } if content == latest)),
            "the latest request {latest:?} was lost"
        );
    }
}

fn summary() -> Summary {
    Summary {
        current_goal: "g".to_owned(),
        key_findings: vec!["f".to_owned()],
        files_read_or_changed: vec![],
        remaining_work: vec![],
        user_constraints: vec![],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn compaction_never_separates_a_call_from_its_result(
        steps in prop::collection::vec(step(), 0..40),
        more in prop::collection::vec(step(), 0..10),
        keep in keep(),
        again in keep(),
    ) {
        let built = build(&steps);
        assert_well_formed(&built.messages);
        let latest = latest_request(&built);
        let system = ChatMessage::system("rebuilt");

        check(&sent_messages(&built.messages, usize::MAX), None, &latest);

        let (dropped, dropped_origins) =
            drop_oldest(system.clone(), &built.messages, &built.origins, keep);
        check(&dropped, Some(&dropped_origins), &latest);

        if let Some(planned) = plan(&built.messages, &built.origins, keep) {
            prop_assert!(planned.summarise.end == planned.keep_from);
            prop_assert!(!planned.summarise.is_empty());
            prop_assert!(planned.person_words.iter().map(String::len).sum::<usize>() <= 8_192);
            let text = render_summary(&summary(), &planned.person_words);
            let (messages, origins) =
                compacted(system.clone(), &planned, text, &built.messages, &built.origins);
            check(&messages, Some(&origins), &latest);
            check(&sent_messages(&messages, usize::MAX), None, &latest);

            // The compacted history, continued, compacts again just as safely.
            let mut continued = Built { messages, origins };
            let offset = steps.len();
            let extra = build(&more);
            for (message, origin) in extra.messages.into_iter().zip(extra.origins).skip(1) {
                // Ids stay unique: rename the calls of the continuation.
                continued.messages.push(rename(message, offset));
                continued.origins.push(origin);
            }
            let latest = latest_request(&continued);
            if let Some(second) = plan(&continued.messages, &continued.origins, again) {
                let text = render_summary(&summary(), &second.person_words);
                let (messages, origins) = compacted(
                    system.clone(), &second, text, &continued.messages, &continued.origins,
                );
                check(&messages, Some(&origins), &latest);
            }
            let (dropped, dropped_origins) =
                drop_oldest(system.clone(), &continued.messages, &continued.origins, again);
            check(&dropped, Some(&dropped_origins), &latest);
        }
    }
}

fn rename(message: ChatMessage, offset: usize) -> ChatMessage {
    let id = |id: &str| format!("more{offset}_{id}");
    match message {
        ChatMessage::Assistant(mut answer) => {
            for call in &mut answer.tool_calls {
                call.id = id(&call.id);
            }
            ChatMessage::Assistant(answer)
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => ChatMessage::Tool {
            tool_call_id: id(&tool_call_id),
            content,
        },
        other => other,
    }
}
