//! The model's context window, and the request size at which summary compaction runs.
//!
//! Servers count tokens; troupe counts bytes (the serialised request, [`super::sent_bytes`]),
//! because a tokenizer per provider is a dependency troupe does not want and the count must be
//! made before every call. The heuristic is [`BYTES_PER_TOKEN`] = 4 (English prose and code
//! average about 4 bytes per token with the GPT and Claude tokenizers; JSON framing makes the
//! byte count a little larger, which errs on the safe side). Summary compaction runs when a
//! request would pass three quarters of the window so estimated: the last quarter is room for
//! the answer and for the estimate's error (text in scripts with multi-byte characters has
//! fewer bytes per token).
//!
//! The window comes from the setting when there is one, else from [`context_window_tokens`] (a
//! built-in table, values as published by the providers at the end of 2025), else
//! [`DEFAULT_CONTEXT_WINDOW_TOKENS`]: small enough for most local and compatible servers.

/// The window assumed for a model the table does not know, in tokens.
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u32 = 32_768;
/// The bytes of serialised request counted as one token.
pub const BYTES_PER_TOKEN: usize = 4;

/// Known model families, by name prefix, most specific first (the first match wins).
const WINDOWS: &[(&str, u32)] = &[
    // OpenAI
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-1106", 128_000),
    ("gpt-4-0125", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo-instruct", 4_096),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-oss", 131_072),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    // Anthropic (through compatible endpoints)
    ("claude-", 200_000),
    // DeepSeek
    ("deepseek-chat", 128_000),
    ("deepseek-reasoner", 128_000),
    // Google (OpenAI-compatible endpoint)
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-", 1_048_576),
    // Open models commonly served by compatible servers
    ("llama-3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama-3.3", 131_072),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3.3", 131_072),
    ("mistral-large", 131_072),
    ("qwen2.5", 32_768),
];

/// The context window of `model` in tokens, if the built-in table knows it.
///
/// Matching ignores case, a provider path before the last `/` (`openai/gpt-4o`), and an `ft:`
/// fine-tune prefix; then the name's start is matched against the table, so dated snapshots
/// (`gpt-4o-2024-08-06`) and variants (`gpt-4o-mini`, `claude-sonnet-4-5`) are found.
pub fn context_window_tokens(model: &str) -> Option<u32> {
    let lower = model.trim().to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let name = name.strip_prefix("ft:").unwrap_or(name);
    WINDOWS
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, tokens)| *tokens)
}

/// How large a request may grow before summary compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// The model's context window in tokens (the setting, the table, or the default).
    pub window_tokens: u32,
    /// The request size in bytes (as [`super::sent_bytes`] counts it) above which the history
    /// is summarised before the call: window × [`BYTES_PER_TOKEN`] × 3/4.
    pub budget_bytes: usize,
}

impl ContextBudget {
    /// The budget of `model`, with `override_tokens` (the setting) taking precedence over the
    /// built-in table.
    pub fn for_model(model: &str, override_tokens: Option<u32>) -> Self {
        let window_tokens = override_tokens
            .or_else(|| context_window_tokens(model))
            .unwrap_or(DEFAULT_CONTEXT_WINDOW_TOKENS);
        Self::for_window(window_tokens)
    }

    /// The budget of a window of `window_tokens` tokens.
    pub fn for_window(window_tokens: u32) -> Self {
        let window_bytes = (window_tokens as usize).saturating_mul(BYTES_PER_TOKEN);
        Self {
            window_tokens,
            budget_bytes: window_bytes / 4 * 3,
        }
    }
}
