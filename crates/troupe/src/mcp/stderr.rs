//! The bounded log a stdio MCP server's stderr goes to: its last [`STDERR_LOG_BYTES`] bytes,
//! kept in memory for a failure report, never shown on the terminal while the run goes.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::io::AsyncReadExt;

/// How much of a server's stderr is kept (the end: how it failed).
pub const STDERR_LOG_BYTES: usize = 16 * 1024;

/// The last bytes a server wrote to stderr.
#[derive(Debug, Default)]
pub struct StderrLog {
    bytes: Mutex<VecDeque<u8>>,
    /// Set once the stream ended (the server closed its stderr or exited).
    ended: tokio::sync::watch::Sender<bool>,
}

impl StderrLog {
    pub fn push(&self, chunk: &[u8]) {
        let Ok(mut bytes) = self.bytes.lock() else {
            return;
        };
        bytes.extend(chunk);
        let excess = bytes.len().saturating_sub(STDERR_LOG_BYTES);
        bytes.drain(..excess);
    }

    /// The kept text, lossily decoded, trimmed.
    pub fn text(&self) -> String {
        let Ok(bytes) = self.bytes.lock() else {
            return String::new();
        };
        let (a, b) = bytes.as_slices();
        let mut all = a.to_vec();
        all.extend_from_slice(b);
        String::from_utf8_lossy(&all).trim().to_owned()
    }

    /// Reads `stream` into the log until it ends.
    pub async fn drain(&self, mut stream: impl tokio::io::AsyncRead + Unpin) {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => self.push(&buffer[..n]),
            }
        }
        self.ended.send_replace(true);
    }

    /// Waits until the stream has ended and everything it wrote is in the log (a server that
    /// exited: its last words, read to the end).
    pub async fn ended(&self) {
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(|ended| *ended).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_end() {
        let log = StderrLog::default();
        log.push(&vec![b'a'; STDERR_LOG_BYTES]);
        log.push(b"the end");
        let text = log.text();
        assert_eq!(text.len(), STDERR_LOG_BYTES);
        assert!(text.ends_with("the end"));
    }
}
