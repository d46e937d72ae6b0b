//! Approval providers: who answers when the rules say `ask` (SPEC §7).
//!
//! A provider is consulted only for `ask`; it never sees a call the rules deny, so an approval
//! cannot loosen a deny. The CLI picks one with `--approval ask|auto|deny`.
//!
//! The terminal prompt never holds a run hostage: its read runs on a thread of its own and is
//! raced against a cancellation token (Ctrl-C in the CLI), so an interrupt denies the pending
//! call at once instead of waiting for Enter.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use super::effect::Effect;

/// What a provider is asked about.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    /// The calling agent (a teammate's `ask` is labelled with its own name).
    pub agent: &'a AgentName,
    pub tool: &'a str,
    pub effect: Effect,
    pub arguments: &'a Value,
    /// Why the rules asked.
    pub reason: &'a str,
    /// The rule entry a person may remember for this call (`shell(cargo test:*)`,
    /// `write_file(docs/a.md)`), when the policy has one to suggest.
    pub suggestion: Option<&'a str>,
}

/// A provider's answer, with a reason for the audit log and, on deny, for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAnswer {
    pub approved: bool,
    pub reason: String,
    /// An allow entry to remember for the rest of the run ("always"; only with `approved`).
    pub remember: Option<String>,
}

impl ApprovalAnswer {
    pub fn approve(reason: impl Into<String>) -> Self {
        Self {
            approved: true,
            reason: reason.into(),
            remember: None,
        }
    }

    /// Approved, and `entry` is allowed for the rest of the run.
    pub fn approve_always(reason: impl Into<String>, entry: impl Into<String>) -> Self {
        Self {
            approved: true,
            reason: reason.into(),
            remember: Some(entry.into()),
        }
    }

    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            approved: false,
            reason: reason.into(),
            remember: None,
        }
    }
}

#[async_trait]
pub trait ApprovalProvider: Send + Sync {
    /// Names the provider in the audit log (`approval:<name>`).
    fn name(&self) -> &'static str;
    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer;
}

/// `--approval auto`: allows everything it is asked about (it is never asked about a deny).
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApproval;

#[async_trait]
impl ApprovalProvider for AutoApproval {
    fn name(&self) -> &'static str {
        "auto"
    }

    async fn approve(&self, _request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        ApprovalAnswer::approve("approved automatically (--approval auto)")
    }
}

/// `--approval deny`: refuses everything that needs approval.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyApproval;

#[async_trait]
impl ApprovalProvider for DenyApproval {
    fn name(&self) -> &'static str {
        "deny"
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        ApprovalAnswer::deny(format!(
            "{} tools are refused in this run (--approval deny)",
            request.effect.as_str()
        ))
    }
}

/// What a terminal prompt reads from and writes to.
struct TerminalIo {
    input: Box<dyn BufRead + Send>,
    output: Box<dyn Write + Send>,
}

/// Saves an allow entry for later runs (the CLI appends it to `[permissions] allow` in the
/// workspace's `troupe.toml`). Returns where it was saved, or why it could not be.
pub type SaveAllow = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// `--approval ask`: asks a person on the terminal, naming the agent, the tool and the
/// arguments. Without a terminal it denies and says how to allow.
///
/// The answers: `y` yes, once; `a` always — the suggested entry (`shell(cargo test:*)`, the
/// file's path) is allowed for the rest of the run; `s` save — the same, and the entry is saved
/// with the [`SaveAllow`] given to [`TerminalApproval::with_saver`]; `N` (or Enter, or anything
/// else) no, then an optional reason that goes into the denial the model sees. Without a
/// suggestion only `y/N` are offered.
///
/// Prompts are serialised: two agents asking at once get one prompt after the other. Once the
/// token given to [`TerminalApproval::with_cancel`] fires, the prompt on screen is answered "no"
/// and every later call is denied without asking.
pub struct TerminalApproval {
    io: Arc<Mutex<TerminalIo>>,
    is_terminal: bool,
    /// Fired on interrupt. A blocking read of a terminal cannot be ended from outside, so the
    /// prompt waits on this and on the reading thread, whichever comes first.
    cancel: CancellationToken,
    saver: Option<SaveAllow>,
}

/// The guidance given when there is no terminal to ask.
pub const NO_TERMINAL_GUIDANCE: &str = "no terminal to ask; rerun with --approval auto to allow \
     write/execute tools, or --approval deny";

/// Why a call is denied once the prompt was interrupted.
pub const INTERRUPTED_REASON: &str = "interrupted before an answer; treated as no";

/// Why a call is denied when the person said no without a reason.
pub const REFUSED_REASON: &str = "refused at the terminal";

/// Arguments longer than this are cut in the prompt (a whole file's content helps no one).
const PROMPT_ARGUMENTS_MAX: usize = 2_000;

/// What the person answered, read on the prompt's thread.
enum Reply {
    Yes,
    Always {
        entry: String,
        saved: Option<String>,
    },
    No {
        reason: String,
    },
    Closed,
}

impl TerminalApproval {
    /// Reads stdin, prompts on stderr (stdout stays for the run's answer).
    pub fn stdio() -> Self {
        let is_terminal = std::io::stdin().is_terminal();
        Self::with_io(
            Box::new(std::io::BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
            is_terminal,
        )
    }

    /// For tests: any input, any output, and whether to behave as if on a terminal.
    pub fn with_io(
        input: Box<dyn BufRead + Send>,
        output: Box<dyn Write + Send>,
        is_terminal: bool,
    ) -> Self {
        Self {
            io: Arc::new(Mutex::new(TerminalIo { input, output })),
            is_terminal,
            cancel: CancellationToken::new(),
            saver: None,
        }
    }

    /// Ends the prompt on screen (denied) and denies every later call once `cancel` fires.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Offers `[s]ave`, saving the entry with `saver`.
    pub fn with_saver(mut self, saver: SaveAllow) -> Self {
        self.saver = Some(saver);
        self
    }

    fn prompt_text(&self, request: &ApprovalRequest<'_>) -> String {
        let mut arguments = request.arguments.to_string();
        if arguments.len() > PROMPT_ARGUMENTS_MAX {
            let mut cut = PROMPT_ARGUMENTS_MAX;
            while !arguments.is_char_boundary(cut) {
                cut -= 1;
            }
            let total = arguments.len();
            arguments.truncate(cut);
            arguments.push_str(&format!("… ({total} bytes in all)"));
        }
        let choices = match (request.suggestion, self.saver.is_some()) {
            (Some(entry), true) => format!(
                "  [y]es once / [a]lways allow {entry} this run / [s]ave {entry} to troupe.toml / [N]o\nAllow? [y/a/s/N] "
            ),
            (Some(entry), false) => format!(
                "  [y]es once / [a]lways allow {entry} this run / [N]o\nAllow? [y/a/N] "
            ),
            (None, _) => "Allow? [y/N] ".to_owned(),
        };
        format!(
            "\n[troupe] agent {agent} wants to run {tool} ({effect}): {reason}\n  arguments: {arguments}\n{choices}",
            agent = request.agent,
            tool = request.tool,
            effect = request.effect.as_str(),
            reason = request.reason,
        )
    }
}

/// Shows `prompt`, reads the answer (and the reason after a no), saves when asked to.
fn converse(
    io: &mut TerminalIo,
    prompt: &str,
    suggestion: Option<&str>,
    saver: Option<&SaveAllow>,
) -> std::io::Result<Reply> {
    io.output.write_all(prompt.as_bytes())?;
    io.output.flush()?;
    let mut line = String::new();
    if io.input.read_line(&mut line)? == 0 {
        return Ok(Reply::Closed);
    }
    let answer = line.trim().to_ascii_lowercase();
    match (answer.as_str(), suggestion) {
        ("y" | "yes", _) => Ok(Reply::Yes),
        ("a" | "always", Some(entry)) => Ok(Reply::Always {
            entry: entry.to_owned(),
            saved: None,
        }),
        ("s" | "save", Some(entry)) if saver.is_some() => {
            let saved = match saver.map(|save| save(entry)) {
                Some(Ok(place)) => {
                    writeln!(io.output, "  saved allow {entry} to {place}")?;
                    format!("saved to {place}")
                }
                Some(Err(e)) => {
                    writeln!(
                        io.output,
                        "  could not save {entry}: {e} (allowed for this run only)"
                    )?;
                    format!("not saved: {e}")
                }
                None => String::new(),
            };
            io.output.flush()?;
            Ok(Reply::Always {
                entry: entry.to_owned(),
                saved: Some(saved),
            })
        }
        _ => {
            io.output
                .write_all(b"Reason for the agent (optional, Enter to skip): ")?;
            io.output.flush()?;
            let mut reason = String::new();
            io.input.read_line(&mut reason)?;
            Ok(Reply::No {
                reason: reason.trim().to_owned(),
            })
        }
    }
}

#[async_trait]
impl ApprovalProvider for TerminalApproval {
    fn name(&self) -> &'static str {
        "terminal"
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        if !self.is_terminal {
            return ApprovalAnswer::deny(NO_TERMINAL_GUIDANCE);
        }
        if self.cancel.is_cancelled() {
            return ApprovalAnswer::deny(INTERRUPTED_REASON);
        }
        let prompt = self.prompt_text(request);
        let suggestion = request.suggestion.map(str::to_owned);
        let saver = self.saver.clone();
        let io = self.io.clone();
        let (answer_tx, answer_rx) = tokio::sync::oneshot::channel();
        // A thread of its own rather than `spawn_blocking`: the read may never end (nobody
        // answers, the run was interrupted), and a runtime waits for its blocking tasks when it
        // shuts down. A read left behind ends with the process.
        let reader = std::thread::Builder::new()
            .name("troupe-approval".to_owned())
            .spawn(move || {
                let mut io = crate::sync::lock(&io);
                let read = converse(&mut io, &prompt, suggestion.as_deref(), saver.as_ref());
                let _ = answer_tx.send(read);
            });
        if let Err(e) = reader {
            return ApprovalAnswer::deny(format!("cannot ask at the terminal: {e}"));
        }
        let answer = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return ApprovalAnswer::deny(INTERRUPTED_REASON),
            answer = answer_rx => answer,
        };
        match answer {
            Ok(Ok(Reply::Yes)) => ApprovalAnswer::approve("approved at the terminal"),
            Ok(Ok(Reply::Always { entry, saved })) => {
                let reason = match saved {
                    None => format!("approved at the terminal; {entry} allowed for this run"),
                    Some(saved) => format!(
                        "approved at the terminal; {entry} allowed for this run and {saved}"
                    ),
                };
                ApprovalAnswer::approve_always(reason, entry)
            }
            Ok(Ok(Reply::No { reason })) if reason.is_empty() => {
                ApprovalAnswer::deny(REFUSED_REASON)
            }
            Ok(Ok(Reply::No { reason })) => {
                ApprovalAnswer::deny(format!("{REFUSED_REASON}: {reason}"))
            }
            Ok(Ok(Reply::Closed)) => {
                ApprovalAnswer::deny("the terminal closed before an answer; treated as no")
            }
            Ok(Err(e)) => ApprovalAnswer::deny(format!("cannot ask at the terminal: {e}")),
            Err(_) => ApprovalAnswer::deny("cannot ask at the terminal: the reader stopped"),
        }
    }
}
