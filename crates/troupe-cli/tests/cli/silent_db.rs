//! A shared team whose database stops answering: the connections stay open, but nothing comes
//! back (a server frozen, a network that drops packets). Stopping a `troupe worker` (SIGTERM) or
//! interrupting the lead's `troupe run` (Ctrl-C) then must not wait on the database for long: once the team closes, every store call gets at most
//! `CLOSING_WAIT` (3 s), and what could not be written is left to the leases. The database is
//! reached through a proxy on loopback that the test freezes; skipped (with a notice) where no
//! PostgreSQL can be reached.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use troupe::store::postgres::testing::TestDb;

use super::shared_team::WorkerProcess;

/// A TCP proxy to `upstream` that, once frozen, forwards nothing more and answers no new
/// connection, holding every socket open.
struct FreezingProxy {
    addr: SocketAddr,
    frozen: Arc<AtomicBool>,
}

impl FreezingProxy {
    fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(Vec::new()));
        let accepting = frozen.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if accepting.load(Ordering::SeqCst) {
                    held.lock().unwrap().push(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                pipe(&client, &server, accepting.clone());
                pipe(&server, &client, accepting.clone());
            }
        });
        Self { addr, frozen }
    }

    fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until `from` ends, or forever holds what it read once `frozen`.
fn pipe(from: &TcpStream, to: &TcpStream, frozen: Arc<AtomicBool>) {
    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buffer) {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) => n,
            };
            if frozen.load(Ordering::SeqCst) {
                // Held, never delivered: the sockets stay open and silent.
                let _keep = (from, to);
                loop {
                    std::thread::park();
                }
            }
            if to.write_all(&buffer[..n]).is_err() {
                return;
            }
        }
    });
}

/// `url` with its `host:port` replaced by `addr`, and the server's address; `None` when the
/// URL names no TCP address (a socket path).
fn through(url: &str, addr: SocketAddr) -> Option<(String, SocketAddr)> {
    let (scheme, rest) = url.split_once("://")?;
    let (user, rest) = rest.split_once('@')?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let upstream = std::net::ToSocketAddrs::to_socket_addrs(&rest[..end])
        .ok()?
        .next()?;
    Some((
        format!("{scheme}://{user}@{addr}{}", &rest[end..]),
        upstream,
    ))
}

/// A freezing proxy in front of the test database, and the database's URL through it; `None`
/// (with a notice) when the URL names no TCP address.
fn proxied(db: &TestDb) -> Option<(FreezingProxy, String)> {
    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
    let Some((_, upstream)) = through(&db.url(), probe.local_addr().unwrap()) else {
        eprintln!("notice: the test database's URL names no TCP address; skipped");
        return None;
    };
    drop(probe);
    let proxy = FreezingProxy::start(upstream);
    let (url, _) = through(&db.url(), proxy.addr)?;
    Some((proxy, url))
}

#[test]
fn a_worker_stopped_while_its_database_is_silent_exits_within_the_closing_bound() {
    let Some(db) = TestDb::create() else { return };
    let Some((proxy, url)) = proxied(&db) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let worker = WorkerProcess::start_with(
        &ws,
        &url,
        "http://127.0.0.1:9/v1",
        &[("TROUPE_LEASE", "2s")],
    );

    proxy.freeze();
    let stopped = Instant::now();
    worker.signal(libc::SIGTERM);
    let mut worker = worker;
    let (tx, rx) = mpsc::channel();
    let pid = worker.child.id() as i32;
    let mut child = std::mem::replace(
        &mut worker.child,
        std::process::Command::new("true").spawn().unwrap(),
    );
    std::thread::spawn(move || {
        let _ = tx.send(child.wait().map(|s| s.code()));
    });
    // Without the bound a call into a silent server waits as long as TCP does (minutes); with
    // it, the close's calls give up 3 s after it starts. 20 s is slack for a loaded machine.
    let exited = rx.recv_timeout(Duration::from_secs(20));
    let took = stopped.elapsed();
    let log = worker.log();
    let Ok(code) = exited else {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the worker did not exit within 20 s of SIGTERM: {log}");
    };
    let code = code.unwrap();
    assert_eq!(code, Some(0), "{log}");
    // The bound is 3 s from the close's start; the rest is slack for a loaded machine (a close
    // that also waited out the event stream's own 5 s took 8 s).
    assert!(took < Duration::from_secs(7), "took {took:?}: {log}");
    assert!(
        log.contains("did not answer within 3s while the team closed"),
        "took {took:?}: {log}"
    );
}

/// The lead's `troupe run` of a shared team, interrupted (Ctrl-C) while the database is silent
/// and its teammate's work is still out: it exits 130 within the same bound.
#[test]
fn a_lead_interrupted_while_its_database_is_silent_exits_within_the_closing_bound() {
    let Some(db) = TestDb::create() else { return };
    let Some((proxy, url)) = proxied(&db) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let script = ws.join("script.json");
    let call = |name: &str, arguments: serde_json::Value| serde_json::json!({"tool_calls": [{"name": name, "arguments": arguments}]});
    std::fs::write(
        &script,
        serde_json::json!({"agents": {"lead": [
            call("spawn_teammate", serde_json::json!({
                "name": "writer", "role": "writer", "prompt": "Write notes."})),
            {"text": "waiting for writer"},
            {"text": "done"},
        ]}})
        .to_string(),
    )
    .unwrap();
    let mut lead = super::support::command(&ws)
        .args([
            "run",
            "--prompt",
            "Have a writer write notes.",
            "--model-script",
            script.to_str().unwrap(),
            "--approval",
            "auto",
            "--sandbox",
            "off",
            "--no-memory",
            "--store",
            &url,
            "--no-local-workers",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // No worker runs the writer: the lead waits for its result.
    let stderr = std::io::BufReader::new(lead.stderr.take().unwrap());
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stderr) {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the lead never said it waits: {log}"));
        log.push_str(&line);
        log.push('\n');
        if line.contains("says: waiting for writer") {
            break;
        }
    }

    proxy.freeze();
    let stopped = Instant::now();
    let pid = lead.id() as i32;
    unsafe { libc::kill(pid, libc::SIGINT) };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(lead.wait().map(|s| s.code()));
    });
    let exited = rx.recv_timeout(Duration::from_secs(20));
    let took = stopped.elapsed();
    while let Ok(line) = lines.try_recv() {
        log.push_str(&line);
        log.push('\n');
    }
    let Ok(code) = exited else {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the lead did not exit within 20 s of Ctrl-C: {log}");
    };
    let code = code.unwrap();
    assert_eq!(code, Some(130), "{log}");
    assert!(took < Duration::from_secs(7), "took {took:?}: {log}");
}
