//! ARCHITECTURE.md's code map and `lib.rs`'s module list, checked against the sources, so that
//! neither names a file, a type or a layer that is not there (issue 41).
//!
//! The rules, also written at the top of ARCHITECTURE.md's "Code map":
//! - A backticked name outside fenced blocks is a **repository path** when it is made of path
//!   characters only (`a-z A-Z 0-9 _ . / - { } ,`), contains a `/` or ends in `.rs`, does not
//!   start with `.` or `/` (those are paths of a workspace or of the machine: `.troupe/…`,
//!   `/proc/…`), and ends in `.rs` or `/` or starts with `crates/` or `docs/`. It must exist:
//!   from the repository's root, or as the tail of a file or folder under `crates/`
//!   (`store/mailbox/file.rs`, `commands/run.rs`). `{a,b}` stands for each alternative.
//! - A backticked Rust path (`Type`, `module::Type::method`, `Type::method()`) names a **type**
//!   by its first CamelCase segment (a capital, then at least one lower-case letter, no `_`);
//!   that type must be defined in `crates/` (`struct|enum|trait|type|union NAME`), or be another
//!   crate's, in [`OTHER_CRATES_TYPES`]. A qualified one (`team::Postman::send`) must be defined
//!   in a file of the module it names (`…/team/postman.rs`).
//! - No measured figure: a number followed by `/s`, `×`, `%` or `µs` (rates, ratios, shares,
//!   timings of benchmark runs) belongs in BENCHMARKS.md. Limits troupe sets (`64 MiB`, `3 s`)
//!   stay.
//! - The numbered list of "Layers and how to check them" is `LAYERS` of `architecture.rs`,
//!   and every top-level module of `lib.rs` has a layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::architecture::LAYERS;

/// Types of other crates the document names, each with its crate.
const OTHER_CRATES_TYPES: &[(&str, &str)] = &[
    ("Arc", "std"),
    ("File", "std"),
    ("BatchSpanProcessor", "opentelemetry_sdk"),
    ("SpanData", "opentelemetry_sdk"),
    ("Connect", "deadpool"),
    ("MakeTlsConnect", "tokio_postgres"),
];

/// Folders of a workspace's `.troupe/` named on their own (`ready/`, `answers/`): not
/// repository paths.
const WORKSPACE_FOLDERS: &[&str] = &["ready/", "answers/"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap()
}

/// The text outside fenced blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Every backticked span of `text` (on one line).
fn spans(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split('`').collect();
        // Odd parts are inside backticks, when the line's backticks pair up.
        for (i, part) in parts.iter().enumerate() {
            if i % 2 == 1 && i + 1 < parts.len() && !part.is_empty() {
                found.push((*part).to_owned());
            }
        }
    }
    found
}

fn is_repository_path(span: &str) -> bool {
    let path_chars = span
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_./-{},".contains(c));
    path_chars
        && (span.contains('/') || span.ends_with(".rs"))
        && !span.starts_with('.')
        && !span.starts_with('/')
        && (span.ends_with(".rs")
            || span.ends_with('/')
            || span.starts_with("crates/")
            || span.starts_with("docs/"))
}

/// `a/{b,c}.rs` as `a/b.rs` and `a/c.rs`.
fn alternatives(span: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (span.find('{'), span.find('}')) else {
        return vec![span.to_owned()];
    };
    span[open + 1..close]
        .split(',')
        .flat_map(|choice| {
            alternatives(&format!(
                "{}{}{}",
                &span[..open],
                choice.trim(),
                &span[close + 1..]
            ))
        })
        .collect()
}

/// Every file and folder under `crates/` (without `target/`), relative to the root, with `/`.
fn entries_under_crates() -> Vec<String> {
    let root = root();
    let mut found = Vec::new();
    let mut pending = vec![root.join("crates")];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(&root).unwrap().to_string_lossy();
            found.push(relative.replace('\\', "/"));
            if path.is_dir() && path.file_name().is_some_and(|n| n != "target") {
                pending.push(path);
            }
        }
    }
    found
}

fn path_exists(path: &str, entries: &[String]) -> bool {
    let path = path.trim_end_matches('/');
    root().join(path).exists()
        || entries
            .iter()
            .any(|entry| entry.ends_with(&format!("/{path}")))
}

/// The type a backticked Rust path names, if it names one.
fn type_named(span: &str) -> Option<String> {
    let path = match span.find('(') {
        Some(at) if span.ends_with(')') => &span[..at],
        Some(_) => return None,
        None => span,
    };
    let segments: Vec<&str> = path.split("::").collect();
    let is_ident = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !segments.iter().all(|s| is_ident(s)) {
        return None;
    }
    segments
        .iter()
        .find(|s| {
            s.starts_with(|c: char| c.is_ascii_uppercase())
                && s.chars().any(|c| c.is_ascii_lowercase())
                && !s.contains('_')
        })
        .map(|s| (*s).to_owned())
}

/// Every `.rs` file under `crates/`.
fn rust_files() -> Vec<PathBuf> {
    entries_under_crates()
        .into_iter()
        .filter(|e| e.ends_with(".rs"))
        .map(|e| root().join(e))
        .collect()
}

/// Every type defined in `crates/`, with the files (relative to the root) that define it: the
/// word after `struct`, `enum`, `trait`, `type` or `union` in code (line comments left out).
fn definitions() -> BTreeMap<String, Vec<String>> {
    let root = root();
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in rust_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let words: Vec<&str> = code
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .collect();
            for pair in words.windows(2) {
                if matches!(pair[0], "struct" | "enum" | "trait" | "type" | "union") {
                    defined
                        .entry(pair[1].to_owned())
                        .or_default()
                        .push(shown.clone());
                }
            }
        }
    }
    defined
}

fn defined_types() -> BTreeSet<String> {
    definitions().into_keys().collect()
}

/// The modules a qualified name puts its type in (`approvals::ApprovalDesk::answer` →
/// `approvals`), and the type; `None` for a name without both.
fn qualified_type(span: &str) -> Option<(Vec<String>, String)> {
    let name = type_named(span)?;
    let modules: Vec<String> = span
        .split("::")
        .take_while(|s| *s != name)
        .map(str::to_owned)
        .collect();
    (!modules.is_empty()).then_some((modules, name))
}

/// Whether `file` is in the module path `modules` (`worktree/git.rs`, `team/postman.rs` for
/// `team`), wherever that module sits in its crate.
fn file_in_module(file: &str, modules: &[String]) -> bool {
    let path = file.trim_end_matches(".rs");
    let parts: Vec<&str> = path.split('/').collect();
    parts
        .windows(modules.len())
        .any(|w| w.iter().zip(modules).all(|(a, b)| a == b))
}

/// The numbered layer list of the section "Layers and how to check them".
fn documented_layers(text: &str) -> Vec<Vec<String>> {
    let section = text
        .split("\n## Layers and how to check them")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"Layers and how to check them\"");
    let section = section.split("\n## ").next().unwrap_or("");
    let mut layers = Vec::new();
    for line in section.lines() {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        assert_eq!(
            number.parse::<usize>().unwrap(),
            layers.len() + 1,
            "layers are numbered in order: {line}"
        );
        layers.push(
            rest.split(',')
                .map(|m| m.trim().trim_matches('`').to_owned())
                .collect(),
        );
    }
    layers
}

/// The top-level modules `lib.rs` declares.
fn library_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(root().join("crates/troupe/src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))?;
            Some(rest.strip_suffix(';')?.trim().to_owned())
        })
        .collect()
}

/// The modules `lib.rs`'s doc names in its list (`//! - [`a`], [`b`]: …`).
fn documented_library_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(root().join("crates/troupe/src/lib.rs")).unwrap();
    let mut named = BTreeSet::new();
    for line in lib.lines() {
        let Some(item) = line.strip_prefix("//! - ") else {
            continue;
        };
        let head = item.split(':').next().unwrap_or("");
        for piece in head.split("[`").skip(1) {
            if let Some((name, _)) = piece.split_once("`]") {
                named.insert(name.to_owned());
            }
        }
    }
    named
}

#[test]
fn every_path_the_architecture_names_exists() {
    let entries = entries_under_crates();
    let text = prose(&architecture());
    let mut checked = 0;
    let missing: BTreeSet<String> = spans(&text)
        .into_iter()
        .filter(|span| is_repository_path(span) && !WORKSPACE_FOLDERS.contains(&span.as_str()))
        .inspect(|_| checked += 1)
        .filter(|span| {
            !alternatives(span)
                .iter()
                .all(|path| path_exists(path, &entries))
        })
        .collect();
    assert!(checked > 100, "the reader finds the paths ({checked})");
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn every_type_the_architecture_names_is_defined() {
    let defined = defined_types();
    let text = prose(&architecture());
    let named: BTreeSet<String> = spans(&text).iter().filter_map(|s| type_named(s)).collect();
    assert!(named.len() > 100, "the reader finds the types ({named:?})");
    let missing: Vec<&String> = named
        .iter()
        .filter(|name| !defined.contains(*name))
        .filter(|name| !OTHER_CRATES_TYPES.iter().any(|(t, _)| t == name))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names types that no crate defines: {missing:?}"
    );
    // The exceptions stay true too: none of them is (now) a type of ours.
    let ours: Vec<&&str> = OTHER_CRATES_TYPES
        .iter()
        .map(|(t, _)| t)
        .filter(|t| named.contains(**t) && defined.contains(**t))
        .collect();
    assert!(ours.is_empty(), "no longer other crates' types: {ours:?}");
}

/// The measured figures in `text`: a number directly followed (a space allowed) by `/s`, `×`,
/// `%` or `µs`, each with its line.
fn measured_figures(text: &str) -> Vec<String> {
    const UNITS: &[&str] = &["/s", "×", "%", "µs"];
    let mut found = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        while let Some(at) = rest.find(|c: char| c.is_ascii_digit()) {
            let number_end = rest[at..]
                .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
                .map_or(rest.len(), |end| at + end);
            let after = rest[number_end..]
                .strip_prefix(' ')
                .unwrap_or(&rest[number_end..]);
            if UNITS.iter().any(|unit| after.starts_with(unit)) {
                found.push(line.trim().to_owned());
                break;
            }
            rest = &rest[number_end..];
        }
    }
    found
}

#[test]
fn the_architecture_quotes_no_measured_figures() {
    let figures = measured_figures(&architecture());
    assert!(
        figures.is_empty(),
        "measured figures belong in BENCHMARKS.md:\n{}",
        figures.join("\n")
    );
    // The reader finds them where they are.
    let benchmarks = std::fs::read_to_string(root().join("BENCHMARKS.md")).unwrap();
    assert!(measured_figures(&benchmarks).len() > 10);
    assert_eq!(
        measured_figures("claim+ack 630/s → 1,320/s; about 7 % (0.3 ms); 0.45 × raw; 2.5 µs"),
        vec!["claim+ack 630/s → 1,320/s; about 7 % (0.3 ms); 0.45 × raw; 2.5 µs".to_owned()]
    );
    assert!(measured_figures("at most 64 MiB, 3 s, 50 ms–1 s, SPEC §10, 2026-12-03").is_empty());
}

#[test]
fn every_qualified_type_is_defined_in_the_module_it_names() {
    // `team::Postman` is defined under `team/`, not merely somewhere: a type's old name that
    // another module still uses is caught too.
    let definitions = definitions();
    let text = prose(&architecture());
    let mut checked = 0;
    let mut elsewhere = BTreeSet::new();
    for (modules, name) in spans(&text).iter().filter_map(|s| qualified_type(s)) {
        let Some(files) = definitions.get(&name) else {
            continue; // the check above names it
        };
        checked += 1;
        if !files.iter().any(|f| file_in_module(f, &modules)) {
            elsewhere.insert(format!(
                "{}::{name} (defined in {files:?})",
                modules.join("::")
            ));
        }
    }
    assert!(checked > 10, "the reader finds qualified types ({checked})");
    assert!(
        elsewhere.is_empty(),
        "ARCHITECTURE.md puts types in modules that do not define them:\n{}",
        elsewhere.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_documented_layers_are_the_checked_ones() {
    let documented = documented_layers(&architecture());
    let checked: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|layer| layer.iter().map(|m| (*m).to_owned()).collect())
        .collect();
    pretty_assertions::assert_eq!(
        documented,
        checked,
        "ARCHITECTURE.md's layer list and LAYERS in tests/all/architecture.rs"
    );
}

#[test]
fn every_module_of_the_library_has_a_layer() {
    let modules = library_modules();
    assert!(modules.len() > 20, "{modules:?}");
    let layered: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|layer| layer.iter().map(|m| (*m).to_owned()))
        .collect();
    let without: Vec<&String> = modules.difference(&layered).collect();
    let gone: Vec<&String> = layered.difference(&modules).collect();
    assert!(without.is_empty(), "modules without a layer: {without:?}");
    assert!(
        gone.is_empty(),
        "layers name modules lib.rs lacks: {gone:?}"
    );
}

#[test]
fn the_library_doc_lists_every_module() {
    pretty_assertions::assert_eq!(documented_library_modules(), library_modules());
}

#[test]
fn the_readers_see_what_they_check() {
    // Known good and bad names, so that a passing check means something.
    assert!(is_repository_path("crates/troupe/src/store/roster.rs"));
    assert!(is_repository_path("store/mailbox/file.rs"));
    assert!(is_repository_path("crates/troupe/src/{error,clock}.rs"));
    assert!(!is_repository_path(".troupe/events.jsonl"));
    assert!(!is_repository_path("/proc/<pid>/environ"));
    assert!(!is_repository_path("info/exclude"));
    assert_eq!(
        alternatives("a/{b, c}.rs"),
        vec!["a/b.rs".to_owned(), "a/c.rs".to_owned()]
    );
    let entries = entries_under_crates();
    assert!(path_exists("store/mailbox/", &entries));
    assert!(!path_exists("store/usage_copy.rs", &entries));
    assert_eq!(type_named("UsageCopy").as_deref(), Some("UsageCopy"));
    assert_eq!(
        type_named("approvals::ApprovalDesk::answer").as_deref(),
        Some("ApprovalDesk")
    );
    assert_eq!(type_named("Team::driver()").as_deref(), Some("Team"));
    assert_eq!(type_named("sync::lock"), None);
    assert_eq!(type_named("OUTPUT_CAP"), None);
    assert_eq!(type_named("Error [<code>]: <message>"), None);
    assert_eq!(
        qualified_type("worktree::git::Git"),
        Some((
            vec!["worktree".to_owned(), "git".to_owned()],
            "Git".to_owned()
        ))
    );
    assert_eq!(qualified_type("Sandbox::new"), None);
    assert!(file_in_module(
        "crates/troupe/src/worktree/git.rs",
        &["worktree".to_owned(), "git".to_owned()]
    ));
    assert!(!file_in_module(
        "crates/troupe-cli/src/serve/api.rs",
        &["team".to_owned()]
    ));
    let defined = defined_types();
    assert!(defined.contains("Placement") && defined.contains("ErrorCode"));
    assert!(!defined.contains("UsageCopy"));
}
