//! The job supervisor: starts background commands, watches each to its end, and stops them
//! all when the runtime closes.
//!
//! A job is `sh -c <command>` in the given workspace, a real child in its own process group
//! (the same spawning and killing as the `shell` tool, `crate::process`). `submit` writes the
//! `running` record, starts the process and returns at once; a task per job collects the
//! combined output (the last [`OUTPUT_CAP`] bytes), and when the job ends it replaces the record
//! with the final one, then sends the [`JobCompletion`], then stops counting the job as running
//! (in that order: see the module doc of `jobs`). Output longer than the cap is also kept
//! whole (to [`ARTIFACT_LIMIT_BYTES`], redacted) as an artifact of the job's agent,
//! `.troupe/artifacts/<agent>/<id>.txt`, as `shell` keeps a foreground command's; the tail ends
//! with a line naming it.
//! The tail is redacted ([`JobSupervisor::with_redactor`]) before it is recorded or sent, and
//! never starts inside a secret, since both land where the model and `.troupe/` can see them.
//!
//! Stopping a job (its time limit, or `close`) sends SIGTERM to its whole group, then SIGKILL
//! once the shell has exited or [`DEFAULT_TERM_GRACE`] has passed. When the shell exits by
//! itself, whatever it left running in its group is killed too, as with `shell`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, UtcTime};

use serde_json::json;

use crate::process::{OutputSink, Pipe};
use crate::store::artifact_stream::{ArtifactStream, StreamEnd, ARTIFACT_LIMIT_BYTES};
use crate::store::artifacts::{ArtifactCopy, ArtifactStore, FilesOnly};

use super::record::{self, JobEnd, JobId, JobRecord, JobState, JobStatus};
use super::JobError;
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::layout::Layout;
use crate::process::{CappedOutput, Ending, GroupChild, Stop, OUTPUT_CAP};
use crate::sandbox::Sandbox;
use crate::secrets::Redactor;
use crate::store::events::{kinds, EventSink, NoEvents};
use crate::store::team_copy::{CopyTo, JobLine};

/// A job's default time limit. The run is not quiescent while a job runs, so a job that never
/// ends (a dev server) would otherwise hold `troupe run` open for ever; half an hour leaves room
/// for long builds and test suites.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Between SIGTERM and SIGKILL when a job is stopped: time to clean up, not to finish.
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_secs(2);

/// How a job ended, sent once per job on the supervisor's channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobCompletion {
    pub job_id: JobId,
    pub agent: AgentName,
    pub command: String,
    /// `None` when the shell did not exit by itself (a signal, a timeout, a cancel).
    pub exit_code: Option<i32>,
    pub status: JobEnd,
    /// The end of the combined output, with a notice when earlier output was cut.
    pub output_tail: String,
    pub started_at_utc: UtcTime,
    pub finished_at_utc: UtcTime,
}

impl JobCompletion {
    /// The final record of the job.
    pub fn record(&self) -> JobRecord {
        JobRecord {
            id: self.job_id,
            agent: self.agent.clone(),
            command: self.command.clone(),
            started_at_utc: self.started_at_utc,
            state: JobState::Finished {
                end: self.status,
                exit_code: self.exit_code,
                finished_at_utc: self.finished_at_utc,
                output_tail: self.output_tail.clone(),
            },
        }
    }
}

/// Starts and watches background jobs. Share it as `Arc<JobSupervisor>` (every agent's `shell`
/// tool holds one). Dropping it stops the jobs still running, as `close` would, without waiting.
pub struct JobSupervisor {
    shared: Arc<Shared>,
    ids: Arc<dyn IdGenerator>,
    /// Each job's time limit; `None` is no limit.
    timeout: Option<Duration>,
    output_cap: usize,
    term_grace: Duration,
    /// Removed from every job's output tail before it is recorded or sent: the tail lands in
    /// `.troupe/jobs/` and in the lead's history.
    redactor: Redactor,
    /// Cancelled by `close` (and on drop); every job watches a child of it.
    closing: CancellationToken,
    /// Where `job_started` and `job_ended` go (SPEC §10).
    events: Arc<dyn EventSink>,
}

/// A job that did not start: its record, how it ended, why, and the caller's error.
type Unstarted = Box<(JobRecord, JobEnd, String, JobError)>;

/// What the job tasks share with the supervisor.
struct Shared {
    layout: Layout,
    /// A shared team's job table, where every record is copied too.
    copy: CopyTo<JobLine>,
    /// Where a job's whole-output artifact is copied too (a shared team's database).
    artifact_copy: Arc<dyn ArtifactCopy>,
    clock: Arc<dyn Clock>,
    completions: UnboundedSender<JobCompletion>,
    /// Jobs whose completion has not been sent yet.
    running: AtomicUsize,
    tasks: Mutex<Tasks>,
}

#[derive(Default)]
struct Tasks {
    /// Set by `close`: no job starts after it.
    closed: bool,
    /// The watching task of every job not yet ended; `close` awaits them.
    handles: HashMap<JobId, JoinHandle<()>>,
}

impl Shared {
    fn tasks(&self) -> MutexGuard<'_, Tasks> {
        // The lock guards plain bookkeeping that no panic can leave half-done.
        crate::sync::lock(&self.tasks)
    }
}

impl JobSupervisor {
    /// A supervisor whose records go under `layout`'s `.troupe/jobs/` and whose completions go
    /// to `completions`. Jobs get [`DEFAULT_JOB_TIMEOUT`], [`OUTPUT_CAP`] and
    /// [`DEFAULT_TERM_GRACE`] unless told otherwise.
    pub fn new(
        layout: Layout,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        completions: UnboundedSender<JobCompletion>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                layout,
                copy: CopyTo::nowhere(),
                artifact_copy: Arc::new(FilesOnly),
                clock,
                completions,
                running: AtomicUsize::new(0),
                tasks: Mutex::new(Tasks::default()),
            }),
            ids,
            timeout: Some(DEFAULT_JOB_TIMEOUT),
            output_cap: OUTPUT_CAP,
            term_grace: DEFAULT_TERM_GRACE,
            redactor: Redactor::default(),
            closing: CancellationToken::new(),
            events: Arc::new(NoEvents),
        }
    }

    /// Reports every job's start and end to `events`.
    /// Copies every record to a shared team's job table as well. Only before the first job:
    /// later, the supervisor's state is shared with its jobs and this changes nothing.
    pub fn with_copy(mut self, copy: CopyTo<JobLine>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.copy = copy;
        }
        self
    }

    /// Copies every job's whole-output artifact to `copy` as well (a shared team's
    /// database), as the agents' own artifacts are. Only before the first job, like
    /// [`with_copy`](Self::with_copy).
    pub fn with_artifact_copy(mut self, copy: Arc<dyn ArtifactCopy>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.artifact_copy = copy;
        }
        self
    }

    pub fn with_events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.events = events;
        self
    }

    /// Another time limit per job (`None`: none).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Another cap on the output tail kept per job.
    pub fn with_output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = bytes.max(1);
        self
    }

    /// Redacts `redactor`'s secrets from every output tail (and never cuts the tail through one).
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Another wait between SIGTERM and SIGKILL.
    pub fn with_term_grace(mut self, grace: Duration) -> Self {
        self.term_grace = grace;
        self
    }

    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    pub fn output_cap(&self) -> usize {
        self.output_cap
    }

    /// Jobs whose completion has not been sent yet.
    pub fn running_count(&self) -> usize {
        self.shared.running.load(Ordering::SeqCst)
    }

    /// No job running: every submitted job's completion is already on the channel.
    pub fn is_idle(&self) -> bool {
        self.running_count() == 0
    }

    /// Starts `sh -c command` in `workspace` for `agent` and returns its id at once. The
    /// `running` record is written before the process starts, so every job that ran has a record.
    /// Fails after `close` has begun.
    pub async fn submit(
        &self,
        agent: AgentName,
        command: &str,
        workspace: &Path,
    ) -> Result<JobId, JobError> {
        self.submit_confined(agent, command, workspace, None).await
    }

    /// [`Self::submit`], the command confined by `sandbox` when one is given.
    pub async fn submit_confined(
        &self,
        agent: AgentName,
        command: &str,
        workspace: &Path,
        sandbox: Option<&Sandbox>,
    ) -> Result<JobId, JobError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| JobError::NoRuntime)?;
        if self.shared.tasks().closed {
            return Err(JobError::Closed);
        }
        let running = JobRecord {
            id: JobId::from_generator(self.ids.as_ref()),
            agent,
            command: command.to_owned(),
            started_at_utc: self.shared.clock.now(),
            state: JobState::Running,
        };
        record::write_and_copy(&self.shared.layout, &self.shared.copy, &running).await?;
        match self.start_job(running, command, workspace, sandbox, &runtime) {
            Ok(id) => Ok(id),
            Err(unstarted) => {
                let (running, end, why, error) = *unstarted;
                self.shared.finish_unstarted(running, end, &why).await;
                Err(error)
            }
        }
    }

    /// Starts the process of the job `running` under the tasks' lock and its watching task;
    /// what stopped it from starting is returned with its record, to be finished.
    fn start_job(
        &self,
        running: JobRecord,
        command: &str,
        workspace: &Path,
        sandbox: Option<&Sandbox>,
        runtime: &tokio::runtime::Handle,
    ) -> Result<JobId, Unstarted> {
        // Spawning under the lock orders every start before or after `close`: a job that
        // starts is in `handles` when `close` takes them.
        let mut tasks = self.shared.tasks();
        if tasks.closed {
            return Err(Box::new((
                running,
                JobEnd::Cancelled,
                "not started: closing".to_owned(),
                JobError::Closed,
            )));
        }
        let absent = sandbox.and_then(Sandbox::absent_protected);
        let spawned = match sandbox {
            Some(sandbox) => GroupChild::spawn_confined(command, workspace, sandbox),
            None => GroupChild::spawn(command, workspace),
        };
        let group = match spawned {
            Ok(group) => group,
            Err(e) => {
                let why = format!("cannot start sh: {e}");
                return Err(Box::new((running, JobEnd::Failed, why, JobError::Start(e))));
            }
        };
        let id = running.id;
        // Which group this is, so a later run can stop it if this one dies first.
        if let Err(e) = super::orphans::remember(&self.shared.layout, id, group.pgid()) {
            tracing::warn!(job = %id, error = %e, "cannot note the job's process group");
        }
        self.shared.running.fetch_add(1, Ordering::SeqCst);
        let artifacts = ArtifactStore::new(
            &self.shared.layout,
            &running.agent,
            Arc::new(crate::ids::RandomIds),
        )
        .with_copy(self.shared.artifact_copy.clone());
        let watch = Watch {
            artifacts,
            shared: self.shared.clone(),
            record: running,
            timeout: self.timeout,
            output_cap: self.output_cap,
            term_grace: self.term_grace,
            redactor: self.redactor.clone(),
            cancel: self.closing.child_token(),
            events: self.events.clone(),
            absent,
        };
        self.events.emit(
            watch.record.agent.as_str(),
            kinds::JOB_STARTED,
            kinds::fields(json!({"job_id": id.to_string(), "command": watch.record.command})),
        );
        tasks.handles.insert(id, runtime.spawn(watch.run(group)));
        Ok(id)
    }

    /// Stops every running job (SIGTERM to its whole group, SIGKILL after the grace), records
    /// each as `cancelled` and sends its completion, and returns once all have ended. No job
    /// starts after this begins. Idempotent.
    pub async fn close(&self) {
        let handles: Vec<JoinHandle<()>> = {
            let mut tasks = self.shared.tasks();
            tasks.closed = true;
            tasks.handles.drain().map(|(_, handle)| handle).collect()
        };
        self.closing.cancel();
        for handle in handles {
            let _ = handle.await;
        }
    }
}

impl Drop for JobSupervisor {
    fn drop(&mut self) {
        self.closing.cancel();
    }
}

impl std::fmt::Debug for JobSupervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobSupervisor")
            .field("jobs_dir", &self.shared.layout.jobs_dir())
            .field("running", &self.running_count())
            .field("timeout", &self.timeout)
            .field("output_cap", &self.output_cap)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The final record of a job whose process never started (the caller gets the error; no
    /// completion is sent).
    async fn finish_unstarted(&self, running: JobRecord, end: JobEnd, why: &str) {
        let finished = JobRecord {
            state: JobState::Finished {
                end,
                exit_code: None,
                finished_at_utc: self.finished_at(running.started_at_utc),
                output_tail: format!("[{why}]\n"),
            },
            ..running
        };
        if let Err(e) = record::write_and_copy(&self.layout, &self.copy, &finished).await {
            tracing::warn!(job = %finished.id, error = %e, "cannot record an unstarted job");
        }
    }

    /// Now, but never before the start: an injected clock that moved back must not produce a
    /// record that breaks its own invariant.
    fn finished_at(&self, started: UtcTime) -> UtcTime {
        self.clock.now().max(started)
    }
}

/// One job's watching task.
struct Watch {
    /// Where the whole output goes once it is longer than the tail keeps (the job's agent's).
    artifacts: ArtifactStore,
    shared: Arc<Shared>,
    record: JobRecord,
    timeout: Option<Duration>,
    output_cap: usize,
    term_grace: Duration,
    redactor: Redactor,
    cancel: CancellationToken,
    events: Arc<dyn EventSink>,
    /// The protected paths missing when the job started: moved aside if it creates them.
    absent: Option<crate::sandbox::Absent>,
}

impl Watch {
    async fn run(self, group: GroupChild) {
        let mut output = JobOutput {
            tail: CappedOutput::tail_only(self.output_cap).redacting(self.redactor.clone()),
            whole: ArtifactStream::new(self.artifacts, self.output_cap, self.redactor),
        };
        let deadline = self.timeout.map(|t| tokio::time::Instant::now() + t);
        let ending = group
            .run(
                &mut output,
                deadline,
                &self.cancel,
                Stop::TermThenKill(self.term_grace),
            )
            .await;
        let (status, exit_code) = match ending {
            Ok(Ending::Exited(status)) if status.success() => (JobEnd::Completed, status.code()),
            Ok(Ending::Exited(status)) => (JobEnd::Failed, status.code()),
            Ok(Ending::TimedOut) => (JobEnd::TimedOut, None),
            Ok(Ending::Cancelled) => (JobEnd::Cancelled, None),
            Err(e) => {
                output
                    .tail
                    .push(format!("[cannot wait for sh: {e}]").as_bytes());
                (JobEnd::Failed, None)
            }
        };
        if let Some(absent) = &self.absent {
            for note in crate::sync::blocking(|| absent.undo_created()) {
                output.tail.push(format!("\n{note}").as_bytes());
            }
        }
        let (output, whole) = output.finish().await;
        let job = self.record;
        let completion = JobCompletion {
            job_id: job.id,
            agent: job.agent,
            command: job.command,
            exit_code,
            status,
            output_tail: match whole {
                Some(line) => format!("{line}\n{}", output.render()),
                None => output.render(),
            },
            started_at_utc: job.started_at_utc,
            finished_at_utc: self.shared.finished_at(job.started_at_utc),
        };
        if let Err(e) =
            record::write_and_copy(&self.shared.layout, &self.shared.copy, &completion.record())
                .await
        {
            // The completion still goes out: the lead learning how the job ended matters
            // more than the inspection record.
            tracing::warn!(job = %job.id, error = %e, "cannot write the final job record");
        } else {
            // A file removal: off the async threads.
            crate::sync::blocking(|| super::orphans::forget(&self.shared.layout, job.id));
        }
        self.events.emit(
            completion.agent.as_str(),
            kinds::JOB_ENDED,
            kinds::compact(json!({
                "job_id": completion.job_id.to_string(),
                "command": completion.command,
                "status": JobStatus::from(completion.status).as_str(),
                "exit_code": completion.exit_code,
            })),
        );
        // The receiver is gone only when the runtime is closing; nobody is left to tell.
        let _ = self.shared.completions.send(completion);
        self.shared.running.fetch_sub(1, Ordering::SeqCst);
        self.shared.tasks().handles.remove(&job.id);
    }
}

/// A job's output: the tail the record and the completion show, and the whole of it (past the
/// cap) as an artifact.
struct JobOutput {
    tail: CappedOutput,
    whole: ArtifactStream,
}

impl OutputSink for JobOutput {
    fn push_from(&mut self, _pipe: Pipe, bytes: &[u8]) {
        self.tail.push(bytes);
        self.whole.push(bytes);
    }
}

impl JobOutput {
    /// Places the artifact (one `sync_all`, off the async threads) and returns the tail and,
    /// when the output was cut, the line that names the artifact (the completion's first).
    async fn finish(self) -> (CappedOutput, Option<String>) {
        let tail = self.tail;
        let line = match self.whole.finish().await {
            StreamEnd::Small => return (tail, None),
            StreamEnd::Kept {
                artifact,
                kept,
                total,
            } if kept < total => format!(
                "[the whole output: {} (the first {kept} of {total} bytes; the limit is \
                 {ARTIFACT_LIMIT_BYTES}); read_file reads it]",
                artifact.relative_path
            ),
            StreamEnd::Kept {
                artifact, total, ..
            } => format!(
                "[the whole output ({total} bytes): {}; read_file reads it]",
                artifact.relative_path
            ),
            StreamEnd::Lost { reason, total } => {
                format!("[the whole output ({total} bytes) was not kept: {reason}]")
            }
        };
        let cut = tail.is_cut();
        (tail, cut.then_some(line))
    }
}
