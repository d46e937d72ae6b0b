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
}

/// A provider's answer, with a reason for the audit log and, on deny, for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAnswer {
    pub approved: bool,
    pub reason: String,
}

impl ApprovalAnswer {
    pub fn approve(reason: impl Into<String>) -> Self {
        Self {
            approved: true,
            reason: reason.into(),
        }
    }

    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            approved: false,
            reason: reason.into(),
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

/// `--approval ask`: asks a person on the terminal, naming the agent, the tool and the
/// arguments, and reads `y`/`N`. Without a terminal it denies and says how to allow.
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
}

/// The guidance given when there is no terminal to ask.
pub const NO_TERMINAL_GUIDANCE: &str = "no terminal to ask; rerun with --approval auto to allow \
     write/execute tools, or --approval deny";

/// Why a call is denied once the prompt was interrupted.
pub const INTERRUPTED_REASON: &str = "interrupted before an answer; treated as no";

/// Arguments longer than this are cut in the prompt (a whole file's content helps no one).
const PROMPT_ARGUMENTS_MAX: usize = 2_000;

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
        }
    }

    /// Ends the prompt on screen (denied) and denies every later call once `cancel` fires.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    fn prompt_text(request: &ApprovalRequest<'_>) -> String {
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
        format!(
            "\n[troupe] agent {agent} wants to run {tool} ({effect}): {reason}\n  arguments: {arguments}\nAllow? [y/N] ",
            agent = request.agent,
            tool = request.tool,
            effect = request.effect.as_str(),
            reason = request.reason,
        )
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
        let prompt = Self::prompt_text(request);
        let io = self.io.clone();
        let (answer_tx, answer_rx) = tokio::sync::oneshot::channel();
        // A thread of its own rather than `spawn_blocking`: the read may never end (nobody
        // answers, the run was interrupted), and a runtime waits for its blocking tasks when it
        // shuts down. A read left behind ends with the process.
        let reader = std::thread::Builder::new()
            .name("troupe-approval".to_owned())
            .spawn(move || {
                let read = (|| -> std::io::Result<String> {
                    let mut io = crate::sync::lock(&io);
                    io.output.write_all(prompt.as_bytes())?;
                    io.output.flush()?;
                    let mut line = String::new();
                    io.input.read_line(&mut line)?;
                    Ok(line)
                })();
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
            Ok(Ok(line)) => match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => ApprovalAnswer::approve("approved at the terminal"),
                "" if line.is_empty() => {
                    ApprovalAnswer::deny("the terminal closed before an answer; treated as no")
                }
                _ => ApprovalAnswer::deny("refused at the terminal"),
            },
            Ok(Err(e)) => ApprovalAnswer::deny(format!("cannot ask at the terminal: {e}")),
            Err(_) => ApprovalAnswer::deny("cannot ask at the terminal: the reader stopped"),
        }
    }
}
