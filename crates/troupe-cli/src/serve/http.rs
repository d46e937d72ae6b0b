//! The HTTP side of `troupe serve`: accepting connections on 127.0.0.1, the checks every request
//! passes before any route sees it (the `Host` header, the token), and the response bodies.
//!
//! A request is refused with 403 unless its `Host` is `127.0.0.1:PORT` or `localhost:PORT` (a
//! page of another site that rebinds its name to 127.0.0.1 sends its own name) and it carries
//! the token: a GET in `?token=` or `Authorization: Bearer`, a POST in `X-Troupe-Token` only (so
//! that a form or an image of another page cannot make one).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::api::{self, Shared};

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

/// Accepts connections until `shutdown` completes; each connection is served on its own task.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                // Out of file descriptors and the like: this connection is lost, not the server.
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    if !host_allowed(request.headers(), shared.port) {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "the Host header must be 127.0.0.1:PORT or localhost:PORT",
        );
    }
    if !authorized(&shared, &request) {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "missing or wrong token (GET: ?token= or Authorization: Bearer; POST: X-Troupe-Token)",
        );
    }
    api::route(shared, request).await
}

fn host_allowed(headers: &HeaderMap, port: u16) -> bool {
    let Some(host) = headers.get("host").and_then(|h| h.to_str().ok()) else {
        return false;
    };
    host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
}

fn authorized(shared: &Shared, request: &Request<Incoming>) -> bool {
    let headers = request.headers();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if request.method() == Method::POST {
        return header("x-troupe-token").is_some_and(|t| shared.token.matches(t));
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return false;
    }
    let from_query = query_param(request.uri().query(), "token");
    let from_header = header("authorization").and_then(|v| v.strip_prefix("Bearer "));
    from_query
        .as_deref()
        .or(from_header)
        .is_some_and(|t| shared.token.matches(t))
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
