//! What a replay says: the same calls and tree (exit 0), the first difference (exit 1), or the
//! workspace left at `--until` (exit 0); as text, or one JSON object with `--json`.

use std::path::Path;

use serde_json::json;
use troupe::replay::Divergence;

use crate::args::ReplayArgs;
use crate::error::CliError;
use crate::render;

/// What a replay came to.
pub struct Played {
    pub run: String,
    pub workspace: std::path::PathBuf,
    pub report: troupe::replay::Report,
    /// The recorded final tree, and this run's (none: not digested).
    pub trees: (Option<String>, Option<String>),
    /// The run's own error, when it failed for another reason than the replay stopping it.
    pub run_error: Option<CliError>,
    pub answer: Option<String>,
}

pub fn report(played: &Played, args: &ReplayArgs, kept: Option<&Path>) -> Result<(), CliError> {
    if let Some(error) = &played.run_error {
        if played.report.divergence.is_none() {
            return Err(CliError::failed(format!(
                "the replayed run failed before its recording ended: {}",
                error.cause()
            ))
            .with_code("replay_run_failed"));
        }
    }
    let report = &played.report;
    let same_tree = match &played.trees {
        (Some(then), Some(now)) => Some(then == now),
        _ => None,
    };
    let verdict = match (&report.divergence, report.stopped_after) {
        (Some(_), _) => "diverged",
        (None, Some(_)) => "stopped",
        (None, None) if same_tree == Some(false) => "tree_differs",
        (None, None) => "identical",
    };
    if args.json {
        render::print_json(&json!({
            "run": played.run,
            "outcome": verdict,
            "calls": report.total,
            "served": report.served,
            "stopped_after": report.stopped_after,
            "divergence": report.divergence.as_ref().map(divergence_json),
            "tree": {"recorded": played.trees.0, "replayed": played.trees.1},
            "workspace": kept.map(|_| played.workspace.display().to_string()),
            "answer": played.answer,
        }))?;
    } else {
        render::print_text(&text(played, verdict, kept))?;
    }
    match verdict {
        "identical" | "stopped" => Ok(()),
        "tree_differs" => Err(CliError::failed(
            "every call matched, but the final tree differs from the recorded run's",
        )
        .with_code("replay_tree_differs")),
        _ => Err(
            CliError::failed(format!("run {} diverged from its recording", played.run))
                .with_code("replay_diverged"),
        ),
    }
}

fn divergence_json(divergence: &Divergence) -> serde_json::Value {
    let mut value = json!({"message": divergence.to_string()});
    match divergence {
        Divergence::Request {
            call,
            agent,
            index,
            diff,
            recorded_answer,
        } => {
            value["kind"] = json!("request");
            value["call"] = json!(call);
            value["agent"] = json!(agent);
            value["index"] = json!(index);
            value["diff"] = json!(diff);
            value["recorded_answer"] = json!(recorded_answer);
        }
        Divergence::Extra { agent, index } => {
            value["kind"] = json!("extra_call");
            value["agent"] = json!(agent);
            value["index"] = json!(index);
        }
        Divergence::Stalled {
            call, agent, index, ..
        } => {
            value["kind"] = json!("stalled");
            value["call"] = json!(call);
            value["agent"] = json!(agent);
            value["index"] = json!(index);
        }
        Divergence::Missing { call, agent, index } => {
            value["kind"] = json!("missing_call");
            value["call"] = json!(call);
            value["agent"] = json!(agent);
            value["index"] = json!(index);
        }
    }
    value
}

fn text(played: &Played, verdict: &str, kept: Option<&Path>) -> String {
    let report = &played.report;
    let mut out = String::new();
    match verdict {
        "identical" => out.push_str(&format!(
            "replayed run {}: all {} model calls identical; the final tree matches{}\n",
            played.run,
            report.total,
            match &played.trees.1 {
                Some(tree) => format!(" ({})", &tree[..tree.len().min(12)]),
                None => " (not digested: too large)".to_owned(),
            }
        )),
        "tree_differs" => out.push_str(&format!(
            "replayed run {}: all {} model calls identical, but the final tree differs from the \
             recorded one (a tool or command did something else)\n",
            played.run, report.total
        )),
        "stopped" => out.push_str(&format!(
            "replayed run {}: stopped after call {} of {}\n",
            played.run,
            report.stopped_after.unwrap_or(0),
            report.total
        )),
        _ => {
            if let Some(divergence) = &report.divergence {
                out.push_str(&format!(
                    "replayed run {}: {} calls identical, then {divergence}\n",
                    played.run, report.served
                ));
                if let Divergence::Request {
                    diff,
                    recorded_answer,
                    ..
                } = divergence
                {
                    out.push_str("\nwhat changed in the request (recorded → now):\n");
                    out.push_str(diff);
                    out.push_str("\nwhat the recorded model answered:\n");
                    out.push_str(recorded_answer);
                    out.push('\n');
                }
                if args_live(played) {
                    out.push_str("\nthe run went on with the configured model");
                    if let Some(answer) = &played.answer {
                        out.push_str(&format!("; its answer:\n{answer}"));
                    }
                    out.push('\n');
                }
            }
        }
    }
    if let Some(dir) = kept {
        out.push_str(&format!(
            "the workspace at that point is {}; `troupe run --workspace {} --continue` goes on \
             from it\n",
            played.workspace.display(),
            dir.display()
        ));
    }
    out
}

/// Whether the run went on after its divergence (it has an answer of its own).
fn args_live(played: &Played) -> bool {
    played.answer.is_some()
}
