//! The HTTP side of `troupe serve`: accepting connections on 127.0.0.1 and the checks every
//! request passes before the handler it was given (the routes of `api`) sees it: the `Host`
//! header, the token. It knows no route.
//!
//! A request is refused with 403 unless its `Host` is `127.0.0.1:PORT` or `localhost:PORT` (a
//! page of another site that rebinds its name to 127.0.0.1 sends its own name) and it carries
//! the token: a GET in `?token=` or `Authorization: Bearer`, a POST in `X-Troupe-Token` only (so
//! that a form or an image of another page cannot make one).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::response::{error, query_param, Body};
use super::token::Token;

/// What answers a request that passed the checks: the routes, built by their module and handed
/// to [`serve`], which knows nothing of them.
pub type Handler = Arc<
    dyn Fn(Request<Incoming>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> + Send + Sync,
>;

/// What a request must show before the handler sees it: the port its `Host` names, the token.
pub struct Gate {
    pub port: u16,
    pub token: Arc<Token>,
}

/// Accepts connections until `shutdown` completes; each connection is served on its own task,
/// each request that passes the `gate` by `handler`.
pub async fn serve(
    listener: TcpListener,
    gate: Gate,
    handler: Handler,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::pin!(shutdown);
    let gate = Arc::new(gate);
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
        let (gate, handler) = (gate.clone(), handler.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let (gate, handler) = (gate.clone(), handler.clone());
                async move { Ok::<_, Infallible>(handle(&gate, &handler, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(gate: &Gate, handler: &Handler, request: Request<Incoming>) -> Response<Body> {
    if !host_allowed(request.headers(), gate.port) {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "the Host header must be 127.0.0.1:PORT or localhost:PORT",
        );
    }
    if !authorized(&gate.token, &request) {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "missing or wrong token (GET: ?token= or Authorization: Bearer; POST: X-Troupe-Token)",
        );
    }
    handler(request).await
}

fn host_allowed(headers: &HeaderMap, port: u16) -> bool {
    let Some(host) = headers.get("host").and_then(|h| h.to_str().ok()) else {
        return false;
    };
    host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
}

fn authorized(token: &Token, request: &Request<Incoming>) -> bool {
    let headers = request.headers();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if request.method() == Method::POST {
        return header("x-troupe-token").is_some_and(|t| token.matches(t));
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return false;
    }
    let from_query = query_param(request.uri().query(), "token");
    let from_header = header("authorization").and_then(|v| v.strip_prefix("Bearer "));
    from_query
        .as_deref()
        .or(from_header)
        .is_some_and(|t| token.matches(t))
}
