//! `troupe_run {prompt}`: one prompt of the session core, driven until the team is quiescent,
//! as `troupe session` drives each prompt (the same lead conversation across runs).
//!
//! - Progress: with the request's progress token, each event of the run is a progress
//!   notification ([`super::progress`]), all sent before the result.
//! - Cancel: the client's `notifications/cancelled` fires the request's token; the work is
//!   stopped as Ctrl-C stops `troupe run` ([`Core::cancel`]: the team closed at a safe point,
//!   in-flight messages back to `ready/`, a waiting ask answered no). A `troupe_run` that comes
//!   while the cancelled one still closes its team waits for the close.
//! - One run at a time ([`Runs`]): another `troupe_run` while one works is refused with a tool
//!   error (`session_busy`, as the session core itself refuses a second prompt).
//! - The result: the lead's answer; the files written or edited ([`super::changes`]); the
//!   calls denied and how to allow such calls; what the run said (recovered messages, the
//!   closing tokens line); the run's tokens and estimated cost per agent, from the usage
//!   records written since the run started (as `troupe usage` reads them).

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::RoleServer;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::clock::{Clock, SystemClock};
use troupe::permissions::ApprovalProvider;
use troupe::prices::report::UsageReport;

use super::asks::{Elicited, NoElicitation, HOW_TO_ALLOW};
use super::changes::{Changes, Denied};
use super::progress::Progress;
use crate::commands::session::core::{Asker, Core, Hooks};
use crate::error::CliError;

/// What `troupe_run` keeps across calls.
#[derive(Default)]
pub struct Runs {
    /// What the runs said (recovered messages, the closing usage line), for the run's result.
    said: Mutex<Vec<String>>,
    /// Held by the `troupe_run` going on, from its start until its team is closed and its
    /// result made: one run at a time.
    slot: tokio::sync::Mutex<()>,
    /// The cancel of the request that holds the slot. rmcp fires it as it reads the client's
    /// `notifications/cancelled`, before it reads the next request: a `troupe_run` that comes
    /// after a cancel finds it fired and waits for the slot instead of being refused.
    holder: Mutex<Option<CancellationToken>>,
}

impl Runs {
    /// The session's `said`: lines on stderr, and kept for the run's result.
    pub fn said(&self, lines: Vec<String>) {
        for line in &lines {
            eprintln!("{line}");
        }
        troupe::sync::lock(&self.said).extend(lines);
    }

    /// The run slot: at once when no run goes on; once the run going on is closed when it was
    /// cancelled; `None` (refused) when it goes on, or when `cancel` fires while waiting.
    async fn slot(&self, cancel: &CancellationToken) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if let Ok(slot) = self.slot.try_lock() {
            return Some(slot);
        }
        let cancelled = troupe::sync::lock(&self.holder)
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled);
        if !cancelled {
            return None;
        }
        tokio::select! {
            slot = self.slot.lock() => Some(slot),
            () = cancel.cancelled() => None,
        }
    }
}

pub async fn troupe_run(
    core: &Core,
    runs: &Runs,
    prompt: &str,
    context: RequestContext<RoleServer>,
) -> CallToolResult {
    let Some(_slot) = runs.slot(&context.ct).await else {
        return busy();
    };
    *troupe::sync::lock(&runs.holder) = Some(context.ct.clone());
    let result = run(core, runs, prompt, &context).await;
    *troupe::sync::lock(&runs.holder) = None;
    result
}

/// One run, holding the slot.
async fn run(
    core: &Core,
    runs: &Runs,
    prompt: &str,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let progress = context
        .meta
        .get_progress_token()
        .map(|token| Progress::start(context.peer.clone(), token));
    let changes = Arc::new(Changes::default());
    let hooks = Hooks {
        listeners: progress.iter().map(Progress::listener).collect(),
        observer: Some(changes.clone()),
        asker: Some(asker(context)),
    };
    troupe::sync::lock(&runs.said).clear();
    let started = SystemClock.now();
    let cancelled = context.ct.clone();
    let work = core.prompt(prompt, hooks);
    tokio::pin!(work);
    let outcome = tokio::select! {
        biased;
        outcome = &mut work => outcome,
        () = cancelled.cancelled() => {
            tracing::info!("troupe_run cancelled by the MCP client: stopping the team");
            core.cancel();
            work.await
        }
    };
    if let Some(progress) = progress {
        progress.finish().await;
    }
    if matches!(&outcome, Err(e) if e.code() == "session_busy") {
        return busy();
    }
    let said = std::mem::take(&mut *troupe::sync::lock(&runs.said));
    let (files, denied) = changes.take();
    let usage = match crate::commands::usage::report_by_agent(
        core.workspace(),
        core.store(),
        Some(started),
    )
    .await
    {
        Ok(report) => Some(report),
        Err(e) => {
            tracing::debug!(error = %e, "the run's usage could not be read");
            None
        }
    };
    result(
        outcome.map(|o| o.answer),
        &files,
        &denied,
        &said,
        usage.as_ref(),
    )
}

/// Under `--approval ask`: the run's asks go to the client as elicitations when it can be
/// asked, else they are denied (with how to allow them).
fn asker(context: &RequestContext<RoleServer>) -> Asker {
    let peer = context.peer.clone();
    let elicits = peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form);
    Arc::new(move |cancel| -> Arc<dyn ApprovalProvider> {
        if elicits {
            Arc::new(Elicited::new(peer.clone(), cancel))
        } else {
            Arc::new(NoElicitation)
        }
    })
}

/// The refusal of a second run.
fn busy() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        "a troupe_run is already going on in this workspace; wait for its result, or cancel \
         it, before starting another (troupe_send reaches the lead meanwhile) [session_busy]",
    )])
}

/// The run's result: its text (what a person reads) and its structured content.
fn result(
    outcome: Result<String, CliError>,
    files: &[String],
    denied: &[Denied],
    said: &[String],
    usage: Option<&UsageReport>,
) -> CallToolResult {
    let mut text = String::new();
    let mut value = json!({
        "files_changed": files,
        "denied": denied,
        "said": said,
    });
    let failed = outcome.is_err();
    match &outcome {
        Ok(answer) => {
            text.push_str(answer);
            value["answer"] = Value::String(answer.clone());
        }
        Err(e) => {
            text.push_str(&format!("troupe: {} [{}]", e.cause(), e.code()));
            value["error"] = Value::String(e.cause().to_owned());
            value["code"] = Value::String(e.code().to_owned());
        }
    }
    text.push_str("\n\n");
    if files.is_empty() {
        text.push_str("files changed: none\n");
    } else {
        text.push_str(&format!("files changed: {}\n", files.join(", ")));
    }
    if !denied.is_empty() {
        text.push_str(&format!("denied ({}):\n", denied.len()));
        for call in denied {
            text.push_str(&format!(
                "  {} {}: {}\n",
                call.agent,
                call.call,
                troupe::store::events::kinds::cut(&call.reason, 300)
            ));
        }
        text.push_str(&format!("{HOW_TO_ALLOW}\n"));
    }
    for line in said {
        text.push_str(line);
        text.push('\n');
    }
    if let Some(report) = usage {
        // A run with a cost budget says its cost itself.
        let said_cost = said.iter().any(|line| line.starts_with("estimated cost:"));
        if let Some(line) = cost_line(report).filter(|_| !said_cost) {
            text.push_str(&line);
            text.push('\n');
        }
        value["usage"] = json!({"by_agent": report.groups, "total": report.total});
    }
    let content = vec![ContentBlock::text(text.trim_end().to_owned())];
    let mut result = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(value);
    result
}

/// `estimated cost: $0.0123`, or why there is none; nothing when no tokens were spent.
fn cost_line(report: &UsageReport) -> Option<String> {
    let total = &report.total;
    if total.tokens.total_tokens == 0 {
        return None;
    }
    let unpriced = (!total.unpriced_models.is_empty())
        .then(|| format!(" (no price for {})", total.unpriced_models.join(", ")));
    Some(match total.cost {
        Some(cost) => format!(
            "estimated cost: {}{}",
            cost.text(),
            unpriced.unwrap_or_default()
        ),
        None => format!("estimated cost: unknown{}", unpriced.unwrap_or_default()),
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn text_of(result: &CallToolResult) -> String {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[test]
    fn the_result_says_the_answer_the_files_the_denials_and_what_the_run_said() {
        let denied = [Denied {
            agent: "lead".into(),
            tool: "shell".into(),
            call: "shell: make deploy".into(),
            rule: "default+approval:mcp".into(),
            reason: "not now".into(),
        }];
        let said = ["tokens: lead 1,200 in / 34 out · total 1,234".to_owned()];
        let files = ["README.md".to_owned(), "src/lib.rs".to_owned()];
        let done = result(Ok("All done.".into()), &files, &denied, &said, None);
        assert_eq!(done.is_error, Some(false));
        assert_eq!(
            text_of(&done),
            format!(
                "All done.\n\nfiles changed: README.md, src/lib.rs\ndenied (1):\n  lead shell: \
                 make deploy: not now\n{HOW_TO_ALLOW}\ntokens: lead 1,200 in / 34 out · total \
                 1,234"
            )
        );
        let value = done.structured_content.unwrap_or_default();
        assert_eq!(value["answer"], "All done.");
        assert_eq!(value["files_changed"], json!(["README.md", "src/lib.rs"]));
        assert_eq!(value["denied"][0]["reason"], "not now");

        let failed = result(
            Err(CliError::incomplete("the lead stopped".into()).with_code("turn_limit")),
            &[],
            &[],
            &[],
            None,
        );
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(
            text_of(&failed),
            "troupe: the lead stopped [turn_limit]\n\nfiles changed: none"
        );
        assert_eq!(
            failed.structured_content.unwrap_or_default()["code"],
            "turn_limit"
        );
    }
}
