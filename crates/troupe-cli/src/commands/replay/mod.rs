//! `troupe replay RUN`: a recorded run played again, with no key and no network.
//!
//! The recording is found (`find.rs`) and read strictly; its starting point is rebuilt in a
//! fresh folder with today's configuration over it (`starting_point.rs`); the same prompt is
//! driven as `troupe run` drives it (`run.rs`'s `prepare` and `drive_work`), every model call
//! answered by a [`Player`] in the recorded global order. The outcome (`outcome.rs`): the
//! same calls and the same final tree (exit 0), the first difference with its diff (exit 1),
//! or — with `--until` — the folder left as a workspace at that call (exit 0).

mod find;
mod outcome;
mod starting_point;

use std::path::Path;
use std::sync::Arc;

use troupe::model::Purpose;
use troupe::replay::{Mode, PlayOptions, Player, Recording};

use self::outcome::Played;
use super::run::{drive_work, prepare, Say, Work};
use crate::args::{ApprovalMode, ReplayArgs, RunArgs, StoreFlags, TeamFlags};
use crate::error::CliError;
use crate::input::parse_duration;
use crate::interrupt::Interrupt;
use crate::observe::{Console, Sink};

pub async fn replay(workspace: &Path, args: ReplayArgs) -> Result<(), CliError> {
    let stall = parse_duration(&args.stall_timeout)?;
    if stall.is_zero() {
        return Err(CliError::usage("--stall-timeout must be above 0".into()));
    }
    if args.until == Some(0) {
        return Err(CliError::usage(
            "--until counts calls from 1 (the first call of the run)".into(),
        ));
    }
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let choice = crate::store_choice::store_choice(&args.store, &settings, false)?;
    let view = crate::store_choice::team_view(workspace, &choice).await?;
    let found = find::recording(&view, &args.run).await?;
    let recording = Recording::parse(&found.text).map_err(|why| {
        CliError::usage(format!(
            "the recording of run {} cannot be played: {why}",
            found.run
        ))
        .with_code("recording_invalid")
    })?;
    if recording.start.prompt.is_empty() {
        return Err(CliError::usage(format!(
            "run {} continued an earlier run (`troupe run --continue`): it has no prompt of its \
             own to replay",
            recording.start.run
        ))
        .with_code("replay_unsupported"));
    }
    if let Some(until) = args.until {
        if until > recording.calls.len() {
            return Err(CliError::usage(format!(
                "--until {until}: the recording has {} call(s)",
                recording.calls.len()
            )));
        }
    }
    if let Some(earlier) = earlier_messages(&recording) {
        eprintln!(
            "troupe: the recorded run went on with an earlier conversation of the lead ({earlier} \
             message(s) before its prompt); replay starts a fresh one, so the lead's first call \
             will differ"
        );
    }
    let folder = find::folder(args.into.as_deref())?;
    let built = starting_point::build(workspace, &recording.start, folder.path())?;
    for warning in &built.warnings {
        eprintln!(
            "troupe: {}",
            troupe::terminal_text::line_for_terminal(warning)
        );
    }
    // `prepare` reads the recording as `--model-recording` (no key needed); the player
    // answers in its place.
    let scratch = tempfile::Builder::new()
        .prefix("troupe-recording-")
        .suffix(".jsonl")
        .tempfile()
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, found.text.as_bytes())?;
            Ok(file)
        });
    let result = match scratch {
        Ok(file) => play(&built.workspace, file.path(), recording, &args, stall).await,
        Err(e) => Err(CliError::failed(format!(
            "cannot write the recording to a temporary file: {e}"
        ))),
    };
    folder.finish(built.repository.as_deref());
    let played = result?;
    outcome::report(&played, &args, folder.kept())
}

async fn play(
    workspace: &Path,
    file: &Path,
    recording: Recording,
    args: &ReplayArgs,
    stall: std::time::Duration,
) -> Result<Played, CliError> {
    let run_args = run_args(&recording, file);
    let interrupt = Interrupt::default();
    let mut prepared =
        prepare(workspace, &run_args, &interrupt).map_err(|e| trust_hint(e, workspace))?;
    let live = if args.live_after_divergence {
        let loaded = crate::trust::load(workspace, crate::trust::Use::Run)?;
        let models = crate::agent_setup::models(&args.model, &loaded)?;
        prepared.settings.redactor = models.redactor.clone();
        Some(models.chooser)
    } else {
        None
    };
    let run = recording.start.run.clone();
    let recorded_tree = recording.end.as_ref().and_then(|e| e.tree.clone());
    let player = Player::new(
        recording,
        PlayOptions {
            mode: Mode::Compare,
            until: args.until,
            live,
            stall,
            workspace: std::fs::canonicalize(workspace)
                .unwrap_or_else(|_| workspace.to_owned())
                .to_string_lossy()
                .into_owned(),
            redactor: prepared.settings.redactor.clone(),
        },
    );
    prepared.settings.models = player.models();
    // The replayed team's lines on stderr as `troupe run` shows them (not with --json).
    let console = (!args.json).then(|| Arc::new(Console::new(Sink::Stderr, false)));
    if let Some(console) = &console {
        prepared.settings.events.listeners = vec![console.clone()];
    }
    let stop = player.stop_token();
    let cancel = interrupt.run.clone();
    let stopper = tokio::spawn(async move {
        stop.cancelled().await;
        cancel.cancel();
    });
    let prompt = player.recording().start.prompt.clone();
    let held = Say::Held(Default::default());
    let result = drive_work(
        prepared.settings,
        Work::Prompt(&prompt),
        &interrupt,
        None,
        None,
        &held,
    )
    .await;
    stopper.abort();
    if let Some(console) = &console {
        console.finish();
    }
    let report = player.report();
    let stopped_by_replay = report.divergence.is_some() || report.stopped_after.is_some();
    let (answer, run_error) = match result {
        Ok(outcome) => (outcome.map(|o| o.answer), None),
        Err(_) if stopped_by_replay && player.stop_token().is_cancelled() => (None, None),
        Err(e) => (None, Some(e)),
    };
    let root = workspace.to_owned();
    let tree = troupe::sync::offload("digesting the workspace", move || {
        troupe::replay::start_point::tree_digest(&root)
    })
    .await
    .ok()
    .flatten()
    .map(|(digest, _)| digest);
    Ok(Played {
        run,
        workspace: workspace.to_owned(),
        report,
        trees: (recorded_tree, tree),
        run_error,
        answer,
    })
}

/// The `troupe run` a replay drives: automatic approvals (a person's answers are not part of
/// the recording), memories extracted only if the recorded run extracted some, on this
/// workspace's own files; the model flags name the recording, so that no key is needed to
/// prepare (the player answers in its place).
fn run_args(recording: &Recording, file: &Path) -> RunArgs {
    let remembered = recording
        .calls
        .iter()
        .any(|c| c.purpose == Purpose::MemoryExtract);
    RunArgs {
        prompt: Some(recording.start.prompt.clone()),
        continue_run: false,
        team: TeamFlags {
            approval: ApprovalMode::Auto,
            max_turns: 50,
            request_ttl: "5m".into(),
            model: crate::args::ModelFlags {
                provider: None,
                model: None,
                base_url: None,
                fallback_model: None,
                model_script: None,
                model_recording: Some(file.to_owned()),
                context_window: None,
            },
            require_plans: false,
            isolation: None,
            new_session: false,
            max_tokens: None,
            max_cost: None,
            no_memory: !remembered,
            sandbox: None,
            store: StoreFlags {
                store: None,
                team: None,
                local: true,
            },
        },
        json: false,
        watch: false,
        no_local_workers: false,
    }
}

/// How many messages the lead's conversation held before the recorded prompt, when it held
/// any but its system prompt (a session's later prompt, `run` after an earlier run).
fn earlier_messages(recording: &Recording) -> Option<usize> {
    let first = recording
        .calls
        .iter()
        .find(|c| c.agent.is_lead() && c.purpose == Purpose::Turn)?;
    let prompt = first
        .request
        .messages
        .iter()
        .rposition(|m| matches!(**m, troupe::model::ChatMessage::User { .. }))?;
    let earlier = prompt.saturating_sub(1);
    (earlier > 0).then_some(earlier)
}

/// A replay folder's settings wait for trust like any workspace's: say how to give it.
fn trust_hint(error: CliError, workspace: &Path) -> CliError {
    if error.code() != crate::trust::UNTRUSTED_CODE {
        return error;
    }
    CliError::usage(format!(
        "{}; the replay's folder {} holds this workspace's troupe.toml: run the replay with \
         --trust-workspace (or TROUPE_TRUST_WORKSPACE=1) if you trust it",
        error.cause(),
        workspace.display()
    ))
    .with_code(crate::trust::UNTRUSTED_CODE)
}
