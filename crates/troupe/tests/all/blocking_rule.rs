//! One way across from async code to blocking work (ARCHITECTURE, "Blocking work from async
//! code"): `troupe::sync` alone names tokio's crossings, and its in-place [`blocking`] has a fixed
//! list of callers — the file adapters and bootstrap. Everything else awaits the ports, or hands
//! long work (a tool's walk or read, git) to `sync::offload`.
//!
//! Read from the sources like the layer check: library code only (no `#[cfg(test)]` part, no
//! comments).
//!
//! [`blocking`]: troupe::sync::blocking

use std::path::Path;

use super::architecture::{library_code, modules, Module};

/// What moves work off the async threads; only `sync.rs` names them.
const CROSSINGS: &[&str] = &["spawn_blocking", "block_in_place", "tokio::fs"];

/// Who may call `sync::blocking`, by module path prefix, and why.
const BLOCKING_CALLERS: &[(&str, &str)] = &[
    ("store", "the store ports' file adapters"),
    ("agent::transcript", "the transcripts' file adapter"),
    ("permissions::audit", "the audit log's file"),
    ("jobs", "the job records' files"),
    (
        "bootstrap",
        "start-up and close, once per process or teammate",
    ),
];

/// The CLI's callers: the page's and the answers' file readers.
const CLI_BLOCKING_CALLERS: &[&str] = &[
    "serve::history",
    "serve::window",
    "serve::api",
    "permission_answer",
];

fn crate_modules(crate_dir: &str) -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    modules(&src)
        .into_iter()
        .map(|(module, (text, _))| (joined(&module), library_code(&text)))
        .collect()
}

fn joined(module: &Module) -> String {
    if module.is_empty() {
        "lib".to_owned()
    } else {
        module.join("::")
    }
}

/// Whether `code` calls `sync::blocking` (by path, or imported from `sync`).
fn calls_blocking(code: &str) -> bool {
    code.contains("sync::blocking")
        || code.match_indices("sync::{").any(|(at, _)| {
            let group = &code[at..];
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == "blocking")
        })
}

fn allowed(module: &str, prefixes: &[&str]) -> bool {
    prefixes
        .iter()
        .any(|p| module == *p || module.starts_with(&format!("{p}::")))
}

#[test]
fn only_sync_names_tokios_crossings_to_blocking_work() {
    let mut found = Vec::new();
    for crate_dir in ["troupe", "troupe-cli"] {
        for (module, code) in crate_modules(crate_dir) {
            if crate_dir == "troupe" && module == "sync" {
                continue;
            }
            for crossing in CROSSINGS {
                if code.contains(crossing) {
                    found.push(format!("{crate_dir}: {module} names {crossing}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "use troupe::sync::offload (or, in a file adapter, sync::blocking): {found:#?}"
    );
}

#[test]
fn only_the_file_adapters_and_bootstrap_block_in_place() {
    let library: Vec<&str> = BLOCKING_CALLERS.iter().map(|(m, _)| *m).collect();
    let mut found = Vec::new();
    for (crate_dir, callers) in [
        ("troupe", &library[..]),
        ("troupe-cli", CLI_BLOCKING_CALLERS),
    ] {
        for (module, code) in crate_modules(crate_dir) {
            if module == "sync" || !calls_blocking(&code) {
                continue;
            }
            if !allowed(&module, callers) {
                found.push(format!("{crate_dir}: {module}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "sync::blocking is for file adapters' locked sections; await a port or use \
         sync::offload: {found:#?}"
    );
}

#[test]
fn the_rule_sees_a_call_and_an_import() {
    assert!(calls_blocking("let x = crate::sync::blocking(|| 1);"));
    assert!(calls_blocking("use crate::sync::{lock, blocking};"));
    assert!(!calls_blocking("use crate::sync::{lock, offload};"));
    assert!(!calls_blocking("let x = offload(\"w\", || 1);"));
    assert!(allowed("store::mailbox::file", &["store"]));
    assert!(!allowed("storehouse", &["store"]));
}
