//! shell: real child processes in their own group, output cap, exit code, timeout and
//! cancellation that kill the whole group.

use std::fs;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::process::OUTPUT_CAP;
use troupe::tools::shell::ShellTool;

use super::{base_dispatcher, call, lead_ctx};

/// Waits (bounded) for a process to exit, via a pidfd: readable once the process has exited,
/// zombie or not, so this does not depend on who reaps it. Returns true if it is gone.
pub fn process_exits_within(pid: i32, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    // SAFETY: plain syscalls on values we own.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
        if fd < 0 {
            // ESRCH: no such process any more (already reaped).
            let err = std::io::Error::last_os_error();
            return err.raw_os_error() == Some(libc::ESRCH);
        }
        let exited = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            match libc::poll(&mut pfd, 1, left.as_millis() as i32) {
                1 => break true,
                // SIGCHLD from the runtime's child handling interrupts poll: wait again.
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                }
                _ => break false,
            }
        };
        libc::close(fd);
        exited
    }
}

pub fn read_pid(path: &std::path::Path) -> i32 {
    fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

#[tokio::test]
async fn output_is_combined_and_the_exit_code_is_stated() {
    let dir = tempfile::tempdir().unwrap();
    let (content, is_error) = call(
        dir.path(),
        "shell",
        json!({"command": "echo out; echo err >&2; pwd; exit 3"}),
    )
    .await;
    assert!(!is_error);
    let real = fs::canonicalize(dir.path()).unwrap();
    assert!(content.contains("out\n"), "{content}");
    assert!(content.contains("err\n"), "{content}");
    assert!(
        content.contains(&format!("{}\n", real.display())),
        "{content}"
    );
    assert!(content.ends_with("[exit code: 3]"), "{content}");

    let (content, _) = call(dir.path(), "shell", json!({"command": "true"})).await;
    assert_eq!(content, "[exit code: 0]");
}

#[tokio::test]
async fn output_over_the_cap_keeps_head_and_tail_and_states_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let (content, _) = call(
        dir.path(),
        "shell",
        json!({"command": "echo FIRST; head -c 100000 /dev/zero | tr '\\0' x; echo; echo LAST"}),
    )
    .await;
    let total = 6 + 100_000 + 1 + 5;
    let omitted = total - OUTPUT_CAP;
    // The first line says what was printed and what was dropped; then the head and the tail.
    let (first_line, rest) = content.split_once('\n').unwrap();
    assert!(
        first_line.starts_with(&format!(
            "[Output truncated: the command printed {total} bytes; no artifact holds them"
        )),
        "{first_line}"
    );
    assert!(first_line.ends_with(&format!(
        "the {omitted} bytes not shown here were dropped.]"
    )));
    assert!(rest.starts_with("FIRST\n"), "{}", &rest[..100]);
    assert!(
        content.ends_with("LAST\n[exit code: 0]"),
        "{}",
        &content[content.len() - 100..]
    );
    assert!(
        content.contains(&format!("\n[… {omitted} bytes not shown …]\n")),
        "notice missing"
    );
    assert!(content.len() < OUTPUT_CAP + 400);
}

#[tokio::test]
async fn background_jobs_are_refused_for_now() {
    let dir = tempfile::tempdir().unwrap();
    let (content, is_error) = call(
        dir.path(),
        "shell",
        json!({"command": "touch ran", "run_in_background": true}),
    )
    .await;
    assert!(is_error);
    assert_eq!(
        content,
        "Error [invalid_arguments]: background jobs are not available yet"
    );
    assert!(!dir.path().join("ran").exists());
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, _) =
        base_dispatcher(ShellTool::new().with_timeout(Duration::from_millis(700)));
    let started = std::time::Instant::now();
    let outcome = dispatcher
        .dispatch(
            &lead_ctx(dir.path()),
            "shell",
            &json!({"command": "echo before; sleep 1000 & echo $! > grandchild.pid; wait"})
                .to_string(),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(outcome.is_error);
    assert!(
        outcome
            .content
            .starts_with("Error [timeout]: the command ran longer than 700 ms"),
        "{}",
        outcome.content
    );
    assert!(outcome.content.contains("before\n"), "{}", outcome.content);
    let pid = read_pid(&dir.path().join("grandchild.pid"));
    assert!(
        process_exits_within(pid, Duration::from_secs(5)),
        "grandchild {pid} survived"
    );
}

#[tokio::test]
async fn processes_left_running_are_killed_when_the_command_exits() {
    let dir = tempfile::tempdir().unwrap();
    let (content, _) = call(
        dir.path(),
        "shell",
        json!({"command": "sleep 1000 >/dev/null 2>&1 & echo $! > left.pid"}),
    )
    .await;
    assert!(content.ends_with("[exit code: 0]"), "{content}");
    let pid = read_pid(&dir.path().join("left.pid"));
    assert!(
        process_exits_within(pid, Duration::from_secs(5)),
        "{pid} survived"
    );
}

#[tokio::test]
async fn cancellation_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("started.fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);

    let (dispatcher, _) = base_dispatcher(ShellTool::new());
    let ctx = lead_ctx(dir.path());
    let cancel = ctx.cancel.clone();
    let command = "sleep 1000 & echo $! > started.fifo; wait";
    let run = tokio::spawn(async move {
        dispatcher
            .dispatch(&ctx, "shell", &json!({"command": command}).to_string())
            .await
    });
    // Opening the FIFO for reading blocks until the command has started its grandchild.
    let pid = tokio::task::spawn_blocking(move || read_pid(&fifo))
        .await
        .unwrap();
    cancel.cancel();
    let outcome = run.await.unwrap();
    assert!(outcome.is_error);
    assert!(
        outcome.content.starts_with("Error [cancelled]:"),
        "{}",
        outcome.content
    );
    assert!(
        process_exits_within(pid, Duration::from_secs(5)),
        "grandchild {pid} survived"
    );
}

const SECRET_CHILD_ENV: &str = "TROUPE_TEST_SHELL_SECRET_CHILD";

/// Child side: runs with OPENAI_API_KEY set (by the parent) and checks the command cannot see it.
#[tokio::test]
async fn shell_secret_child() {
    if std::env::var(SECRET_CHILD_ENV).is_err() {
        return;
    }
    assert_eq!(std::env::var("OPENAI_API_KEY").unwrap(), "sk-test-secret");
    let dir = tempfile::tempdir().unwrap();
    let (content, _) = call(
        dir.path(),
        "shell",
        json!({"command": "echo \"key=${OPENAI_API_KEY:-unset} other=$TROUPE_TEST_SHELL_SECRET_CHILD\""}),
    )
    .await;
    assert_eq!(content, "key=unset other=1\n[exit code: 0]");
}

#[test]
fn the_command_does_not_see_troupes_api_key() {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "tools::shell::shell_secret_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SECRET_CHILD_ENV, "1")
        .env("OPENAI_API_KEY", "sk-test-secret")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}
