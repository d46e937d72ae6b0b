//! The living system prompt (SPEC §9): an agent's system prompt is not a constant but a view of
//! things that change while it works — the roster, pending requests, selected memory. A
//! [`SystemPromptSource`] renders it; the runner asks before every model call and replaces the
//! history's system message only when the text changed, so an unchanged prompt keeps the
//! request prefix (and the provider's prompt cache) stable.

/// Renders an agent's current system prompt. Implementations re-render only when one of their
/// inputs changed, and return the same text otherwise.
#[async_trait::async_trait]
pub trait SystemPromptSource: Send + Sync {
    fn render(&self) -> String;

    /// Reads what the prompt shows from async ports (a team's roster, the pending requests) for
    /// the next [`Self::render`]; the runner awaits it before every model call. The default:
    /// nothing.
    async fn refresh(&self) {}

    /// The memory section selected for the coming turn (empty: none). Sources without a memory
    /// section ignore it.
    fn set_memory(&self, _section: String) {}
}

/// A prompt that never changes (subagents, tests).
pub struct FixedPrompt(pub String);

impl SystemPromptSource for FixedPrompt {
    fn render(&self) -> String {
        self.0.clone()
    }
}
