//! The compaction plan, the compacted history and the drop fallback.

use pretty_assertions::assert_eq;
use troupe::agent::context::{
    carried_person_words, compacted, drop_oldest, groups, plan, render_summary, Group, Keep,
    Origin, Plan, Summary, PERSON_WORDS_BYTES, REACTIVE_KEEP_GROUPS,
};
use troupe::model::ChatMessage;

use super::{assert_well_formed, Built};

fn summary() -> Summary {
    Summary {
        current_goal: "goal".to_owned(),
        key_findings: vec![],
        files_read_or_changed: vec![],
        remaining_work: vec![],
        user_constraints: vec![],
    }
}

fn system() -> ChatMessage {
    ChatMessage::system("You are lead (rebuilt).")
}

#[test]
fn groups_cover_the_history_after_the_system_message_and_keep_exchanges_whole() {
    let history = Built::new()
        .person("go")
        .exchange("a", 2, 1)
        .say("ok")
        .exchange("b", 1, 1)
        .messages;
    assert_eq!(
        groups(&history),
        vec![
            Group {
                range: 1..2,
                tool_exchange: false
            },
            Group {
                range: 2..5,
                tool_exchange: true
            },
            Group {
                range: 5..6,
                tool_exchange: false
            },
            Group {
                range: 6..8,
                tool_exchange: true
            },
        ]
    );
    // Without a system message the first group starts at 0; a stray result is its own group.
    let stray = vec![
        ChatMessage::user("hi"),
        ChatMessage::tool_result("nobody", "x"),
    ];
    assert_eq!(
        groups(&stray),
        vec![
            Group {
                range: 0..1,
                tool_exchange: false
            },
            Group {
                range: 1..2,
                tool_exchange: false
            },
        ]
    );
}

#[test]
fn keeping_n_exchanges_cuts_at_a_group_boundary_and_puts_back_the_latest_request() {
    assert_eq!(REACTIVE_KEEP_GROUPS, 5);
    let history = Built::new()
        .person("first words")
        .exchange("a", 2, 10)
        .person("the latest request")
        .exchange("b", 1, 10)
        .exchange("c", 3, 10)
        .say("done");
    let planned = plan(&history.messages, &history.origins, Keep::Exchanges(2)).unwrap();
    // Groups: person(1) a(2..5) person(5) b(6..8) c(8..12) say(12): keep c and say.
    assert_eq!(
        planned,
        Plan {
            summarise: 1..8,
            keep_from: 8,
            person_words: vec!["first words".to_owned()],
            latest_request: Some("the latest request".to_owned()),
            latest_request_origin: Origin::Person,
        }
    );
    let text = render_summary(&summary(), &planned.person_words);
    let (messages, origins) = compacted(
        system(),
        &planned,
        text.clone(),
        &history.messages,
        &history.origins,
    );
    let mut expected = vec![
        system(),
        ChatMessage::user(text),
        ChatMessage::user("the latest request"),
    ];
    expected.extend_from_slice(&history.messages[8..]);
    assert_eq!(messages, expected);
    assert_eq!(
        origins,
        [
            vec![Origin::Runtime, Origin::Summary, Origin::Person],
            vec![Origin::Runtime; 5]
        ]
        .concat()
    );
    assert_well_formed(&messages);
}

#[test]
fn nothing_to_summarise_is_none() {
    let short = Built::new().person("go").exchange("a", 1, 10);
    assert_eq!(
        plan(&short.messages, &short.origins, Keep::Exchanges(5)),
        None
    );
    assert_eq!(
        plan(
            &Built::new().messages,
            &[Origin::Runtime],
            Keep::Exchanges(0)
        ),
        None
    );
    // Only an earlier summary and the latest request would be summarised: no progress, None.
    let mut again = Built::new();
    again
        .messages
        .push(ChatMessage::user("[Summary of earlier conversation]\n..."));
    again.origins.push(Origin::Summary);
    let again = again.person("latest").exchange("a", 1, 10);
    assert_eq!(
        plan(&again.messages, &again.origins, Keep::Exchanges(1)),
        None
    );
}

#[test]
fn keeping_bytes_keeps_the_newest_groups_that_fit_and_at_least_the_last() {
    let history = Built::new()
        .person("go")
        .exchange("a", 1, 1_000)
        .exchange("b", 1, 1_000)
        .exchange("c", 1, 1_000);
    let at_least_one = plan(&history.messages, &history.origins, Keep::Bytes(0)).unwrap();
    assert_eq!(
        at_least_one.keep_from, 6,
        "the last exchange is kept however small the budget"
    );
    let size = |range: std::ops::Range<usize>| {
        serde_json::to_string(&history.messages[range])
            .unwrap()
            .len()
    };
    let two_exchanges = size(4..6) + size(6..8);
    let two = plan(
        &history.messages,
        &history.origins,
        Keep::Bytes(two_exchanges),
    )
    .unwrap();
    assert_eq!(two.keep_from, 4);
    assert_eq!(two.latest_request, Some("go".to_owned()));
    let one = plan(
        &history.messages,
        &history.origins,
        Keep::Bytes(two_exchanges - 1),
    )
    .unwrap();
    assert_eq!(one.keep_from, 6);
}

#[test]
fn earlier_person_words_are_kept_newest_first_up_to_8_kib_in_chronological_order() {
    assert_eq!(PERSON_WORDS_BYTES, 8_192);
    let word = |n: usize| format!("{n}{}", "w".repeat(2_999));
    let history = Built::new()
        .person(&word(1))
        .input("an event is not a person's words")
        .person(&word(2))
        .person(&word(3))
        .exchange("a", 1, 10)
        .person("latest")
        .exchange("b", 1, 10);
    let planned = plan(&history.messages, &history.origins, Keep::Exchanges(1)).unwrap();
    assert_eq!(planned.person_words, vec![word(2), word(3)]);
    assert_eq!(planned.latest_request, Some("latest".to_owned()));
    // Exactly 8,192 bytes fit.
    let exact = Built::new()
        .person(&"x".repeat(8_192))
        .person("latest")
        .exchange("a", 1, 1);
    let planned = plan(&exact.messages, &exact.origins, Keep::Exchanges(1)).unwrap();
    assert_eq!(planned.person_words, vec!["x".repeat(8_192)]);
    let over = Built::new()
        .person(&"x".repeat(8_193))
        .person("latest")
        .exchange("a", 1, 1);
    let planned = plan(&over.messages, &over.origins, Keep::Exchanges(1)).unwrap();
    assert_eq!(planned.person_words, Vec::<String>::new());
}

#[test]
fn without_a_person_the_latest_input_is_the_request_kept() {
    let history = Built::new()
        .input("event one")
        .exchange("a", 1, 10)
        .input("event two")
        .exchange("b", 1, 10);
    let planned = plan(&history.messages, &history.origins, Keep::Exchanges(1)).unwrap();
    assert_eq!(planned.latest_request, Some("event two".to_owned()));
    assert_eq!(planned.latest_request_origin, Origin::Input);
    assert_eq!(planned.person_words, Vec::<String>::new());
}

#[test]
fn a_persons_words_survive_repeated_compactions() {
    let history = Built::new()
        .person("Never touch the vendor folder.")
        .exchange("a", 1, 10)
        .person("Now fix the tests.")
        .exchange("b", 1, 10)
        .exchange("c", 1, 10);
    let first = plan(&history.messages, &history.origins, Keep::Exchanges(1)).unwrap();
    let (messages, origins) = compacted(
        system(),
        &first,
        render_summary(&summary(), &first.person_words),
        &history.messages,
        &history.origins,
    );
    let mut more = Built { messages, origins };
    more = more.exchange("d", 1, 10).exchange("e", 1, 10);
    let second = plan(&more.messages, &more.origins, Keep::Exchanges(1)).unwrap();
    assert_eq!(
        second.person_words,
        vec!["Never touch the vendor folder.".to_owned()]
    );
    assert_eq!(second.latest_request, Some("Now fix the tests.".to_owned()));
    let (messages, _) = compacted(
        system(),
        &second,
        render_summary(&summary(), &second.person_words),
        &more.messages,
        &more.origins,
    );
    let ChatMessage::User { content } = &messages[1] else {
        panic!("no summary");
    };
    assert_eq!(
        carried_person_words(content),
        vec!["Never touch the vendor folder.".to_owned()]
    );
    assert_eq!(messages[2], ChatMessage::user("Now fix the tests."));
}

#[test]
fn dropping_the_oldest_leaves_a_note_the_words_and_the_latest_request() {
    let history = Built::new()
        .person("be brief")
        .exchange("a", 2, 10)
        .person("latest")
        .exchange("b", 1, 10)
        .exchange("c", 1, 10);
    let (messages, origins) = drop_oldest(
        system(),
        &history.messages,
        &history.origins,
        Keep::Exchanges(1),
    );
    let ChatMessage::User { content: note } = &messages[1] else {
        panic!("no note");
    };
    assert!(
        note.starts_with("[Earlier conversation dropped: the summary failed. 7 messages removed.]")
    );
    assert_eq!(carried_person_words(note), vec!["be brief".to_owned()]);
    assert_eq!(messages[2], ChatMessage::user("latest"));
    assert_eq!(&messages[3..], &history.messages[8..]);
    assert_eq!(origins[1], Origin::Summary);
    assert_well_formed(&messages);

    // Nothing to drop: the history, behind the rebuilt system prompt.
    let short = Built::new().person("go");
    let (messages, origins) = drop_oldest(
        system(),
        &short.messages,
        &short.origins,
        Keep::Exchanges(5),
    );
    assert_eq!(messages, vec![system(), ChatMessage::user("go")]);
    assert_eq!(origins, vec![Origin::Runtime, Origin::Person]);
}

#[test]
fn origins_serialise_in_snake_case() {
    assert_eq!(
        serde_json::to_string(&[
            Origin::Runtime,
            Origin::Person,
            Origin::Input,
            Origin::Summary
        ])
        .unwrap(),
        r#"["runtime","person","input","summary"]"#
    );
}
