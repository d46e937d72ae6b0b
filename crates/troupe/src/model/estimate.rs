//! Token counts for a server that reports none.
//!
//! Some OpenAI-compatible servers (llama-cpp-python's, older local ones) stream an answer without
//! any `usage`, even when asked for it. Counting nothing would let such a run past its token and
//! cost budgets and leave `.troupe/usage.jsonl` empty, so the transport estimates instead: about
//! one token per [`BYTES_PER_TOKEN`] bytes — of the request's messages and tools as JSON for the
//! prompt, of the answer's text, reasoning and tool calls (names and arguments) for the
//! completion, each rounded up. It is a rough, tokenizer-free figure (real tokenizers give
//! roughly 3 to 5 bytes a token for English and code), and everything that shows it says it is
//! an estimate ([`Usage::estimated`]).

use super::types::{ModelRequest, ModelResponse, Reasoning, Usage};

/// How many bytes one estimated token stands for.
pub const BYTES_PER_TOKEN: u64 = 4;

/// `response` with its usage estimated from `request` and itself when the server reported none;
/// as it was otherwise.
pub fn when_unreported(request: &ModelRequest, mut response: ModelResponse) -> ModelResponse {
    if response.usage.is_none() {
        response.usage = Some(estimate(request, &response));
    }
    response
}

/// The estimated usage of one call: see the module's notes.
pub fn estimate(request: &ModelRequest, response: &ModelResponse) -> Usage {
    let sent = serde_json::to_vec(&request.messages).map_or(0, |json| json.len())
        + serde_json::to_vec(&request.tools).map_or(0, |json| json.len());
    let message = &response.message;
    let answered = message.content.as_deref().map_or(0, str::len)
        + message.reasoning.iter().map(reasoning_len).sum::<usize>()
        + message
            .tool_calls
            .iter()
            .map(|call| call.name.len() + call.arguments.len())
            .sum::<usize>();
    let prompt_tokens = tokens(sent);
    let completion_tokens = tokens(answered);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens.saturating_add(completion_tokens),
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: true,
    }
}

fn reasoning_len(reasoning: &Reasoning) -> usize {
    match reasoning {
        Reasoning::Text { text, .. } => text.len(),
        Reasoning::Redacted { data } => data.len(),
    }
}

/// `bytes` as tokens, rounded up.
fn tokens(bytes: usize) -> u64 {
    u64::try_from(bytes)
        .unwrap_or(u64::MAX)
        .div_ceil(BYTES_PER_TOKEN)
}
