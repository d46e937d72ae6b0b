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
//! Output is capped at [`OUTPUT_CAP`] bytes. Longer output is streamed, as it is read, to an
//! artifact of the calling agent (up to [`ARTIFACT_LIMIT_BYTES`]), and the result's first line
//! says how many bytes the command printed, how many the artifact holds and how many were
//! dropped, before the start and the end of the output ([`super::shell_output`]). The result
//! always states the exit code.
//!
//! With a [`Sandbox`] ([`ShellTool::with_sandbox`]) every command, foreground or background, runs
//! confined; a failed command whose output shows the sandbox refusing gets `sandbox: …` notes
//! the model can act on. With [`ShellTool::with_unconfined_reruns`] such a foreground command
//! is offered to the approval provider to run once more unconfined — a person's decision,
//! audited with `"sandbox": "off"`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::confine::Workspace;
use super::shell_output::{ShellOutput, ARTIFACT_LIMIT_BYTES};
use super::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};
use crate::error::ErrorCode;
use crate::jobs::JobSupervisor;
use crate::permissions::{PermissionPolicy, PermissionRequest, Scope};
use crate::process::{describe_duration, describe_status, Ending, GroupChild, Stop, OUTPUT_CAP};
use crate::sandbox::{Mode, Sandbox};

pub use crate::process::SCRUBBED_ENV;

/// The default time a command may run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone)]
pub struct ShellTool {
    timeout: Duration,
    output_cap: usize,
    /// The most output bytes an artifact keeps of one command.
    artifact_limit: u64,
    /// Where `run_in_background` commands go; `None` refuses the option.
    jobs: Option<Arc<JobSupervisor>>,
    /// Confines every command; `None` runs them as they are (the library's default).
    sandbox: Option<Arc<Sandbox>>,
    /// Asks to rerun a command the sandbox refused, unconfined (a person answers).
    reruns: Option<PermissionPolicy>,
}

impl std::fmt::Debug for ShellTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellTool")
            .field("timeout", &self.timeout)
            .field("output_cap", &self.output_cap)
            .field("sandbox", &self.sandbox.as_ref().map(|s| s.describe()))
            .field("unconfined_reruns", &self.reruns.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for ShellTool {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            output_cap: OUTPUT_CAP,
            artifact_limit: ARTIFACT_LIMIT_BYTES,
            jobs: None,
            sandbox: None,
            reruns: None,
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

    /// Another limit on the output kept in an artifact (tests use small ones).
    pub fn with_artifact_limit(mut self, bytes: u64) -> Self {
        self.artifact_limit = bytes;
        self
    }

    /// Accepts `run_in_background: true`, submitting such commands to `jobs`.
    pub fn with_jobs(mut self, jobs: Arc<JobSupervisor>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// Runs every command confined by `sandbox`.
    pub fn with_sandbox(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Offers a foreground command the sandbox refused to `policy`'s approval provider, to run
    /// once more unconfined. Only for a provider a person answers: `auto` would approve every
    /// escape.
    pub fn with_unconfined_reruns(mut self, policy: PermissionPolicy) -> Self {
        self.reruns = Some(policy);
        self
    }

    fn sandbox_description(&self) -> String {
        let Some(sandbox) = self.sandbox.as_ref().filter(|s| s.mode() != Mode::Off) else {
            return String::new();
        };
        let writes = match sandbox.mode() {
            Mode::ReadOnly => "nowhere but the temp folder ($TMPDIR)",
            _ => {
                "only inside the workspace (not .git, troupe.toml, .env or .troupe/) and the \
                 temp folder ($TMPDIR)"
            }
        };
        format!(
            " Commands run in a sandbox ({}): they may write {writes}, cannot read ~/.ssh,              ~/.aws, ~/.gnupg, ~/.config/gcloud or .env, and the network is {}. A refusal              shows as `sandbox: …` in the result.",
            sandbox.mode(),
            sandbox.network().as_str()
        )
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
                 over {OUTPUT_CAP} bytes is kept (up to {} bytes) in a file under \
                 .troupe/artifacts/ that read_file can open; the result then starts with a \
                 line naming it and saying how many bytes were printed, kept and dropped, and \
                 shows the start and the end of the output.{background}{}",
                self.timeout.as_secs(),
                self.artifact_limit,
                self.sandbox_description()
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

    fn sandbox(&self) -> Option<Mode> {
        self.sandbox.as_ref().map(|s| s.mode())
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let command = str_arg(&args, "command")?;
        let background = args.get("run_in_background").and_then(Value::as_bool) == Some(true);
        if !background {
            let workspace = Workspace::new(&ctx.workspace)?;
            let cwd = workspace.root().to_owned();
            let sandbox = self.sandbox.as_deref();
            let absent = sandbox.and_then(Sandbox::absent_protected);
            let (ok, mut text) = self.run(command, &cwd, ctx, sandbox).await?;
            if let Some(absent) = absent {
                let notes = crate::sync::offload("shell", move || absent.undo_created())
                    .await
                    .map_err(|e| ToolError::Failed(e.to_string()))?;
                for note in notes {
                    text.push('\n');
                    text.push_str(&note);
                }
            }
            let notes = match sandbox {
                Some(sandbox) if !ok => sandbox.explain(&text, &cwd),
                _ => Vec::new(),
            };
            if notes.is_empty() {
                return Ok(text);
            }
            if let Some(policy) = &self.reruns {
                let request = PermissionRequest {
                    agent: &ctx.agent,
                    tool: "shell",
                    effect: Effect::Execute,
                    scope: Scope::World,
                    arguments: &args,
                    sandbox: self.sandbox(),
                    preview: None,
                    protected: None,
                };
                let decision = policy
                    .approve_unconfined_rerun(&request, &notes.join("; "))
                    .await
                    .map_err(|e| ToolError::AuditFailed(e.to_string()))?;
                if decision.allowed {
                    let (_, rerun) = self.run(command, &cwd, ctx, None).await?;
                    return Ok(format!(
                        "{text}\n{}\nA person approved running it again outside the sandbox \
                         (the first run's effects inside the workspace stay). The rerun:\n{rerun}",
                        notes.join("\n")
                    ));
                }
                return Ok(format!(
                    "{text}\n{}\nRunning it outside the sandbox was not approved: {}",
                    notes.join("\n"),
                    decision.reason
                ));
            }
            return Ok(format!(
                "{text}\n{}\nIf this command must do that, ask the user to rerun it outside the \
                 sandbox or to allow it in troupe.toml's [sandbox]; otherwise change course.",
                notes.join("\n")
            ));
        }
        let Some(jobs) = &self.jobs else {
            return Err(ToolError::InvalidArguments(
                "background jobs are not available yet".to_owned(),
            ));
        };
        let workspace = Workspace::new(&ctx.workspace)?;
        // The job's record is written before it starts.
        let id = jobs
            .submit_confined(
                ctx.agent.clone(),
                command,
                workspace.root(),
                self.sandbox.as_deref(),
            )
            .await
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
    /// Runs `command` to its end: whether it exited 0, and the result text.
    async fn run(
        &self,
        command: &str,
        cwd: &Path,
        ctx: &ToolContext,
        sandbox: Option<&Sandbox>,
    ) -> Result<(bool, String), ToolError> {
        let spawned = match sandbox {
            Some(sandbox) => GroupChild::spawn_confined(command, cwd, sandbox),
            None => GroupChild::spawn(command, cwd),
        };
        let group = spawned.map_err(|e| ToolError::Failed(format!("cannot start sh: {e}")))?;
        // The dispatcher redacts the result; the output must also be cut around any secret, and
        // the artifact, which the dispatcher never sees, is redacted as it is written.
        let mut output = ShellOutput::new(
            self.output_cap,
            &ctx.redactor,
            ctx.artifacts.clone(),
            self.artifact_limit,
        );
        let deadline = tokio::time::Instant::now() + self.timeout;
        let ending = group
            .run(&mut output, Some(deadline), &ctx.cancel, Stop::Kill)
            .await
            .map_err(|e| ToolError::Failed(format!("cannot wait for sh: {e}")))?;
        let text = output.render().await;
        match ending {
            Ending::Exited(status) => Ok((
                status.success(),
                format!("{text}[{}]", describe_status(status)),
            )),
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
