//! MCP servers: a real third-party server (`mcp-server-time` from PyPI, in a venv made once
//! under `target/test-deps`), and the project's own fixture server for the failure cases, all
//! called through the one dispatch path.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::json;
use troupe::clock::ManualClock;
use troupe::mcp::{McpServers, ServerState};
use troupe::permissions::{AutoApproval, MemoryAuditSink, PermissionPolicy};
use troupe::sandbox::{Host, Mode, Network, Policy, Sandbox};
use troupe::secrets::Redactor;
use troupe::settings::{McpServerSpec, McpTransport, Source};
use troupe::tools::mcp::{mcp_tools, register_all};
use troupe::tools::{Dispatcher, ToolHandler, ToolRegistry};

use super::tools::lead_ctx;

fn fixture_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_fixture.py")
}

fn fixture_spec(name: &str, mode: &str, env: Vec<(String, String)>) -> McpServerSpec {
    McpServerSpec {
        name: name.into(),
        transport: McpTransport::Stdio {
            command: "python3".into(),
            args: vec![fixture_script().display().to_string(), mode.into()],
            env,
        },
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(20),
        sandbox: None,
        network: None,
        source: Source::Default,
    }
}

/// A dispatcher over every MCP tool of `servers`, approving everything, redacting `secret`.
fn dispatcher(servers: &McpServers, secret: &str) -> (Dispatcher, Arc<MemoryAuditSink>) {
    let mut registry = ToolRegistry::new();
    // `odd` (a schema that is not an object's) is left out, not an error.
    register_all(&mut registry, mcp_tools(servers));
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), audit.clone());
    (
        Dispatcher::new(Arc::new(registry), policy, Default::default())
            .with_redactor(Redactor::new([secret])),
        audit,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixture_server_s_tools_run_through_the_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "fixture-secret-0123456789abcdef";
    std::env::set_var("TROUPE_TEST_FIXTURE_SECRET", secret);
    let servers = McpServers::start(
        &[fixture_spec(
            "fix-ture",
            "ok",
            vec![(
                "FIXTURE_SECRET".into(),
                "${TROUPE_TEST_FIXTURE_SECRET}".into(),
            )],
        )],
        dir.path(),
        &Sandbox::off(dir.path()),
    )
    .await;
    let status = &servers.statuses()[0];
    assert_eq!(status.state, ServerState::Up, "{status:?}");
    // The token given by `${…}` reference is one the run redacts.
    assert_eq!(servers.secrets(), [secret]);
    let (dispatcher, audit) = dispatcher(&servers, &servers.secrets()[0]);
    let names = dispatcher.registry().names();
    assert_eq!(
        names,
        [
            "mcp__fix_ture__echo",
            "mcp__fix_ture__secret",
            "mcp__fix_ture__fail",
            "mcp__fix_ture__crash",
            "mcp__fix_ture__malformed",
            "mcp__fix_ture__big",
            "mcp__fix_ture__hang"
        ]
    );
    let ctx = lead_ctx(dir.path());
    let echo = dispatcher
        .dispatch(&ctx, "mcp__fix_ture__echo", r#"{"text": "hi"}"#)
        .await;
    assert_eq!((echo.content.as_str(), echo.is_error), ("echo: hi", false));
    // The echo schema is in troupe's subset: checked in full before the server sees it.
    let bad = dispatcher
        .dispatch(&ctx, "mcp__fix_ture__echo", r#"{"text": 1}"#)
        .await;
    assert!(
        bad.content.starts_with("Error [invalid_arguments]"),
        "{}",
        bad.content
    );
    // The default policy asks for MCP tools (auto-approved here), and the audit has them.
    let decision = echo.decision.unwrap();
    assert_eq!(
        decision.rules_said,
        troupe::permissions::Decision::Ask,
        "{decision:?}"
    );
    assert!(audit
        .records()
        .iter()
        .any(|r| r.tool == "mcp__fix_ture__echo"));
    // A server's result that holds a secret is redacted by the dispatcher.
    let leak = dispatcher.dispatch(&ctx, "mcp__fix_ture__secret", "").await;
    assert!(!leak.content.contains(secret), "{}", leak.content);
    assert!(leak.content.contains("[redacted]"), "{}", leak.content);
    // isError → a tool error.
    let failed = dispatcher.dispatch(&ctx, "mcp__fix_ture__fail", "{}").await;
    assert!(failed.is_error);
    assert!(
        failed
            .content
            .starts_with("Error [mcp_tool_error]: mcp__fix_ture__fail answered with an error: it failed on purpose"),
        "{}",
        failed.content
    );
    // A big result is capped.
    let big = dispatcher.dispatch(&ctx, "mcp__fix_ture__big", "{}").await;
    assert!(!big.is_error);
    assert!(big.content.len() < 40_000, "{}", big.content.len());
    assert!(big.content.contains("omitted"), "{}", &big.content[..200]);
    // A malformed reply is a clear error, and the server stays up.
    let malformed = dispatcher
        .dispatch(&ctx, "mcp__fix_ture__malformed", "{}")
        .await;
    assert!(malformed.is_error);
    assert!(
        malformed.content.contains("mcp__") || malformed.content.contains("MCP server fix-ture"),
        "{}",
        malformed.content
    );
    eprintln!("malformed: {}", malformed.content);
    // A crash mid-call: a tool error, the server down, its tools withdrawn.
    let crash = dispatcher
        .dispatch(&ctx, "mcp__fix_ture__crash", "{}")
        .await;
    assert!(crash.is_error);
    assert!(
        crash.content.starts_with("Error [mcp_server_down]"),
        "{}",
        crash.content
    );
    assert_eq!(dispatcher.registry().available_definitions().count(), 0);
    let after = dispatcher
        .dispatch(&ctx, "mcp__fix_ture__echo", r#"{"text": "hi"}"#)
        .await;
    assert!(
        after.content.starts_with("Error [mcp_server_down]"),
        "{}",
        after.content
    );
    assert!(matches!(servers.statuses()[0].state, ServerState::Down(_)));
    // The server's last words may still be on their way through the pipe.
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        servers.servers()[0].stderr_ended(),
    )
    .await
    .expect("the crashed server's stderr ends");
    assert!(servers.servers()[0].stderr_tail().contains("crashing now"));
    servers.stop().await;
}

#[tokio::test]
async fn a_server_slower_than_its_startup_timeout_is_reported_and_offers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut slow = fixture_spec("slow", "slow", vec![]);
    slow.startup_timeout = Duration::from_millis(500);
    let missing_env = fixture_spec(
        "noenv",
        "ok",
        vec![(
            "GITHUB_TOKEN".into(),
            "${TROUPE_TEST_SURELY_UNSET_VAR}".into(),
        )],
    );
    let servers =
        McpServers::start(&[slow, missing_env], dir.path(), &Sandbox::off(dir.path())).await;
    let statuses = servers.statuses();
    match &statuses[0].state {
        ServerState::Failed(reason) => {
            assert!(reason.contains("startup timeout"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    match &statuses[1].state {
        ServerState::Failed(reason) => {
            assert!(reason.contains("TROUPE_TEST_SURELY_UNSET_VAR"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(mcp_tools(&servers).is_empty());
    servers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_beyond_the_call_timeout_is_a_timeout_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = fixture_spec("fix", "ok", vec![]);
    spec.call_timeout = Duration::from_millis(300);
    let servers = McpServers::start(&[spec], dir.path(), &Sandbox::off(dir.path())).await;
    let (dispatcher, _) = dispatcher(&servers, "unused-secret-value-123");
    let hang = dispatcher
        .dispatch(&lead_ctx(dir.path()), "mcp__fix__hang", "{}")
        .await;
    assert!(
        hang.content
            .starts_with("Error [mcp_timeout]: hang of MCP server fix did not answer within 300ms"),
        "{}",
        hang.content
    );
    servers.stop().await;
}

#[tokio::test]
async fn a_server_that_cannot_run_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = fixture_spec("gone", "ok", vec![]);
    spec.transport = McpTransport::Stdio {
        command: "/nonexistent/mcp-server".into(),
        args: vec![],
        env: vec![],
    };
    let servers = McpServers::start(&[spec], dir.path(), &Sandbox::off(dir.path())).await;
    match &servers.statuses()[0].state {
        ServerState::Failed(reason) => assert!(
            reason.ends_with("could not start: program \"/nonexistent/mcp-server\" not found"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

/// The venv with `mcp-server-time`, made once (under a file lock) in `target/test-deps`;
/// `None`, with one notice, when it cannot be made (no network).
fn time_server() -> Option<PathBuf> {
    static MADE: OnceLock<Option<PathBuf>> = OnceLock::new();
    MADE.get_or_init(|| {
        let deps = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .unwrap()
            .join("test-deps");
        std::fs::create_dir_all(&deps).unwrap();
        let lock = std::fs::File::create(deps.join("mcp-venv.lock")).unwrap();
        // SAFETY: flock on a descriptor we own.
        assert_eq!(
            unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) },
            0
        );
        let venv = deps.join("mcp-venv");
        let program = venv.join("bin/mcp-server-time");
        // A venv is not relocatable: one made at another path (a moved target folder) or left
        // half-made is made again.
        let ready = std::fs::read_to_string(venv.join(".ready"))
            .is_ok_and(|made_at| made_at == venv.display().to_string())
            && std::process::Command::new(venv.join("bin/python"))
                .args(["-c", "import mcp_server_time"])
                .status()
                .is_ok_and(|s| s.success());
        if !ready {
            let _ = std::fs::remove_dir_all(&venv);
            let made = std::process::Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .is_ok_and(|s| s.success())
                && std::process::Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "mcp-server-time"])
                    .status()
                    .is_ok_and(|s| s.success());
            if !made || !program.exists() {
                eprintln!(
                    "NOTICE: mcp-server-time could not be installed (no network?); its tests \
                     are skipped"
                );
                return None;
            }
            std::fs::write(venv.join(".ready"), venv.display().to_string()).unwrap();
        }
        Some(program)
    })
    .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_time_server_lists_and_answers() {
    let Some(program) = time_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spec = McpServerSpec {
        name: "time".into(),
        transport: McpTransport::Stdio {
            command: program.display().to_string(),
            args: vec![],
            env: vec![],
        },
        startup_timeout: Duration::from_secs(60),
        call_timeout: Duration::from_secs(30),
        sandbox: None,
        network: None,
        source: Source::Default,
    };
    let servers = McpServers::start(&[spec], dir.path(), &Sandbox::off(dir.path())).await;
    assert_eq!(
        servers.statuses()[0].state,
        ServerState::Up,
        "{}",
        servers.servers()[0].stderr_tail()
    );
    let tools = mcp_tools(&servers);
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    assert!(
        names.contains(&"mcp__time__get_current_time".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"mcp__time__convert_time".to_owned()),
        "{names:?}"
    );
    let (dispatcher, _) = dispatcher(&servers, "unused-secret-value-123");
    let outcome = dispatcher
        .dispatch(
            &lead_ctx(dir.path()),
            "mcp__time__get_current_time",
            &json!({"timezone": "UTC"}).to_string(),
        )
        .await;
    assert!(!outcome.is_error, "{}", outcome.content);
    assert!(
        outcome.content.contains("\"timezone\": \"UTC\"") || outcome.content.contains("UTC"),
        "{}",
        outcome.content
    );
    assert!(outcome.content.contains("datetime"), "{}", outcome.content);
    // A missing required argument is caught before the server (its schema is checked loosely).
    let missing = dispatcher
        .dispatch(&lead_ctx(dir.path()), "mcp__time__get_current_time", "{}")
        .await;
    assert!(
        missing.content.starts_with("Error [invalid_arguments]"),
        "{}",
        missing.content
    );
    servers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_s_tools_are_called_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("python3")
        .arg(fixture_script())
        .arg("http")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port: u16 = line.trim().strip_prefix("port ").unwrap().parse().unwrap();
    let spec = McpServerSpec {
        name: "web".into(),
        transport: McpTransport::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
        },
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(20),
        sandbox: None,
        network: None,
        source: Source::Default,
    };
    let servers = McpServers::start(&[spec], dir.path(), &Sandbox::off(dir.path())).await;
    let status = &servers.statuses()[0];
    assert_eq!(
        (status.transport, &status.state),
        ("http", &ServerState::Up),
        "{status:?}"
    );
    let (dispatcher, _) = dispatcher(&servers, "unused-secret-value-123");
    let echo = dispatcher
        .dispatch(
            &lead_ctx(dir.path()),
            "mcp__web__echo",
            r#"{"text": "over http"}"#,
        )
        .await;
    assert_eq!(
        (echo.content.as_str(), echo.is_error),
        ("echo: over http", false)
    );
    servers.stop().await;
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Whether process `pid` still exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for the process.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lead_is_offered_mcp_tools_after_its_own_until_the_server_dies_and_close_kills_the_group(
) {
    use super::team::support::{call, drive, say, Fixture, Models, TestModel};
    use troupe::bootstrap::{build_team, LEAD_TOOLS};

    let fx = Fixture::new();
    let servers = Arc::new(
        McpServers::start(
            &[fixture_spec("fix", "family", vec![])],
            &fx.workspace,
            &Sandbox::off(&fx.workspace),
        )
        .await,
    );
    let pids = std::fs::read_to_string(fx.workspace.join("fixture.pids")).unwrap();
    let pids: Vec<i32> = pids.split(' ').map(|p| p.parse().unwrap()).collect();
    let (server_pid, grandchild) = (pids[0], pids[1]);
    assert!(alive(server_pid) && alive(grandchild));
    let lead = TestModel::new(&fx.signal, |c| {
        if c.calls_named("mcp__fix__crash").is_empty() {
            call("mcp__fix__crash", json!({}))
        } else {
            say("done")
        }
    });
    let models = Models::new(&fx.signal, &[("lead", &lead)]);
    let mut settings = fx.settings(models);
    settings.mcp = servers.clone();
    let mut team = build_team(settings).await.unwrap();
    drive(&mut team, "use the server").await;
    let offered = |n: usize| -> Vec<String> {
        lead.requests()[n]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    let mut expected: Vec<String> = LEAD_TOOLS.iter().map(|t| (*t).to_owned()).collect();
    assert_eq!(offered(1), expected, "withdrawn once the server died");
    expected.extend(
        [
            "echo",
            "secret",
            "fail",
            "crash",
            "malformed",
            "big",
            "hang",
        ]
        .map(|t| format!("mcp__fix__{t}")),
    );
    assert_eq!(
        offered(0),
        expected,
        "the fixed SPEC order, then the server's tools"
    );
    // The living system prompt names the tools it offers: the withdrawn ones leave it too.
    let system = |n: usize| -> String { lead.wire_messages(n)[0]["content"].to_string() };
    assert!(system(1).contains("mcp__fix__echo"), "{}", system(1));
    assert!(!system(2).contains("mcp__fix__echo"), "{}", system(2));
    let second = lead.wire_messages(2);
    let result = second.last().unwrap()["content"].as_str().unwrap();
    assert!(result.starts_with("Error [mcp_server_down]"), "{result}");
    // The server's own process died; its child is still in the group until close kills it.
    assert!(alive(grandchild));
    team.close().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(grandchild) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !alive(grandchild),
        "closing the team killed the server's process group"
    );
}

/// A stdio server runs under the run's sandbox: it cannot write outside the workspace, and a
/// server that says `sandbox = "off"` can; a confined server that fails says how it was
/// confined and names the settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_servers_run_confined_unless_their_settings_say_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, tmp) = (root.join("ws"), root.join("tmp"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let host = Host {
        home: None,
        temp: tmp,
        mechanism: None,
    };
    let run = Sandbox::new_on(
        &Policy {
            mode: Mode::WorkspaceWrite,
            network: Network::Off,
            deny_read: Vec::new(),
            deny_write: Vec::new(),
        },
        &ws,
        &host,
    )
    .unwrap();
    let outside = root.join("touched-outside");
    let touching = |name: &str, mode: Option<Mode>| McpServerSpec {
        sandbox: mode,
        ..fixture_spec(
            name,
            "touch",
            vec![("FIXTURE_TOUCH".into(), outside.display().to_string())],
        )
    };
    let servers = McpServers::start(&[touching("confined", None)], &ws, &run).await;
    assert_eq!(servers.statuses()[0].state, ServerState::Up);
    assert!(
        !outside.exists(),
        "a confined server wrote outside the workspace"
    );
    servers.stop().await;

    let servers = McpServers::start(&[touching("open", Some(Mode::Off))], &ws, &run).await;
    assert_eq!(servers.statuses()[0].state, ServerState::Up);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "touched");
    servers.stop().await;

    // A program that runs and exits at once: the failure of a confined server, said with the
    // settings that loosen its confinement.
    let missing = McpServerSpec {
        transport: McpTransport::Stdio {
            command: "false".into(),
            args: Vec::new(),
            env: Vec::new(),
        },
        ..fixture_spec("gone", "ok", Vec::new())
    };
    let servers = McpServers::start(&[missing], &ws, &run).await;
    let ServerState::Failed(reason) = &servers.statuses()[0].state else {
        panic!("{:?}", servers.statuses());
    };
    assert!(
        reason.contains("it ran confined: workspace-write")
            && reason.contains("`sandbox` or `network` of [[mcp_servers]] gone"),
        "{reason}"
    );
}
