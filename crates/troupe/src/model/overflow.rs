//! Recognising a server's "the prompt is too long for this model".
//!
//! Every server says it differently, and most say it with a plain HTTP 400 that otherwise means
//! "your request is wrong". Telling the two apart matters: a request that is wrong fails again
//! whatever is done, but a request that is too long succeeds once the conversation is compacted
//! (SPEC §9, reactive compaction). So the error's code, type and message are matched against
//! the phrasings of the servers troupe talks to, case-insensitively.

/// What OpenAI-compatible servers put in an error's `code`, `type` or `message` when the request
/// does not fit the model's context window. Lowercase; matched as substrings.
const MARKERS: [&str; 14] = [
    // OpenAI's `code`, and its message "This model's maximum context length is … tokens".
    "context_length_exceeded",
    "maximum context length",
    "context length exceeded",
    "context_window_exceeded",
    "exceeds the context window",
    // Anthropic: "prompt is too long: 208310 tokens > 200000 maximum", and "input length and
    // `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or
    // `max_tokens` and try again"; and Anthropic-style gateways.
    "prompt is too long",
    "exceed context limit",
    "prompt_too_long",
    "input is too long",
    "too many tokens",
    "reduce the length of the messages",
    // llama.cpp server: "the request exceeds the available context size, try increasing it".
    "exceeds the available context size",
    // vLLM: "This model's maximum context length is …" or "… is longer than the model's context
    // length (…)".
    "longer than the model's context length",
    "longer than the maximum model length",
];

/// The statuses a too-long request comes back with: 400, and 413 from servers that see it as
/// a payload too large.
pub fn is_overflow_status(status: u16) -> bool {
    matches!(status, 400 | 413)
}

/// Whether `text` (an error's code, type or message) says the request exceeded the model's
/// context window.
pub fn says_context_too_long(text: &str) -> bool {
    let text = text.to_lowercase();
    MARKERS.iter().any(|marker| text.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_known_phrasing_is_recognised_in_any_case() {
        for text in [
            "context_length_exceeded",
            "This model's maximum context length is 8192 tokens. However, you requested 9000.",
            "Prompt is too long: 210000 tokens > 200000 maximum",
            "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, \
             decrease input length or `max_tokens` and try again",
            "CONTEXT LENGTH EXCEEDED",
            "context_window_exceeded",
            "Too many tokens in the request",
            "Please reduce the length of the messages.",
            "Input is too long for requested model.",
            "Your input exceeds the context window of this model.",
            "prompt_too_long",
            "the request exceeds the available context size, try increasing it",
            "The prompt (total length 40000) is longer than the model's context length (32768)",
        ] {
            assert!(says_context_too_long(text), "{text}");
        }
    }

    #[test]
    fn other_complaints_are_not_mistaken_for_it() {
        for text in [
            "tools[0] is invalid",
            "invalid_request_error",
            "max_tokens must be at least 1",
            "Unsupported parameter: 'temperature'",
            "",
        ] {
            assert!(!says_context_too_long(text), "{text}");
        }
    }
}
