//! Text and JSON rendering of command results.

use std::io::Write;

use serde::Serialize;
use troupe::cron::CronJobView;
use troupe::inspect::{MailboxReport, RequestView, StatusReport};
use troupe::jobs::{JobRecord, JobState};
use troupe::store::tasks::TaskView;
use troupe::terminal_text::{for_terminal, json_for_terminal};
use troupe::wire::RequestStatus;

use crate::error::CliError;

/// Prints `value` as JSON: as serde writes it, with DEL, the C1 controls and the invisible
/// characters written as `\uXXXX` escapes too ([`json_for_terminal`]; serde escapes the C0
/// controls itself). A program reads the same value.
pub fn print_json(value: &impl Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(CliError::failed)?;
    write_stdout(&format!("{}\n", json_for_terminal(&text)))
}

/// Prints a command's text: what it holds of a workspace, a model, a tool or a server (a task's
/// subject, a message, a hook command, the run's answer) is shown, never obeyed — its control
/// characters are escaped ([`troupe::terminal_text`]). Every text result goes through here.
pub fn print_text(text: &str) -> Result<(), CliError> {
    write_stdout(&for_terminal(text))
}

/// Prints text that must not be escaped again: troupe's own that must stay byte for byte (a
/// shell completion script), or text whose outside values were escaped where they were put in
/// place (the trust review, whose one-line items escape their newlines too).
pub fn print_verbatim(text: &str) -> Result<(), CliError> {
    write_stdout(text)
}

fn write_stdout(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // A closed pipe (`troupe status | head`) is not a failure of troupe.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::failed(format_args!("cannot write output: {e}"))),
    }
}

pub fn status(report: &StatusReport) -> String {
    let mut out = format!("workspace  {}\n", report.workspace);
    match (&report.run.active, &report.run.holder) {
        (true, Some(holder)) => out.push_str(&format!("run        active ({holder})\n")),
        _ => out.push_str("run        none\n"),
    }
    out.push_str("\nteammates\n");
    if report.teammates.is_empty() {
        out.push_str("  (none)\n");
    } else {
        out.push_str(&format!("  {:<20} {:<9} {}\n", "name", "status", "role"));
    }
    for t in &report.teammates {
        out.push_str(&format!(
            "  {:<20} {:<9} {}",
            t.name,
            t.status.as_str(),
            t.role
        ));
        if let Some(detail) = &t.detail {
            out.push_str(&format!("  ({detail})"));
        }
        out.push('\n');
    }
    if let Some(workers) = &report.workers {
        out.push_str("\nworkers (shared store)\n");
        if workers.is_empty() {
            out.push_str("  (none)\n");
        } else {
            out.push_str(&format!(
                "  {:<28} {:<7} {:>10}  {}\n",
                "worker", "role", "heartbeat", "teammates"
            ));
        }
        for w in workers {
            let teammates = if w.teammates.is_empty() {
                "-".to_owned()
            } else {
                w.teammates.join(", ")
            };
            out.push_str(&format!(
                "  {:<28} {:<7} {:>8.1}s  {}\n",
                w.id,
                w.role,
                w.heartbeat_age_ms as f64 / 1000.0,
                teammates
            ));
        }
    }
    out.push_str("\nmailboxes\n");
    if report.mailboxes.is_empty() {
        out.push_str("  (none)\n");
    } else {
        out.push_str(&format!(
            "  {:<20} {:>7} {:>10} {:>7} {:>10}\n",
            "agent", "ready", "processing", "done", "quarantine"
        ));
    }
    for m in &report.mailboxes {
        out.push_str(&format!(
            "  {:<20} {:>7} {:>10} {:>7} {:>10}\n",
            m.agent, m.ready, m.processing, m.done, m.quarantine
        ));
    }
    out.push_str("\npending requests\n");
    if report.pending_requests.is_empty() {
        out.push_str("  (none)\n");
    } else {
        out.push_str(&format!("  {}", request_header()));
    }
    for r in &report.pending_requests {
        out.push_str(&format!("  {}", request_line(r)));
    }
    let waiting = report
        .pending_requests
        .iter()
        .filter(|r| {
            r.kind == troupe::wire::RequestKind::Permission.as_str()
                && r.status == RequestStatus::Pending
        })
        .count();
    if waiting > 0 {
        out.push_str(&format!(
            "  {waiting} {} waiting for approval: troupe approve ID or troupe deny ID\n",
            if waiting == 1 { "call" } else { "calls" }
        ));
    }
    out.push_str("\njobs\n");
    if report.jobs.is_empty() {
        out.push_str("  (none)\n");
    } else {
        out.push_str(&format!("  {}", job_header()));
    }
    for job in &report.jobs {
        out.push_str(&format!("  {}", job_line(job)));
    }
    let t = &report.tasks;
    out.push_str(&format!(
        "\ntasks      {} ({} pending, {} in progress, {} completed)\n",
        t.total, t.pending, t.in_progress, t.completed
    ));
    out.push_str(&format!(
        "state      {} in .troupe/",
        bytes(report.state_bytes)
    ));
    if report.state_bytes > troupe::gc::size::SUGGEST_GC_ABOVE {
        out.push_str(" (`troupe gc --dry-run` shows what [retention] lets go)");
    }
    out.push('\n');
    out.push_str(&usage(&report.usage));
    out
}

/// A size for people: `512 B`, `3.1 KB`, `4.2 MB`, `1.3 GB` (decimal units).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The `usage` part of `troupe status`: totals, one line per agent, the latest run.
fn usage(totals: &troupe::store::usage::UsageTotals) -> String {
    use troupe::agent::usage::thousands;
    let counts = |c: &troupe::store::usage::TokenCounts| {
        // Of the input, what a prompt cache served, when a provider said so.
        let cached = if c.cache_read_tokens > 0 || c.cache_write_tokens > 0 {
            format!(
                "; {} cached, {} written to the cache",
                thousands(c.cache_read_tokens),
                thousands(c.cache_write_tokens)
            )
        } else {
            String::new()
        };
        // Counts troupe estimated for a server that reported none.
        let estimated = if c.estimated_tokens > 0 {
            format!("; {} estimated", thousands(c.estimated_tokens))
        } else {
            String::new()
        };
        format!(
            "{} tokens ({} in / {} out{cached}{estimated})",
            thousands(c.total_tokens),
            thousands(c.prompt_tokens),
            thousands(c.completion_tokens)
        )
    };
    if totals.runs == 0 {
        return "usage      none recorded\n".to_owned();
    }
    let runs = if totals.runs == 1 { "run" } else { "runs" };
    let mut out = format!(
        "usage      {} over {} {runs}\n",
        counts(&totals.total),
        totals.runs
    );
    out.push_str(&format!(
        "  {:<20} {:>12} {:>12} {:>12} {:>12}\n",
        "agent", "prompt", "completion", "total", "cached"
    ));
    for (agent, c) in &totals.agents {
        out.push_str(&format!(
            "  {:<20} {:>12} {:>12} {:>12} {:>12}\n",
            agent,
            thousands(c.prompt_tokens),
            thousands(c.completion_tokens),
            thousands(c.total_tokens),
            thousands(c.cache_read_tokens)
        ));
    }
    if let Some(latest) = &totals.latest_run {
        out.push_str(&format!(
            "  latest run {}: {}\n",
            latest.run_id,
            counts(&latest.counts)
        ));
    }
    if totals.total.estimated_tokens > 0 {
        out.push_str(&format!("  {ESTIMATED_NOTE}\n"));
    }
    out
}

/// Said under usage that holds estimated tokens (`troupe status`, `troupe usage`).
pub const ESTIMATED_NOTE: &str = "estimated: the server reported no usage for some calls; \
                                  troupe counted about 4 bytes of request and answer a token";

/// One line per task: id, status, owner, when its lease runs out, subject, its tags and
/// assignee, and what still blocks it.
pub fn tasks(views: &[TaskView]) -> String {
    if views.is_empty() {
        return "no tasks\n".to_owned();
    }
    let mut out = format!(
        "{:<36}  {:<11} {:<20} {:<24}  {}\n",
        "id", "status", "owner", "lease until", "subject"
    );
    for v in views {
        let task = &v.task;
        let owner = task.owner.as_ref().map_or("-", |o| o.as_str());
        let lease = task
            .lease
            .map_or_else(|| "-".to_owned(), |l| l.expires_at_utc.to_string());
        out.push_str(&format!(
            "{}  {:<11} {:<20} {:<24}  {}",
            task.id,
            task.status.as_str(),
            owner,
            lease,
            first_line(&task.subject, 60)
        ));
        if !task.tags.is_empty() {
            out.push_str(&format!("  [{}]", task.tags.join(", ")));
        }
        if let Some(assignee) = &task.assignee {
            out.push_str(&format!("  (for {assignee})"));
        }
        if !v.open_blockers.is_empty() {
            let open: Vec<String> = v.open_blockers.iter().map(ToString::to_string).collect();
            out.push_str(&format!("  (blocked by {})", open.join(", ")));
        }
        out.push('\n');
    }
    out
}

/// The teammates' worktrees: one line each (`?` where git could not tell), and any problem.
pub fn worktrees(views: &[troupe::worktree::WorktreeView]) -> String {
    if views.is_empty() {
        return "no worktrees\n".to_owned();
    }
    fn shown<T: ToString>(value: Option<T>) -> String {
        value.map_or_else(|| "?".to_owned(), |v| v.to_string())
    }
    let mut out = format!(
        "{:<20} {:<28} {:<12} {:>5} {:>6}  {:<5} {}\n",
        "name", "branch", "base", "ahead", "behind", "dirty", "merged"
    );
    for v in views {
        out.push_str(&format!(
            "{:<20} {:<28} {:<12} {:>5} {:>6}  {:<5} {}\n",
            v.name.as_str(),
            v.branch,
            v.base.get(..12).unwrap_or(&v.base),
            shown(v.ahead),
            shown(v.behind),
            shown(v.dirty),
            shown(v.merged),
        ));
        if let Some(problem) = &v.problem {
            out.push_str(&format!("  {problem}\n"));
        }
    }
    out
}

/// The column names of [`job_line`].
fn job_header() -> String {
    format!(
        "{:<36}  {:<9} {:<12} {:<4}  {:<24}  {:<24}  {}\n",
        "id", "status", "agent", "exit", "started", "finished", "command"
    )
}

/// One job: id, status, agent, exit code, start and end, and its command's first line.
fn job_line(job: &JobRecord) -> String {
    let (exit, finished) = match &job.state {
        JobState::Running => ("-".to_owned(), "-".to_owned()),
        JobState::Finished {
            exit_code,
            finished_at_utc,
            ..
        } => (
            exit_code.map_or_else(|| "-".to_owned(), |c| c.to_string()),
            finished_at_utc.to_string(),
        ),
    };
    format!(
        "{}  {:<9} {:<12} {:<4}  {:<24}  {:<24}  {}\n",
        job.id,
        job.status().as_str(),
        job.agent.as_str(),
        exit,
        job.started_at_utc.to_string(),
        finished,
        first_line(&job.command, 60)
    )
}

pub fn jobs(jobs: &[JobRecord]) -> String {
    if jobs.is_empty() {
        return "no background jobs\n".to_owned();
    }
    let mut out = job_header();
    out.extend(jobs.iter().map(job_line));
    out
}

/// The column names of [`request_line`].
fn request_header() -> String {
    format!(
        "{:<8}  {:<36}  {:<13} {:<12} {:<12} {:<8}  {:<33}  {}\n",
        "short", "id", "kind", "from", "to", "status", "when", "content"
    )
}

/// One request. `when` is the deadline of an open or expired request, and the time of the
/// answer of a resolved one: a resolved request no longer has a deadline worth showing.
fn request_line(r: &RequestView) -> String {
    let when = match (&r.resolution, r.status) {
        (Some(resolution), _) => format!("resolved {}", resolution.resolved_at_utc),
        (None, RequestStatus::Expired) => format!("expired {}", r.expires_at_utc),
        (None, _) => format!("expires {}", r.expires_at_utc),
    };
    // The short id is what a person types (`troupe approve`, `deny`, `review`).
    let short =
        troupe::wire::RequestId::parse(&r.id).map_or_else(|_| r.id.clone(), |id| id.short());
    format!(
        "{:<8}  {}  {:<13} {:<12} {:<12} {:<8}  {:<33}  {}\n",
        short,
        r.id,
        r.kind,
        r.sender,
        r.target,
        r.status.as_str(),
        when,
        first_line(&request_text(r), 60)
    )
}

/// What a request line shows of its content: a permission request's call in one line
/// (`shell: cargo test`), any other request's text.
fn request_text(r: &RequestView) -> String {
    if r.kind == troupe::wire::RequestKind::Permission.as_str() {
        if let Ok(ask) = troupe::approvals::PermissionAsk::from_content(&r.content) {
            return ask.summary();
        }
    }
    r.content.clone()
}

pub fn requests(views: &[RequestView]) -> String {
    if views.is_empty() {
        return "no protocol requests\n".to_owned();
    }
    let mut out = request_header();
    out.extend(views.iter().map(request_line));
    out
}

pub fn cron_jobs(jobs: &[CronJobView]) -> String {
    if jobs.is_empty() {
        return "no durable cron jobs\n".to_owned();
    }
    let mut out = format!(
        "{:<36}  {:<16} {:<20} {:<9}  {:<24}  {:<29}  {}\n",
        "id", "cron", "timezone", "kind", "next (UTC)", "next (local)", "prompt"
    );
    out.extend(jobs.iter().map(|j| {
        format!(
            "{}  {:<16} {:<20} {:<9}  {:<24}  {:<29}  {}\n",
            j.id,
            j.cron,
            j.timezone,
            if j.recurring { "recurring" } else { "once" },
            j.next_fire_utc.to_string(),
            j.next_fire_local,
            first_line(&j.prompt, 60)
        )
    }));
    out
}

pub fn mailbox(report: &MailboxReport) -> String {
    if report.messages.is_empty() {
        return format!("mailbox of {} is empty\n", report.agent);
    }
    let mut out = format!(
        "{:<10} {:<24}  {:<36}  {:<12} {:<12} {:<22} {}\n",
        "state", "created", "id", "from", "to", "kind", "content"
    );
    for entry in &report.messages {
        match &entry.message {
            Some(message) => {
                let field = |k: &str| message.get(k).and_then(|v| v.as_str()).unwrap_or("");
                out.push_str(&format!(
                    "{:<10} {:<24}  {:<36}  {:<12} {:<12} {:<22} ",
                    entry.state,
                    field("created_at_utc"),
                    field("id"),
                    field("sender"),
                    field("recipient"),
                    field("kind"),
                ));
                if let Some(request_id) = message.get("request_id").and_then(|v| v.as_str()) {
                    out.push_str(&format!("(request {request_id}) "));
                }
                out.push_str(&format!("{}\n", first_line(field("content"), 60)));
            }
            None => out.push_str(&format!(
                "{:<10} {} (invalid: {})\n",
                entry.state,
                entry.file_name,
                entry.reason.as_deref().unwrap_or("no reason recorded")
            )),
        }
    }
    out
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > max || text.lines().nth(1).is_some() {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use troupe::cron::CronJobId;
    use troupe::inspect::ResolutionView;
    use troupe::wire::UtcTime;

    fn at(text: &str) -> UtcTime {
        UtcTime::parse(text).unwrap()
    }

    #[test]
    fn job_lines_show_status_exit_code_and_times_under_a_header() {
        let running = JobRecord {
            id: troupe::jobs::JobId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
            agent: troupe::wire::AgentName::lead(),
            command: "cargo test\nsecond line".to_owned(),
            started_at_utc: at("2026-07-30T08:00:00.000Z"),
            state: JobState::Running,
        };
        let failed = JobRecord {
            state: JobState::Finished {
                end: troupe::jobs::JobEnd::Failed,
                exit_code: Some(101),
                finished_at_utc: at("2026-07-30T08:01:00.000Z"),
                output_tail: "error\n".to_owned(),
            },
            ..running.clone()
        };
        assert_eq!(jobs(&[]), "no background jobs\n");
        assert_eq!(
            jobs(&[running, failed]),
            "id                                    status    agent        exit  \
             started                   finished                  command\n\
             00000000-0000-4000-8000-000000000001  running   lead         -     \
             2026-07-30T08:00:00.000Z  -                         cargo test…\n\
             00000000-0000-4000-8000-000000000001  failed    lead         101   \
             2026-07-30T08:00:00.000Z  2026-07-30T08:01:00.000Z  cargo test…\n"
        );
    }

    #[test]
    fn cron_jobs_text_shows_schedule_zone_kind_next_fire_and_prompt_under_a_header() {
        assert_eq!(cron_jobs(&[]), "no durable cron jobs\n");
        let job = CronJobView {
            id: CronJobId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
            cron: "30 2 * * *".to_owned(),
            timezone: "Europe/Berlin".to_owned(),
            prompt: "check the build\nthen report".to_owned(),
            recurring: false,
            durable: true,
            next_fire_utc: at("2026-07-31T00:30:00.000Z"),
            next_fire_local: "2026-07-31T02:30:00.000+02:00".to_owned(),
        };
        assert_eq!(
            cron_jobs(&[job]),
            "id                                    cron             timezone             kind       \
             next (UTC)                next (local)                   prompt\n\
             00000000-0000-4000-8000-000000000001  30 2 * * *       Europe/Berlin        once       \
             2026-07-31T00:30:00.000Z  2026-07-31T02:30:00.000+02:00  check the build…\n"
        );
    }

    fn request(id: &str, status: RequestStatus, resolved: Option<&str>) -> RequestView {
        RequestView {
            id: id.to_owned(),
            kind: "plan_approval",
            sender: "writer".to_owned(),
            target: "lead".to_owned(),
            status,
            content: "the plan".to_owned(),
            created_at_utc: at("2026-07-30T08:00:00.000Z"),
            expires_at_utc: at("2026-07-30T08:05:00.000Z"),
            resolution: resolved.map(|t| ResolutionView {
                message_id: "00000000-0000-4000-8000-0000000000ff".to_owned(),
                approved: status == RequestStatus::Approved,
                content: "ok".to_owned(),
                resolved_at_utc: at(t),
            }),
        }
    }

    #[test]
    fn requests_have_a_header_and_resolved_ones_show_no_expiry() {
        assert_eq!(requests(&[]), "no protocol requests\n");
        let text = requests(&[
            request(
                "00000000-0000-4000-8000-000000000001",
                RequestStatus::Pending,
                None,
            ),
            request(
                "00000000-0000-4000-8000-000000000002",
                RequestStatus::Expired,
                None,
            ),
            request(
                "00000000-0000-4000-8000-000000000003",
                RequestStatus::Approved,
                Some("2026-07-30T08:01:00.000Z"),
            ),
            request(
                "00000000-0000-4000-8000-000000000004",
                RequestStatus::Rejected,
                Some("2026-07-30T08:02:00.000Z"),
            ),
        ]);
        assert_eq!(
            text,
            "short     id                                    kind          from         to           \
             status    when                               content\n\
             00000001  00000000-0000-4000-8000-000000000001  plan_approval writer       lead         \
             pending   expires 2026-07-30T08:05:00.000Z   the plan\n\
             00000002  00000000-0000-4000-8000-000000000002  plan_approval writer       lead         \
             expired   expired 2026-07-30T08:05:00.000Z   the plan\n\
             00000003  00000000-0000-4000-8000-000000000003  plan_approval writer       lead         \
             approved  resolved 2026-07-30T08:01:00.000Z  the plan\n\
             00000004  00000000-0000-4000-8000-000000000004  plan_approval writer       lead         \
             rejected  resolved 2026-07-30T08:02:00.000Z  the plan\n"
        );
    }
}
