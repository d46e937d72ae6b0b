//! The CLI's import structure, read from its sources: no two files import each other, however
//! far round, and no two of its top-level modules (`commands`, `serve`, `observe`, …) either.
//! Both binaries are checked: `troupe` (`src/main.rs`) and `troupe-bench` (`src/bench/main.rs`).
//!
//! A file depends on the modules it names through a path that starts with `crate::`,
//! `super::`, `self::` or, in a file that declares modules (`main.rs`, `mod.rs`), the name of
//! one of them (`run::run(…)` in `commands/mod.rs`): such a file uses its children like any
//! other module, so a child that imports from it closes a circle. Test code (`#[cfg(test)]`
//! items) and comments and literals are left out; a `mod x;` declaration is not a use.
//!
//! The same reading checks that `troupe` has one tokio runtime: `main.rs` builds it and runs
//! the async `commands::execute` on it; no other file builds one or blocks on a future, except
//! the view's thread waiting on that runtime through its handle (`watch/waiting.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module by its path from its crate's root (`["serve", "http"]`); the root is `[]`.
type Module = Vec<String>;

/// One binary's files: each module's code (comments, literals and tests taken out) and the
/// names of the modules it declares.
struct Crate {
    files: BTreeMap<Module, Code>,
}

struct Code {
    text: String,
    declares: BTreeSet<String>,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The crate whose root is `folder/main.rs`: every `.rs` file under `folder`, except those of
/// `skip` (another binary's folder).
fn read_crate(folder: &Path, skip: Option<&Path>) -> Crate {
    let mut files = BTreeMap::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if Some(path.as_path()) != skip {
                    pending.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let mut module: Module = path
                .strip_prefix(folder)
                .unwrap()
                .with_extension("")
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "main")) {
                module.pop();
            }
            let raw = std::fs::read_to_string(&path).unwrap();
            files.insert(module, parse_code(&raw));
        }
    }
    Crate { files }
}

fn parse_code(raw: &str) -> Code {
    let text = without_tests(&blank_comments_and_literals(raw));
    let tokens = tokens(&text);
    let declares = tokens
        .windows(3)
        .filter(|w| w[0] == "mod" && w[2] == ";")
        .map(|w| w[1].clone())
        .collect();
    Code { text, declares }
}

/// `raw` with its comments, string literals and character literals replaced by spaces, so that
/// a path in a doc comment or a brace in a string is not read as code.
fn blank_comments_and_literals(raw: &str) -> String {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        let skip = if rest.starts_with(&['/', '/']) {
            rest.iter().position(|&c| c == '\n').unwrap_or(rest.len())
        } else if rest.starts_with(&['/', '*']) {
            block_comment_len(rest)
        } else if rest[0] == '"' {
            quoted_len(rest, '"')
        } else if rest[0] == 'r'
            && (i == 0 || !is_ident(chars[i - 1]))
            && matches!(rest.get(1), Some('"' | '#'))
        {
            raw_string_len(rest)
        } else if rest[0] == '\'' {
            char_literal_len(rest)
        } else {
            0
        };
        if skip == 0 {
            out.push(chars[i]);
            i += 1;
        } else {
            out.extend(
                rest[..skip]
                    .iter()
                    .map(|&c| if c == '\n' { '\n' } else { ' ' }),
            );
            i += skip;
        }
    }
    out
}

fn block_comment_len(rest: &[char]) -> usize {
    let (mut depth, mut i) = (0usize, 0);
    while i < rest.len() {
        if rest[i..].starts_with(&['/', '*']) {
            depth += 1;
            i += 2;
        } else if rest[i..].starts_with(&['*', '/']) {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    rest.len()
}

/// A literal from its opening `quote` through its closing one, escapes skipped.
fn quoted_len(rest: &[char], quote: char) -> usize {
    let mut i = 1;
    while i < rest.len() {
        match rest[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    rest.len()
}

/// `r"…"`, `r#"…"#`, …; zero if `r` starts an identifier instead (`r#type`).
fn raw_string_len(rest: &[char]) -> usize {
    let hashes = rest[1..].iter().take_while(|&&c| c == '#').count();
    if rest.get(1 + hashes) != Some(&'"') {
        return 0;
    }
    let start = 2 + hashes;
    let mut i = start;
    while i < rest.len() {
        if rest[i] == '"'
            && rest[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    rest.len()
}

/// `'x'` or `'\n'`; zero for a lifetime (`'a`), which is left as it is.
fn char_literal_len(rest: &[char]) -> usize {
    match rest.get(1) {
        Some('\\') => quoted_len(rest, '\''),
        Some(_) if rest.get(2) == Some(&'\'') => 3,
        _ => 0,
    }
}

/// `code` without its `#[cfg(test)]` items (a `mod x;` through its `;`, any other item through
/// its closing brace).
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = match (item.find(';'), item.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => semi + 1,
            (Some(semi), None) => semi + 1,
            (_, Some(brace)) => brace + matching_brace_len(&item[brace..]),
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

fn matching_brace_len(from_brace: &str) -> usize {
    let mut depth = 0usize;
    for (at, c) in from_brace.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
    }
    from_brace.len()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Identifiers, `::`, and every other non-space character as a token of its own.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if is_ident(c) {
            let end = chars[i..]
                .iter()
                .position(|&c| !is_ident(c))
                .map_or(chars.len(), |n| i + n);
            out.push(chars[i..end].iter().collect());
            i = end;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Every path in `tokens` that starts at a token `starts` accepts and is not itself the tail of
/// a longer path, `use` groups expanded at any depth (`a::{b, c::{d, e}}` is `a::b`, `a::c::d`,
/// `a::c::e`; `self` in a group is the group's own path).
fn paths(tokens: &[String], starts: impl Fn(&str) -> bool) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let follows_path = i > 0 && tokens[i - 1] == "::";
        if follows_path || !starts(token) || tokens.get(i + 1).is_none_or(|t| t != "::") {
            continue;
        }
        path_at(tokens, i, Vec::new(), &mut found);
    }
    found
}

/// Reads the path at `tokens[i]` after `prefix` into `found`; returns the index after it.
fn path_at(
    tokens: &[String],
    mut i: usize,
    prefix: Vec<String>,
    found: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while let Some(token) = tokens.get(i) {
                    match token.as_str() {
                        "}" => return i + 1,
                        "," => i += 1,
                        "self" => {
                            found.push(path.clone());
                            i += 1;
                        }
                        _ => i = path_at(tokens, i, path.clone(), found),
                    }
                }
                return i;
            }
            Some(token) if token.starts_with(is_ident) => {
                path.push(token.to_owned());
                i += 1;
                if tokens.get(i).is_some_and(|t| t == "::") {
                    i += 1;
                    continue;
                }
                // `x as y`: the alias names nothing new.
                if tokens.get(i).is_some_and(|t| t == "as") {
                    i += 2;
                }
                found.push(path);
                return i;
            }
            _ => {
                found.push(path);
                return i;
            }
        }
    }
}

/// The module a path names, from the file of `module`: its longest prefix that is a file of
/// the crate.
fn resolve(krate: &Crate, module: &Module, path: &[String]) -> Option<Module> {
    let mut base: Module = Vec::new();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => rest = &path[1..],
        Some("self") => {
            base = module.clone();
            rest = &path[1..];
        }
        Some("super") => base = module.clone(),
        _ => base = module.clone(), // a declared child's name
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    (0..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|prefix| krate.files.contains_key(prefix))
}

/// Each file's dependencies on the crate's other files.
fn file_graph(krate: &Crate) -> BTreeMap<Module, BTreeSet<Module>> {
    krate
        .files
        .iter()
        .map(|(module, code)| {
            let starts =
                |t: &str| matches!(t, "crate" | "super" | "self") || code.declares.contains(t);
            let targets = paths(&tokens(&code.text), starts)
                .iter()
                .filter_map(|path| resolve(krate, module, path))
                .filter(|target| target != module)
                .collect();
            (module.clone(), targets)
        })
        .collect()
}

/// The same graph between top-level modules (`serve::api → commands::review` is
/// `serve → commands`); the root, which declares them all, is left out.
fn top_level_graph(
    files: &BTreeMap<Module, BTreeSet<Module>>,
) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, targets) in files {
        let Some(top) = from.first() else { continue };
        let entry = graph.entry(vec![top.clone()]).or_default();
        for target in targets {
            if let Some(target_top) = target.first().filter(|t| *t != top) {
                entry.insert(vec![target_top.clone()]);
            }
        }
    }
    graph
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "main".to_owned()
    } else {
        module.join("::")
    }
}

/// Every cycle closed by an edge back to a module still being explored, as `a → b → a`.
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    fn visit(
        graph: &BTreeMap<Module, BTreeSet<Module>>,
        at: &Module,
        stack: &mut Vec<Module>,
        finished: &mut BTreeSet<Module>,
        found: &mut Vec<String>,
    ) {
        stack.push(at.clone());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(start) = stack.iter().position(|m| m == next) {
                let mut cycle: Vec<String> = stack[start..].iter().map(name).collect();
                cycle.push(name(next));
                found.push(cycle.join(" → "));
            } else if !finished.contains(next) {
                visit(graph, next, stack, finished, found);
            }
        }
        stack.pop();
        finished.insert(at.clone());
    }
    let mut finished = BTreeSet::new();
    let mut found = Vec::new();
    for module in graph.keys() {
        if !finished.contains(module) {
            visit(graph, module, &mut Vec::new(), &mut finished, &mut found);
        }
    }
    found
}

fn troupe_crate() -> Crate {
    read_crate(&src(), Some(&src().join("bench")))
}

fn bench_crate() -> Crate {
    read_crate(&src().join("bench"), None)
}

fn module(path: &str) -> Module {
    path.split("::").map(str::to_owned).collect()
}

#[test]
fn no_files_of_the_cli_import_each_other_in_a_circle() {
    let mut found = Vec::new();
    for (binary, krate) in [("troupe", troupe_crate()), ("troupe-bench", bench_crate())] {
        let files = file_graph(&krate);
        found.extend(cycles(&files).into_iter().map(|c| format!("{binary}: {c}")));
        let top = top_level_graph(&files);
        found.extend(
            cycles(&top)
                .into_iter()
                .map(|c| format!("{binary} (top-level): {c}")),
        );
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The `troupe` binary reaches a shared team only through the library's bootstrap
/// (`TeamView`, `send_as_user`, the inspector…), never its PostgreSQL adapters: the backend is
/// chosen in one place. (`troupe-bench` measures the adapters themselves.)
#[test]
fn the_cli_never_names_the_postgresql_adapters() {
    let krate = troupe_crate();
    let naming: Vec<String> = krate
        .files
        .iter()
        .filter(|(_, code)| code.text.contains("store::postgres"))
        .map(|(module, _)| name(module))
        .collect();
    assert!(
        naming.is_empty(),
        "files of the troupe binary that name troupe::store::postgres (use a bootstrap \
         adapter): {naming:?}"
    );
}

/// The binary looks at which backend a team is on in one file, `store_choice.rs` (which makes the
/// choice and opens the team's view); every other file takes what it opens (issue 41).
#[test]
fn the_cli_matches_the_store_choice_in_one_file() {
    let krate = troupe_crate();
    let matching: Vec<String> = krate
        .files
        .iter()
        .filter(|(_, code)| {
            code.text.contains("StoreChoice::Files") || code.text.contains("StoreChoice::Postgres")
        })
        .map(|(module, _)| name(module))
        .collect();
    assert_eq!(
        matching,
        ["store_choice"],
        "files of the troupe binary that name a StoreChoice variant (take the view \
         store_choice.rs opens instead)"
    );
}

/// What a team holds is read through the view's ports, the same way on either backend: no file
/// of the binary reads the workspace's stream, conversations or usage log itself (which would
/// be a second way, for files only, beside the database's).
#[test]
fn the_cli_reads_a_team_through_its_view_only() {
    let krate = troupe_crate();
    let file_readers = [
        "events::read",
        "events::index",
        "events::follow",
        "EventCursor",
        "EventIndex",
        "FileTranscript",
        "FileUsage",
        "for_each_record_after",
        "FileEvents",
    ];
    let reading: Vec<String> = krate
        .files
        .iter()
        .filter_map(|(module, code)| {
            let named: Vec<&str> = file_readers
                .iter()
                .copied()
                .filter(|reader| code.text.contains(reader))
                .collect();
            (!named.is_empty()).then(|| format!("{} ({})", name(module), named.join(", ")))
        })
        .collect();
    assert!(
        reading.is_empty(),
        "files of the troupe binary that read a team's files themselves (use TeamView's \
         ports): {reading:?}"
    );
}

/// Files that may call `block_on(` besides `main.rs`, and why: each on a `Handle` of the one
/// runtime, from a thread that is not one of its own.
const HANDLE_WAITERS: &[(&str, &str)] = &[(
    "watch::waiting",
    "the view's loop runs on the blocking pool and waits there for its store calls",
)];

/// What breaks the one-runtime rule in `krate`: a file other than `main.rs` that builds a
/// runtime or blocks on a future (but for [`HANDLE_WAITERS`]), or a `commands::execute` that
/// is not `async`.
fn runtime_offenders(krate: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    for (module, code) in &krate.files {
        if module.is_empty() {
            continue;
        }
        let file = name(module);
        if code.text.contains("runtime::Builder") {
            found.push(format!("{file} builds a runtime (runtime::Builder)"));
        }
        let waiter = HANDLE_WAITERS.iter().any(|(m, _)| *m == file);
        if code.text.contains("block_on(") && !(waiter && code.text.contains("Handle")) {
            found.push(format!("{file} blocks on a future (block_on)"));
        }
    }
    let execute_is_async = krate
        .files
        .get(&module("commands"))
        .is_some_and(|code| code.text.contains("pub async fn execute("));
    if !execute_is_async {
        found.push("commands::execute is not an async fn".to_owned());
    }
    found
}

#[test]
fn the_cli_runs_every_command_on_the_one_runtime_main_builds() {
    let krate = troupe_crate();
    let offenders = runtime_offenders(&krate);
    assert!(
        offenders.is_empty(),
        "main.rs builds the one runtime and runs the async commands::execute on it; await the \
         library instead (troupe::sync::offload for blocking work):\n{}",
        offenders.join("\n")
    );
    let main = &krate.files[&Vec::new()].text;
    assert!(
        main.contains("runtime::Builder"),
        "main.rs builds no runtime"
    );
    assert!(
        main.contains("block_on(commands::execute("),
        "main.rs does not run commands::execute on its runtime"
    );
}

/// The check refuses what the CLI did before it had one runtime: a runtime per call and
/// per command, and a synchronous `execute`.
#[test]
fn a_runtime_per_call_is_found() {
    let krate = Crate {
        files: [
            (
                "",
                "mod block_on;\nmod commands;\nfn main() { commands::execute(cli); }",
            ),
            (
                "block_on",
                "pub fn block_on<F: Future>(f: F) -> F::Output {\n\
                 tokio::runtime::Builder::new_current_thread().build().block_on(f) }",
            ),
            (
                "commands",
                "pub fn execute(cli: Cli) -> Result<(), CliError> { run::run(cli) }",
            ),
            (
                "watch::feed",
                "fn next(&self) { self.runtime.block_on(self.view.events_after(0, 1)) }",
            ),
            (
                "watch::waiting",
                "pub fn wait<F: Future>(&self, f: F) -> F::Output { self.0.block_on(f) }\n\
                 fn current() -> Self { Self(Handle::current()) }",
            ),
        ]
        .into_iter()
        .map(|(path, text)| {
            let module = if path.is_empty() {
                Vec::new()
            } else {
                module(path)
            };
            (module, parse_code(text))
        })
        .collect(),
    };
    assert_eq!(
        runtime_offenders(&krate),
        [
            "block_on builds a runtime (runtime::Builder)",
            "block_on blocks on a future (block_on)",
            "watch::feed blocks on a future (block_on)",
            "commands::execute is not an async fn",
        ]
    );
}

#[test]
fn the_check_sees_the_imports_there_are() {
    let files = file_graph(&troupe_crate());
    let edge = |from: &str, to: &str| {
        let targets = &files[&module(from)];
        assert!(targets.contains(&module(to)), "{from} → {to}? {targets:?}");
    };
    edge("commands::run", "agent_setup"); // `use crate::agent_setup::{…}`
    edge("commands::demo", "commands::run"); // `super::run::drive(…)`
    edge("commands", "commands::run"); // `run::run(…)`, a declared child
    edge("serve::api", "serve::response"); // `use super::response::{self, …}`
    edge("serve", "serve::http"); // `http::serve(…)` from `serve/mod.rs`
    let bench = file_graph(&bench_crate());
    assert!(bench[&module("sandbox")].contains(&module("stats")));
    assert!(bench[&Vec::new()].contains(&module("mailbox")));
}

#[test]
fn a_circle_is_found_and_named() {
    let krate = Crate {
        files: [
            ("", "mod a;\nmod b;\nfn main() { a::go(); }"),
            (
                "a",
                "use crate::b::{self, c::{Thing as Other}};\npub fn go() {}",
            ),
            ("b", "// crate::a::go in a comment is not a use\npub mod c;"),
            (
                "b::c",
                "fn f() { let _ = \"super::super::a\"; super::super::a::go(); }",
            ),
        ]
        .into_iter()
        .map(|(path, text)| {
            let module = if path.is_empty() {
                Vec::new()
            } else {
                module(path)
            };
            (module, parse_code(text))
        })
        .collect(),
    };
    let files = file_graph(&krate);
    assert_eq!(
        files[&module("a")],
        BTreeSet::from([module("b"), module("b::c")])
    );
    assert_eq!(files[&module("b")], BTreeSet::new());
    assert_eq!(cycles(&files), ["a → b::c → a"]);
    assert_eq!(cycles(&top_level_graph(&files)), ["a → b → a"]);
}

#[test]
fn test_code_and_literals_are_not_read() {
    let code = parse_code(
        "use crate::x;\nconst S: &str = r#\"crate::y\"#;\nfn f<'a>(c: char) -> bool { c == '{' }\n\
         #[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod more { use crate::z; fn g() { if true {} } }\n\
         fn after() { crate::w::go() }",
    );
    let found = paths(&tokens(&code.text), |t| t == "crate");
    assert_eq!(found, [module("crate::x"), module("crate::w::go")]);
    assert!(code.declares.is_empty(), "{:?}", code.declares);
}
