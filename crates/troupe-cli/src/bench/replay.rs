//! The replay suite (issue 44): what playing a recording costs on top of the run it replays.
//!
//! A lead whose model answers at once makes `calls` model calls in one turn: each of the first
//! `calls - 1` answered with one `read_file` of a small file, the last with a text. That run is
//! recorded (every run built on files is) and is the recording replayed. Then `runs` rounds,
//! each in two fresh workspaces seeded with the same file: a **live** run (the same model, the
//! same calls, recorded too) and a **replay** of the first recording (`Recording::load`, then a
//! [`Player`] in [`Mode::Compare`] answering every call, each request masked and compared); the
//! order of the two alternates from round to round. Each replay must serve every recorded call
//! with no divergence and end on the recorded tree, or the suite fails.
//!
//! Per round, the drive's wall time (`Driver::run`, the calls and their tools) of each run;
//! the replay's cost per call is the replay's minus the live run's of the same round, over the
//! calls (the pairing takes the machine's drift out). Both runs record, so the recorder's cost
//! is on both sides and not in the difference. Every model client is timed too: the time spent
//! inside the model's `complete` (the player's, or the live model's ~0), per call and for the
//! first and last tenth of the calls — a request grows by two messages a call, so a cost that
//! grows with the request shows there. `Recording::load` is timed apart, with the file's size
//! and the memory the loaded recording holds (`load_rss_bytes`: the resident set's growth).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::agent::NullObserver;
use troupe::bootstrap::{build_team, ModelChooser, SandboxOptions, TeamSettings};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::model::{
    ModelClient, ModelError, ModelRequest, ModelResponse, ScriptedModel, ToolCall,
};
use troupe::permissions::AutoApproval;
use troupe::replay::{start_point, Mode, PlayOptions, Player, Recording};
use troupe::team::{EventPacing, TeamObserver, TeamUpdate};
use troupe::wire::AgentName;

use crate::result::BenchResult;
use crate::stats::{peak_rss_bytes, round2};

const PROMPT: &str = "Read notes.txt again and again.";
/// The small file every call reads.
const NOTES: &str = "notes.txt";
const NOTES_TEXT: &str = "The quick brown fox jumps over the lazy dog.\nSecond line.\n";
/// How long one run may take before the suite gives up.
const RUN_LIMIT: Duration = Duration::from_secs(900);

/// A lead's model that answers at once: a `read_file` of [`NOTES`] for the first `calls - 1`
/// turn calls, then a text. The runtime's own calls (summaries, if the run compacts) get the
/// scripted model's built-in answers.
struct Reader {
    calls: usize,
    made: AtomicUsize,
    side: ScriptedModel,
}

#[async_trait::async_trait]
impl ModelClient for Reader {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        if !request.purpose.is_turn() {
            return self.side.complete(request).await;
        }
        let n = self.made.fetch_add(1, Ordering::SeqCst);
        if n + 1 >= self.calls {
            return Ok(ModelResponse::text("Read it every time.", "bench"));
        }
        let call = ToolCall::new(
            format!("call_{n}"),
            "read_file",
            json!({ "path": NOTES }).to_string(),
        );
        Ok(ModelResponse::tool_calls(vec![call], "bench"))
    }
}

/// The time each model call spent inside its client, in call order.
#[derive(Clone, Default)]
struct Spent(Arc<Mutex<Vec<Duration>>>);

impl Spent {
    fn take(&self) -> Vec<Duration> {
        self.0
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

/// A team's models, each call timed; the inner models' pacing kept.
struct Timed {
    inner: Arc<dyn ModelChooser>,
    spent: Spent,
}

impl Timed {
    fn wrap(&self, inner: Arc<dyn ModelClient>) -> Arc<dyn ModelClient> {
        Arc::new(TimedClient {
            inner,
            spent: self.spent.clone(),
        })
    }
}

impl ModelChooser for Timed {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        self.wrap(self.inner.model_for(agent))
    }

    fn model_named(&self, agent: &AgentName, model: Option<&str>) -> Arc<dyn ModelClient> {
        self.wrap(self.inner.model_named(agent, model))
    }

    fn pacing(&self) -> Option<Arc<dyn EventPacing>> {
        self.inner.pacing()
    }
}

struct TimedClient {
    inner: Arc<dyn ModelClient>,
    spent: Spent,
}

#[async_trait::async_trait]
impl ModelClient for TimedClient {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let start = Instant::now();
        let answer = self.inner.complete(request).await;
        let took = start.elapsed();
        if let Ok(mut spent) = self.spent.0.lock() {
            spent.push(took);
        }
        answer
    }
}

struct Quiet;

impl TeamObserver for Quiet {
    fn update(&self, _update: &TeamUpdate) {}
}

/// What one run took.
struct RunTimes {
    /// `build_team`.
    build: Duration,
    /// `Driver::run`: the prompt's turn and the event turns until quiescent.
    drive: Duration,
    /// `Team::close` (the recording's end: the tree's digest).
    close: Duration,
    /// Time inside the models' `complete`, per call, in order.
    in_model: Vec<Duration>,
    recording: Option<std::path::PathBuf>,
    cancelled: bool,
}

/// A fresh workspace under `dir` with the starting files; its canonical path.
fn workspace(dir: &Path) -> BenchResult<(tempfile::TempDir, std::path::PathBuf)> {
    let temp = tempfile::tempdir_in(dir).map_err(|e| format!("a temporary workspace: {e}"))?;
    let path =
        std::fs::canonicalize(temp.path()).map_err(|e| format!("the workspace's path: {e}"))?;
    std::fs::write(path.join(NOTES), NOTES_TEXT).map_err(|e| format!("the starting file: {e}"))?;
    Ok((temp, path))
}

fn settings(workspace: &Path, models: Arc<dyn ModelChooser>, max_turns: usize) -> TeamSettings {
    let mut settings = TeamSettings {
        workspace: workspace.to_path_buf(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        models,
        approval: Arc::new(AutoApproval),
        run_observer: Arc::new(NullObserver),
        team_observer: Arc::new(Quiet),
        max_turns,
        request_ttl: Duration::from_secs(300),
        shell_timeout: Duration::from_secs(10),
        watch: false,
        require_plans: false,
        redactor: troupe::secrets::Redactor::default(),
        long_lived: Default::default(),
        events: Default::default(),
        settings: Default::default(),
        sandbox: SandboxOptions::off(workspace),
        mcp: Default::default(),
        store: Default::default(),
    };
    settings.events.prompt = PROMPT.to_owned();
    settings
}

/// Builds a team on `workspace` with `models` (timed), drives [`PROMPT`] to its end (or
/// `stop`), closes it.
async fn one_run(
    workspace: &Path,
    models: Arc<dyn ModelChooser>,
    stop: CancellationToken,
    max_turns: usize,
) -> BenchResult<RunTimes> {
    let spent = Spent::default();
    let models = Arc::new(Timed {
        inner: models,
        spent: spent.clone(),
    });
    let start = Instant::now();
    let mut team = build_team(settings(workspace, models, max_turns))
        .await
        .map_err(|e| format!("build the team: {e}"))?;
    let build = start.elapsed();
    let recording = team.recording();
    let mut driver = team.driver();
    let start = Instant::now();
    let outcome = tokio::time::timeout(RUN_LIMIT, driver.run(&mut team.lead, PROMPT, &stop))
        .await
        .map_err(|_| format!("the run did not end within {}s", RUN_LIMIT.as_secs()))?
        .map_err(|e| format!("the run failed: {e}"))?;
    let drive = start.elapsed();
    drop(driver);
    let start = Instant::now();
    team.close().await;
    let close = start.elapsed();
    Ok(RunTimes {
        build,
        drive,
        close,
        in_model: spent.take(),
        recording,
        cancelled: outcome.cancelled,
    })
}

/// A run of the live model.
async fn live_run(dir: &Path, calls: usize) -> BenchResult<(RunTimes, tempfile::TempDir)> {
    let (temp, ws) = workspace(dir)?;
    let model = Arc::new(Reader {
        calls,
        made: AtomicUsize::new(0),
        side: ScriptedModel::new(),
    });
    let models = Arc::new(troupe::bootstrap::SameModel(model.clone()));
    let times = one_run(&ws, models, CancellationToken::new(), calls + 8).await?;
    let made = model.made.load(Ordering::SeqCst);
    if made != calls || times.cancelled {
        return Err(format!(
            "the live run made {made} turn calls where {calls} were scripted"
        ));
    }
    Ok((times, temp))
}

/// What one replay did.
struct Replayed {
    load: Duration,
    times: RunTimes,
}

/// A replay of `recording` in a fresh workspace; fails unless it served every call with no
/// divergence and ended on the recorded tree.
async fn replay_run(dir: &Path, recording: &Path, calls: usize) -> BenchResult<Replayed> {
    let (_temp, ws) = workspace(dir)?;
    let start = Instant::now();
    let loaded = Recording::load(recording).map_err(|e| e.to_string())?;
    let load = start.elapsed();
    let tree = loaded.end.as_ref().and_then(|e| e.tree.clone());
    let player = Player::new(
        loaded,
        PlayOptions {
            mode: Mode::Compare,
            until: None,
            live: None,
            stall: Duration::from_secs(60),
            workspace: ws.to_string_lossy().into_owned(),
            redactor: troupe::secrets::Redactor::default(),
        },
    );
    let times = one_run(&ws, player.models(), player.stop_token(), calls + 8).await?;
    let report = player.report();
    if let Some(divergence) = &report.divergence {
        return Err(format!("the replay diverged: {divergence}"));
    }
    if report.served != report.total {
        return Err(format!(
            "the replay served {} of {} calls",
            report.served, report.total
        ));
    }
    let now = start_point::tree_digest(&ws).map(|(digest, _)| digest);
    if tree.is_none() || now != tree {
        return Err("the replay did not end on the recorded tree".into());
    }
    Ok(Replayed { load, times })
}

/// The mean of `samples`' slice `from..to` (a share of the calls), in µs.
fn mean_us(samples: &[Duration], from: usize, to: usize) -> f64 {
    let part = &samples[from.min(samples.len())..to.min(samples.len())];
    if part.is_empty() {
        return 0.0;
    }
    part.iter().map(Duration::as_secs_f64).sum::<f64>() / part.len() as f64 * 1e6
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_unstable_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn run(dir: &Path, calls: usize, runs: usize) -> BenchResult<Value> {
    if calls < 2 || runs == 0 {
        return Err("--calls must be at least 2 and --runs at least 1".into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("start the async runtime: {e}"))?;

    // The recorded run (also the warm-up).
    let (recorded, _recorded_ws) = runtime.block_on(live_run(dir, calls))?;
    let path = recorded
        .recording
        .clone()
        .ok_or("the recorded run was not recorded")?;
    let recording_bytes = std::fs::metadata(&path)
        .map_err(|e| format!("the recording's size: {e}"))?
        .len();
    // What a loaded recording holds in memory: every request whole.
    let rss_before = rss_bytes();
    let loaded = Recording::load(&path).map_err(|e| e.to_string())?;
    let load_rss_bytes = rss_bytes().saturating_sub(rss_before);
    let recorded_calls = loaded.calls.len();
    drop(loaded);

    let mut live_drive = Vec::with_capacity(runs);
    let mut replay_drive = Vec::with_capacity(runs);
    let mut extra_per_call = Vec::with_capacity(runs);
    let mut replay_per_call = Vec::with_capacity(runs);
    let mut live_per_call = Vec::with_capacity(runs);
    let mut ratio = Vec::with_capacity(runs);
    let mut loads = Vec::with_capacity(runs);
    let mut player_per_call = Vec::with_capacity(runs);
    let mut player_first = Vec::with_capacity(runs);
    let mut player_last = Vec::with_capacity(runs);
    let mut live_model_per_call = Vec::with_capacity(runs);
    let mut replay_build_close = Vec::with_capacity(runs);
    let mut live_build_close = Vec::with_capacity(runs);
    let tenth = (recorded_calls / 10).max(1);
    for round in 0..runs {
        let (live, replayed) = if round % 2 == 0 {
            let (live, _ws) = runtime.block_on(live_run(dir, calls))?;
            (live, runtime.block_on(replay_run(dir, &path, calls))?)
        } else {
            let replayed = runtime.block_on(replay_run(dir, &path, calls))?;
            let (live, _ws) = runtime.block_on(live_run(dir, calls))?;
            (live, replayed)
        };
        let replay = &replayed.times;
        let n = recorded_calls as f64;
        live_drive.push(ms(live.drive));
        replay_drive.push(ms(replay.drive));
        extra_per_call.push((replay.drive.as_secs_f64() - live.drive.as_secs_f64()) / n * 1e3);
        replay_per_call.push(ms(replay.drive) / n);
        live_per_call.push(ms(live.drive) / n);
        ratio.push(replay.drive.as_secs_f64() / live.drive.as_secs_f64());
        loads.push(ms(replayed.load));
        let in_player = &replay.in_model;
        player_per_call.push(mean_us(in_player, 0, in_player.len()));
        player_first.push(mean_us(in_player, 0, tenth));
        player_last.push(mean_us(
            in_player,
            in_player.len().saturating_sub(tenth),
            in_player.len(),
        ));
        live_model_per_call.push(mean_us(&live.in_model, 0, live.in_model.len()));
        replay_build_close.push(ms(replay.build + replay.close));
        live_build_close.push(ms(live.build + live.close));
    }
    let load_ms = median(&mut loads);
    let extra = median(&mut extra_per_call);
    let load_per_call = load_ms / recorded_calls as f64;
    Ok(json!({
        "suite": "replay",
        "calls": calls,
        "recorded_calls": recorded_calls,
        "runs": runs,
        "recording_bytes": recording_bytes,
        "recorded_run_drive_ms": round2(ms(recorded.drive)),
        "live_drive_ms_p50": round2(median(&mut live_drive)),
        "replay_drive_ms_p50": round2(median(&mut replay_drive)),
        "live_ms_per_call_p50": round3(median(&mut live_per_call)),
        "replay_ms_per_call_p50": round3(median(&mut replay_per_call)),
        "replay_extra_ms_per_call_p50": round3(extra),
        "replay_over_live_p50": round3(median(&mut ratio)),
        "load_ms_p50": round2(load_ms),
        "load_rss_bytes": load_rss_bytes,
        "replay_extra_ms_per_call_with_load_p50": round3(extra + load_per_call),
        "player_us_per_call_p50": round2(median(&mut player_per_call)),
        "player_us_per_call_first_tenth_p50": round2(median(&mut player_first)),
        "player_us_per_call_last_tenth_p50": round2(median(&mut player_last)),
        "live_model_us_per_call_p50": round2(median(&mut live_model_per_call)),
        "live_build_close_ms_p50": round2(median(&mut live_build_close)),
        "replay_build_close_ms_p50": round2(median(&mut replay_build_close)),
        "target_ms_per_call": 2.0,
        "target_met": extra + load_per_call < 2.0,
        "divergences": 0,
        "peak_rss_bytes": peak_rss_bytes(),
    }))
}

/// This process's resident set size now, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
