//! Every stable error code, against a committed list (`error_codes.txt`): renaming or removing
//! a code fails here, and so does adding one until the list has it (issue 41). The codes are a
//! contract (`src/error.rs`): scripts match on them.
//!
//! Read from the sources of every crate, outside `#[cfg(test)]` code:
//! - every `fn code(…) -> &'static str` (each `impl ErrorCode`, and the inherent ones of
//!   `SettingsError` and the CLI's `Kind`): each arm of its `match` as `Owner::Pattern code`,
//!   an arm that hands over to another error's code as `(its code)`; a body without a `match`
//!   as `Owner code`. No arm may be a wildcard, so the compiler's exhaustiveness check makes
//!   each new variant an arm, and so a line here;
//! - the codes a `BackendError` is made with (`BackendError::new("…"`), as `BackendError code`;
//! - the CLI's own codes (`.with_code("…")`), as `CliError code`;
//! - codes given as a field's literal (`ToolError::Coded { code: "…"`, the web view's error
//!   bodies), as `code: code`;
//! - codes kept in a constant (`const CODE`, `…_CODE` or `…_ERROR`), as `NAME code`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Every `.rs` file under `crates/*/src`.
fn sources() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The code a file compiles outside tests, line comments left out.
fn library_code(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The index just past the bracket that closes the one at `open`.
fn closing(text: &str, open: usize) -> usize {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text[open..].char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return open + i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A pattern without its bindings: `Auth { .. }` → `Auth`, `Io(e)` → `Io`,
/// `Events(EventLogError::Io(e))` → `Events(EventLogError::Io)`.
fn variant(pattern: &str) -> String {
    let mut out = String::new();
    let mut rest = pattern.trim();
    while let Some(at) = rest.find(['{', '(']) {
        out.push_str(&rest[..at]);
        let end = closing(rest, at);
        let inner = &rest[at + 1..end - 1];
        if rest[at..].starts_with('(') && inner.contains("::") {
            out.push('(');
            out.push_str(&variant(inner));
            out.push(')');
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    squeeze(&out)
        .trim_start_matches("Self::")
        .replace(" ", "")
        .to_owned()
}

/// What an arm gives: a literal's code, or `(its code)` for another error's code.
fn value(expression: &str) -> String {
    let expression = squeeze(expression.trim().trim_end_matches(','));
    if let Some(code) = expression
        .strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
    {
        return code.to_owned();
    }
    if expression.ends_with(".code()") {
        return "(its code)".to_owned();
    }
    format!("({expression})")
}

/// The owner of the `impl` block around `at`: `impl ErrorCode for X` or `impl X`.
fn owner(code: &str, at: usize) -> String {
    let before = &code[..at];
    let line = before
        .rfind("\nimpl")
        .map(|i| &before[i + 1..])
        .unwrap_or("");
    let head = line.split('{').next().unwrap_or("");
    let head = head.rsplit(" for ").next().unwrap_or(head);
    head.trim_start_matches("impl")
        .split_whitespace()
        .last()
        .unwrap_or("?")
        .to_owned()
}

/// The arms of the `match` block `block` (its braces excluded), as (pattern, expression).
fn arms(block: &str) -> Vec<(String, String)> {
    let mut arms = Vec::new();
    let mut rest = block;
    while let Some(arrow) = rest.find("=>") {
        let pattern = rest[..arrow].trim().to_owned();
        let after = &rest[arrow + 2..];
        let start = after.len() - after.trim_start().len();
        // A block arm ends with its block; any other expression at the next comma outside
        // brackets and strings (or the block's end).
        let end = if after[start..].starts_with('{') {
            closing(after, start)
        } else {
            let mut i = start;
            loop {
                let Some(c) = after[i..].chars().next() else {
                    break after.len();
                };
                match c {
                    ',' => break i,
                    '"' => i = after[i + 1..].find('"').map_or(after.len(), |j| i + j + 2),
                    '{' | '(' | '[' => i = closing(after, i),
                    _ => i += c.len_utf8(),
                }
            }
        };
        arms.push((pattern, after[..end].to_owned()));
        rest = after[end..].trim_start_matches(',');
    }
    arms
}

/// Every code, as the lines of `error_codes.txt` (sorted).
fn codes() -> (BTreeSet<String>, Vec<String>) {
    let mut lines = BTreeSet::new();
    let mut wildcards = Vec::new();
    for file in sources() {
        let code = library_code(&std::fs::read_to_string(&file).unwrap());
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        for (at, _) in code.match_indices("fn code(") {
            let Some(open) = code[at..].find('{').map(|i| at + i) else {
                continue;
            };
            // A declaration without a body (the trait's) has no block of its own.
            if !code[at..open].contains("-> &'static str") || code[at..open].contains(';') {
                continue;
            }
            let owner = owner(&code, at);
            let body = &code[open + 1..closing(&code, open) - 1];
            let Some(matched) = body.find("match ") else {
                lines.insert(format!("{owner} {}", value(body)));
                continue;
            };
            let block_open = matched + body[matched..].find('{').unwrap();
            let block = &body[block_open + 1..closing(body, block_open) - 1];
            for (pattern, expression) in arms(block) {
                for alternative in pattern.split(" | ").flat_map(|p| p.split("\n|")) {
                    let alternative = squeeze(alternative.trim().trim_start_matches('|'));
                    let bare = alternative
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_');
                    if bare {
                        wildcards.push(format!("{shown}: {owner} has the arm `{alternative}`"));
                        continue;
                    }
                    let name = variant(&alternative);
                    let name = name.rsplit_once("::").map_or(name.as_str(), |(_, v)| v);
                    let name = if alternative.contains('(') && name.contains(')') {
                        variant(&alternative)
                    } else {
                        name.to_owned()
                    };
                    lines.insert(format!("{owner}::{name} {}", value(&expression)));
                }
            }
        }
        // Codes kept in a constant (`UNTRUSTED_CODE`, the wire's `WireError::CODE`).
        for line in code.lines() {
            let line = line.trim();
            let Some(rest) = line
                .strip_prefix("pub const ")
                .or_else(|| line.strip_prefix("const "))
            else {
                continue;
            };
            let Some((name, literal)) = rest.split_once(':') else {
                continue;
            };
            if !(name == "CODE" || name.ends_with("_CODE") || name.ends_with("_ERROR")) {
                continue;
            }
            let literal = literal.split('=').nth(1).unwrap_or("");
            let name = if name == "CODE" {
                let at = code.find(line).unwrap_or(0);
                format!("{}::CODE", owner(&code, at))
            } else {
                name.to_owned()
            };
            lines.insert(format!("{name} {}", value(literal.trim_end_matches(';'))));
        }
        for (prefix, owner) in [
            ("BackendError::new(\"", "BackendError"),
            ("code: \"", "code:"),
            (".with_code(\"", "CliError"),
        ] {
            for (at, _) in code.match_indices(prefix) {
                let rest = &code[at + prefix.len()..];
                if let Some(end) = rest.find('"') {
                    lines.insert(format!("{owner} {}", &rest[..end]));
                }
            }
        }
    }
    (lines, wildcards)
}

#[test]
fn every_error_code_is_in_the_committed_list() {
    let (found, wildcards) = codes();
    assert!(
        wildcards.is_empty(),
        "a wildcard arm in `fn code` lets a new variant go unlisted:\n{}",
        wildcards.join("\n")
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/all/error_codes.txt");
    let committed = std::fs::read_to_string(&path).unwrap();
    let committed: Vec<&str> = committed
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    if committed != found {
        let added: Vec<&&str> = found.iter().filter(|l| !committed.contains(l)).collect();
        let gone: Vec<&&str> = committed.iter().filter(|l| !found.contains(l)).collect();
        panic!(
            "error codes differ from {}: a code is never renamed or removed (SPEC: stable \
             codes); a new one is added to the list.\nnot in the list: {added:#?}\nin the list, \
             not in the code: {gone:#?}\nthe codes as they are now:\n{}",
            path.display(),
            found.join("\n")
        );
    }
}

#[test]
fn the_reader_sees_the_codes() {
    let (found, _) = codes();
    for line in [
        "ModelError::Auth model_auth",
        "ModelError::FallbackFailed (its code)",
        "IoError storage_error",
        "BackendError store_unavailable",
        "SettingsError::Read settings_read",
        "Kind::Usage usage",
        "BootstrapError::Events(EventLogError::Io) (its code)",
    ] {
        assert!(found.contains(line), "{line} in {found:#?}");
    }
    assert!(found.len() > 150, "{}", found.len());
    assert_eq!(variant("Self::Auth { .. }"), "Auth");
    assert_eq!(variant("Self::Io(e)"), "Io");
    assert_eq!(value("\"x\","), "x");
    assert_eq!(value("e.code()"), "(its code)");
}
