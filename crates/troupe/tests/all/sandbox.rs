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
