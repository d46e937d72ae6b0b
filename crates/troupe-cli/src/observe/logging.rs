//! The tracing output on stderr: `warn` without a flag, `info` with `-v`, `debug` with `-vv`,
//! `trace` beyond; `RUST_LOG`, when set, wins. Colours as for the rest of stderr.
//!
//! A command without `-v` or `RUST_LOG` prints formatted lines only: its warnings and errors
//! come as notices ([`Notice`]: one line, `troupe: …`, each once), not as log records with a
//! time and a module path. A run also leaves out the model client's warnings about retries and
//! fallbacks (it shows them as event lines, `model_retry` and `model_fallback`, or as its
//! error).

use std::collections::HashSet;
use std::fmt;
use std::io::IsTerminal;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use super::{style, terminal::StderrRecord};

/// The filter for `verbose` (the count of `-v`) when `RUST_LOG` is not set. The MCP SDK's own
/// messages are left out by default and shown from `-v`: troupe reports a server that fails or
/// dies itself, once.
fn level(verbose: u8) -> &'static str {
    match verbose {
        0 => "warn,rmcp=off",
        1 => "info,rmcp=warn",
        2 => "debug",
        _ => "trace",
    }
}

/// The filter of a run's notices: [`level`]`(0)`, less what the run shows as event lines.
const RUN_NOTICES: &str = "warn,rmcp=off,troupe::model::transport=error";

/// Installs the subscriber. A `RUST_LOG` that does not parse falls back to the flag's level
/// (tracing-subscriber says which directive it skipped). Without `-v` or `RUST_LOG`, logs are
/// notices; `run` is whether the command runs a team (`troupe run`, `troupe demo`), whose
/// notices leave out what its event lines show.
pub fn init(verbose: u8, run: bool) {
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|raw| !raw.trim().is_empty());
    let colour = style::colour_wanted(std::io::stderr().is_terminal());
    if verbose == 0 && rust_log.is_none() {
        let notices = if run { RUN_NOTICES } else { level(0) };
        let _ = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(notices))
            .with_writer(StderrRecord::default)
            .event_format(Notice::default())
            .try_init();
        return;
    }
    let filter = match rust_log {
        Some(raw) => EnvFilter::builder()
            .parse(raw.trim())
            .unwrap_or_else(|_| EnvFilter::new(level(verbose))),
        None => EnvFilter::new(level(verbose)),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(StderrRecord::default)
        .with_ansi(colour)
        .try_init();
}

/// A log record as a person's notice: `troupe: <message> (<field>: <value>, …)` on one line,
/// control characters escaped, each distinct line once. A field whose value the message
/// already quotes is not repeated.
#[derive(Default)]
struct Notice {
    shown: Mutex<HashSet<String>>,
}

impl<S, N> FormatEvent<S, N> for Notice
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let text = fields.text();
        if !troupe::sync::lock(&self.shown).insert(text.clone()) {
            return Ok(());
        }
        writeln!(
            writer,
            "troupe: {}",
            troupe::terminal_text::line_for_terminal(&text)
        )
    }
}

/// The message and the other fields of one record, as text.
#[derive(Default)]
struct Fields {
    message: String,
    others: Vec<(&'static str, String)>,
}

impl Fields {
    fn text(&self) -> String {
        let others: Vec<String> = self
            .others
            .iter()
            .filter(|(_, value)| !self.message.contains(value.as_str()))
            .map(|(name, value)| format!("{name}: {value}"))
            .collect();
        match (self.message.is_empty(), others.is_empty()) {
            (_, true) => self.message.clone(),
            (true, false) => others.join(", "),
            (false, false) => format!("{} ({})", self.message, others.join(", ")),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record(field, format!("{value:?}"));
    }
}

impl Fields {
    fn record(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.others.push((field.name(), value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Fields;

    #[test]
    fn each_v_is_one_level_more() {
        assert_eq!(
            [0, 1, 2, 3, 9].map(super::level),
            ["warn,rmcp=off", "info,rmcp=warn", "debug", "trace", "trace"]
        );
    }

    #[test]
    fn a_notice_is_the_message_then_the_fields_it_does_not_quote() {
        let fields = |message: &str, others: &[(&'static str, &str)]| Fields {
            message: message.to_owned(),
            others: others.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        };
        assert_eq!(
            fields("model \"m\" has no price", &[("model", "m")]).text(),
            "model \"m\" has no price"
        );
        assert_eq!(
            fields("cannot note", &[("job", "j1"), ("error", "gone")]).text(),
            "cannot note (job: j1, error: gone)"
        );
        assert_eq!(fields("", &[("job", "j1")]).text(), "job: j1");
    }
}
