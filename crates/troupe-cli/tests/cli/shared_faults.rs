//! Faults of a shared team, with real processes: a worker SIGKILLed mid-message, a worker
//! SIGSTOPped past its lease and then continued, PostgreSQL restarted mid-run, and a second
//! lead of the same team. Each test has a database schema (or a whole server) of its own and a
//! short lease (`TROUPE_LEASE=2s`) so takeovers come quickly; nothing waits on a sleep: the
//! tests wait for the model mock to be asked, for processes to end, for the run's answer.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Value;
use troupe::store::postgres::testing::TestDb;

use super::shared_team::{writer_audit, WorkerProcess};
use super::sse_server::{Recorded, SseServer, Step};
use super::support::{json, troupe_in};

const LEASE: (&str, &str) = ("TROUPE_LEASE", "2s");
const ANSWER: &str = "writer wrote NOTES.md under an approved plan and has shut down.\n";

fn is_writer(request: &Recorded) -> bool {
    request.body.get("tools").is_some()
        && request.body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You are writer"))
}

fn is_lead(request: &Recorded) -> bool {
    request.body.get("tools").is_some()
        && request.body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You are lead,"))
}

/// The demo's flow; the first request `matches` picks is held for `pause` and announced on
/// the returned channel (and so is every later one it picks, once `announce_all`).
fn server_pausing(
    server: &SseServer,
    matches: fn(&Recorded) -> bool,
    pause: Duration,
) -> (mpsc::Receiver<usize>, Arc<AtomicBool>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let paused = AtomicBool::new(false);
    let announce_all = Arc::new(AtomicBool::new(false));
    let all = announce_all.clone();
    let seen = AtomicUsize::new(0);
    server.respond_with(move |request| {
        let mut reply = super::streaming::team(request);
        if matches(request) {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            if !paused.swap(true, Ordering::SeqCst) {
                reply.steps.insert(0, Step::Pause(pause));
                let _ = tx.lock().unwrap().send(n);
            } else if all.load(Ordering::SeqCst) {
                let _ = tx.lock().unwrap().send(n);
            }
        }
        reply
    });
    (rx, announce_all)
}

async fn lead_run(ws: &Path, url: &str, base_url: &str) -> super::support::Ran {
    super::shared_team::lead_run(ws, url, base_url, &[LEASE]).await
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

async fn start_worker(ws: &Path, url: &str, base_url: &str) -> WorkerProcess {
    let (ws, url, base) = (ws.to_owned(), url.to_owned(), base_url.to_owned());
    tokio::task::spawn_blocking(move || WorkerProcess::start_with(&ws, &url, &base, &[LEASE]))
        .await
        .unwrap()
}

async fn next(rx: &mpsc::Receiver<usize>) -> usize {
    tokio::task::block_in_place(|| rx.recv_timeout(Duration::from_secs(60)))
        .expect("the model mock was not asked")
}

/// The messages of the team in the database, by state (what `troupe mailbox --store` shows).
fn messages(lead_ws: &Path, url: &str, agent: &str) -> Vec<(String, String)> {
    let out = json(&troupe_in(
        lead_ws,
        &["mailbox", agent, "--json", "--store", url],
    ));
    out["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["state"].as_str().unwrap().to_owned(),
                m["message"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn settled(entries: &[(String, String)]) -> bool {
    entries.iter().all(|(state, _)| state == "done")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_message_hands_its_teammate_over_and_nothing_is_lost_or_doubled() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let ((_l, lead_ws), (_a, a_ws), (_b, b_ws)) = (workspace(), workspace(), workspace());
    let server = SseServer::start().await;
    // The writer's first model call hangs: its worker is mid-message (task claimed, input in
    // the transcript) when it is killed.
    let (asked, _) = server_pausing(&server, is_writer, Duration::from_secs(30));
    let a = start_worker(&a_ws, &url, &server.base_url).await;
    let lead = tokio::spawn({
        let (ws, url, base) = (lead_ws.clone(), url.clone(), server.base_url.clone());
        async move { lead_run(&ws, &url, &base).await }
    });
    next(&asked).await;
    a.signal(libc::SIGKILL);
    let mut a = a;
    a.child.wait().unwrap();
    // Another worker takes the teammate over once the lease runs out and redelivers the task.
    let b = start_worker(&b_ws, &url, &server.base_url).await;
    let out = lead.await.unwrap();
    assert_eq!(out.code, 0, "{out:#?}\nB: {}", b.log());
    assert_eq!(out.stdout, ANSWER);
    assert!(std::fs::read_to_string(b_ws.join("NOTES.md"))
        .unwrap()
        .starts_with("# Notes"));
    assert!(!a_ws.join("NOTES.md").exists());
    assert_eq!(
        writer_audit(&b_ws),
        [
            ("submit_plan", "allow"),
            ("write_file", "deny"),
            ("write_file", "allow")
        ]
        .map(|(t, d)| (t.to_owned(), d.to_owned()))
    );
    // Every message ended done, each once: nothing lost, nothing doubled.
    for agent in ["lead", "writer"] {
        let entries = messages(&lead_ws, &url, agent);
        assert!(settled(&entries), "{agent}: {entries:?}");
        let mut ids: Vec<&String> = entries.iter().map(|(_, id)| id).collect();
        ids.dedup();
        assert_eq!(ids.len(), entries.len());
    }
    // One result per writer turn that answered the lead, as in one process.
    let results = json(&troupe_in(
        &lead_ws,
        &["mailbox", "lead", "--json", "--store", &url],
    ));
    let from_writer = results["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["sender"] == "writer" && m["message"]["kind"] == "result")
        .count();
    assert_eq!(from_writer, 2, "{results:#}");
    assert_eq!(
        tokio::task::spawn_blocking(move || b.stop()).await.unwrap(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_past_its_lease_does_nothing_twice_when_it_continues() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let ((_l, lead_ws), (_a, a_ws), (_b, b_ws)) = (workspace(), workspace(), workspace());
    let server = SseServer::start().await;
    let (asked, announce_all) = server_pausing(&server, is_writer, Duration::from_secs(4));
    let a = start_worker(&a_ws, &url, &server.base_url).await;
    let lead = tokio::spawn({
        let (ws, url, base) = (lead_ws.clone(), url.clone(), server.base_url.clone());
        async move { lead_run(&ws, &url, &base).await }
    });
    next(&asked).await;
    a.signal(libc::SIGSTOP);
    let b = start_worker(&b_ws, &url, &server.base_url).await;
    let out = lead.await.unwrap();
    assert_eq!(out.code, 0, "{out:#?}\nB: {}", b.log());
    assert_eq!(out.stdout, ANSWER);
    let lead_before = messages(&lead_ws, &url, "lead");
    // A continues: its held model answer arrives, asks for a tool, and is refused by the lease
    // gate; it reports nothing.
    announce_all.store(true, Ordering::SeqCst);
    a.signal(libc::SIGCONT);
    next(&asked).await;
    let a_log = a.log();
    assert_eq!(
        tokio::task::spawn_blocking(move || a.stop()).await.unwrap(),
        0,
        "{a_log}"
    );
    let denied: Vec<Value> = super::shared_team::writer_audit_lines(&a_ws);
    assert!(!denied.is_empty(), "A ran no tool after it continued");
    assert!(
        denied
            .iter()
            .all(|l| l["decision"] == "deny" && l["rule"] == "lease_gate"),
        "{denied:#?}"
    );
    assert!(!a_ws.join("NOTES.md").exists());
    assert!(b_ws.join("NOTES.md").exists());
    assert_eq!(
        messages(&lead_ws, &url, "lead"),
        lead_before,
        "A sent the lead something"
    );
    assert!(settled(&messages(&lead_ws, &url, "writer")));
    assert_eq!(
        tokio::task::spawn_blocking(move || b.stop()).await.unwrap(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_lead_of_the_same_team_is_refused() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let ((_l, lead_ws), (_o, other_ws), (_a, a_ws)) = (workspace(), workspace(), workspace());
    let server = SseServer::start().await;
    let (asked, _) = server_pausing(&server, is_lead, Duration::from_secs(2));
    let a = start_worker(&a_ws, &url, &server.base_url).await;
    let lead = tokio::spawn({
        let (ws, url, base) = (lead_ws.clone(), url.clone(), server.base_url.clone());
        async move { lead_run(&ws, &url, &base).await }
    });
    next(&asked).await;
    let second = lead_run(&other_ws, &url, &server.base_url).await;
    assert_eq!(second.code, 1, "{second:#?}");
    assert!(
        second.stderr.contains("a lead of team \"default\" runs"),
        "{second:#?}"
    );
    let first = lead.await.unwrap();
    assert_eq!(first.code, 0, "{first:#?}");
    assert_eq!(first.stdout, ANSWER);
    assert_eq!(
        tokio::task::spawn_blocking(move || a.stop()).await.unwrap(),
        0
    );
}

/// A PostgreSQL server of the test's own (initdb in a temp folder, run as `postgres` on a
/// free port), so it can be restarted without disturbing other tests. `None` (with a notice)
/// when the machine has no PostgreSQL binaries or the test cannot run them as `postgres`.
struct PrivateServer {
    dir: tempfile::TempDir,
    bin: std::path::PathBuf,
    port: u16,
    /// More server options (`-c ssl=on …`).
    extra: Mutex<String>,
}

impl PrivateServer {
    fn start() -> Option<Self> {
        Self::start_with(|_| Some(String::new()))
    }

    /// [`Self::start`], with `setup` run on the initialised server (its folder in hand) before
    /// it starts; it returns more `-c` options.
    fn start_with(setup: impl FnOnce(&Self) -> Option<String>) -> Option<Self> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .find(|b| b.join("initdb").exists())?;
        let dir = tempfile::tempdir().ok()?;
        let owner = Command::new("chown")
            .args(["postgres:postgres", dir.path().to_str()?])
            .status()
            .ok()?;
        if !owner.success() {
            eprintln!("notice: cannot hand a folder to the postgres user; restart test skipped");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let server = Self {
            dir,
            bin,
            port,
            extra: Mutex::new(String::new()),
        };
        let data = server.data();
        let init = server.as_postgres(&[
            server.bin.join("initdb").to_str()?,
            "-D",
            &data,
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ]);
        if !init {
            eprintln!("notice: initdb did not run as postgres; restart test skipped");
            return None;
        }
        let extra = setup(&server)?;
        *server.extra.lock().unwrap() = extra;
        server.pg_ctl("start").then_some(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn as_postgres(&self, args: &[&str]) -> bool {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn pg_ctl(&self, action: &str) -> bool {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off {}",
            self.port,
            self.dir.path().display(),
            self.extra.lock().unwrap()
        );
        let log = self.dir.path().join("log").display().to_string();
        self.as_postgres(&[
            self.bin.join("pg_ctl").to_str().unwrap_or("pg_ctl"),
            "-D",
            &self.data(),
            "-o",
            &options,
            "-l",
            &log,
            "-m",
            "fast",
            "-w",
            action,
        ])
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = self.as_postgres(&[
            self.bin.join("pg_ctl").to_str().unwrap_or("pg_ctl"),
            "-D",
            &self.data(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_completes_when_postgresql_restarts_mid_run() {
    let Some(pg) = tokio::task::spawn_blocking(PrivateServer::start)
        .await
        .unwrap()
    else {
        eprintln!("notice: no private PostgreSQL server could be started; restart test skipped");
        return;
    };
    let url = pg.url();
    let ((_l, lead_ws), (_a, a_ws)) = (workspace(), workspace());
    let server = SseServer::start().await;
    let (asked, _) = server_pausing(&server, is_writer, Duration::from_secs(3));
    let a = start_worker(&a_ws, &url, &server.base_url).await;
    let lead = tokio::spawn({
        let (ws, url, base) = (lead_ws.clone(), url.clone(), server.base_url.clone());
        async move { lead_run(&ws, &url, &base).await }
    });
    next(&asked).await;
    // While the writer waits for its model, the server goes down and comes back.
    assert!(tokio::task::spawn_blocking({
        let pg_ctl = pg.bin.join("pg_ctl");
        let (data, port, dir) = (pg.data(), pg.port, pg.dir.path().to_owned());
        move || {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(pg_ctl)
                .args(["-D", &data, "-m", "fast", "-w", "-o"])
                .arg(format!(
                    "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
                    dir.display()
                ))
                .arg("restart")
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap()
                .success()
        }
    })
    .await
    .unwrap());
    let out = lead.await.unwrap();
    assert_eq!(out.code, 0, "{out:#?}\nworker: {}", a.log());
    assert_eq!(out.stdout, ANSWER);
    assert!(a_ws.join("NOTES.md").exists());
    assert!(settled(&messages(&lead_ws, &url, "writer")));
    assert_eq!(
        tokio::task::spawn_blocking(move || a.stop()).await.unwrap(),
        0
    );
}

/// Runs `openssl` with `args` in `dir`; whether it succeeded.
fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A test CA and a server certificate for `localhost` signed by it, in `dir`: `ca.pem`,
/// `server.crt`, `server.key`.
fn certificates(dir: &Path) -> bool {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").is_ok()
        && openssl(
            dir,
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=troupe test CA",
                ],
            ]
            .concat(),
        )
        && openssl(
            dir,
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=localhost",
                ],
            ]
            .concat(),
        )
        && openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "san.ext",
            ],
        )
}

/// `sslmode=require` connects over TLS only, checking the server's certificate against
/// `TROUPE_STORE_CA` (here a private CA) and its name against the URL's host; without the CA
/// the certificate is refused, and a server that takes TLS only refuses the plain connection.
/// `troupe status --store` on the fresh server says `store_empty`: it got in.
#[test]
fn a_store_url_with_sslmode_require_connects_over_checked_tls_only() {
    let certs = tempfile::tempdir().unwrap();
    if !certificates(certs.path()) {
        eprintln!("notice: openssl could not make test certificates; TLS test skipped");
        return;
    }
    let Some(server) = PrivateServer::start_with(|server| {
        let data = std::path::PathBuf::from(server.data());
        for name in ["server.crt", "server.key"] {
            std::fs::copy(certs.path().join(name), data.join(name)).ok()?;
        }
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 reject\n",
        )
        .ok()?;
        let owned = Command::new("chown")
            .args(["-R", "postgres:postgres", data.to_str()?])
            .status()
            .ok()?
            .success();
        let private = Command::new("chmod")
            .args(["600", data.join("server.key").to_str()?])
            .status()
            .ok()?
            .success();
        (owned && private).then(|| "-c ssl=on".to_owned())
    }) else {
        return;
    };
    let url = |mode: &str| {
        format!(
            "postgres://postgres@localhost:{}/postgres?sslmode={mode}&hostaddr=127.0.0.1",
            server.port
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let status = |mode: &str, ca: Option<&Path>| {
        let mut c = super::support::command(dir.path());
        c.args(["status", "--json", "--store", &url(mode), "--workspace"])
            .arg(dir.path());
        if let Some(ca) = ca {
            c.env("TROUPE_STORE_CA", ca);
        }
        super::support::ran(c.output().unwrap())
    };
    let trusted = status("require", Some(&certs.path().join("ca.pem")));
    let log = || std::fs::read_to_string(server.dir.path().join("log")).unwrap_or_default();
    assert!(
        trusted.stdout.contains("store_empty"),
        "{trusted:#?}\nserver log:\n{}",
        log()
    );
    let untrusted = status("require", None);
    assert!(
        untrusted.stdout.contains("store_unavailable"),
        "{untrusted:#?}"
    );
    assert!(
        untrusted.stdout.to_lowercase().contains("certificate"),
        "{untrusted:#?}"
    );
    let plain = status("disable", None);
    assert!(plain.stdout.contains("store_unavailable"), "{plain:#?}");
    assert!(
        plain.stdout.contains("no encryption") || plain.stdout.contains("pg_hba"),
        "{plain:#?}"
    );
}
