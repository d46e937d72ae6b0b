//! Shows a run as it happens: tool activity and team changes, one line each, on stderr for
//! `troupe run` and as the timeline on stdout for `troupe demo`.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

use troupe::agent::observer::CompactionReport;
use troupe::agent::transcript::BoundaryKind;
use troupe::agent::RunObserver;
use troupe::model::{ModelResponse, ToolCall};
use troupe::team::{TeamObserver, TeamUpdate};
use troupe::tools::ToolOutcome;
use troupe::wire::{AgentName, MailboxMessage};

pub enum Sink {
    Stdout,
    Stderr,
}

pub struct Console {
    start: Instant,
    sink: Sink,
    /// Show "thinking" lines while a model call is in flight (only on a terminal).
    progress: bool,
    lock: Mutex<()>,
}

impl Console {
    pub fn new(sink: Sink) -> Self {
        let progress = matches!(sink, Sink::Stderr) && std::io::stderr().is_terminal();
        Self {
            start: Instant::now(),
            sink,
            progress,
            lock: Mutex::new(()),
        }
    }

    fn line(&self, text: &str) {
        let _guard = self.lock.lock();
        let stamp = format!("{:>8.3}s", self.start.elapsed().as_secs_f64());
        let out = format!("{stamp}  {text}\n");
        let _ = match self.sink {
            Sink::Stdout => std::io::stdout().write_all(out.as_bytes()),
            Sink::Stderr => std::io::stderr().write_all(out.as_bytes()),
        };
    }
}

fn short(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

impl RunObserver for Console {
    fn model_call_started(&self, agent: &AgentName, call_number: usize) {
        if self.progress {
            self.line(&format!(
                "{agent:<8} … waiting for the model (call {call_number})"
            ));
        }
    }

    fn model_call_finished(&self, _agent: &AgentName, _response: &ModelResponse) {}

    fn tool_started(&self, _agent: &AgentName, _call: &ToolCall) {}

    fn tool_finished(&self, agent: &AgentName, call: &ToolCall, outcome: &ToolOutcome) {
        let verdict = match (&outcome.decision, outcome.is_error) {
            (Some(d), _) if !d.allowed => format!("DENIED ({}): {}", d.rule, short(&d.reason, 110)),
            (_, true) => format!("failed: {}", short(&outcome.content, 110)),
            (_, false) => format!("ok: {}", short(&outcome.content, 80)),
        };
        self.line(&format!(
            "{agent:<8} tool {} {}  → {verdict}",
            call.name,
            short(&call.arguments, 70)
        ));
    }

    fn compacted(&self, agent: &AgentName, report: &CompactionReport) {
        let how = match report.kind {
            BoundaryKind::Summary => "summarised",
            BoundaryKind::Dropped => "dropped (no valid summary)",
        };
        self.line(&format!(
            "{agent:<8} context compacted ({}): {} messages → {}, {} KB → {} KB, older history {how}",
            report.trigger.as_str(),
            report.messages_before,
            report.messages_after,
            report.bytes_before / 1024,
            report.bytes_after / 1024,
        ));
    }
}

impl TeamObserver for Console {
    fn update(&self, update: &TeamUpdate) {
        let text = match update {
            TeamUpdate::Spawned { name, role } => format!("team     spawned {name} ({role})"),
            TeamUpdate::Status {
                name,
                status,
                detail,
            } => match detail {
                Some(d) => format!("team     {name} is {} ({})", status.as_str(), short(d, 100)),
                None => format!("team     {name} is {}", status.as_str()),
            },
            TeamUpdate::Sent(MailboxMessage::Ordinary(m)) => format!(
                "mail     {} → {} [{}] {}  \"{}\"",
                m.sender,
                m.recipient,
                m.kind.as_str(),
                m.id,
                short(m.content.as_str(), 60)
            ),
            TeamUpdate::Sent(MailboxMessage::Protocol(p)) => format!(
                "protocol {} → {} [{}] request {}{}  \"{}\"",
                p.sender(),
                p.recipient(),
                p.kind().as_str(),
                p.request_id(),
                match p.approved() {
                    Some(true) => " approved",
                    Some(false) => " rejected",
                    None => "",
                },
                short(p.content().as_str(), 50)
            ),
            TeamUpdate::Resolved(r) => format!(
                "protocol request {} ({}) is now {}",
                r.id(),
                r.kind().as_str(),
                r.stored_status()
            ),
            TeamUpdate::Quarantined {
                agent,
                message,
                reason,
            } => {
                format!(
                    "mail     quarantined {message} in {agent}'s mailbox: {}",
                    short(reason, 90)
                )
            }
            TeamUpdate::Expired(r) => format!(
                "protocol request {} ({} {} → {}) expired without an answer",
                r.id(),
                r.kind().as_str(),
                r.sender(),
                r.target()
            ),
        };
        self.line(&text);
    }
}
