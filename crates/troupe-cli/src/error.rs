//! The CLI's error: how a command failed, its stable code, and the exit code it maps to.
//!
//! In a module of its own because every command and the renderer return it: it depends on
//! nothing of theirs, so neither has to import the other for it.

use std::io::Write;
use std::process::ExitCode;

/// The exit code of an interrupted command (128 + SIGINT, as shells report it).
pub const INTERRUPTED_EXIT: u8 = 130;

/// How a command failed, which decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// Bad input or missing configuration: exit 2.
    Usage(String),
    /// Anything else: exit 1.
    Failed(String),
    /// The team stopped without a final answer (turn limit): exit 3.
    Incomplete(String),
    /// Ctrl-C: exit 130.
    Interrupted(String),
    /// A failure of a run that is already in its event stream (`run_ended` carries it): said
    /// as one line on stderr even under `--json`, whose stdout is the stream.
    InStream(Box<CliError>),
}

impl CliError {
    pub fn failed(error: impl std::fmt::Display) -> Self {
        Self::Failed(one_line(&error.to_string()))
    }

    /// A usage error found by clap (unknown flag, missing value, …), already rendered by it.
    /// A first line that ends in `:` (`the following required arguments were not provided:`)
    /// takes the indented lines under it (`<AGENT>`), so the one line names what is missing.
    pub fn from_clap(error: &clap::Error) -> Self {
        let rendered = error.render().to_string();
        let mut lines = rendered.lines();
        let first = lines.next().unwrap_or("invalid arguments");
        let mut message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
        if message.ends_with(':') {
            let listed: Vec<&str> = lines
                .take_while(|l| l.starts_with(char::is_whitespace) && !l.trim().is_empty())
                .map(str::trim)
                .collect();
            if !listed.is_empty() {
                message = format!("{} {}", message, listed.join(", "));
            }
        }
        Self::Usage(message)
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Self::InStream(inner) => inner.exit_code(),
            Self::Usage(_) => 2,
            Self::Failed(_) => 1,
            Self::Incomplete(_) => 3,
            Self::Interrupted(_) => INTERRUPTED_EXIT,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Self::InStream(inner) => inner.message(),
            Self::Usage(m) | Self::Failed(m) | Self::Incomplete(m) | Self::Interrupted(m) => m,
        }
    }

    /// The stable code and the message without it. Every command ends a message with
    /// ` [code]` when the error has one; the others get the code of their kind.
    pub fn code_and_cause(&self) -> (&str, &str) {
        let message = self.message();
        let coded = message
            .strip_suffix(']')
            .and_then(|rest| rest.rsplit_once(" ["))
            .filter(|(_, code)| {
                !code.is_empty()
                    && code
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
        match coded {
            Some((cause, code)) => (code, cause),
            None => (
                match self {
                    Self::Usage(_) => "usage",
                    Self::Failed(_) => "failed",
                    Self::Incomplete(_) => "incomplete",
                    Self::Interrupted(_) => "interrupted",
                    Self::InStream(inner) => return inner.code_and_cause(),
                },
                message,
            ),
        }
    }

    /// Tells the user and gives the exit code: one line `troupe: <cause> [<code>]` on stderr,
    /// or, when JSON was asked for, one object `{"error":{"code","message"}}` on stdout and
    /// nothing on stderr (the exit code is the same). An [`CliError::InStream`] error is always
    /// the stderr line: under `--json` its stdout is the event stream, which already ends with
    /// the error in `run_ended`.
    pub fn report(&self, json: bool) -> ExitCode {
        if let Self::InStream(inner) = self {
            return inner.report(false);
        }
        if json {
            let (code, cause) = self.code_and_cause();
            let object = serde_json::json!({"error": {"code": code, "message": cause}});
            // Written here rather than through `render`, which reports its own failures as a
            // `CliError`: a failure to print the error has nowhere left to go.
            let mut out = std::io::stdout().lock();
            let _ = out
                .write_all(format!("{object}\n").as_bytes())
                .and_then(|()| out.flush());
        } else {
            eprintln!("troupe: {}", self.message());
        }
        ExitCode::from(self.exit_code())
    }
}

/// Errors are printed as one line, whatever they carry.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_a_stable_code() {
        let coded = CliError::Failed("no mailbox for agent ghost [unknown_agent]".into());
        assert_eq!(
            coded.code_and_cause(),
            ("unknown_agent", "no mailbox for agent ghost")
        );
        let plain = CliError::Usage("invalid agent name \"Lead\"".into());
        assert_eq!(
            plain.code_and_cause(),
            ("usage", "invalid agent name \"Lead\"")
        );
        let odd = CliError::Failed("a message that ends [With Brackets]".into());
        assert_eq!(odd.code_and_cause().0, "failed");
    }
}
