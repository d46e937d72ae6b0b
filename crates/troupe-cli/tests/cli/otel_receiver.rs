//! A real OpenTelemetry receiver for the telemetry tests: Arize Phoenix (`pip install
//! arize-phoenix`), which people run to look at LLM traces. It takes OTLP over HTTP at
//! `/v1/traces` and gives the spans back through its REST API.
//!
//! Which Phoenix: `TROUPE_TEST_OTEL_URL` when one already runs (`.ci/run` starts one early, so
//! its minute of start-up overlaps the build); else `phoenix` from the virtual environment
//! `.ci/run` installs (`$HOME/.cache/troupe-test/phoenix`), started once for this test binary
//! and killed with it. Without either the tests are skipped with one notice, unless
//! `TROUPE_TEST_OTEL_REQUIRED=1` (CI), where that is a failure.
//!
//! Each test sends its spans to its own Phoenix project (`openinference.project.name`, a
//! resource attribute set through `OTEL_RESOURCE_ATTRIBUTES`), so tests never see each
//! other's spans.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long Phoenix may take to start (it imports a lot and migrates its database).
const START_DEADLINE: Duration = Duration::from_secs(300);
/// How long exported spans may take to be readable.
const READ_DEADLINE: Duration = Duration::from_secs(60);

pub struct Receiver {
    /// `http://127.0.0.1:<port>`: OTLP at `/v1/traces`, the REST API at `/v1/…`.
    pub base_url: String,
}

/// The receiver, or `None` (said once) when there is none here and CI does not require one.
pub fn receiver() -> Option<&'static Receiver> {
    static RECEIVER: OnceLock<Option<Receiver>> = OnceLock::new();
    RECEIVER
        .get_or_init(|| {
            let found = find();
            if found.is_none() {
                if std::env::var("TROUPE_TEST_OTEL_REQUIRED").is_ok_and(|v| v == "1") {
                    panic!(
                        "TROUPE_TEST_OTEL_REQUIRED=1 but no Phoenix: set TROUPE_TEST_OTEL_URL or \
                         install it (`.ci/run` does)"
                    );
                }
                eprintln!(
                    "note: telemetry tests skipped: no OpenTelemetry receiver (Arize Phoenix) here; \
                     `.ci/run` installs one"
                );
            }
            found
        })
        .as_ref()
}

fn find() -> Option<Receiver> {
    if let Ok(url) = std::env::var("TROUPE_TEST_OTEL_URL") {
        let url = url.trim_end_matches('/').to_owned();
        wait_healthy(&url);
        return Some(Receiver { base_url: url });
    }
    let binary = phoenix_binary()?;
    let port = free_port();
    let grpc_port = free_port();
    let data = binary
        .parent()
        .and_then(|bin| bin.parent())
        .map(|venv| venv.with_file_name("phoenix-data"))
        .unwrap_or_else(|| std::env::temp_dir().join("troupe-test-phoenix-data"));
    std::fs::create_dir_all(&data).unwrap();
    // Started from a thread that lives as long as the test binary: the child gets SIGKILL when
    // that thread (so the binary) ends, whatever way it ends.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(&binary);
        command
            .arg("serve")
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
            .env("PHOENIX_WORKING_DIR", &data)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn();
        let ok = child.is_ok();
        tx.send(child.map(|_| ()).map_err(|e| e.to_string()))
            .unwrap();
        if ok {
            loop {
                std::thread::park();
            }
        }
    });
    rx.recv().unwrap().unwrap();
    let base_url = format!("http://127.0.0.1:{port}");
    wait_healthy(&base_url);
    Some(Receiver { base_url })
}

fn phoenix_binary() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("TROUPE_TEST_PHOENIX") {
        return Some(PathBuf::from(path));
    }
    let home = std::env::var("HOME").ok()?;
    let path = PathBuf::from(home).join(".cache/troupe-test/phoenix/bin/phoenix");
    path.exists().then_some(path)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_healthy(base_url: &str) {
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        if get(base_url, "/healthz").is_some_and(|(status, _)| status == 200) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Phoenix at {base_url} did not come up in {START_DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `GET path` over plain HTTP/1.1: (status, body), or `None` when nothing answers.
fn get(base_url: &str, path: &str) -> Option<(u16, String)> {
    let authority = base_url.strip_prefix("http://")?;
    let mut stream = TcpStream::connect(authority).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_owned()
    };
    Some((status, body))
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

impl Receiver {
    /// The variables that send a run's spans here, into `project`.
    pub fn env(&self, project: &str) -> Vec<(String, String)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), self.base_url.clone()),
            (
                "OTEL_RESOURCE_ATTRIBUTES".into(),
                format!("openinference.project.name={project}"),
            ),
        ]
    }

    /// Every span of `project`, as Phoenix gives them (`name`, `context`, `parent_id`,
    /// `attributes`, …), each with the `links` of its OTLP form added.
    pub fn spans(&self, project: &str) -> Vec<Value> {
        let read = |path: &str| -> Vec<Value> {
            match get(
                &self.base_url,
                &format!("/v1/projects/{project}/{path}?limit=1000"),
            ) {
                Some((200, body)) => serde_json::from_str::<Value>(&body).unwrap()["data"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                _ => Vec::new(),
            }
        };
        let otlp = read("spans/otlpv1");
        let mut spans = read("spans");
        for span in &mut spans {
            let id = span["context"]["span_id"].clone();
            let links = otlp
                .iter()
                .find(|o| o["span_id"] == id)
                .map(|o| o["links"].clone())
                .unwrap_or(Value::Null);
            span["links"] = links;
        }
        spans
    }

    /// The spans of `project` once `done` holds for them (polled, a minute at most).
    pub fn spans_when(&self, project: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + READ_DEADLINE;
        loop {
            let spans = self.spans(project);
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the spans of {project} never got there: {spans:#?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A project name no other test (or earlier run) uses.
pub fn project(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{test}-{}-{nanos}", std::process::id())
}

/// The spans named `name`.
pub fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}
