//! A hand-rolled HTTP/1.1 server on 127.0.0.1 for streamed answers: each reply is written as
//! chunked transfer encoding with the chunk boundaries the test chooses (mid-line, mid-UTF-8
//! character, several events in one chunk), optional pauses between chunks, and an optional
//! cut (the connection dropped without the final chunk). Every request is recorded.
//!
//! Replies are queued; when the queue is empty, the responder answers (if set: a function of
//! the request, e.g. per agent), else the `always` reply (if set), else a 500.
//!
//! Also used by the CLI tests (`crates/troupe-cli/tests/cli.rs` includes this file).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One piece of a reply body.
#[derive(Clone, Debug)]
pub enum Step {
    /// Written as one HTTP chunk, flushed.
    Chunk(Vec<u8>),
    /// Nothing is written for this long.
    Pause(Duration),
}

/// One scripted HTTP response.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub steps: Vec<Step>,
    /// Drop the connection instead of ending the body properly.
    pub cut: bool,
}

impl Reply {
    /// A `text/event-stream` 200 whose body is `chunks`, each its own HTTP chunk.
    pub fn events<S: AsRef<[u8]>>(chunks: &[S]) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream".to_owned(),
            steps: chunks
                .iter()
                .map(|chunk| Step::Chunk(chunk.as_ref().to_vec()))
                .collect(),
            cut: false,
        }
    }

    /// A JSON body (any status), in one chunk.
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            content_type: "application/json".to_owned(),
            steps: vec![Step::Chunk(body.to_string().into_bytes())],
            cut: false,
        }
    }
}

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Lowercased names.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

type Responder = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    responder: Option<Responder>,
    fallback: Option<Reply>,
    requests: Vec<Recorded>,
}

pub struct SseServer {
    pub base_url: String,
    state: Arc<Mutex<State>>,
}

impl SseServer {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(socket, state).await;
                });
            }
        });
        Self {
            base_url: format!("http://{address}/v1"),
            state,
        }
    }

    /// Answers the next request not yet answered by an earlier `push`.
    pub fn push(&self, reply: Reply) {
        self.state.lock().unwrap().replies.push_back(reply);
    }

    /// Answers every request once the queue is empty.
    pub fn always(&self, reply: Reply) {
        self.state.lock().unwrap().fallback = Some(reply);
    }

    /// Answers every request the queue does not with `respond(request)`.
    pub fn respond_with(&self, respond: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) {
        self.state.lock().unwrap().responder = Some(Arc::new(respond));
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }
}

async fn serve(mut socket: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        let read = socket.read(&mut piece).await?;
        if read == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&piece[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = socket.read(&mut piece).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&piece[..read]);
    }
    let recorded = Recorded {
        method,
        target,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let (queued, responder) = {
        let mut state = state.lock().unwrap();
        state.requests.push(recorded.clone());
        let queued = state.replies.pop_front().or_else(|| {
            state
                .responder
                .is_none()
                .then(|| state.fallback.clone())
                .flatten()
        });
        (queued, state.responder.clone())
    };
    // The responder runs outside the lock: it may be slow or panic.
    let reply = queued
        .or_else(|| responder.map(|respond| respond(&recorded)))
        .unwrap_or_else(|| Reply::json(500, &serde_json::json!({"error": "no reply"})));
    let head = format!(
        "HTTP/1.1 {} Scripted\r\ncontent-type: {}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        reply.status, reply.content_type
    );
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    for step in reply.steps {
        match step {
            Step::Pause(pause) => tokio::time::sleep(pause).await,
            Step::Chunk(bytes) => {
                if bytes.is_empty() {
                    continue;
                }
                socket
                    .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
                    .await?;
                socket.write_all(&bytes).await?;
                socket.write_all(b"\r\n").await?;
                socket.flush().await?;
            }
        }
    }
    if !reply.cut {
        socket.write_all(b"0\r\n\r\n").await?;
        socket.flush().await?;
    }
    socket.shutdown().await
}

/// `data: {json}\n\n` for each chunk value, concatenated.
pub fn sse(values: &[Value]) -> String {
    values
        .iter()
        .map(|value| format!("data: {value}\n\n"))
        .collect()
}

pub const DONE: &str = "data: [DONE]\n\n";
