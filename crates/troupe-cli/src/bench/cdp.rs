//! A small Chrome DevTools Protocol client over `--remote-debugging-pipe`: it starts a headless
//! Chromium, opens one page, navigates, evaluates JavaScript and takes screenshots. It is used by
//! the `page_load_ms_10k` figure of `troupe-bench events` and, through `#[path]`, by the browser
//! tests of `troupe serve` — one copy for both.
//!
//! The pipe transport: Chromium reads commands on its fd 3 and writes replies and events on its
//! fd 4, each message one JSON object ended by a NUL byte. A reader thread splits the replies and
//! hands them over a channel, so every wait has a deadline and fails with a message that says what
//! was awaited. Chromium runs in its own process group, killed whole when the [`Browser`] drops (and
//! by the kernel if this process dies first).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one protocol command may take before the client gives up (a screenshot of a large
/// page is the slowest).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the first command may wait for a browser that is still starting: a cold Chromium
/// (its 200 MB read from disk after a large build pushed it out of the page cache) on a busy
/// 2-core machine was seen to need more than 30 s.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(120);

/// Events kept while waiting for replies; older ones are dropped (nobody waits for them).
const MAX_BUFFERED_EVENTS: usize = 10_000;

/// The executables tried in `PATH` when `TROUPE_CHROMIUM` does not name one.
const CANDIDATES: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// The Chromium executable: `TROUPE_CHROMIUM` if set, else the first candidate found in `PATH`.
pub fn find_chromium() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("TROUPE_CHROMIUM") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "TROUPE_CHROMIUM={} is not a file; unset it or point it at a Chromium executable",
                path.display()
            ))
        };
    }
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&dirs) {
        for name in CANDIDATES {
            let path = dir.join(name);
            if path.is_file() {
                return Ok(path);
            }
        }
    }
    Err(
        "Chromium is not installed: install the Debian package `chromium` \
         (`apt-get install -y chromium`; .ci/run installs it), or set TROUPE_CHROMIUM to its path"
            .to_string(),
    )
}

/// A headless Chromium driven through its DevTools pipe.
pub struct Browser {
    /// The Chromium process, leader of its own process group.
    child: Child,
    /// Our end of Chromium's fd 3: commands go here.
    commands: File,
    /// Messages read from Chromium's fd 4 by the reader thread; an `Err` when the pipe closed.
    incoming: Receiver<Result<Value, String>>,
    /// Events that arrived while a reply was awaited, oldest first.
    events: VecDeque<Value>,
    /// The id of the next command.
    next_id: u64,
    /// Chromium's stderr, read back for the error message when it dies.
    stderr_path: PathBuf,
    /// The fresh profile folder, removed after the process is gone.
    profile: Option<tempfile::TempDir>,
}

impl Browser {
    /// Starts a headless Chromium with a fresh profile and a 1280×900 window.
    pub fn launch() -> Result<Browser, String> {
        let executable = find_chromium()?;
        let profile = tempfile::Builder::new()
            .prefix("troupe-chromium-")
            .tempdir()
            .map_err(|e| format!("cannot create Chromium's profile folder: {e}"))?;
        let stderr_path = profile.path().join("chromium.stderr");
        let stderr = File::create(&stderr_path)
            .map_err(|e| format!("cannot create {}: {e}", stderr_path.display()))?;
        let (command_read, command_write) = pipe()?;
        let (reply_read, reply_write) = pipe()?;
        let (child_in, child_out) = (command_read.as_raw_fd(), reply_write.as_raw_fd());

        let mut command = Command::new(&executable);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
                "--disable-dev-shm-usage",
                "--window-size=1280,900",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        // SAFETY: only async-signal-safe calls (setpgid, prctl, fcntl, dup2) between fork and exec.
        unsafe {
            command.pre_exec(move || child_fds(child_in, child_out));
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", executable.display()))?;
        // Our copies of the child's ends: dropping them lets EOF reach each side.
        drop(command_read);
        drop(reply_write);

        let (sender, incoming) = mpsc::channel();
        std::thread::Builder::new()
            .name("cdp-reader".to_string())
            .spawn(move || read_messages(File::from(reply_read), sender))
            .map_err(|e| format!("cannot start the DevTools reader thread: {e}"))?;

        Ok(Browser {
            child,
            commands: File::from(command_write),
            incoming,
            events: VecDeque::new(),
            next_id: 1,
            stderr_path,
            profile: Some(profile),
        })
    }

    /// Sends one command (to the browser, or to a page's session) and returns its `result`;
    /// a protocol error or no reply before `timeout` is an error naming the method.
    pub fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::from(session);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        self.commands.write_all(&bytes).map_err(|e| {
            format!(
                "{method}: cannot write to Chromium: {e}{}",
                self.last_words()
            )
        })?;
        let deadline = Instant::now() + timeout;
        loop {
            let message = self.receive(deadline, || {
                format!("{method}: no reply within {timeout:?}")
            })?;
            if message.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(error) = message.get("error") {
                    return Err(format!("{method} failed: {error}"));
                }
                return Ok(message.get("result").cloned().unwrap_or(Value::Null));
            }
            self.keep_event(message);
        }
    }

    /// Waits for the first event (buffered or new) that `matches`, removing it from the buffer.
    pub fn wait_event(
        &mut self,
        what: &str,
        timeout: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Result<Value, String> {
        if let Some(index) = self.events.iter().position(&matches) {
            if let Some(event) = self.events.remove(index) {
                return Ok(event);
            }
        }
        let deadline = Instant::now() + timeout;
        loop {
            let message = self.receive(deadline, || format!("no {what} within {timeout:?}"))?;
            if matches(&message) {
                return Ok(message);
            }
            self.keep_event(message);
        }
    }

    /// Forgets the buffered events that `matches` (stale ones, before waiting for a fresh one).
    pub fn drop_events(&mut self, matches: impl Fn(&Value) -> bool) {
        self.events.retain(|event| !matches(event));
    }

    fn keep_event(&mut self, message: Value) {
        if message.get("method").is_some() {
            if self.events.len() == MAX_BUFFERED_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(message);
        }
    }

    fn receive(&mut self, deadline: Instant, waited: impl Fn() -> String) -> Result<Value, String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.incoming.recv_timeout(left) {
            Ok(Ok(message)) => Ok(message),
            Ok(Err(e)) => Err(format!("{}: {e}{}", waited(), self.last_words())),
            Err(RecvTimeoutError::Timeout) => Err(waited()),
            Err(RecvTimeoutError::Disconnected) => Err(format!(
                "{}: Chromium's pipe is closed{}",
                waited(),
                self.last_words()
            )),
        }
    }

    /// The end of Chromium's stderr, for errors after it died.
    fn last_words(&mut self) -> String {
        let exited = matches!(self.child.try_wait(), Ok(Some(_)));
        if !exited {
            return String::new();
        }
        let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
        format!(" (Chromium exited; its stderr ends: {tail})")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: a plain kill(2) of the process group Chromium leads (set in `child_fds`).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
        // The profile goes after the processes writing into it.
        drop(self.profile.take());
    }
}

/// One page (a target attached in flat mode) of its own browser.
pub struct Page {
    browser: Browser,
    /// The flat-mode session that addresses this page's commands and events.
    session: String,
}

impl Page {
    /// Launches a browser and opens one blank page in it, with the `Page` domain enabled.
    pub fn open() -> Result<Page, String> {
        let mut browser = Browser::launch()?;
        let target = browser.call(
            None,
            "Target.createTarget",
            json!({ "url": "about:blank" }),
            LAUNCH_TIMEOUT,
        )?;
        let target_id = target
            .get("targetId")
            .and_then(Value::as_str)
            .ok_or("Target.createTarget: no targetId in the reply")?
            .to_string();
        let attached = browser.call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
            COMMAND_TIMEOUT,
        )?;
        let session = attached
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or("Target.attachToTarget: no sessionId in the reply")?
            .to_string();
        let mut page = Page { browser, session };
        page.call("Page.enable", json!({}))?;
        Ok(page)
    }

    /// One command to this page.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.browser
            .call(Some(&self.session), method, params, COMMAND_TIMEOUT)
    }

    /// Runs `source` in every document this page loads from now on, before the page's own scripts.
    pub fn add_init_script(&mut self, source: &str) -> Result<(), String> {
        self.call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": source }),
        )
        .map(|_| ())
    }

    /// Navigates and waits until the new document is parsed (`DOMContentLoaded`): a page that
    /// keeps a live connection open (server-sent events) may never fire `load`.
    pub fn navigate(&mut self, url: &str) -> Result<(), String> {
        let session = self.session.clone();
        let is_parsed = move |event: &Value| {
            event.get("method").and_then(Value::as_str) == Some("Page.domContentEventFired")
                && event.get("sessionId").and_then(Value::as_str) == Some(session.as_str())
        };
        self.browser.drop_events(&is_parsed);
        let reply = self.call("Page.navigate", json!({ "url": url }))?;
        if let Some(error) = reply.get("errorText").and_then(Value::as_str) {
            return Err(format!("cannot open {url}: {error}"));
        }
        self.browser
            .wait_event(
                &format!("DOMContentLoaded of {url}"),
                COMMAND_TIMEOUT,
                is_parsed,
            )
            .map(|_| ())
    }

    /// Evaluates `expression` in the page, awaiting it if it is a promise, and returns its value
    /// as JSON. A thrown exception or a rejected promise is an error carrying its message.
    pub fn evaluate(&mut self, expression: &str) -> Result<Value, String> {
        self.evaluate_within(expression, COMMAND_TIMEOUT)
    }

    fn evaluate_within(&mut self, expression: &str, timeout: Duration) -> Result<Value, String> {
        let reply = self.browser.call(
            Some(&self.session),
            "Runtime.evaluate",
            json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
            timeout,
        )?;
        if let Some(details) = reply.get("exceptionDetails") {
            let message = details
                .pointer("/exception/description")
                .and_then(Value::as_str)
                .or_else(|| details.get("text").and_then(Value::as_str))
                .unwrap_or("an exception");
            return Err(format!("the page threw: {message}"));
        }
        Ok(reply
            .pointer("/result/value")
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// Waits until the JavaScript `condition` is true, without polling: a promise in the page
    /// checks it now and on every DOM mutation, and rejects after `timeout`.
    pub fn wait_for(&mut self, condition: &str, timeout: Duration) -> Result<(), String> {
        let millis = timeout.as_millis();
        let described = serde_json::to_string(condition).map_err(|e| e.to_string())?;
        let expression = format!(
            "new Promise((resolve, reject) => {{
               const check = () => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }};
               if (check()) {{ resolve(true); return; }}
               const observer = new MutationObserver(() => {{
                 if (check()) {{ observer.disconnect(); clearTimeout(timer); resolve(true); }}
               }});
               observer.observe(document, {{ subtree: true, childList: true, attributes: true, characterData: true }});
               const timer = setTimeout(() => {{
                 observer.disconnect();
                 reject(new Error('not true within {millis} ms: ' + {described}));
               }}, {millis});
             }})"
        );
        self.evaluate_within(&expression, timeout + COMMAND_TIMEOUT)
            .map(|_| ())
    }

    /// Saves a PNG screenshot of the viewport to `path`.
    pub fn screenshot(&mut self, path: &Path) -> Result<(), String> {
        let reply = self.call("Page.captureScreenshot", json!({ "format": "png" }))?;
        let data = reply
            .get("data")
            .and_then(Value::as_str)
            .ok_or("Page.captureScreenshot: no data in the reply")?;
        let png = decode_base64(data)?;
        std::fs::write(path, png).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// In the child between fork and exec: its own process group, killed with this process, and the
/// pipe ends moved to fds 3 and 4 (first above 10, so neither `dup2` overwrites the other end).
fn child_fds(commands: RawFd, replies: RawFd) -> std::io::Result<()> {
    // SAFETY: async-signal-safe system calls on fds this process owns.
    unsafe {
        if libc::setpgid(0, 0) != 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let high_in = libc::fcntl(commands, libc::F_DUPFD, 10);
        let high_out = libc::fcntl(replies, libc::F_DUPFD, 10);
        if high_in < 0
            || high_out < 0
            || libc::dup2(high_in, 3) != 3
            || libc::dup2(high_out, 4) != 4
        {
            return Err(std::io::Error::last_os_error());
        }
        libc::close(high_in);
        libc::close(high_out);
    }
    Ok(())
}

/// A pipe whose both ends close on exec (the child gets its copies through `dup2`).
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array on success.
    let status = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if status != 0 {
        return Err(format!(
            "cannot create a pipe for Chromium: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The reader thread: NUL-terminated JSON messages to the channel until the pipe closes.
fn read_messages(replies: File, sender: mpsc::Sender<Result<Value, String>>) {
    let mut reader = BufReader::new(replies);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(0, &mut buffer) {
            Ok(0) => {
                let _ = sender.send(Err("Chromium closed its DevTools pipe".to_string()));
                return;
            }
            Ok(_) => {
                if buffer.last() == Some(&0) {
                    buffer.pop();
                }
                let message = troupe::wire::strict::parse_json_bytes(&buffer, "a DevTools message")
                    .map_err(|e| e.to_string());
                if sender.send(message).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = sender.send(Err(format!("cannot read Chromium's DevTools pipe: {e}")));
                return;
            }
        }
    }
}

/// Standard base64 (with or without padding) to bytes.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    fn value(byte: u8) -> Option<u32> {
        match byte {
            b'A'..=b'Z' => Some(u32::from(byte - b'A')),
            b'a'..=b'z' => Some(u32::from(byte - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(byte - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let digits = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        if chunk.len() == 1 {
            return Err("invalid base64: a lone trailing digit".to_string());
        }
        let mut bits = 0u32;
        for (i, &byte) in chunk.iter().enumerate() {
            let v = value(byte).ok_or_else(|| format!("invalid base64 byte {byte:#04x}"))?;
            bits |= v << (18 - 6 * i);
        }
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Ok(out)
}
