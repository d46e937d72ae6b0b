//! The sandbox's escapes refused, through real child processes under each mechanism this
//! machine has (Landlock always where the kernel has it; bubblewrap when `bwrap` is installed —
//! CI installs it). Each attempt also runs with the sandbox off, where it must succeed, so a
//! test cannot pass because the command was broken.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use troupe::process::{CappedOutput, Ending, GroupChild, Stop};
use troupe::sandbox::{Host, Mode, Network, Policy, Sandbox};

struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, home, tmp) = (root.join("ws"), root.join("home"), root.join("tmp"));
    for d in [
        ws.join(".troupe/protocol"),
        home.join(".ssh"),
        tmp.clone(),
        root.join("outside"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_test"), "SSH-SECRET\n").unwrap();
    std::fs::write(ws.join(".env"), "ENV-SECRET\n").unwrap();
    std::fs::write(ws.join(".troupe/protocol/state.json"), "{}\n").unwrap();
    std::fs::write(ws.join("notes.md"), "hello\n").unwrap();
    Place {
        _dir: dir,
        root,
        ws,
        home,
        tmp,
    }
}

fn mechanisms() -> Vec<&'static str> {
    let mut found = vec!["landlock"];
    if std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("bwrap").is_file())
    {
        found.push("bubblewrap");
    } else {
        eprintln!("notice: bwrap is not installed; the bubblewrap fallback is not tested here");
    }
    found
}

fn sandbox(p: &Place, mode: Mode, network: Network, mechanism: &str) -> Sandbox {
    let host = Host {
        home: Some(p.home.clone()),
        temp: p.tmp.clone(),
        mechanism: Some(mechanism.to_owned()),
    };
    let policy = Policy {
        mode,
        network,
        deny_read: vec!["secrets".to_owned()],
        deny_write: vec!["ci".to_owned()],
    };
    Sandbox::new_on(&policy, &p.ws, &host).unwrap()
}

/// Runs `command` in the workspace; whether it exited 0, and its output.
async fn run(sandbox: &Sandbox, cwd: &Path, command: &str) -> (bool, String) {
    let group = GroupChild::spawn_confined(command, cwd, sandbox).unwrap();
    let mut output = CappedOutput::head_and_tail(100_000);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let ending = group
        .run(
            &mut output,
            Some(deadline),
            &CancellationToken::new(),
            Stop::Kill,
        )
        .await
        .unwrap();
    let ok = matches!(ending, Ending::Exited(s) if s.success());
    (ok, output.render())
}

/// `command` fails confined (default mode) and succeeds unconfined, with `check` telling
/// whether its effect happened.
async fn refused_then_allowed(command: &str, effect: impl Fn(&Place) -> bool) {
    for mechanism in mechanisms() {
        let p = place();
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism);
        let (ok, out) = run(&confined, &p.ws, command).await;
        assert!(
            !ok && !effect(&p),
            "{mechanism}: `{command}` escaped the sandbox: {out}"
        );
        let p = place();
        let open = sandbox(&p, Mode::Off, Network::On, mechanism);
        let (ok, out) = run(&open, &p.ws, command).await;
        assert!(
            ok && effect(&p),
            "{mechanism}: `{command}` failed unconfined: {out}"
        );
    }
}

#[tokio::test]
async fn writing_above_the_workspace_is_refused() {
    refused_then_allowed("echo escaped > ../x", |p| p.root.join("x").exists()).await;
}

#[tokio::test]
async fn writing_an_absolute_path_outside_is_refused() {
    refused_then_allowed("touch \"$(cd .. && pwd)/outside/abs\"", |p| {
        p.root.join("outside/abs").exists()
    })
    .await;
}

#[tokio::test]
async fn writing_through_a_symlink_that_points_out_is_refused() {
    refused_then_allowed("ln -s ../outside link && echo x > link/through", |p| {
        p.root.join("outside/through").exists()
    })
    .await;
}

#[tokio::test]
async fn writing_into_the_users_ssh_folder_is_refused() {
    refused_then_allowed("echo key > ../home/.ssh/x", |p| {
        p.home.join(".ssh/x").exists()
    })
    .await;
}

#[tokio::test]
async fn a_forked_child_is_confined_like_its_parent() {
    refused_then_allowed(
        "sh -c 'echo x > ../forked' & wait $!; (echo y > ../sub) ; test -e ../forked",
        |p| p.root.join("forked").exists(),
    )
    .await;
}

#[tokio::test]
async fn modifying_troupe_state_is_refused_but_reading_it_works() {
    refused_then_allowed(
        "cat .troupe/protocol/state.json && echo '{\"forged\":1}' > .troupe/protocol/state.json",
        |p| {
            std::fs::read_to_string(p.ws.join(".troupe/protocol/state.json"))
                .unwrap()
                .contains("forged")
        },
    )
    .await;
    refused_then_allowed(
        "rm .troupe/protocol/state.json || mv .troupe/protocol/state.json .troupe/x",
        |p| !p.ws.join(".troupe/protocol/state.json").exists(),
    )
    .await;
    refused_then_allowed("echo m > .troupe/protocol/new.json", |p| {
        p.ws.join(".troupe/protocol/new.json").exists()
    })
    .await;
}

/// A secret must not reach the output confined, and must unconfined.
async fn secret_unreadable(command: &str, secret: &str) {
    for mechanism in mechanisms() {
        let p = place();
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism);
        let (_, out) = run(&confined, &p.ws, command).await;
        assert!(
            !out.contains(secret),
            "{mechanism}: `{command}` read it: {out}"
        );
        let open = sandbox(&p, Mode::Off, Network::On, mechanism);
        let (ok, out) = run(&open, &p.ws, command).await;
        assert!(ok && out.contains(secret), "{mechanism}: {out}");
    }
}

#[tokio::test]
async fn the_users_keys_cannot_be_read() {
    secret_unreadable("cat ../home/.ssh/id_test", "SSH-SECRET").await;
    secret_unreadable("cat ../home/.ssh/*", "SSH-SECRET").await;
}

#[tokio::test]
async fn the_workspace_env_file_cannot_be_read() {
    secret_unreadable("cat .env", "ENV-SECRET").await;
    secret_unreadable("cp .env copy && cat copy", "ENV-SECRET").await;
}

#[tokio::test]
async fn a_settings_path_is_protected_too() {
    let p = place();
    std::fs::create_dir_all(p.ws.join("secrets")).unwrap();
    std::fs::write(p.ws.join("secrets/token"), "EXTRA-SECRET").unwrap();
    for mechanism in mechanisms() {
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism);
        let (_, out) = run(&confined, &p.ws, "cat secrets/token").await;
        assert!(!out.contains("EXTRA-SECRET"), "{mechanism}: {out}");
    }
}

fn python_connect(port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5); \
         print('connected')\""
    )
}

#[tokio::test]
async fn the_network_is_off_by_default_and_on_when_allowed() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for mechanism in mechanisms() {
        let p = place();
        let (ok, out) = run(
            &sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism),
            &p.ws,
            &python_connect(port),
        )
        .await;
        assert!(!ok && !out.contains("connected"), "{mechanism}: {out}");
        // The private loopback does not reach the host's listener either.
        let (ok, out) = run(
            &sandbox(&p, Mode::WorkspaceWrite, Network::Loopback, mechanism),
            &p.ws,
            &python_connect(port),
        )
        .await;
        assert!(!ok, "{mechanism}: {out}");
        let (ok, out) = run(
            &sandbox(&p, Mode::WorkspaceWrite, Network::On, mechanism),
            &p.ws,
            &python_connect(port),
        )
        .await;
        assert!(ok && out.contains("connected"), "{mechanism}: {out}");
    }
}

#[tokio::test]
async fn udp_is_off_too() {
    let p = place();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let port = udp.local_addr().unwrap().port();
    let command = format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendto(b'leak', ('127.0.0.1', {port}))\""
    );
    let (ok, out) = run(
        &sandbox(&p, Mode::WorkspaceWrite, Network::Off, "landlock"),
        &p.ws,
        &command,
    )
    .await;
    assert!(!ok, "{out}");
    let mut buf = [0u8; 16];
    assert!(udp.recv(&mut buf).is_err(), "a datagram left the sandbox");
}

#[tokio::test]
async fn a_private_loopback_serves_the_commands_own_servers() {
    let p = place();
    let command = "python3 -c \"import socket; l=socket.socket(); l.bind(('127.0.0.1', 0)); \
                   l.listen(); c=socket.create_connection(l.getsockname(), 5); print('own loopback')\"";
    let (ok, out) = run(
        &sandbox(&p, Mode::WorkspaceWrite, Network::Loopback, "landlock"),
        &p.ws,
        command,
    )
    .await;
    assert!(ok && out.contains("own loopback"), "{out}");
}

#[tokio::test]
async fn build_like_work_inside_the_workspace_and_temp_still_works() {
    for mechanism in mechanisms() {
        let p = place();
        let command = "mkdir -p target/debug/deps && echo bin > target/debug/app && \
                       t=$(mktemp) && echo tmp > \"$t\" && cat \"$t\" target/debug/app && \
                       echo new > fresh.txt && cat fresh.txt notes.md > /dev/null && \
                       rm fresh.txt && ls / > /dev/null && echo done >&2";
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism);
        let (ok, out) = run(&confined, &p.ws, command).await;
        assert!(ok && out.contains("done"), "{mechanism}: {out}");
        assert!(p.ws.join("target/debug/app").exists());
    }
}

#[tokio::test]
async fn read_only_mode_reads_the_workspace_and_writes_nothing_there() {
    for mechanism in mechanisms() {
        let p = place();
        let confined = sandbox(&p, Mode::ReadOnly, Network::Off, mechanism);
        let (ok, out) = run(&confined, &p.ws, "cat notes.md").await;
        assert!(ok && out.contains("hello"), "{mechanism}: {out}");
        let (ok, out) = run(&confined, &p.ws, "echo x > made.txt").await;
        assert!(!ok && !p.ws.join("made.txt").exists(), "{mechanism}: {out}");
        let (_, out) = run(&confined, &p.ws, "cat .env").await;
        assert!(!out.contains("ENV-SECRET"), "{mechanism}: {out}");
    }
}

#[tokio::test]
async fn a_denial_is_explained_for_the_model() {
    let p = place();
    let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, "landlock");
    let (_, out) = run(&confined, &p.ws, "echo x > ../x").await;
    let notes = confined.explain(&out, &p.ws);
    assert_eq!(
        notes,
        [format!(
            "sandbox: write outside the workspace denied: {}",
            p.root.join("x").display()
        )],
        "{out}"
    );
    let (_, out) = run(&confined, &p.ws, "echo x > .troupe/x").await;
    let notes = confined.explain(&out, &p.ws);
    assert!(
        notes[0].starts_with("sandbox: .troupe/ is read-only"),
        "{notes:?} {out}"
    );
    let (_, out) = run(&confined, &p.ws, "cat ../home/.ssh/id_test").await;
    let notes = confined.explain(&out, &p.ws);
    assert!(
        notes[0].starts_with("sandbox: reading a protected path denied"),
        "{notes:?} {out}"
    );
    let (_, out) = run(&confined, &p.ws, &python_connect(9)).await;
    let notes = confined.explain(&out, &p.ws);
    assert!(
        notes[0].starts_with("sandbox: network access denied"),
        "{notes:?} {out}"
    );
    // A real permission problem inside the workspace is not the sandbox's.
    assert!(confined
        .explain("cat: notes.md: Permission denied", &p.ws)
        .is_empty());
}

#[tokio::test]
async fn timeouts_and_group_kills_work_inside_the_sandbox() {
    for mechanism in mechanisms() {
        let p = place();
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism);
        let group = GroupChild::spawn_confined("sleep 60 & sleep 60", &p.ws, &confined).unwrap();
        let mut output = CappedOutput::head_and_tail(1000);
        let started = std::time::Instant::now();
        let ending = group
            .run(
                &mut output,
                Some(tokio::time::Instant::now() + Duration::from_millis(300)),
                &CancellationToken::new(),
                Stop::Kill,
            )
            .await
            .unwrap();
        assert_eq!(ending, Ending::TimedOut, "{mechanism}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{mechanism}: not killed"
        );
    }
}

#[test]
fn no_mechanism_refuses_and_names_sandbox_off() {
    let p = place();
    let host = Host {
        home: Some(p.home.clone()),
        temp: p.tmp.clone(),
        mechanism: Some("none-such".to_owned()),
    };
    let err = Sandbox::new_on(&Policy::default(), &p.ws, &host).unwrap_err();
    assert_eq!(troupe::error::ErrorCode::code(&err), "sandbox_unavailable");
    assert!(err.to_string().contains("--sandbox off"), "{err}");
    // `off` needs no mechanism.
    let off = Policy {
        mode: Mode::Off,
        ..Policy::default()
    };
    assert_eq!(
        Sandbox::new_on(&off, &p.ws, &host).unwrap().mode(),
        Mode::Off
    );
}

mod reruns {
    //! A command the sandbox refused may run once more unconfined — only when the approval
    //! provider (a person) says so, and audited as `"sandbox": "off"`.

    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use serde_json::json;
    use troupe::clock::SystemClock;
    use troupe::permissions::{
        ApprovalAnswer, ApprovalProvider, ApprovalRequest, DenyApproval, EffectDefaults,
        MemoryAuditSink, PermissionPolicy,
    };
    use troupe::tools::shell::ShellTool;
    use troupe::tools::{ToolContext, ToolHandler};
    use troupe::wire::AgentName;

    use super::*;

    /// Approves, and remembers what it was asked.
    #[derive(Default)]
    struct Person {
        asked: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl ApprovalProvider for Person {
        fn name(&self) -> &'static str {
            "person"
        }

        async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
            self.asked.lock().unwrap().push(request.reason.to_owned());
            ApprovalAnswer::approve("the person said yes")
        }
    }

    fn tool(p: &Place, approval: Arc<dyn ApprovalProvider>) -> (ShellTool, Arc<MemoryAuditSink>) {
        let audit = Arc::new(MemoryAuditSink::new(Arc::new(SystemClock)));
        let policy = PermissionPolicy::new(vec![Arc::new(EffectDefaults)], approval, audit.clone());
        let confined = sandbox(p, Mode::WorkspaceWrite, Network::Off, "landlock");
        let shell = ShellTool::new()
            .with_sandbox(Arc::new(confined))
            .with_unconfined_reruns(policy);
        (shell, audit)
    }

    #[tokio::test]
    async fn an_approved_rerun_runs_unconfined_and_is_audited_as_off() {
        let p = place();
        let person = Arc::new(Person::default());
        let (shell, audit) = tool(&p, person.clone());
        let ctx = ToolContext::new(AgentName::lead(), &p.ws);
        let result = shell
            .call(&ctx, json!({"command": "echo x > ../rerun"}))
            .await
            .unwrap();
        assert!(p.root.join("rerun").exists(), "{result}");
        assert!(
            result.contains("sandbox: write outside the workspace denied"),
            "{result}"
        );
        assert!(
            result.contains("A person approved running it again"),
            "{result}"
        );
        let asked = person.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert!(asked[0].contains("outside the sandbox"), "{asked:?}");
        let records = audit.records();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0].rule, "sandbox-rerun+approval:person");
        assert_eq!(records[0].decision, "allow");
        assert_eq!(records[0].sandbox, Some("off"));
    }

    #[tokio::test]
    async fn a_refused_rerun_leaves_the_refusal_and_is_audited() {
        let p = place();
        let (shell, audit) = tool(&p, Arc::new(DenyApproval));
        let ctx = ToolContext::new(AgentName::lead(), &p.ws);
        let result = shell
            .call(&ctx, json!({"command": "echo x > ../rerun"}))
            .await
            .unwrap();
        assert!(!p.root.join("rerun").exists(), "{result}");
        assert!(result.contains("was not approved"), "{result}");
        let records = audit.records();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0].decision, "deny");
        assert_eq!(records[0].sandbox, Some("off"));
    }

    #[tokio::test]
    async fn a_failure_that_is_not_the_sandboxs_asks_nobody() {
        let p = place();
        let person = Arc::new(Person::default());
        let (shell, audit) = tool(&p, person.clone());
        let ctx = ToolContext::new(AgentName::lead(), &p.ws);
        let result = shell
            .call(&ctx, json!({"command": "cat missing-file"}))
            .await
            .unwrap();
        assert!(!result.contains("sandbox:"), "{result}");
        assert!(person.asked.lock().unwrap().is_empty());
        assert!(audit.records().is_empty());
    }

    #[tokio::test]
    async fn without_reruns_the_model_is_told_how_to_proceed() {
        let p = place();
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, "landlock");
        let shell = ShellTool::new().with_sandbox(Arc::new(confined));
        let ctx = ToolContext::new(AgentName::lead(), &p.ws);
        let result = shell
            .call(&ctx, json!({"command": "echo x > ../x"}))
            .await
            .unwrap();
        assert!(
            result.contains("sandbox: write outside the workspace denied"),
            "{result}"
        );
        assert!(result.contains("ask the user"), "{result}");
        assert_eq!(shell.sandbox(), Some(Mode::WorkspaceWrite));
    }
}

mod per_agent_and_hooks {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;
    use troupe::bootstrap::SandboxOptions;
    use troupe::settings::{HookEvent, HookSpec, Source};
    use troupe::team::definitions::parse_definition;

    use super::*;

    fn definition(sandbox: &str) -> troupe::team::definitions::AgentDefinition {
        parse_definition(
            &format!("---\nname: checker\ndescription: checks\nsandbox: {sandbox}\n---\nCheck."),
            "checker",
            &["shell", "read_file"],
        )
        .unwrap()
    }

    fn options(p: &Place, mode: Mode) -> SandboxOptions {
        let confined = sandbox(p, mode, Network::Off, "landlock");
        SandboxOptions {
            sandbox: Arc::new(confined),
            policy: Policy {
                mode,
                ..Policy::default()
            },
            confine_hooks: false,
            unconfined_reruns: false,
        }
    }

    #[test]
    fn a_definition_names_its_sandbox_and_a_bad_one_is_refused() {
        assert_eq!(definition("read-only").sandbox, Some(Mode::ReadOnly));
        let err = parse_definition(
            "---\nname: checker\ndescription: d\nsandbox: loose\n---\n",
            "checker",
            &["shell"],
        )
        .unwrap_err();
        assert!(err.contains("unknown sandbox mode"), "{err}");
    }

    #[tokio::test]
    async fn a_definition_can_tighten_the_runs_sandbox_but_never_loosen_it() {
        let p = place();
        let run = options(&p, Mode::WorkspaceWrite);
        let tightened = run.for_definition(Some(&definition("read-only"))).unwrap();
        assert_eq!(tightened.mode(), Mode::ReadOnly);
        let (ok, _) = run_in(&tightened, &p.ws, "echo x > made.txt").await;
        assert!(!ok && !p.ws.join("made.txt").exists());
        // `off` in a workspace's file does not lift the user's sandbox.
        let kept = run.for_definition(Some(&definition("off"))).unwrap();
        assert_eq!(kept.mode(), Mode::WorkspaceWrite);
        let (ok, _) = run_in(&kept, &p.ws, "echo x > ../escaped").await;
        assert!(!ok && !p.root.join("escaped").exists());
        assert_eq!(
            run.for_definition(None).unwrap().mode(),
            Mode::WorkspaceWrite
        );
    }

    async fn run_in(sandbox: &Sandbox, cwd: &Path, command: &str) -> (bool, String) {
        run(sandbox, cwd, command).await
    }

    fn hook(command: &str) -> HookSpec {
        HookSpec {
            event: HookEvent::PreToolUse,
            matcher: None,
            command: command.to_owned(),
            timeout: Duration::from_secs(10),
            source: Source::Default,
            index: 0,
        }
    }

    #[tokio::test]
    async fn hooks_run_unconfined_unless_the_settings_confine_them() {
        let p = place();
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, "landlock");
        let spec = hook("echo x > ../hooked; exit 0");
        troupe::hooks::run_hook(&spec, &p.ws, &json!({}), Some(&confined)).await;
        assert!(!p.root.join("hooked").exists(), "a confined hook escaped");
        troupe::hooks::run_hook(&spec, &p.ws, &json!({}), None).await;
        assert!(
            p.root.join("hooked").exists(),
            "an unconfined hook did not run"
        );
    }
}

mod what_decides_later_runs {
    //! A confined command must not be able to change what runs unconfined later: troupe's
    //! settings (permissions, hooks, the sandbox itself) and git's hooks and config.

    use super::*;

    #[tokio::test]
    async fn settings_and_git_hooks_are_read_only_to_commands() {
        for mechanism in mechanisms() {
            let p = place();
            std::fs::write(p.ws.join("troupe.toml"), "[sandbox]\n").unwrap();
            std::fs::create_dir_all(p.ws.join(".git/hooks")).unwrap();
            std::fs::write(p.ws.join(".git/config"), "[core]\n").unwrap();
            std::fs::write(p.ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
            let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism);
            for command in [
                "echo 'mode = \"off\"' >> troupe.toml",
                "echo 'evil' > .git/hooks/pre-commit",
                "printf '[core]\\nfsmonitor = evil\\n' > .git/config",
                "rm troupe.toml",
                "mv troupe.toml moved.toml",
                // `.git` is protected whole: nothing in it written, the folder itself neither
                // renamed nor replaced.
                "echo x > .git/ORIG_HEAD",
                "mv .git .git-old",
                "rm -rf .git",
            ] {
                let (ok, out) = run(&confined, &p.ws, command).await;
                assert!(!ok, "{mechanism}: `{command}` succeeded: {out}");
            }
            assert_eq!(
                std::fs::read_to_string(p.ws.join("troupe.toml")).unwrap(),
                "[sandbox]\n"
            );
            assert!(!p.ws.join(".git/hooks/pre-commit").exists());
            assert_eq!(
                std::fs::read_to_string(p.ws.join(".git/config")).unwrap(),
                "[core]\n"
            );
            assert!(p.ws.join(".git/HEAD").exists());
            assert!(!p.ws.join(".git/ORIG_HEAD").exists());
            // They stay readable.
            let (ok, out) = run(&confined, &p.ws, "cat troupe.toml .git/config").await;
            assert!(ok, "{mechanism}: {out}");
            let (_, out) = run(&confined, &p.ws, "echo x > .git/hooks/post-commit").await;
            let notes = confined.explain(&out, &p.ws);
            if mechanism == "landlock" {
                assert!(
                    notes[0].starts_with("sandbox: read-only to commands"),
                    "{notes:?} {out}"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_protected_file_cannot_be_hard_linked_or_reached_through_proc() {
        let p = place();
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, "landlock");
        let key = p.home.join(".ssh/id_test");
        let (_, out) = run(
            &confined,
            &p.ws,
            &format!("ln {} stolen; cat stolen", key.display()),
        )
        .await;
        assert!(!out.contains("SSH-SECRET"), "{out}");
        assert!(!p.ws.join("stolen").exists(), "{out}");
        // troupe's own view of the file system, through /proc/<troupe>/root, is out of reach.
        let (ok, out) = run(
            &confined,
            &p.ws,
            &format!(
                "cat /proc/$PPID/root{}; echo x > /proc/$PPID/root{}/via_proc",
                key.display(),
                p.root.display()
            ),
        )
        .await;
        assert!(!ok && !out.contains("SSH-SECRET"), "{out}");
        assert!(!p.root.join("via_proc").exists(), "{out}");
    }
}

#[tokio::test]
async fn a_masked_path_is_never_changed_and_a_refused_write_is_explained() {
    let p = place();
    std::fs::create_dir_all(p.ws.join("secrets")).unwrap();
    std::fs::write(p.ws.join("secrets/token"), "EXTRA-SECRET").unwrap();
    let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, "landlock");
    // `.env` is masked by /dev/null: a write vanishes, the file is untouched.
    run(&confined, &p.ws, "echo TOKEN=x > .env").await;
    assert_eq!(
        std::fs::read_to_string(p.ws.join(".env")).unwrap(),
        "ENV-SECRET\n"
    );
    // A masked folder is a read-only empty tmpfs: a write there is refused and explained.
    let (ok, out) = run(&confined, &p.ws, "echo x > secrets/token2").await;
    assert!(!ok && !p.ws.join("secrets/token2").exists(), "{out}");
    let notes = confined.explain(&out, &p.ws);
    assert!(
        notes[0].starts_with("sandbox: a protected path cannot be changed"),
        "{notes:?} {out}"
    );
}

/// A workspace inside the host's temp folder (as `troupe demo` makes them), with a neighbour's
/// project beside it.
fn place_in_temp() -> Place {
    let p = place();
    let ws = p.tmp.join("ws");
    std::fs::rename(&p.ws, &ws).unwrap();
    std::fs::create_dir_all(p.tmp.join("neighbour")).unwrap();
    std::fs::write(ws.join("troupe.toml"), "[permissions]\n").unwrap();
    Place { ws, ..p }
}

#[tokio::test]
async fn a_workspace_inside_the_temp_folder_keeps_its_protected_paths_in_every_mode() {
    for mechanism in mechanisms() {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            let p = place_in_temp();
            let confined = sandbox(&p, mode, Network::Off, mechanism);
            let what = format!("{mechanism} {mode}");
            for (command, path) in [
                ("echo x > .troupe/planted", p.ws.join(".troupe/planted")),
                ("echo x >> troupe.toml", p.ws.join("troupe.toml")),
                (
                    "echo x > ../neighbour/planted",
                    p.tmp.join("neighbour/planted"),
                ),
                ("echo x > ../planted", p.tmp.join("planted")),
            ] {
                let (ok, out) = run(&confined, &p.ws, command).await;
                assert!(!ok, "{what}: `{command}` was allowed: {out}");
                let changed = std::fs::read_to_string(&path).is_ok_and(|t| t.contains('x'));
                assert!(!changed, "{what}: `{command}` changed {}", path.display());
            }
            let (ok, out) = run(&confined, &p.ws, "echo x > made.txt").await;
            assert_eq!(ok, mode == Mode::WorkspaceWrite, "{what}: {out}");
            // The command's own temp folder works in both.
            let (ok, out) = run(
                &confined,
                &p.ws,
                "t=$(mktemp) && echo tmp > \"$t\" && cat \"$t\"",
            )
            .await;
            assert!(ok && out.contains("tmp"), "{what}: {out}");
        }
    }
}

#[tokio::test]
async fn confined_commands_write_a_private_temp_folder_removed_with_the_sandbox() {
    for mechanism in mechanisms() {
        let p = place();
        let confined = sandbox(&p, Mode::WorkspaceWrite, Network::Off, mechanism);
        let private = confined.private_temp().unwrap().to_path_buf();
        assert!(
            private.starts_with(&p.tmp) && private.is_dir(),
            "{private:?}"
        );
        // `/tmp/x` (here: the host temp folder's path) lands in the private folder, and
        // `TMPDIR` names it; a background job of the same run (a clone) sees the same files.
        let host = p.tmp.display().to_string();
        let (ok, out) = run(
            &confined,
            &p.ws,
            &format!("echo mine > {host}/scratch && test \"$TMPDIR\" = {host} && mktemp"),
        )
        .await;
        assert!(ok, "{mechanism}: {out}");
        assert!(
            !p.tmp.join("scratch").exists(),
            "{mechanism}: the host's temp was written"
        );
        assert_eq!(
            std::fs::read_to_string(private.join("scratch")).unwrap(),
            "mine\n"
        );
        let job = confined.clone();
        let (ok, out) = run(&job, &p.ws, &format!("cat {host}/scratch")).await;
        assert!(ok && out.contains("mine"), "{mechanism}: {out}");
        drop(confined);
        assert!(private.exists(), "a clone still holds it");
        drop(job);
        assert!(
            !private.exists(),
            "{mechanism}: removed with the last holder"
        );
    }
}
