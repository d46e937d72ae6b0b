//! Where everything lives under `<workspace>/.troupe/` (SPEC §3).

use std::path::{Path, PathBuf};

use troupe_wire::AgentName;

/// The paths of one workspace's state. Cheap to clone; it holds only the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    workspace: PathBuf,
}

impl Layout {
    pub const STATE_DIR: &'static str = ".troupe";
    /// The mode of every folder troupe makes under [`Self::STATE_DIR`]: the user's alone
    /// (transcripts hold the files agents read, requests the calls' arguments).
    pub const DIR_MODE: u32 = 0o700;

    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
        }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// `<workspace>/.troupe`
    pub fn state_dir(&self) -> PathBuf {
        self.workspace.join(Self::STATE_DIR)
    }

    /// `.troupe/mailboxes`
    pub fn mailboxes_dir(&self) -> PathBuf {
        self.state_dir().join("mailboxes")
    }

    /// `.troupe/mailboxes/<agent>`
    pub fn mailbox_dir(&self, agent: &AgentName) -> PathBuf {
        self.mailboxes_dir().join(agent.as_str())
    }

    /// `.troupe/protocol`
    pub fn protocol_dir(&self) -> PathBuf {
        self.state_dir().join("protocol")
    }

    /// `.troupe/protocol/state.json`
    pub fn protocol_state(&self) -> PathBuf {
        self.protocol_dir().join("state.json")
    }

    /// `.troupe/protocol/archive.jsonl`: resolved requests moved out of `state.json`.
    pub fn protocol_archive(&self) -> PathBuf {
        self.protocol_dir().join("archive.jsonl")
    }

    /// `.troupe/protocol/answers`: the one answer sent to each request, `<request-id>.json`.
    pub fn protocol_answers_dir(&self) -> PathBuf {
        self.protocol_dir().join("answers")
    }

    /// `.troupe/protocol/.protocol.lock`
    pub fn protocol_lock(&self) -> PathBuf {
        self.protocol_dir().join(".protocol.lock")
    }

    /// `.troupe/transcripts`: the agents' conversations (and earlier ones, `<agent>.<n>.jsonl`).
    pub fn transcripts_dir(&self) -> PathBuf {
        self.state_dir().join("transcripts")
    }

    /// `.troupe/transcripts/<agent>.jsonl`: the agent's conversation, continued by later runs.
    pub fn transcript(&self, agent: &AgentName) -> PathBuf {
        self.transcripts_dir()
            .join(format!("{}.jsonl", agent.as_str()))
    }

    /// `.troupe/artifacts`: every agent's artifacts, one folder each.
    pub fn artifacts_root(&self) -> PathBuf {
        self.state_dir().join("artifacts")
    }

    /// `.troupe/team.json`
    pub fn team_file(&self) -> PathBuf {
        self.state_dir().join("team.json")
    }

    /// `.troupe/audit.jsonl`
    pub fn audit_log(&self) -> PathBuf {
        self.state_dir().join("audit.jsonl")
    }

    /// `.troupe/jobs`: one `<job-id>.json` record per background job.
    pub fn jobs_dir(&self) -> PathBuf {
        self.state_dir().join("jobs")
    }

    /// `.troupe/cron.json`: the durable cron jobs.
    pub fn cron_file(&self) -> PathBuf {
        self.state_dir().join("cron.json")
    }

    /// `.troupe/.cron.lock`: serialises writers of `cron.json` across processes.
    pub fn cron_lock(&self) -> PathBuf {
        self.state_dir().join(".cron.lock")
    }

    /// `.troupe/tasks`: the task board, one `<task-id>.json` per task.
    pub fn tasks_dir(&self) -> PathBuf {
        self.state_dir().join("tasks")
    }

    /// `.troupe/tasks/.tasks.lock`: held for every read-modify-write of the task board.
    pub fn tasks_lock(&self) -> PathBuf {
        self.tasks_dir().join(".tasks.lock")
    }

    /// `.troupe/artifacts/<agent>`: tool results too large for the history, kept whole.
    pub fn artifacts_dir(&self, agent: &AgentName) -> PathBuf {
        self.artifacts_root().join(agent.as_str())
    }

    /// `.troupe/memory`: one `<name>.md` record per memory.
    pub fn memory_dir(&self) -> PathBuf {
        self.state_dir().join("memory")
    }

    /// `.troupe/memory/.memory.lock`: held for every change of the memory records.
    pub fn memory_lock(&self) -> PathBuf {
        self.memory_dir().join(".memory.lock")
    }

    /// `.troupe/recordings`: one `<run-id>.jsonl` per run, what replay needs.
    pub fn recordings_dir(&self) -> PathBuf {
        self.state_dir().join("recordings")
    }

    /// `.troupe/recordings/<run-id>.jsonl`: run `run`'s model calls and starting point.
    pub fn recording(&self, run: &str) -> PathBuf {
        self.recordings_dir().join(format!("{run}.jsonl"))
    }

    /// `.troupe/usage.jsonl`: the token usage of every model response.
    pub fn usage_log(&self) -> PathBuf {
        self.state_dir().join("usage.jsonl")
    }

    /// `.troupe/events.jsonl`: the event stream of every run (SPEC §10).
    pub fn events_log(&self) -> PathBuf {
        self.state_dir().join("events.jsonl")
    }

    /// `.troupe/events`: the event stream's closed segments, `<first>-<last>.jsonl.gz` (see
    /// `store::events::segments`).
    pub fn events_segments_dir(&self) -> PathBuf {
        self.state_dir().join("events")
    }

    /// `.troupe/events/last-seq`: the highest `seq` closed, kept once gc removes the segment
    /// that held it (see `store::events::segments`).
    pub fn events_last_seq(&self) -> PathBuf {
        self.events_segments_dir().join("last-seq")
    }

    /// Where each line of the event stream starts (written by its readers; see
    /// `store::events::index`).
    pub fn events_index(&self) -> PathBuf {
        self.state_dir().join("events.idx")
    }

    /// `.troupe/worktrees`: the teammates' git worktrees (SPEC §12) and their records.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.state_dir().join("worktrees")
    }

    /// `.troupe/worktrees/<agent>`: the git worktree a teammate spawned with `isolation:
    /// "worktree"` works in (its checkout of branch `troupe/<agent>`).
    pub fn worktree(&self, agent: &AgentName) -> PathBuf {
        self.worktrees_dir().join(agent.as_str())
    }

    /// `.troupe/worktrees/<agent>.json`: that worktree's record (branch, base commit, git's
    /// admin folder), written when it is made and removed with it.
    pub fn worktree_record(&self, agent: &AgentName) -> PathBuf {
        self.worktrees_dir()
            .join(format!("{}.json", agent.as_str()))
    }

    /// `.troupe/run.lock`: held by the one `troupe run` of this workspace.
    pub fn run_lock(&self) -> PathBuf {
        self.state_dir().join("run.lock")
    }
}
