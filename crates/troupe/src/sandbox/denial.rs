//! Reading a confined command's output for the marks the sandbox leaves — "Permission denied",
//! "Read-only file system", an unreachable network — and turning them into notes the model can
//! act on: `sandbox: write outside the workspace denied: /path`.
//!
//! The kernel does not say which rule refused, so the note is derived from the path the command
//! printed and the sandbox's own paths; a line without a path the sandbox explains gets no note.

use std::path::{Path, PathBuf};

use super::paths::lexical;
use super::{Mode, Network, Sandbox};

const DENIED: [&str; 3] = [
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
];

const NETWORK: [&str; 6] = [
    "Network is unreachable",
    "Cannot assign requested address",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
    "No address associated with hostname",
];

/// At most this many notes for one command.
const MAX_NOTES: usize = 5;

pub fn explain(sandbox: &Sandbox, output: &str, cwd: &Path) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    let mut add = |note: String| {
        if !notes.contains(&note) && notes.len() < MAX_NOTES {
            notes.push(note);
        }
    };
    for line in output.lines() {
        if sandbox.network() != Network::On && NETWORK.iter().any(|m| line.contains(m)) {
            add(format!(
                "sandbox: network access denied (the sandbox's network is {}; \
                 `[sandbox] network` in troupe.toml allows it)",
                sandbox.network().as_str()
            ));
            continue;
        }
        let Some(marker) = DENIED.iter().find(|m| line.contains(*m)) else {
            continue;
        };
        let Some(path) = path_before(line, marker) else {
            continue;
        };
        let absolute = lexical(&cwd.join(path));
        if let Some(note) = classify(sandbox, &absolute, marker) {
            add(note);
        }
    }
    notes
}

fn classify(sandbox: &Sandbox, path: &Path, marker: &str) -> Option<String> {
    let paths = sandbox.protected();
    let shown = path.display();
    if paths.is_denied(path) && marker == "Read-only file system" {
        return Some(format!(
            "sandbox: a protected path cannot be changed: {shown} (it is masked for commands)"
        ));
    }
    if paths.is_denied(path) {
        return Some(format!(
            "sandbox: reading a protected path denied: {shown} (protected: ~/.ssh, ~/.aws, \
             ~/.gnupg, ~/.config/gcloud, the workspace's .env and `[sandbox] deny_read`)"
        ));
    }
    if path.starts_with(paths.troupe_dir()) {
        return Some(format!(
            "sandbox: .troupe/ is read-only to commands: {shown} (troupe's own state; use the \
             tools instead)"
        ));
    }
    if let Some(hit) = paths.write_protected().find(path) {
        return Some(format!(
            "sandbox: read-only to commands: {shown} ({}; ask the user to change it)",
            hit.explain()
        ));
    }
    let writable = paths.writable(sandbox.mode());
    if writable.iter().any(|w| path.starts_with(w)) {
        return None; // an ordinary permission problem, not the sandbox
    }
    Some(match sandbox.mode() {
        Mode::ReadOnly if path.starts_with(paths.workspace()) => {
            format!("sandbox: write denied, this agent's commands are read-only: {shown}")
        }
        _ => format!("sandbox: write outside the workspace denied: {shown}"),
    })
}

/// The path a tool printed before `marker`: the last quoted string before it (`touch: cannot
/// touch '/x': …`, Python's `…: '/x'` after it), else the last `: `-separated field
/// (`sh: 1: cannot create ../x: Permission denied`).
fn path_before(line: &str, marker: &str) -> Option<PathBuf> {
    let at = line.find(marker)?;
    let (before, after) = (&line[..at], &line[at + marker.len()..]);
    // Python: PermissionError: [Errno 13] Permission denied: '/x'
    if let Some(quoted) = last_quoted(after) {
        return Some(PathBuf::from(quoted));
    }
    let before = before.trim_end().trim_end_matches(':').trim_end();
    if let Some(quoted) = last_quoted(before) {
        return Some(PathBuf::from(quoted));
    }
    let field = before.rsplit(": ").next()?.trim();
    let field = field
        .strip_prefix("cannot create ")
        .or_else(|| field.strip_prefix("can't create "))
        .unwrap_or(field);
    (!field.is_empty() && !field.contains(' ')).then(|| PathBuf::from(field))
}

/// The text between the last pair of matching quotes (`'…'`, `"…"`, `‘…’`, `“…”`).
fn last_quoted(text: &str) -> Option<&str> {
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('“', '”')] {
        let Some(end) = text.rfind(close) else {
            continue;
        };
        let Some(start) = text[..end].rfind(open) else {
            continue;
        };
        let inner = &text[start + open.len_utf8()..end];
        if !inner.is_empty() {
            return Some(inner);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_found_in_the_usual_error_formats() {
        let cases = [
            ("sh: 1: cannot create ../x: Permission denied", "../x"),
            ("touch: cannot touch '/etc/x': Permission denied", "/etc/x"),
            (
                "cat: /root/.ssh/id_test: Permission denied",
                "/root/.ssh/id_test",
            ),
            (
                "mkdir: cannot create directory ‘/opt/y’: Permission denied",
                "/opt/y",
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/srv/z'",
                "/srv/z",
            ),
            (
                "sh: 1: cannot create .troupe/x: Read-only file system",
                ".troupe/x",
            ),
        ];
        for (line, path) in cases {
            let marker = DENIED.iter().find(|m| line.contains(*m)).unwrap();
            assert_eq!(
                path_before(line, marker),
                Some(PathBuf::from(path)),
                "{line}"
            );
        }
        assert_eq!(path_before("Permission denied", "Permission denied"), None);
    }
}
