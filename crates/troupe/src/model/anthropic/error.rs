//! What an Anthropic error response means.
//!
//! Anthropic answers failures with `{"type": "error", "error": {"type": …, "message": …}}`, the
//! same object it sends as an `error` event in the middle of a stream. The kind comes from the
//! status, refined by the error's `type`:
//!
//! | status / `error.type` | kind |
//! |---|---|
//! | 529, or `overloaded_error` at any status | [`ErrorKind::Overloaded`] |
//! | 400/413 whose type or message says the prompt is too long ([`overflow`]) | [`ErrorKind::ContextTooLong`] |
//! | 401, 403 | [`ErrorKind::Auth`] |
//! | 404 | [`ErrorKind::NotFound`] |
//! | 429 | [`ErrorKind::RateLimited`] |
//! | other 5xx | [`ErrorKind::Server`] |
//! | other 4xx | [`ErrorKind::Refused`] |
//!
//! The server's message is returned whole (whitespace collapsed): the transport redacts the key
//! from it before cutting it to one line.
//!
//! **Stream errors.** [`StreamAssembler::push`](crate::model::wire_format::StreamAssembler::push)
//! can only return a `String`, so an `error` event is described as
//! `"{STREAM_ERROR_PREFIX}{type}: {message}"` (e.g. `anthropic error event overloaded_error:
//! Overloaded`); [`stream_error_kind`] reads the kind back from that text, so the transport can
//! retry an overloaded stream like a 529.

use serde_json::Value;

use crate::model::overflow;
use crate::model::wire_format::ErrorKind;

/// How the description of a stream's `error` event starts.
pub const STREAM_ERROR_PREFIX: &str = "anthropic error event ";

/// The kind of an error response and the server's message, if it has one.
pub fn classify(status: u16, body: &str) -> (ErrorKind, Option<String>) {
    let (error_type, message) = read_body(body);
    (
        kind(status, error_type.as_deref(), message.as_deref()),
        message,
    )
}

/// The kind of a failure with this status, error type and message.
pub fn kind(status: u16, error_type: Option<&str>, message: Option<&str>) -> ErrorKind {
    let says_too_long = error_type
        .into_iter()
        .chain(message)
        .any(overflow::says_context_too_long);
    match status {
        _ if status == 529 || error_type == Some("overloaded_error") => ErrorKind::Overloaded,
        status if says_too_long && overflow::is_overflow_status(status) => {
            ErrorKind::ContextTooLong
        }
        401 | 403 => ErrorKind::Auth,
        404 => ErrorKind::NotFound,
        429 => ErrorKind::RateLimited,
        500..=599 => ErrorKind::Server,
        _ => ErrorKind::Refused,
    }
}

/// The kind of a failure described by a stream's `error` event (see the module docs), if `text`
/// is such a description. The status stands in for what the same error would have been sent
/// with as a response: `overloaded_error` 529, `rate_limit_error` 429, `api_error` 500, a
/// too-long prompt 400; other types are refusals.
pub fn stream_error_kind(text: &str) -> Option<ErrorKind> {
    let rest = text.strip_prefix(STREAM_ERROR_PREFIX)?;
    let (error_type, message) = rest.split_once(": ").unwrap_or((rest, ""));
    let status = match error_type {
        "overloaded_error" => 529,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        _ => 400,
    };
    Some(kind(status, Some(error_type), Some(message)))
}

/// The description of an `error` object (`{"type": "error", "error": {…}}`) as the stream
/// assembler returns it.
pub fn error_event_text(value: &Value) -> String {
    let error = value.get("error");
    let field = |name: &str| {
        error
            .and_then(|error| error.get(name))
            .and_then(Value::as_str)
            .map(collapse)
            .filter(|text| !text.is_empty())
    };
    format!(
        "{STREAM_ERROR_PREFIX}{}: {}",
        field("type").unwrap_or_else(|| "unknown_error".to_owned()),
        field("message").unwrap_or_else(|| "(no message)".to_owned()),
    )
}

/// The error's `type` and `message` from an error body; a body that is not Anthropic's JSON is
/// its own message (a proxy's HTML page, plain text).
fn read_body(body: &str) -> (Option<String>, Option<String>) {
    let non_blank = |text: String| (!text.is_empty()).then_some(text);
    match serde_json::from_str::<Value>(body) {
        Ok(value) => {
            let error = value.get("error");
            let field = |name: &str| {
                error
                    .and_then(|error| error.get(name))
                    .and_then(Value::as_str)
                    .map(collapse)
                    .and_then(non_blank)
            };
            let message = field("message").or_else(|| match error {
                Some(Value::String(text)) => non_blank(collapse(text)),
                _ => value
                    .get("message")
                    .and_then(Value::as_str)
                    .map(collapse)
                    .and_then(non_blank),
            });
            (field("type"), message)
        }
        Err(_) => (None, non_blank(collapse(body))),
    }
}

/// Whitespace collapsed to single spaces.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
