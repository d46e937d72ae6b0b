//! `shell`: run a command with `sh -c` in the workspace.
//!
//! The command runs as a real child process in its own process group, with stdin closed and
//! stdout and stderr combined (in arrival order). The whole group is killed (SIGKILL) when the
//! timeout passes, when the call is cancelled, when the tool's future is dropped, and when the
//! command exits — so nothing it started outlives the call (see [`crate::process`]).
//!
//! With `run_in_background: true` the command is handed to the [`JobSupervisor`] the tool was
//! built with ([`ShellTool::with_jobs`]) and the call returns at once, naming the job; the
//! job's completion reaches the lead as an event. A tool without a supervisor refuses the
//! option. Either way the call is an `execute` call, judged by the permission policy before the
//! handler runs (a gated teammate cannot start a background job).
//!
//! The command does not see troupe's own credentials ([`SCRUBBED_ENV`]), and its output is cut
//! so that no secret of the call's redactor is split by the cap (the dispatcher then redacts
//! the whole result).
//!
//! Output is capped at [`OUTPUT_CAP`] bytes: the first and last half are kept and the result
//! says how much was left out. The result always states the exit code.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};
use crate::error::ErrorCode;
use crate::jobs::JobSupervisor;
use crate::process::{
    describe_duration, describe_status, CappedOutput, Ending, GroupChild, Stop, OUTPUT_CAP,
};

pub use crate::process::SCRUBBED_ENV;

/// The default time a command may run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct ShellTool {
    timeout: Duration,
    output_cap: usize,
    /// Where `run_in_background` commands go; `None` refuses the option.
    jobs: Option<Arc<JobSupervisor>>,
}

impl Default for ShellTool {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            output_cap: OUTPUT_CAP,
            jobs: None,
        }
    }
}

impl ShellTool {
    pub fn new() -> Self {
        Self::default()
    }

    /// Another timeout (tests use short ones). Background jobs follow their supervisor's.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Another output cap (tests use small ones).
    pub fn with_output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = bytes.max(2);
        self
    }

    /// Accepts `run_in_background: true`, submitting such commands to `jobs`.
    pub fn with_jobs(mut self, jobs: Arc<JobSupervisor>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    fn background_description(&self) -> (String, &'static str) {
        match &self.jobs {
            Some(jobs) => (
                format!(
                    " With `run_in_background: true` the command starts as a background job and \
                     the call returns at once with the job id; the job's completion (status, \
                     exit code, the last {} bytes of its output) arrives later as an event, so \
                     do not wait or poll for it. {}",
                    jobs.output_cap(),
                    match jobs.timeout() {
                        Some(t) =>
                            format!("A background job is killed after {}.", describe_duration(t)),
                        None => "A background job has no time limit.".to_owned(),
                    }
                ),
                "Start the command as a background job and return at once; its completion \
                 arrives as an event.",
            ),
            None => (
                " `run_in_background` is not available yet.".to_owned(),
                "Not available yet; leave it out.",
            ),
        }
    }
}

#[async_trait]
impl ToolHandler for ShellTool {
    fn definition(&self) -> ToolDefinition {
        let (background, background_parameter) = self.background_description();
        ToolDefinition {
            name: "shell".to_owned(),
            description: format!(
                "Run a shell command with `sh -c` in the workspace root and return its combined \
                 stdout and stderr followed by its exit code. Stdin is closed, so interactive \
                 commands fail. The command is killed (with every process it started) after \
                 {} seconds; processes it leaves running are killed when it exits. Output \
                 over {OUTPUT_CAP} bytes is cut to its first and last {} bytes, and the \
                 result says so.{background}",
                self.timeout.as_secs(),
                OUTPUT_CAP / 2
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1,
                                "description": "The command line, run by `sh -c`."},
                    "run_in_background": {"type": "boolean",
                                          "description": background_parameter}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            effect: Effect::Execute,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let command = str_arg(&args, "command")?;
        let background = args.get("run_in_background").and_then(Value::as_bool) == Some(true);
        if !background {
            let workspace = Workspace::new(&ctx.workspace)?;
            return self.run(command, workspace.root().to_owned(), ctx).await;
        }
        let Some(jobs) = &self.jobs else {
            return Err(ToolError::InvalidArguments(
                "background jobs are not available yet".to_owned(),
            ));
        };
        let workspace = Workspace::new(&ctx.workspace)?;
        // The job's record is written before it starts: off the async threads.
        let id =
            crate::sync::blocking(|| jobs.submit(ctx.agent.clone(), command, workspace.root()))
                .map_err(|e| ToolError::Coded {
                    code: e.code(),
                    message: format!("the background job was not started: {e}"),
                })?;
        Ok(format!(
            "Started background job {id}. It runs in the workspace root; its completion \
             (status, exit code and the end of its output) will arrive as an event. Do not wait \
             or poll for it."
        ))
    }
}

impl ShellTool {
    async fn run(
        &self,
        command: &str,
        cwd: PathBuf,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        let group = GroupChild::spawn(command, &cwd)
            .map_err(|e| ToolError::Failed(format!("cannot start sh: {e}")))?;
        // The dispatcher redacts the result; the output must also be cut around any secret.
        let mut output =
            CappedOutput::head_and_tail(self.output_cap).redacting(ctx.redactor.clone());
        let deadline = tokio::time::Instant::now() + self.timeout;
        let ending = group
            .run(&mut output, Some(deadline), &ctx.cancel, Stop::Kill)
            .await
            .map_err(|e| ToolError::Failed(format!("cannot wait for sh: {e}")))?;
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
