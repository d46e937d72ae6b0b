//! Reading a response body under the transport's two limits: an **idle timeout** (no byte for
//! that long ends the read, however long the whole answer takes) and a **size cap** (a server
//! cannot make troupe buffer an unbounded body or stream).
//!
//! Both limits live in one byte source, [`chunks`], that the whole-body reader and the
//! server-sent-events parser (the `sse-stream` crate) both read from; its failures are
//! [`ReadError`]s, recovered from the parser's boxed errors by [`ReadError::from_sse`].

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, Stream};

/// The most a response body (whole or streamed) may hold: far more than any real answer.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Why reading a body stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No byte arrived within the idle timeout.
    #[error("no data for {0:?}")]
    Idle(Duration),
    /// The body passed [`MAX_BODY_BYTES`].
    #[error("the body passed {MAX_BODY_BYTES} bytes")]
    TooLarge,
    /// The connection failed while reading.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// The event stream is not valid server-sent events (bad UTF-8, a line without a field).
    #[error("malformed event stream: {0}")]
    Malformed(String),
}

impl ReadError {
    /// The read error behind one of the SSE parser's errors.
    pub fn from_sse(err: sse_stream::Error) -> Self {
        match err {
            sse_stream::Error::Body(inner) => match inner.downcast::<ReadError>() {
                Ok(read) => *read,
                Err(other) => Self::Malformed(other.to_string()),
            },
            other => Self::Malformed(other.to_string()),
        }
    }
}

/// The body's chunks as they arrive, each awaited for at most `idle`, the total capped.
pub fn chunks(
    response: reqwest::Response,
    idle: Duration,
) -> impl Stream<Item = Result<Bytes, ReadError>> + Send + Unpin + 'static {
    Box::pin(stream::unfold(
        Some((response, 0usize)),
        move |state| async move {
            let (mut response, seen) = state?;
            match tokio::time::timeout(idle, response.chunk()).await {
                Err(_) => Some((Err(ReadError::Idle(idle)), None)),
                Ok(Err(err)) => Some((Err(ReadError::Http(err)), None)),
                Ok(Ok(None)) => None,
                Ok(Ok(Some(chunk))) => {
                    let seen = seen.saturating_add(chunk.len());
                    if seen > MAX_BODY_BYTES {
                        Some((Err(ReadError::TooLarge), None))
                    } else {
                        Some((Ok(chunk), Some((response, seen))))
                    }
                }
            }
        },
    ))
}

/// The whole body, read under the same limits.
pub async fn whole(response: reqwest::Response, idle: Duration) -> Result<Vec<u8>, ReadError> {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    let mut chunks = chunks(response, idle);
    while let Some(chunk) = chunks.next().await {
        body.extend_from_slice(&chunk?);
    }
    Ok(body)
}
