//! The context window table and the summary threshold.

use pretty_assertions::assert_eq;
use troupe::agent::context::{
    context_window_tokens, ContextBudget, BYTES_PER_TOKEN, DEFAULT_CONTEXT_WINDOW_TOKENS,
};

#[test]
fn common_models_have_their_published_windows() {
    for (model, tokens) in [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4-turbo", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-3.5-turbo", 16_385),
        ("o1", 200_000),
        ("o3-mini", 200_000),
        ("o4-mini", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("claude-sonnet-4-5", 200_000),
        ("deepseek-chat", 128_000),
        ("deepseek-reasoner", 128_000),
        ("openai/gpt-4o", 128_000),
        ("GPT-4o", 128_000),
        ("ft:gpt-4o-mini:acme::abc", 128_000),
    ] {
        assert_eq!(context_window_tokens(model), Some(tokens), "{model}");
    }
}

#[test]
fn unknown_models_get_the_default() {
    assert_eq!(context_window_tokens("my-local-model"), None);
    assert_eq!(DEFAULT_CONTEXT_WINDOW_TOKENS, 32_768);
    assert_eq!(
        ContextBudget::for_model("my-local-model", None),
        ContextBudget {
            window_tokens: 32_768,
            budget_bytes: 98_304,
        }
    );
}

#[test]
fn the_budget_is_three_quarters_of_the_window_at_four_bytes_a_token_and_the_setting_wins() {
    assert_eq!(BYTES_PER_TOKEN, 4);
    assert_eq!(
        ContextBudget::for_model("gpt-4o", None),
        ContextBudget {
            window_tokens: 128_000,
            budget_bytes: 384_000,
        }
    );
    assert_eq!(
        ContextBudget::for_model("gpt-4o", Some(8_000)),
        ContextBudget {
            window_tokens: 8_000,
            budget_bytes: 24_000,
        }
    );
}
