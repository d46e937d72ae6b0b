//! Commands as real child processes in their own process group: spawning `sh -c`, running it to
//! its end while collecting its combined output, and stopping the whole group.
//!
//! Shared by the `shell` tool (a call that waits for its command) and the background job
//! supervisor (`crate::jobs`), so that both kill the same way and cap output the same way.
//!
//! **Architecture Invariant:** nothing a command started outlives its [`GroupChild`]: the group
//! is killed when the command exits, when it is stopped (timeout, cancellation) and when the
//! value is dropped (the owner's future dropped, an early return) — and, for a process that
//! exits at once without dropping anything (a second Ctrl-C), by [`kill_every_group`].

use std::collections::VecDeque;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::sandbox::Sandbox;
use crate::secrets::Redactor;

/// At most this many bytes of a command's output are kept — by the `shell` tool for the model
/// and by a background job for its record: the first and last `OUTPUT_CAP / 2`.
pub const OUTPUT_CAP: usize = 30_000;

/// Variables removed from the command's environment: the model must not be able to print the
/// credentials troupe itself runs with. (The CLI also takes them out of troupe's own
/// environment at start: `crate::secrets::environment`.)
pub const SCRUBBED_ENV: &[&str] = &crate::secrets::environment::CREDENTIAL_VARS;
/// After the command exits (or is killed), how long to wait for its pipes to drain. Only a
/// process that escaped the group (`setsid`) can hold them open that long.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Signals the process group when asked, and kills it (SIGKILL) when dropped: the group dies
/// with its owner however the owner ends.
/// Sends `signal` to every process of group `pgid`. The one place troupe signals a group.
pub(crate) fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal; a stale group id at worst yields ESRCH.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

struct GroupGuard {
    pgid: libc::pid_t,
}

/// The groups of every live [`GroupChild`] of this process.
static LIVE_GROUPS: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

/// Held shared from a command's `spawn` until its group is in [`LIVE_GROUPS`], and exclusively
/// by [`kill_every_group`]: a command whose shell already runs (it may have printed, written a
/// file) but whose group is not registered yet is waited for, not missed. `true` once
/// [`kill_every_group`] ran: no command starts after it.
static SPAWNING: std::sync::RwLock<bool> = std::sync::RwLock::new(false);

/// Kills the group of every live command, hook and job of this process: for an exit that drops
/// nothing (`std::process::exit` on a second Ctrl-C), so that none outlives troupe. A command
/// being started is waited for and killed too, and none can start afterwards (its spawn
/// fails): call this only on the way out.
pub fn kill_every_group() {
    let mut closed = SPAWNING
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *closed = true;
    for pgid in crate::sync::lock(&LIVE_GROUPS).iter() {
        signal_group(*pgid, libc::SIGKILL);
    }
}

impl GroupGuard {
    fn new(pgid: libc::pid_t) -> Self {
        crate::sync::lock(&LIVE_GROUPS).push(pgid);
        Self { pgid }
    }

    fn signal(&self, signal: libc::c_int) {
        signal_group(self.pgid, signal);
    }

    fn kill(&self) {
        self.signal(libc::SIGKILL);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        let mut live = crate::sync::lock(&LIVE_GROUPS);
        if let Some(at) = live.iter().position(|p| *p == self.pgid) {
            live.swap_remove(at);
        }
    }
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(ExitStatus),
    /// The deadline passed; the group was stopped.
    TimedOut,
    /// The cancellation token fired; the group was stopped.
    Cancelled,
}

/// How a command that must stop early (timeout, cancellation) is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGKILL to the group at once.
    Kill,
    /// SIGTERM to the group, then SIGKILL once the shell has exited or the grace has passed,
    /// whichever comes first (a job may want to clean up; a tool call must not linger).
    TermThenKill(Duration),
}

/// A running `sh -c <command>`, leader of its own process group, stdin closed, stdout and
/// stderr piped.
pub struct GroupChild {
    child: Child,
    // Declared after `child`, so dropped after it; either way the group gets its SIGKILL.
    guard: GroupGuard,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
}

impl GroupChild {
    /// Starts `sh -c command` in `cwd`, without [`SCRUBBED_ENV`]. Must be called inside a Tokio
    /// runtime.
    pub fn spawn(command: &str, cwd: &Path) -> std::io::Result<Self> {
        Self::spawn_inner(command, cwd, None, None)
    }

    /// Like [`GroupChild::spawn`], confined by `sandbox` (which may be `off`).
    pub fn spawn_confined(command: &str, cwd: &Path, sandbox: &Sandbox) -> std::io::Result<Self> {
        Self::spawn_inner(command, cwd, None, Some(sandbox))
    }

    /// Like [`GroupChild::spawn`], with `input` written to the command's stdin (then closed).
    /// A command that does not read it is not waited for: the write ends with the group.
    pub fn spawn_with_input(
        command: &str,
        cwd: &Path,
        input: Vec<u8>,
        sandbox: Option<&Sandbox>,
    ) -> std::io::Result<Self> {
        Self::spawn_inner(command, cwd, Some(input), sandbox)
    }

    fn spawn_inner(
        command: &str,
        cwd: &Path,
        input: Option<Vec<u8>>,
        sandbox: Option<&Sandbox>,
    ) -> std::io::Result<Self> {
        let mut command_line = match sandbox {
            Some(sandbox) => sandbox
                .shell(command)
                .map_err(|e| std::io::Error::other(e.to_string()))?,
            None => {
                let mut plain = Command::new("sh");
                plain.arg("-c").arg(command);
                plain
            }
        };
        for name in SCRUBBED_ENV {
            command_line.env_remove(name);
        }
        // Held until the group is registered (see `SPAWNING`).
        let spawning = SPAWNING
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *spawning {
            return Err(std::io::Error::other("troupe is exiting"));
        }
        let mut child = command_line
            .current_dir(cwd)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child
            .id()
            .and_then(|id| libc::pid_t::try_from(id).ok())
            .ok_or_else(|| std::io::Error::other("the shell exited before it started"))?;
        // process_group(0) makes the child's pid its group id.
        let guard = GroupGuard::new(pid);
        drop(spawning);
        if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                // A command that exits without reading closes the pipe: not an error here.
                let _ = stdin.write_all(&input).await;
            });
        }
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        Ok(Self {
            child,
            guard,
            stdout,
            stderr,
        })
    }

    /// The process group's id (the shell's pid: it leads its own group).
    pub fn pgid(&self) -> i32 {
        self.guard.pgid
    }

    /// Runs the command to its end, pushing its combined output (in arrival order) into
    /// `output`. Stops the group as `stop` says when `deadline` passes or `cancel` fires. Whatever
    /// happened, the whole group is dead when this returns (or fails).
    pub async fn run<O: OutputSink>(
        mut self,
        output: &mut O,
        deadline: Option<Instant>,
        cancel: &CancellationToken,
        stop: Stop,
    ) -> std::io::Result<Ending> {
        let mut pipes = Pipes::new(self.stdout.take(), self.stderr.take());
        let ending = loop {
            tokio::select! {
                () = pipes.pump(output) => {}
                status = self.child.wait() => break Ending::Exited(status?),
                () = sleep_until(deadline) => break Ending::TimedOut,
                () = cancel.cancelled() => break Ending::Cancelled,
            }
        };
        if let (false, Stop::TermThenKill(grace)) = (matches!(ending, Ending::Exited(_)), stop) {
            self.guard.signal(libc::SIGTERM);
            let until = Instant::now() + grace;
            // Keep reading while the command shuts down, so a full pipe cannot block it.
            loop {
                tokio::select! {
                    () = pipes.pump(output) => {}
                    _ = self.child.wait() => break,
                    () = tokio::time::sleep_until(until) => break,
                }
            }
        }
        // Whatever happened, nothing the command started may outlive it.
        self.guard.kill();
        if !matches!(ending, Ending::Exited(_)) {
            let _ = self.child.wait().await;
        }
        // Drain what is left in the pipes; the group is dead, so they close promptly.
        let drain = async {
            while pipes.is_open() {
                pipes.pump(output).await;
            }
        };
        let _ = tokio::time::timeout(DRAIN_GRACE, drain).await;
        Ok(ending)
    }
}

/// Which of the command's output pipes a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipe {
    Stdout,
    Stderr,
}

/// Where [`GroupChild::run`] puts the command's output.
pub trait OutputSink {
    fn push_from(&mut self, pipe: Pipe, bytes: &[u8]);
}

/// One output for both pipes, in arrival order (the `shell` tool, a job).
impl OutputSink for CappedOutput {
    fn push_from(&mut self, _pipe: Pipe, bytes: &[u8]) {
        self.push(bytes);
    }
}

/// stdout and stderr kept apart (a hook: stdout is its answer, stderr its reason).
pub struct SplitOutput {
    pub stdout: CappedOutput,
    pub stderr: CappedOutput,
}

impl OutputSink for SplitOutput {
    fn push_from(&mut self, pipe: Pipe, bytes: &[u8]) {
        match pipe {
            Pipe::Stdout => self.stdout.push(bytes),
            Pipe::Stderr => self.stderr.push(bytes),
        }
    }
}

/// The command's stdout and stderr, read in arrival order into one output.
struct Pipes {
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
}

impl Pipes {
    fn new(stdout: Option<ChildStdout>, stderr: Option<ChildStderr>) -> Self {
        Self {
            stdout,
            stderr,
            out_buf: vec![0u8; 8192],
            err_buf: vec![0u8; 8192],
        }
    }

    fn is_open(&self) -> bool {
        self.stdout.is_some() || self.stderr.is_some()
    }

    /// Reads one chunk from whichever pipe has one and pushes it, or notes a pipe's end. Never
    /// resolves once both are closed. Cancel-safe: a dropped read loses no data.
    async fn pump<O: OutputSink>(&mut self, output: &mut O) {
        tokio::select! {
            n = read_some(&mut self.stdout, &mut self.out_buf) => match n {
                Some(n) => output.push_from(Pipe::Stdout, &self.out_buf[..n]),
                None => self.stdout = None,
            },
            n = read_some(&mut self.stderr, &mut self.err_buf) => match n {
                Some(n) => output.push_from(Pipe::Stderr, &self.err_buf[..n]),
                None => self.stderr = None,
            },
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Reads one chunk; `None` at end of stream or error. A closed stream never resolves, so a
/// `select!` over both pipes keeps waiting on the other one.
async fn read_some<R: AsyncRead + Unpin>(reader: &mut Option<R>, buf: &mut [u8]) -> Option<usize> {
    match reader {
        Some(r) => match r.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        },
        None => std::future::pending().await,
    }
}

/// `exit code: N`, or why there is none.
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(signal)) => format!("exit code: none (killed by signal {signal})"),
        (None, None) => "exit code: unknown".to_owned(),
    }
}

/// `2 s` for whole seconds, `700 ms` otherwise.
pub fn describe_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// The start and the end of a cut output, as [`CappedOutput::excerpt`] shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    pub head: String,
    pub tail: String,
    /// Output bytes between the two (the secrets a cut moved around included).
    pub omitted: usize,
}

/// Keeps at most the first `head_cap` and the last `tail_cap` bytes of a stream, and counts the
/// rest.
///
/// With a [`Redactor`] ([`CappedOutput::redacting`]) the rendered output holds no secret: each
/// kept part is redacted, and the cuts are moved so that none splits a secret (a piece of a
/// key at the edge of a part would not match it any more). For that, each part keeps the
/// redactor's margin beyond its cap, so a secret that crosses a cut is seen whole.
pub struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: usize,
    redactor: Redactor,
}

impl CappedOutput {
    /// The first and the last `cap / 2` bytes (a tool result: the start says what the command
    /// did, the end how it ended).
    pub fn head_and_tail(cap: usize) -> Self {
        Self::with_caps(cap / 2, cap / 2)
    }

    /// The last `cap` bytes only (a background job: what matters is how it ended).
    pub fn tail_only(cap: usize) -> Self {
        Self::with_caps(0, cap)
    }

    fn with_caps(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            head: Vec::with_capacity(head_cap.min(64 * 1024)),
            tail: VecDeque::new(),
            head_cap,
            tail_cap,
            total: 0,
            redactor: Redactor::default(),
        }
    }

    /// Renders without `redactor`'s secrets, and never cuts through one.
    pub fn redacting(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Bytes kept at the start: the cap and, past it, the margin that shows a secret crossing it.
    fn head_keep(&self) -> usize {
        match self.head_cap {
            0 => 0,
            cap => cap + self.redactor.margin(),
        }
    }

    fn tail_keep(&self) -> usize {
        self.tail_cap + self.redactor.margin()
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let head_keep = self.head_keep();
        if self.head.len() < head_keep {
            let take = (head_keep - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let tail_keep = self.tail_keep();
        if self.tail.len() > tail_keep {
            let excess = self.tail.len() - tail_keep;
            self.tail.drain(..excess);
        }
    }

    /// The output, ending with a newline when not empty, with a truncation notice if cut.
    pub fn render(&self) -> String {
        let mut tail: Vec<u8> = Vec::with_capacity(self.tail.len());
        let (a, b) = self.tail.as_slices();
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        let mut text = if self.total <= self.head_cap + self.tail_cap {
            // Nothing is left out (each part keeps at least its cap): the whole output.
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            self.shown(&all)
        } else {
            let (head, tail) = self.kept_parts(&tail, self.head_cap, self.tail_cap);
            let omitted = self.total - head.len() - tail.len();
            let mut text = self.shown(&head);
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[output truncated: {omitted} bytes omitted; the cap is {} bytes, showing the first {} and the last {} of {} bytes]\n",
                self.head_cap + self.tail_cap,
                head.len(),
                tail.len(),
                self.total
            ));
            text.push_str(&self.shown(&tail));
            text
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }

    /// Bytes pushed so far.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Whether more was pushed than is kept: [`render`](Self::render) would leave bytes out.
    pub fn is_cut(&self) -> bool {
        self.total > self.head_cap + self.tail_cap
    }

    /// At most the first `head` and the last `tail` bytes of a cut output (each no more than
    /// its cap), as text without secrets: cut short rather than through a secret.
    pub fn excerpt(&self, head: usize, tail: usize) -> Excerpt {
        let kept_tail: Vec<u8> = self.tail.iter().copied().collect();
        let (head, tail) =
            self.kept_parts(&kept_tail, head.min(self.head_cap), tail.min(self.tail_cap));
        Excerpt {
            omitted: self.total.saturating_sub(head.len() + tail.len()),
            head: self.shown(&head),
            tail: self.shown(&tail),
        }
    }

    /// The head (up to `head_cap`) and the tail (up to `tail_cap`) to show when the middle is
    /// left out, cut at those caps or just short of them, so that no secret is cut.
    fn kept_parts(&self, tail: &[u8], head_cap: usize, tail_cap: usize) -> (Vec<u8>, Vec<u8>) {
        if self.head.len() + tail.len() == self.total {
            // The kept bytes are the whole output (the margins met): cut it in one piece.
            let mut all = self.head.clone();
            all.extend_from_slice(tail);
            let head_end = self.redactor.cut_end(&all, head_cap);
            let tail_start = self.redactor.cut_start(&all, self.total - tail_cap);
            return (all[..head_end].to_vec(), all[tail_start..].to_vec());
        }
        let head_end = self.redactor.cut_end(&self.head, head_cap);
        let tail_start = self
            .redactor
            .cut_start(tail, tail.len().saturating_sub(tail_cap));
        (self.head[..head_end].to_vec(), tail[tail_start..].to_vec())
    }

    fn shown(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes);
        self.redactor.redact(&text).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_output_keeps_head_and_tail() {
        let mut out = CappedOutput::head_and_tail(10);
        out.push(b"0123");
        out.push(b"456789abcdefgh");
        let text = out.render();
        assert!(
            text.starts_with("01234\n[output truncated: 8 bytes omitted"),
            "{text}"
        );
        assert!(text.ends_with("defgh\n"), "{text}");
    }

    #[test]
    fn capped_output_untouched_under_the_cap() {
        let mut out = CappedOutput::head_and_tail(10);
        out.push(b"abc\n");
        assert_eq!(out.render(), "abc\n");
        let mut out = CappedOutput::tail_only(10);
        out.push(b"abc\n");
        assert_eq!(out.render(), "abc\n");
    }

    #[test]
    fn a_secret_across_a_cut_is_left_out_whole() {
        let key = "KEY-0123456789";
        let redactor = Redactor::new([key]);
        // Head and tail margins meet (25 bytes, caps 10 + 10): the cuts move off the key.
        let mut out = CappedOutput::head_and_tail(20).redacting(redactor.clone());
        out.push(format!("abcdefgh{key}xyz").as_bytes());
        assert_eq!(
            out.render(),
            "abcdefgh\n[output truncated: 14 bytes omitted; the cap is 20 bytes, showing the first 8 and the last 3 of 25 bytes]\nxyz\n"
        );
        // A long stream: the key at the edge of the head and at the start of the tail.
        let mut out = CappedOutput::head_and_tail(20).redacting(redactor.clone());
        for piece in ["abcdefgh", key, &"-".repeat(100), key, "xyz"] {
            out.push(piece.as_bytes());
        }
        let text = out.render();
        assert!(text.starts_with("abcdefgh\n[output truncated"), "{text}");
        assert!(text.ends_with("bytes]\nxyz\n"), "{text}");
        // A whole key inside the kept part is redacted.
        let mut out = CappedOutput::tail_only(40).redacting(redactor);
        out.push(format!("{}{key}.", "-".repeat(100)).as_bytes());
        assert!(out.render().ends_with("-[redacted].\n"));
    }

    #[test]
    fn tail_only_keeps_the_last_bytes() {
        let mut out = CappedOutput::tail_only(5);
        out.push(b"0123");
        out.push(b"456789");
        assert_eq!(
            out.render(),
            "[output truncated: 5 bytes omitted; the cap is 5 bytes, showing the first 0 and the last 5 of 10 bytes]\n56789\n"
        );
    }
}
