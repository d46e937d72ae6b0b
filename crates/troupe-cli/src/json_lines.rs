//! JSON-RPC lines on stdin and stdout, the stdio transport of `troupe acp` and `troupe mcp
//! serve`: one message per line. The protocol SDKs parse the lines; what reaches them here is
//! always a line of JSON, so that hostile input never ends a connection nor goes unanswered:
//! - a line over [`MAX_LINE`] bytes is read to its end but not kept;
//! - a line that is not UTF-8 is not decoded; a line that is not JSON is not passed on;
//! - each is answered with a parse error (`-32700`, id `null`) that names it in a few words,
//!   never quoting a megabyte of junk back. Blank lines are skipped.
//!
//! Reading waits for the reader (bounded channels), so a flood of lines is held by the pipe,
//! not by memory.

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The longest line kept: a prompt with embedded files fits; a line beyond it is refused.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// One line as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(String),
    TooLong(usize),
    NotUtf8(usize),
}

impl Line {
    /// The line when it is JSON, else why not, in a few words.
    pub fn checked(self) -> Result<String, String> {
        match self {
            Self::Text(text) if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() => {
                Ok(text)
            }
            Self::Text(text) => Err(format!("a line of {} bytes is not JSON", text.len())),
            Self::TooLong(bytes) => Err(format!(
                "a line of {bytes} bytes is over the limit of {MAX_LINE} bytes"
            )),
            Self::NotUtf8(bytes) => Err(format!("a line of {bytes} bytes is not UTF-8")),
        }
    }
}

/// The parse error (`-32700`) answering a refused line.
pub fn parse_error(why: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": "Parse error", "data": format!("troupe: {why}")},
    })
    .to_string()
}

/// Stdin's lines, checked, until it ends (or fails: the error is the last item).
pub fn incoming() -> mpsc::Receiver<std::io::Result<Result<String, String>>> {
    let (mut tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut reader = BufReader::new(tokio::io::stdin());
        loop {
            let line = match next_line(&mut reader, MAX_LINE).await {
                Ok(Some(line)) => Ok(line.checked()),
                Ok(None) => return,
                Err(e) => Err(e),
            };
            let failed = line.is_err();
            if tx.send(line).await.is_err() || failed {
                return;
            }
        }
    });
    rx
}

/// Writes each line sent to stdout, whole and flushed, in the order sent; the writer ends
/// once every sender is gone and every line is out.
pub fn outgoing() -> (mpsc::Sender<String>, Written) {
    let (tx, mut rx) = mpsc::channel::<String>(16);
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(line) = rx.next().await {
            let written = async {
                out.write_all(line.as_bytes()).await?;
                out.write_all(b"\n").await?;
                out.flush().await
            };
            if written.await.is_err() {
                return;
            }
        }
    });
    (tx, Written(writer))
}

/// The end of a connection's writes.
pub struct Written(tokio::task::JoinHandle<()>);

impl Written {
    /// Waits (a bounded time: a sender kept by a task that outlived the connection must not
    /// hold the process) until every line written is out, so that the last answers are not
    /// lost when the process exits.
    pub async fn drained(self) {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.0).await;
    }
}

/// `troupe acp`'s transport for the ACP SDK: checked lines in (a refused line is answered
/// here), the SDK's lines out.
pub fn for_acp() -> (
    agent_client_protocol::Lines<
        impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
        impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
    >,
    Written,
) {
    let (out, written) = outgoing();
    let refusals = out.clone();
    let lines = incoming().filter_map(move |line| {
        let mut refusals = refusals.clone();
        async move {
            match line {
                Ok(Ok(text)) => Some(Ok(text)),
                Ok(Err(why)) => {
                    let _ = refusals.send(parse_error(&why)).await;
                    None
                }
                Err(e) => Some(Err(e)),
            }
        }
    });
    let sink = out.sink_map_err(|e| std::io::Error::new(std::io::ErrorKind::BrokenPipe, e));
    (agent_client_protocol::Lines::new(sink, lines), written)
}

/// `troupe mcp serve`'s transport for rmcp: a reader and a writer (in-process pipes) that
/// carry only checked lines in and rmcp's lines out; a refused line is answered here.
pub fn for_rmcp() -> ((tokio::io::DuplexStream, tokio::io::DuplexStream), Written) {
    const PIPE: usize = 64 * 1024;
    let (rmcp_reads, mut to_rmcp) = tokio::io::duplex(PIPE);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE);
    let (out, written) = outgoing();
    let mut refusals = out.clone();
    let mut lines = incoming();
    tokio::spawn(async move {
        while let Some(Ok(line)) = lines.next().await {
            match line {
                Ok(text) => {
                    let fed = async {
                        to_rmcp.write_all(text.as_bytes()).await?;
                        to_rmcp.write_all(b"\n").await
                    };
                    if fed.await.is_err() {
                        return;
                    }
                }
                Err(why) => {
                    let _ = refusals.send(parse_error(&why)).await;
                }
            }
        }
        // Stdin ended: rmcp reads the end of its input.
        let _ = to_rmcp.shutdown().await;
    });
    tokio::spawn(async move {
        let mut out = out;
        let mut reader = BufReader::new(from_rmcp);
        while let Ok(Some(line)) = next_line(&mut reader, usize::MAX - 1).await {
            if let Line::Text(text) = line {
                if out.send(text).await.is_err() {
                    return;
                }
            }
        }
    });
    ((rmcp_reads, rmcp_writes), written)
}

/// Every line of `input`, read through a tiny buffer (lines cross its ends).
#[cfg(test)]
async fn read_all(input: impl tokio::io::AsyncRead + Unpin, max: usize) -> Vec<Line> {
    let mut reader = BufReader::with_capacity(4, input);
    let mut out = Vec::new();
    while let Some(line) = next_line(&mut reader, max).await.unwrap() {
        out.push(line);
    }
    out
}

/// The next non-blank line of `reader` (without its `\n` or `\r\n`), keeping at most `max`
/// bytes; `None` at the end of the input.
pub async fn next_line(
    reader: &mut (impl AsyncBufReadExt + Unpin),
    max: usize,
) -> std::io::Result<Option<Line>> {
    loop {
        let mut kept: Vec<u8> = Vec::new();
        let mut total = 0usize;
        let mut ended = false;
        loop {
            let available = reader.fill_buf().await?;
            if available.is_empty() {
                ended = true;
                break;
            }
            let (chunk, newline) = match available.iter().position(|b| *b == b'\n') {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            total += chunk.len();
            if kept.len() <= max {
                let room = (max + 1 - kept.len()).min(chunk.len());
                kept.extend_from_slice(&chunk[..room]);
            }
            let used = chunk.len() + usize::from(newline);
            reader.consume(used);
            if newline {
                break;
            }
        }
        if ended && total == 0 {
            return Ok(None);
        }
        if kept.last() == Some(&b'\r') && total <= max + 1 {
            kept.pop();
            total -= 1;
        }
        if total > max {
            return Ok(Some(Line::TooLong(total)));
        }
        match String::from_utf8(kept) {
            Ok(text) if text.trim().is_empty() => {
                if ended {
                    return Ok(None);
                }
            }
            Ok(text) => return Ok(Some(Line::Text(text))),
            Err(_) => return Ok(Some(Line::NotUtf8(total))),
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[tokio::test]
    async fn lines_are_kept_whole_and_refused_lines_are_named_not_kept() {
        let input: &[u8] = b"{\"a\":1}\r\n\n  \nabcdefghijk\n\xff\xfe{}\n{\"b\":2}";
        assert_eq!(
            read_all(input, 10).await,
            vec![
                Line::Text("{\"a\":1}".into()),
                Line::TooLong(11),
                Line::NotUtf8(4),
                Line::Text("{\"b\":2}".into()),
            ]
        );
        assert_eq!(read_all(&b""[..], 10).await, vec![]);
        assert_eq!(read_all(&b"\n\n"[..], 10).await, vec![]);
        assert_eq!(
            read_all(&b"0123456789\n"[..], 10).await,
            vec![Line::Text("0123456789".into())],
            "a line of exactly the limit is kept"
        );
    }

    #[test]
    fn only_json_passes_and_a_refusal_is_short() {
        assert_eq!(
            Line::Text("{\"a\": [1]}".into()).checked(),
            Ok("{\"a\": [1]}".to_owned())
        );
        for line in [
            Line::TooLong(20_000_000),
            Line::NotUtf8(3),
            Line::Text("x".repeat(1024 * 1024)),
            Line::Text("{not json".into()),
        ] {
            let why = line.checked().unwrap_err();
            let error: serde_json::Value = serde_json::from_str(&parse_error(&why)).unwrap();
            assert_eq!(error["error"]["code"], -32700);
            assert!(error["id"].is_null());
            assert!(why.len() < 100, "{why}");
        }
    }
}
