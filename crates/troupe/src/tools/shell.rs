//! `shell`: run a command with `sh -c` in the workspace.
//!
//! The command runs as a real child process in its own process group, with stdin closed and
//! stdout and stderr combined (in arrival order). The whole group is killed (SIGKILL) when the
//! timeout passes, when the call is cancelled, when the tool's future is dropped, and when the
//! command exits — so nothing it started outlives the call. (Long-running jobs will get
//! `run_in_background`; until then that option is refused.)
//!
//! The command does not see troupe's own credentials ([`SCRUBBED_ENV`]).
//!
//! Output is capped at [`OUTPUT_CAP`] bytes: the first and last half are kept and the result
//! says how much was left out. The result always states the exit code.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::confine::Workspace;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

/// The default time a command may run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// At most this many bytes of output reach the model: the first and last `OUTPUT_CAP / 2`.
pub const OUTPUT_CAP: usize = 30_000;
/// Variables removed from the command's environment: the model must not be able to print the
/// credentials troupe itself runs with.
pub const SCRUBBED_ENV: &[&str] = &["OPENAI_API_KEY"];
/// After the command exits (or is killed), how long to wait for its pipes to drain. Only a
/// process that escaped the group (`setsid`) can hold them open that long.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct ShellTool {
    timeout: Duration,
    output_cap: usize,
}

impl Default for ShellTool {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            output_cap: OUTPUT_CAP,
        }
    }
}

impl ShellTool {
    pub fn new() -> Self {
        Self::default()
    }

    /// Another timeout (tests use short ones).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Another output cap (tests use small ones).
    pub fn with_output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = bytes.max(2);
        self
    }
}

#[async_trait]
impl ToolHandler for ShellTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "shell".to_owned(),
            description: format!(
                "Run a shell command with `sh -c` in the workspace root and return its combined \
                 stdout and stderr followed by its exit code. Stdin is closed, so interactive \
                 commands fail. The command is killed (with every process it started) after \
                 {} seconds; processes it leaves running are killed when it exits. Output \
                 over {OUTPUT_CAP} bytes is cut to its first and last {} bytes, and the \
                 result says so. `run_in_background` is not available yet.",
                self.timeout.as_secs(),
                OUTPUT_CAP / 2
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1,
                                "description": "The command line, run by `sh -c`."},
                    "run_in_background": {"type": "boolean",
                                          "description": "Not available yet; leave it out."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            effect: Effect::Execute,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let command = str_arg(&args, "command")?;
        if args.get("run_in_background").and_then(Value::as_bool) == Some(true) {
            return Err(ToolError::InvalidArguments(
                "background jobs are not available yet".to_owned(),
            ));
        }
        let workspace = Workspace::new(&ctx.workspace)?;
        self.run(command, workspace.root().to_owned(), ctx).await
    }
}

/// Kills the process group when dropped, unless disarmed: the group dies with the call however
/// the call ends (timeout, cancellation, the future dropped, an early return).
struct GroupGuard {
    pgid: libc::pid_t,
}

impl GroupGuard {
    fn kill(&self) {
        // SAFETY: killpg only sends a signal; a stale group id at worst yields ESRCH.
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

impl ShellTool {
    async fn run(
        &self,
        command: &str,
        cwd: PathBuf,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        let mut command_line = Command::new("sh");
        for name in SCRUBBED_ENV {
            command_line.env_remove(name);
        }
        let mut child = command_line
            .arg("-c")
            .arg(command)
            .current_dir(&cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ToolError::Failed(format!("cannot start sh: {e}")))?;
        let pid = child
            .id()
            .and_then(|id| libc::pid_t::try_from(id).ok())
            .ok_or_else(|| ToolError::Failed("the shell exited before it started".to_owned()))?;
        // process_group(0) makes the child's pid its group id.
        let guard = GroupGuard { pgid: pid };
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let mut output = CappedOutput::new(self.output_cap);
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut out_buf = vec![0u8; 8192];
        let mut err_buf = vec![0u8; 8192];

        let ending = loop {
            tokio::select! {
                n = read_some(&mut stdout, &mut out_buf) => match n {
                    Some(n) => output.push(&out_buf[..n]),
                    None => stdout = None,
                },
                n = read_some(&mut stderr, &mut err_buf) => match n {
                    Some(n) => output.push(&err_buf[..n]),
                    None => stderr = None,
                },
                status = child.wait() => match status {
                    Ok(status) => break Ending::Exited(status),
                    Err(e) => return Err(ToolError::Failed(format!("cannot wait for sh: {e}"))),
                },
                () = tokio::time::sleep_until(deadline) => break Ending::TimedOut,
                () = ctx.cancel.cancelled() => break Ending::Cancelled,
            }
        };
        // Whatever happened, nothing the command started may outlive the call.
        guard.kill();
        if !matches!(ending, Ending::Exited(_)) {
            let _ = child.wait().await;
        }
        // Drain what is left in the pipes; the group is dead, so they close promptly.
        let drain = async {
            while stdout.is_some() || stderr.is_some() {
                tokio::select! {
                    n = read_some(&mut stdout, &mut out_buf) => match n {
                        Some(n) => output.push(&out_buf[..n]),
                        None => stdout = None,
                    },
                    n = read_some(&mut stderr, &mut err_buf) => match n {
                        Some(n) => output.push(&err_buf[..n]),
                        None => stderr = None,
                    },
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_GRACE, drain).await;
        let text = output.render();
        match ending {
            Ending::Exited(status) => Ok(format!("{text}[{}]", describe_status(status))),
            Ending::TimedOut => Err(ToolError::Timeout(format!(
                "the command ran longer than {} and was killed with every process it started. \
                 Output so far:\n{text}",
                describe_duration(self.timeout)
            ))),
            Ending::Cancelled => Err(ToolError::Cancelled(format!(
                "the command was cancelled and killed with every process it started. Output so far:\n{text}"
            ))),
        }
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

fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(signal)) => format!("exit code: none (killed by signal {signal})"),
        (None, None) => "exit code: unknown".to_owned(),
    }
}

fn describe_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Keeps the first and last `cap / 2` bytes of a stream and counts the rest.
struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    total: usize,
}

impl CappedOutput {
    fn new(cap: usize) -> Self {
        let half = cap / 2;
        Self {
            head: Vec::with_capacity(half.min(64 * 1024)),
            tail: VecDeque::new(),
            half,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        if self.head.len() < self.half {
            let take = (self.half - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        while self.tail.len() > self.half {
            self.tail.pop_front();
        }
    }

    /// The output, ending with a newline when not empty, with a truncation notice if cut.
    fn render(&self) -> String {
        let kept = self.head.len() + self.tail.len();
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            let omitted = self.total - kept;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[output truncated: {omitted} bytes omitted; the cap is {} bytes, showing the first {} and the last {} of {} bytes]\n",
                self.half * 2,
                self.head.len(),
                self.tail.len(),
                self.total
            ));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = a.to_vec();
        tail.extend_from_slice(b);
        text.push_str(&String::from_utf8_lossy(&tail));
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_output_keeps_head_and_tail() {
        let mut out = CappedOutput::new(10);
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
        let mut out = CappedOutput::new(10);
        out.push(b"abc\n");
        assert_eq!(out.render(), "abc\n");
    }
}
