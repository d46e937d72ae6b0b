//! How much of a request a provider's prompt cache can reuse (SPEC §9, `cache_prefix_share`).
//!
//! Providers cache the longest byte-identical prefix of what they are sent, tools first, then
//! the messages in order (Anthropic puts tools before the system prompt; OpenAI renders them
//! into it). So a request is cache-friendly when it is the previous request of the same agent
//! with messages appended. [`cache_bytes`] is a request in that order, and [`shared_prefix`]
//! how many of its first bytes equal the previous one's: the benchmarks and tests measure with
//! these two functions.

use crate::model::ModelRequest;

/// `request` serialised as a provider caches it: the tools' JSON, then the messages' JSON.
pub fn cache_bytes(request: &ModelRequest) -> Vec<u8> {
    // Serialising troupe's own types into a vector cannot fail.
    let mut bytes = serde_json::to_vec(&request.tools).unwrap_or_default();
    bytes.extend(serde_json::to_vec(&request.messages).unwrap_or_default());
    bytes
}

/// The length of the longest common prefix of `previous` and `next`.
pub fn shared_prefix(previous: &[u8], next: &[u8]) -> usize {
    previous
        .iter()
        .zip(next)
        .take_while(|(a, b)| a == b)
        .count()
}
