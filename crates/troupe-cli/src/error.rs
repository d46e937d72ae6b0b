//! The CLI's error: how a command failed, its stable code, and the exit code it maps to.
//!
//! In a module of its own because every command and the renderer return it: it depends on
//! nothing of theirs, so neither has to import the other for it.

use std::io::Write;
use std::process::ExitCode;

use troupe::error::ErrorCode;

/// The exit code of an interrupted command (128 + SIGINT, as shells report it).
pub const INTERRUPTED_EXIT: u8 = 130;

/// How a command failed, which decides the exit code (and the code of an error that has none
/// of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad input or missing configuration: exit 2.
    Usage,
    /// Anything else: exit 1.
    Failed,
    /// The team stopped without a final answer (turn limit): exit 3.
    Incomplete,
    /// Ctrl-C: exit 130.
    Interrupted,
}

impl Kind {
    /// The code of an error of this kind that was given none.
    fn code(self) -> &'static str {
        match self {
            Self::Usage => "usage",
            Self::Failed => "failed",
            Self::Incomplete => "incomplete",
            Self::Interrupted => "interrupted",
        }
    }
}

/// A command's failure: its kind, its stable code if it has one of its own, and its message.
/// Shown as `<message> [<code>]` (or the message alone when it has no code of its own).
#[derive(Debug)]
pub struct CliError {
    kind: Kind,
    code: Option<&'static str>,
    message: String,
    /// A failure of a run that is already in its event stream (`run_ended` carries it): said
    /// as one line on stderr even under `--json`, whose stdout is the stream.
    in_stream: bool,
}

impl CliError {
    /// An error of `kind` with `message` as it is.
    pub fn new(kind: Kind, message: String) -> Self {
        Self {
            kind,
            code: None,
            message,
            in_stream: false,
        }
    }

    /// Bad input or missing configuration (exit 2).
    pub fn usage(message: String) -> Self {
        Self::new(Kind::Usage, message)
    }

    /// A failure (exit 1), said on one line whatever `error` carries.
    pub fn failed(error: impl std::fmt::Display) -> Self {
        Self::new(Kind::Failed, one_line(&error.to_string()))
    }

    /// A failure (exit 1) of an error of the library, on one line, with the error's own code.
    pub fn coded<E: ErrorCode + std::fmt::Display + ?Sized>(error: &E) -> Self {
        Self::failed(error).with_code(error.code())
    }

    /// The team stopped without a final answer (exit 3).
    pub fn incomplete(message: String) -> Self {
        Self::new(Kind::Incomplete, message)
    }

    /// Ctrl-C (exit 130).
    pub fn interrupted(message: String) -> Self {
        Self::new(Kind::Interrupted, message)
    }

    /// The same error with its own stable code.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// The same error, already told in a run's event stream (see [`CliError::report`]).
    pub fn in_stream(mut self) -> Self {
        self.in_stream = true;
        self
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
        Self::usage(message)
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn exit_code(&self) -> u8 {
        match self.kind {
            Kind::Usage => 2,
            Kind::Failed => 1,
            Kind::Incomplete => 3,
            Kind::Interrupted => INTERRUPTED_EXIT,
        }
    }

    /// The stable code: the error's own, else its kind's (`usage`, `failed`, …).
    pub fn code(&self) -> &'static str {
        self.code.unwrap_or(self.kind.code())
    }

    /// What went wrong, without the code.
    pub fn cause(&self) -> &str {
        &self.message
    }

    /// Tells the user and gives the exit code: one line `troupe: <cause> [<code>]` on stderr,
    /// or, when JSON was asked for, one object `{"error":{"code","message"}}` on stdout and
    /// nothing on stderr (the exit code is the same). An error [`CliError::in_stream`] is always
    /// the stderr line: under `--json` its stdout is the event stream, which already ends with
    /// the error in `run_ended`.
    pub fn report(&self, json: bool) -> ExitCode {
        if json && !self.in_stream {
            let object =
                serde_json::json!({"error": {"code": self.code(), "message": self.cause()}});
            // Written here rather than through `render`, which reports its own failures as a
            // `CliError`: a failure to print the error has nowhere left to go.
            let mut out = std::io::stdout().lock();
            let _ = out
                .write_all(
                    format!(
                        "{}\n",
                        troupe::terminal_text::json_for_terminal(&object.to_string())
                    )
                    .as_bytes(),
                )
                .and_then(|()| out.flush());
        } else {
            // A message may quote a workspace's file or a server's answer: shown, never obeyed.
            let line = format!("troupe: {self}");
            eprintln!("{}", troupe::terminal_text::for_terminal(&line));
        }
        ExitCode::from(self.exit_code())
    }
}

/// The message, then ` [<code>]` when the error has a code of its own.
impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match self.code {
            Some(code) => write!(f, " [{code}]"),
            None => Ok(()),
        }
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
        let coded = CliError::new(Kind::Failed, "no mailbox for agent ghost".into())
            .with_code("unknown_agent");
        assert_eq!(
            (coded.code(), coded.cause()),
            ("unknown_agent", "no mailbox for agent ghost")
        );
        assert_eq!(
            coded.to_string(),
            "no mailbox for agent ghost [unknown_agent]"
        );
        let plain = CliError::usage("invalid agent name \"Lead\"".into());
        assert_eq!(
            (plain.code(), plain.cause()),
            ("usage", "invalid agent name \"Lead\"")
        );
        assert_eq!(plain.to_string(), "invalid agent name \"Lead\"");
        let odd = CliError::new(Kind::Failed, "a message that ends [With Brackets]".into());
        assert_eq!(odd.code(), "failed");
        // Nor does a message that happens to end in a code's brackets get one.
        let bracketed = CliError::new(Kind::Failed, "a message that ends [with_brackets]".into());
        assert_eq!(
            (bracketed.code(), bracketed.cause()),
            ("failed", "a message that ends [with_brackets]")
        );
    }

    #[test]
    fn a_library_error_brings_its_code_and_is_one_line() {
        struct Broken;
        impl ErrorCode for Broken {
            fn code(&self) -> &'static str {
                "storage_error"
            }
        }
        impl std::fmt::Display for Broken {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("cannot write\n  the file")
            }
        }
        let error = CliError::coded(&Broken);
        assert_eq!(error.kind(), Kind::Failed);
        assert_eq!(error.exit_code(), 1);
        assert_eq!(error.to_string(), "cannot write the file [storage_error]");
        let usage = CliError::usage("bad".into())
            .with_code("config_invalid")
            .in_stream();
        assert_eq!((usage.exit_code(), usage.code()), (2, "config_invalid"));
    }
}
