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
use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use super::effect::Effect;

/// A picture of what a call would do (the diff of a write or an edit), made only when someone
/// is asked: a call the rules allow never reads the file it replaces.
#[derive(Clone, Copy)]
pub struct Preview<'a>(pub &'a (dyn Fn() -> Option<String> + Send + Sync));

impl std::fmt::Debug for Preview<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Preview(..)")
    }
}

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
    /// For a tool that runs commands, the sandbox mode they would run under.
    pub sandbox: Option<crate::sandbox::Mode>,
    /// The diff a write or an edit would make, when the tool can tell.
    pub preview: Option<Preview<'a>>,
    /// Only a person may answer (a write to a protected path): never the lead, never a
    /// provider that answers on its own.
    pub person_only: bool,
}

/// A provider's answer, with a reason for the audit log and, on deny, for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAnswer {
    pub approved: bool,
    pub reason: String,
    /// An allow entry to remember for the rest of the run ("always"; only with `approved`).
    pub remember: Option<String>,
    /// Who answered, when it was not the provider itself (`terminal`, `cli`, `page`, `lead`,
    /// `expiry`, …): the audit line's rule names it (`default+approval:cli`).
    pub by: Option<String>,
}

impl ApprovalAnswer {
    pub fn approve(reason: impl Into<String>) -> Self {
        Self {
            approved: true,
            reason: reason.into(),
            remember: None,
            by: None,
        }
    }

    /// Approved, and `entry` is allowed for the rest of the run.
    pub fn approve_always(reason: impl Into<String>, entry: impl Into<String>) -> Self {
        Self {
            approved: true,
            reason: reason.into(),
            remember: Some(entry.into()),
            by: None,
        }
    }

    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            approved: false,
            reason: reason.into(),
            remember: None,
            by: None,
        }
    }

    /// The same answer, given by `by`.
    pub fn by(mut self, by: impl Into<String>) -> Self {
        self.by = Some(by.into());
        self
    }
}

/// Whether and where a provider asks a person (SPEC §13: such asks become durable requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Person {
    /// The provider answers on its own (`auto`, `deny`, a test's provider).
    No,
    /// It prompts a person at a terminal.
    AtTerminal,
    /// It would prompt a person, but the process has no terminal.
    NoTerminal,
}

/// What a person answered at a prompt that could be withdrawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersonReply {
    /// Yes, this call.
    Once,
    /// Yes, and this entry for the rest of the run.
    Always(String),
    /// As `Always`, and the entry saved for later runs (the caller saves it once the answer
    /// stands: another answerer may have come first).
    Save(String),
    /// No, with the person's reason (may be empty).
    No(String),
    /// The input closed before an answer.
    Closed,
    /// Ctrl-C before an answer.
    Interrupted,
    /// The prompt was withdrawn: someone answered elsewhere first, or the request expired.
    Withdrawn,
    /// The prompt could not be shown or read.
    Failed(String),
}

/// Completes when a prompt must give way, with the line the prompt says as it goes.
pub type Withdrawal<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send + 'a>>;

#[async_trait]
pub trait ApprovalProvider: Send + Sync {
    /// Names the provider in the audit log (`approval:<name>`).
    fn name(&self) -> &'static str;
    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer;

    /// Whether this provider asks a person, and where.
    fn person(&self) -> Person {
        Person::No
    }

    /// Saves `entry` for later runs, when this provider can (the terminal's `[s]ave`); the note
    /// for the answer (`saved to troupe.toml`, or why not).
    fn save_entry(&self, _entry: &str) -> Option<String> {
        None
    }

    /// Says `line` where the person sees the prompts (nothing, for a provider without one).
    fn tell(&self, _line: &str) {}

    /// Who a person's answer through [`Self::ask_person`] is recorded as (the permission
    /// request's `by`, the audit's `approval:<by>`): `terminal`, or the front end that asked
    /// (`acp`, `mcp`).
    fn answered_by(&self) -> &'static str {
        "terminal"
    }

    /// Asks the person (only when [`Self::person`] is [`Person::AtTerminal`]), giving way when
    /// `withdrawn` completes first: the prompt says the line it yields and ends. Saves nothing.
    async fn ask_person(
        &self,
        request: &ApprovalRequest<'_>,
        withdrawn: Withdrawal<'_>,
    ) -> PersonReply {
        drop(withdrawn);
        let answer = self.approve(request).await;
        match (answer.approved, answer.remember) {
            (true, Some(entry)) => PersonReply::Always(entry),
            (true, None) => PersonReply::Once,
            (false, _) => PersonReply::No(answer.reason),
        }
    }
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

/// Saves an allow entry for later runs (the CLI appends it to `[permissions] allow` in the
/// workspace's `troupe.toml`). Returns where it was saved, or why it could not be.
pub type SaveAllow = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// One line read from the terminal, with when it was read.
enum Line {
    Text(String, Instant),
    Closed,
    Failed(String),
}

/// The terminal's input, read one line per demand on a thread of its own.
///
/// A thread rather than `spawn_blocking`: a read may never end (nobody answers, the run was
/// interrupted), and a runtime waits for its blocking tasks when it shuts down; a read left
/// behind ends with the process. Lines are read only when a prompt asks for one, so input typed
/// ahead is read by the prompt it was typed for; a line read *before* the current prompt was
/// shown (typed for a prompt that was withdrawn) is dropped, never taken as this prompt's answer.
struct Lines {
    input: Option<Box<dyn BufRead + Send>>,
    demand: Option<std::sync::mpsc::Sender<()>>,
    lines: Option<tokio::sync::mpsc::UnboundedReceiver<Line>>,
    /// Demands sent whose line has not been taken yet (a withdrawn prompt leaves one).
    outstanding: usize,
}

impl Lines {
    /// Starts the reading thread on the first demand.
    fn start(&mut self) -> Result<(), String> {
        if self.demand.is_some() {
            return Ok(());
        }
        let Some(mut input) = self.input.take() else {
            return Err("the terminal's input is gone".to_owned());
        };
        let (demand_tx, demand_rx) = std::sync::mpsc::channel::<()>();
        let (line_tx, line_rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("troupe-approval".to_owned())
            .spawn(move || {
                while demand_rx.recv().is_ok() {
                    let mut line = String::new();
                    let read = match input.read_line(&mut line) {
                        Ok(0) => Line::Closed,
                        Ok(_) => Line::Text(line, Instant::now()),
                        Err(e) => Line::Failed(e.to_string()),
                    };
                    let last = !matches!(read, Line::Text(..));
                    if line_tx.send(read).is_err() || last {
                        return;
                    }
                }
            })
            .map_err(|e| format!("cannot read the terminal: {e}"))?;
        self.demand = Some(demand_tx);
        self.lines = Some(line_rx);
        Ok(())
    }

    /// The next line read after `shown`, or `None` when `stop` completed first (or input ended
    /// for good: `Closed`).
    async fn next(
        &mut self,
        shown: Instant,
        stop: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Option<Line> {
        if let Err(e) = self.start() {
            return Some(Line::Failed(e));
        }
        loop {
            if self.outstanding == 0 {
                let sent = self.demand.as_ref().is_some_and(|d| d.send(()).is_ok());
                if !sent {
                    return Some(Line::Closed);
                }
                self.outstanding += 1;
            }
            let lines = self.lines.as_mut()?;
            let line = tokio::select! {
                biased;
                () = &mut *stop => return None,
                line = lines.recv() => line,
            };
            self.outstanding = self.outstanding.saturating_sub(1);
            match line {
                Some(Line::Text(_, at)) if at < shown => continue,
                Some(line) => return Some(line),
                None => return Some(Line::Closed),
            }
        }
    }
}

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
/// and every later call is denied without asking. In a team, a prompt also gives way when the
/// request it shows is answered elsewhere ([`ApprovalProvider::ask_person`]).
pub struct TerminalApproval {
    output: Arc<Mutex<Box<dyn Write + Send>>>,
    /// The input; its async lock also serialises the prompts.
    lines: tokio::sync::Mutex<Lines>,
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

/// Why a call is denied when the terminal's input ended.
pub const CLOSED_REASON: &str = "the terminal closed before an answer; treated as no";

/// Arguments longer than this are cut in the prompt (a whole file's content helps no one).
const PROMPT_ARGUMENTS_MAX: usize = 2_000;

/// A preview longer than this is cut in the prompt.
const PROMPT_PREVIEW_MAX: usize = 4_000;

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
            output: Arc::new(Mutex::new(output)),
            lines: tokio::sync::Mutex::new(Lines {
                input: Some(input),
                demand: None,
                lines: None,
                outstanding: 0,
            }),
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

    /// The saver given, if any (a team saves an entry once its answer stands).
    pub fn saver(&self) -> Option<&SaveAllow> {
        self.saver.as_ref()
    }

    fn prompt_text(&self, request: &ApprovalRequest<'_>) -> String {
        let choices = match (request.suggestion, self.saver.is_some()) {
            (Some(entry), true) => format!(
                "  [y]es once / [a]lways allow {entry} this run / [s]ave {entry} to troupe.toml / [N]o\nAllow? [y/a/s/N] "
            ),
            (Some(entry), false) => format!(
                "  [y]es once / [a]lways allow {entry} this run / [N]o\nAllow? [y/a/N] "
            ),
            (None, _) => "Allow? [y/N] ".to_owned(),
        };
        let preview = request
            .preview
            .and_then(|p| (p.0)())
            .map(|p| format!("  would change:\n{}\n", cut(p, PROMPT_PREVIEW_MAX)))
            .unwrap_or_default();
        format!(
            "\n[troupe] agent {agent} wants to run {tool} ({effect}): {reason}\n  arguments: {arguments}\n{preview}{choices}",
            agent = request.agent,
            tool = request.tool,
            effect = request.effect.as_str(),
            reason = request.reason,
            arguments = cut(request.arguments.to_string(), PROMPT_ARGUMENTS_MAX),
        )
    }

    /// Writes `text` to the terminal. What it quotes of the call (the arguments, the diff, the
    /// file's path) came from a model: its control characters are shown escaped, never obeyed.
    fn say(&self, text: &str) -> std::io::Result<()> {
        let text = crate::terminal_text::for_terminal(text);
        let mut output = crate::sync::lock(&self.output);
        output.write_all(text.as_bytes())?;
        output.flush()
    }

    /// Shows the prompt and reads the answer (and the reason after a no), until `stop`.
    async fn converse(
        &self,
        request: &ApprovalRequest<'_>,
        stop: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> PersonReply {
        let mut lines = self.lines.lock().await;
        let shown = Instant::now();
        if let Err(e) = self.say(&self.prompt_text(request)) {
            return PersonReply::Failed(format!("cannot ask at the terminal: {e}"));
        }
        let answer = match lines.next(shown, stop).await {
            None => return PersonReply::Withdrawn,
            Some(Line::Closed) => return PersonReply::Closed,
            Some(Line::Failed(e)) => {
                return PersonReply::Failed(format!("cannot ask at the terminal: {e}"))
            }
            Some(Line::Text(line, _)) => line.trim().to_ascii_lowercase(),
        };
        match (answer.as_str(), request.suggestion) {
            ("y" | "yes", _) => PersonReply::Once,
            ("a" | "always", Some(entry)) => PersonReply::Always(entry.to_owned()),
            ("s" | "save", Some(entry)) if self.saver.is_some() => {
                PersonReply::Save(entry.to_owned())
            }
            _ => {
                if let Err(e) = self.say("Reason for the agent (optional, Enter to skip): ") {
                    return PersonReply::Failed(format!("cannot ask at the terminal: {e}"));
                }
                match lines.next(Instant::now(), stop).await {
                    None => PersonReply::Withdrawn,
                    Some(Line::Text(reason, _)) => PersonReply::No(reason.trim().to_owned()),
                    Some(Line::Closed | Line::Failed(_)) => PersonReply::No(String::new()),
                }
            }
        }
    }

    /// Saves `entry` with the saver, saying so at the terminal; the note for the answer.
    fn save(&self, entry: &str) -> Option<String> {
        let saver = self.saver.as_ref()?;
        let (line, note) = match saver(entry) {
            Ok(place) => (
                format!("  saved allow {entry} to {place}\n"),
                format!("saved to {place}"),
            ),
            Err(e) => (
                format!("  could not save {entry}: {e} (allowed for this run only)\n"),
                format!("not saved: {e}"),
            ),
        };
        let _ = self.say(&line);
        Some(note)
    }

    /// Says `line` at the terminal (a withdrawn prompt's last word).
    fn tell_terminal(&self, line: &str) {
        let _ = self.say(&format!("\n[troupe] {line}\n"));
    }
}

/// `text` cut to `max` bytes on a character boundary, saying how long it was.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let total = text.len();
        text.truncate(end);
        text.push_str(&format!("… ({total} bytes in all)"));
    }
    text
}

/// The answer a person's reply gives, at the terminal (`save` is the note of a saved entry).
pub fn terminal_answer(reply: PersonReply, saved: Option<String>) -> ApprovalAnswer {
    person_answer(reply, saved, "terminal")
}

/// Where a person who answered as `by` ([`ApprovalProvider::answered_by`]) did, in words.
fn place(by: &str) -> String {
    match by {
        "terminal" => "at the terminal".to_owned(),
        "acp" => "in the editor".to_owned(),
        "mcp" => "by the MCP client".to_owned(),
        other => format!("by {other}"),
    }
}

/// The answer a person's reply gives, said where they answered (`by`: `terminal`, `acp`,
/// `mcp`); `saved` is the note of a saved entry.
pub fn person_answer(reply: PersonReply, saved: Option<String>, by: &str) -> ApprovalAnswer {
    let place = place(by);
    match reply {
        PersonReply::Once => ApprovalAnswer::approve(format!("approved {place}")),
        PersonReply::Always(entry) | PersonReply::Save(entry) => {
            let reason = match saved {
                None => format!("approved {place}; {entry} allowed for this run"),
                Some(saved) => {
                    format!("approved {place}; {entry} allowed for this run and {saved}")
                }
            };
            ApprovalAnswer::approve_always(reason, entry)
        }
        PersonReply::No(reason) if reason.is_empty() => {
            ApprovalAnswer::deny(format!("refused {place}"))
        }
        PersonReply::No(reason) => ApprovalAnswer::deny(format!("refused {place}: {reason}")),
        PersonReply::Closed => ApprovalAnswer::deny(CLOSED_REASON),
        PersonReply::Interrupted | PersonReply::Withdrawn => {
            ApprovalAnswer::deny(INTERRUPTED_REASON)
        }
        PersonReply::Failed(e) => ApprovalAnswer::deny(e),
    }
}

#[async_trait]
impl ApprovalProvider for TerminalApproval {
    fn name(&self) -> &'static str {
        "terminal"
    }

    fn save_entry(&self, entry: &str) -> Option<String> {
        self.save(entry)
    }

    fn tell(&self, line: &str) {
        if self.is_terminal {
            self.tell_terminal(line);
        }
    }

    fn person(&self) -> Person {
        if self.is_terminal {
            Person::AtTerminal
        } else {
            Person::NoTerminal
        }
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        if !self.is_terminal {
            return ApprovalAnswer::deny(NO_TERMINAL_GUIDANCE);
        }
        let reply = self
            .ask_person(request, Box::pin(std::future::pending()))
            .await;
        let saved = match &reply {
            PersonReply::Save(entry) => self.save(entry),
            _ => None,
        };
        terminal_answer(reply, saved)
    }

    async fn ask_person(
        &self,
        request: &ApprovalRequest<'_>,
        withdrawn: Withdrawal<'_>,
    ) -> PersonReply {
        if self.cancel.is_cancelled() {
            return PersonReply::Interrupted;
        }
        let cancel = self.cancel.clone();
        let said = Arc::new(Mutex::new(None::<String>));
        let keep = said.clone();
        // Ends the read on an interrupt (no line to say) or a withdrawal (its line).
        let mut stop = Box::pin(async move {
            tokio::select! {
                biased;
                () = cancel.cancelled() => {}
                line = withdrawn => *crate::sync::lock(&keep) = Some(line),
            }
        });
        let reply = self.converse(request, &mut stop).await;
        if reply != PersonReply::Withdrawn {
            return reply;
        }
        let line = crate::sync::lock(&said).take();
        match line {
            Some(line) => {
                self.tell_terminal(&line);
                PersonReply::Withdrawn
            }
            None => PersonReply::Interrupted,
        }
    }
}
