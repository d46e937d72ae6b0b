//! The connection's lines: JSON-RPC messages, one per line, on stdin and stdout (ACP's stdio
//! transport). The SDK parses them; what reaches it here is always a line it can answer, so
//! that hostile input never ends the connection:
//! - a line over [`MAX_LINE`] bytes is read to its end but not kept;
//! - a line that is not UTF-8 is not decoded;
//! - each becomes a short line that is not JSON, which the SDK answers with a parse error
//!   (`-32700`) naming it. Blank lines are skipped.
//!
//! Reading waits for the dispatcher (a bounded channel), so a flood of lines is held by the
//! pipe, not by memory.

use futures::channel::mpsc;
use futures::SinkExt;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};

/// The longest line kept: a prompt with embedded files fits; a line beyond it is refused.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// A line longer than this that is not JSON is not quoted back in the parse error.
const QUOTED: usize = 1024;

/// One line as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(String),
    TooLong(usize),
    NotUtf8(usize),
}

impl Line {
    /// What the SDK is given: the text, or a note for a refused line (not JSON: a parse error).
    /// A long line that is not JSON is a note too: the parse error quotes the line it got, and
    /// a megabyte of junk is not sent back.
    pub fn for_parser(self) -> String {
        match self {
            Self::Text(text)
                if text.len() > QUOTED
                    && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() =>
            {
                format!("troupe: a line of {} bytes is not JSON", text.len())
            }
            Self::Text(text) => text,
            Self::TooLong(bytes) => {
                format!("troupe: a line of {bytes} bytes is over the limit of {MAX_LINE} bytes")
            }
            Self::NotUtf8(bytes) => format!("troupe: a line of {bytes} bytes is not UTF-8"),
        }
    }
}

/// The transport on the process's stdin and stdout.
pub fn stdio() -> agent_client_protocol::Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(forward(tokio::io::stdin(), tx));
    let out = futures::sink::unfold(tokio::io::stdout(), |mut out, line: String| async move {
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        out.flush().await?;
        Ok::<_, std::io::Error>(out)
    });
    agent_client_protocol::Lines::new(Box::pin(out), rx)
}

/// Reads `input`'s lines into `tx` until it ends (or fails: the error ends the connection).
async fn forward(input: impl AsyncRead + Unpin, mut tx: mpsc::Sender<std::io::Result<String>>) {
    let mut reader = BufReader::new(input);
    loop {
        let line = match next_line(&mut reader, MAX_LINE).await {
            Ok(Some(line)) => Ok(line.for_parser()),
            Ok(None) => return,
            Err(e) => Err(e),
        };
        let failed = line.is_err();
        if tx.send(line).await.is_err() || failed {
            return;
        }
    }
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
            if kept.len() < max + 1 {
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

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(line) = next_line(&mut reader, max).await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn lines_are_kept_whole_and_refused_lines_are_named_not_kept() {
        let input = b"{\"a\":1}\r\n\n  \nabcdefghijk\n\xff\xfe{}\n{\"b\":2}";
        assert_eq!(
            lines(input, 10).await,
            vec![
                Line::Text("{\"a\":1}".into()),
                Line::TooLong(11),
                Line::NotUtf8(4),
                Line::Text("{\"b\":2}".into()),
            ]
        );
        assert_eq!(lines(b"", 10).await, vec![]);
        assert_eq!(lines(b"\n\n", 10).await, vec![]);
        assert_eq!(
            lines(b"0123456789\n", 10).await,
            vec![Line::Text("0123456789".into())],
            "a line of exactly the limit is kept"
        );
    }

    #[test]
    fn a_refused_line_is_not_json() {
        for line in [
            Line::TooLong(20_000_000),
            Line::NotUtf8(3),
            Line::Text("x".repeat(QUOTED + 1)),
        ] {
            let text = line.for_parser();
            assert!(
                serde_json::from_str::<serde_json::Value>(&text).is_err(),
                "{text}"
            );
            assert!(text.len() < 100, "{text}");
        }
        let json = format!("{{\"a\": \"{}\"}}", "x".repeat(QUOTED));
        assert_eq!(
            Line::Text(json.clone()).for_parser(),
            json,
            "long JSON passes whole"
        );
    }
}
