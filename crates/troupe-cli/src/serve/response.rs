//! What every answer of `troupe serve` is made of: the response body (whole, or a stream of
//! chunks), the headers every answer carries, JSON and error answers, and the query string's
//! values. Used by the routes and by the connection checks alike; depends on neither.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::Frame;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

/// A response body: all of it at once, or chunks as they come (the event stream).
pub enum Body {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }
}

/// A complete response with the headers every answer of the server carries.
pub fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut response = Response::new(Body::Full(Some(body.into())));
    *response.status_mut() = status;
    set_common_headers(response.headers_mut(), content_type);
    response
}

pub fn set_common_headers(headers: &mut HeaderMap, content_type: &'static str) {
    headers.insert("content-type", HeaderValue::from_static(content_type));
    headers.insert("cache-control", HeaderValue::from_static("no-store"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    // The token is in the page's address: never send it on.
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
}

pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    respond(status, "application/json", value.to_string())
}

/// `{"ok": false, "error": {"code", "message"}}`.
pub fn error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    json(
        status,
        &serde_json::json!({"ok": false, "error": {"code": code, "message": message}}),
    )
}

/// The first value of `name` in a query string, percent-decoded (`+` is a space).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| percent_decode(value))
    })
}

fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_found_and_decoded() {
        assert_eq!(
            query_param(Some("a=1&token=ab%20c+d"), "token").as_deref(),
            Some("ab c d")
        );
        assert_eq!(query_param(Some("tokens=1"), "token"), None);
        assert_eq!(query_param(None, "token"), None);
        assert_eq!(query_param(Some("x=%4"), "x").as_deref(), Some("%4"));
        assert_eq!(query_param(Some("x=%zz"), "x").as_deref(), Some("%zz"));
    }
}
