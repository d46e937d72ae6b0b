//! `troupe eval SUITE.toml [--jobs N] [--json FILE] [--junit FILE]`: each case of a suite run
//! `repeat` times, each repetition in a fresh copy of its fixture, and checked; a table of pass
//! rates, tokens, cost and time on stdout, the same as JSON and JUnit XML on request. Exit 1
//! when a case passes less often than its `min_pass`; exit 2 for a suite that is not valid.
//!
//! - `suite`: the TOML format and its validation.
//! - `fixture`: a repetition's fresh workspace (a folder copied, a git revision checked out).
//! - `repetition`: one repetition: the copy, the trust gate, `troupe run`, its cost.
//! - `events`: what the run's event stream says (tools, tokens, how it ended).
//! - `checks`: the checks.
//! - `outcome`: a repetition's result.
//! - `report`, `junit`: the table and JSON, the JUnit XML.

mod checks;
mod events;
mod fixture;
mod junit;
mod outcome;
mod repetition;
mod report;
mod suite;

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use troupe::terminal_text::line_for_terminal;

use crate::args::EvalArgs;
use crate::error::{CliError, Kind};
use crate::render;

use outcome::{Failure, Outcome};

/// The code of a suite whose cases passed less often than their `min_pass`.
const EVAL_FAILED_CODE: &str = "eval_failed";
/// The code of a report file that could not be written.
const REPORT_UNWRITABLE_CODE: &str = "eval_report_unwritable";

pub async fn eval(_workspace: &Path, args: EvalArgs) -> Result<(), CliError> {
    if args.jobs == 0 {
        return Err(CliError::usage("--jobs must be at least 1".into()));
    }
    let suite = Arc::new(suite::load(&args.suite)?);
    let cancel = CancellationToken::new();
    let listening = crate::interrupt::listen(cancel.clone())?;
    let outcomes = run_all(&suite, args.jobs, &cancel).await;
    drop(listening);
    let reports = report::cases(&suite, &outcomes);
    render::print_text(&report::table(&reports))?;
    if let Some(file) = &args.json {
        let mut text = serde_json::to_string_pretty(&report::json(&suite, &reports))
            .map_err(CliError::failed)?;
        text.push('\n');
        write_report(file, &text)?;
    }
    if let Some(file) = &args.junit {
        let name = suite
            .file
            .file_stem()
            .map_or_else(|| "eval".to_owned(), |s| s.to_string_lossy().into_owned());
        write_report(file, &junit::xml(&name, &reports))?;
    }
    if cancel.is_cancelled() {
        return Err(CliError::interrupted(
            "interrupted: the repetitions that had not ended were stopped".into(),
        ));
    }
    let short: Vec<String> = reports
        .iter()
        .filter(|r| !r.ok())
        .map(|r| format!("{:?} {}/{}", r.name, r.passed, r.repeat))
        .collect();
    if short.is_empty() {
        return Ok(());
    }
    Err(CliError::new(
        Kind::Failed,
        format!(
            "{} of {} cases passed less often than their min_pass: {}",
            short.len(),
            reports.len(),
            short.join(", ")
        ),
    )
    .with_code(EVAL_FAILED_CODE))
}

fn write_report(file: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(file, text).map_err(|e| {
        CliError::failed(format!("cannot write {}: {e}", file.display()))
            .with_code(REPORT_UNWRITABLE_CODE)
    })
}

/// Every repetition of every case, at most `jobs` at once; one progress line on stderr as each
/// ends.
/// Ctrl-C (`cancel`) stops the runs going on and starts no more.
async fn run_all(
    suite: &Arc<suite::Suite>,
    jobs: usize,
    cancel: &CancellationToken,
) -> Vec<Outcome> {
    let total: usize = suite.cases.iter().map(|c| c.repeat as usize).sum();
    // No more permits than repetitions (a huge --jobs is no more than "all at once").
    let permits = Arc::new(Semaphore::new(jobs.min(total).max(1)));
    let done = Arc::new(AtomicUsize::new(0));
    let mut set = JoinSet::new();
    for (index, case) in suite.cases.iter().enumerate() {
        for number in 1..=case.repeat {
            let suite = Arc::clone(suite);
            let permits = Arc::clone(&permits);
            let done = Arc::clone(&done);
            let cancel = cancel.clone();
            set.spawn(async move {
                let case = &suite.cases[index];
                let permit = permits.acquire_owned().await;
                let outcome = match permit {
                    Ok(_permit) if !cancel.is_cancelled() => {
                        repetition::run(index, case, number, &cancel).await
                    }
                    _ => Outcome {
                        case: index,
                        number,
                        seconds: 0.0,
                        tokens: 0,
                        cost: outcome::Cost::default(),
                        exit_code: None,
                        failures: vec![Failure::new("interrupted", "not started")],
                    },
                };
                let at = done.fetch_add(1, Ordering::SeqCst) + 1;
                progress(at, total, &case.name, &outcome);
                outcome
            });
        }
    }
    let mut outcomes = Vec::with_capacity(total);
    while let Some(joined) = set.join_next().await {
        if let Ok(outcome) = joined {
            outcomes.push(outcome);
        }
    }
    outcomes
}

/// `[2/6] adds a note #1 … passed (1.2 s)`, or `failed (…)` with its first failure.
fn progress(at: usize, total: usize, name: &str, outcome: &Outcome) {
    let verdict = match outcome.failures.first() {
        None => format!("passed ({:.1} s)", outcome.seconds),
        Some(first) => format!(
            "failed ({:.1} s): {}: {}",
            outcome.seconds,
            line_for_terminal(&first.check),
            line_for_terminal(&first.why)
        ),
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "[{at}/{total}] {} #{} … {verdict}",
        line_for_terminal(name),
        outcome.number,
    );
}
