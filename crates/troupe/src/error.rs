//! Stable error codes.
//!
//! Every error enum at a module boundary maps each variant to one of these codes. The codes are
//! part of the contract: tools return `Error [<code>]: <message>` to the model, the CLI prints
//! them, and scripts match on them. Never rename one.

/// Implemented by every error type that crosses a module boundary.
pub trait ErrorCode {
    /// The stable, snake_case code of this error.
    fn code(&self) -> &'static str;
}

/// Renders an error the way a model sees it in a tool result: `Error [<code>]: <message>`.
pub fn tool_error_text(code: &str, message: &str) -> String {
    format!("Error [{code}]: {message}")
}
