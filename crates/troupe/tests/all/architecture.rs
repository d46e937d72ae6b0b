//! The runtime crate's import structure: no cycle between its files, and no module that imports
//! from a layer above it (a lower layer reaches up only through a trait the upper one
//! implements). Read from the sources: every `crate::…` and `super::…` path outside
//! `#[cfg(test)]` code, resolved to the file of the longest module prefix it names. A `mod.rs`
//! (or `lib.rs`) re-exporting its own children is their facade, not a dependency of theirs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first. A module may import only from layers below its own.
/// ARCHITECTURE.md's list is this one (`code_map.rs` checks it).
pub(crate) const LAYERS: &[&[&str]] = &[
    &[
        "error",
        "clock",
        "ids",
        "layout",
        "sync",
        "secrets",
        "terminal_text",
    ],
    &["protected"],
    &["sandbox"],
    &["store"],
    &["prices"],
    &["settings"],
    &["process", "model", "permissions", "mcp"],
    &["jobs", "hooks", "worktree"],
    &["tools"],
    &["agent", "cron"],
    &["team"],
    &["approvals", "replay"],
    &["telemetry"],
    &["gc"],
    &["inspect"],
    &["send"],
    &["bootstrap"],
    &["demo"],
];

pub(crate) type Module = Vec<String>;

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&top))
}

/// Every source file of the crate, by module path, with whether it is a `mod.rs`/`lib.rs`.
pub(crate) fn modules(src: &Path) -> BTreeMap<Module, (String, bool)> {
    let mut found = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let facade = matches!(module.last().map(String::as_str), Some("mod" | "lib"));
            if facade {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            found.insert(module, (text, facade));
        }
    }
    found
}

/// The code a file compiles into the library: no tests, no comments.
pub(crate) fn library_code(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The segments of a path starting at `rest` (`a::b::c`), and what follows it.
fn path_at(rest: &str) -> (Vec<String>, &str) {
    let mut segments = Vec::new();
    let mut rest = rest;
    loop {
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segments.push(rest[..end].to_owned());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(after) if after.starts_with(is_ident) => rest = after,
            _ => break,
        }
    }
    (segments, rest)
}

/// Every module path a file names through `crate::` or `super::`, `use` groups expanded one
/// level (`crate::a::{b, c::d}` names `a::b` and `a::c::d`).
fn named_paths(module: &Module, code: &str) -> Vec<Module> {
    let mut named = Vec::new();
    for (at, _) in code.match_indices("::") {
        let before = &code[..at];
        let start = before.rfind(|c: char| !is_ident(c)).map_or(0, |i| i + 1);
        let root = &before[start..];
        if root != "crate" && root != "super" {
            continue;
        }
        // `super::super::x` is read once, from its first `super`.
        if code[..start].ends_with("::") {
            continue;
        }
        let (mut segments, rest) = path_at(&code[at + 2..]);
        let mut base: Module = if root == "crate" {
            Vec::new()
        } else {
            // `super` of `a/b.rs` is `a`; of `a/b/mod.rs` (module `a::b`) it is `a` too.
            let mut parent = module.clone();
            parent.pop();
            parent
        };
        while segments.first().is_some_and(|s| s == "super") {
            segments.remove(0);
            base.pop();
        }
        base.extend(segments);
        if let Some(group) = rest.strip_prefix("::{") {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let item = item.trim().split(" as ").next().unwrap_or("").trim();
                if item.is_empty() || item == "self" {
                    continue;
                }
                let mut path = base.clone();
                path.extend(item.split("::").map(|s| s.trim().to_owned()));
                named.push(path);
            }
        }
        named.push(base);
    }
    named
}

fn resolve(modules: &BTreeMap<Module, (String, bool)>, path: &[String]) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains_key(prefix))
}

fn dependencies() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let mut edges = BTreeMap::new();
    for (module, (text, facade)) in &modules {
        let code = library_code(text);
        let targets: BTreeSet<Module> = named_paths(module, &code)
            .iter()
            .filter_map(|path| resolve(&modules, path))
            .filter(|target| target != module)
            .filter(|target| !(*facade && target.starts_with(module)))
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "lib".to_owned()
    } else {
        module.join("::")
    }
}

/// A cycle through `from`, if the graph has one reachable from it.
fn cycle_from(
    edges: &BTreeMap<Module, BTreeSet<Module>>,
    from: &Module,
    path: &mut Vec<Module>,
    done: &mut BTreeSet<Module>,
) -> Option<Vec<Module>> {
    if let Some(at) = path.iter().position(|m| m == from) {
        let mut cycle = path[at..].to_vec();
        cycle.push(from.clone());
        return Some(cycle);
    }
    if done.contains(from) {
        return None;
    }
    path.push(from.clone());
    for next in edges.get(from).into_iter().flatten() {
        if let Some(cycle) = cycle_from(edges, next, path, done) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(from.clone());
    None
}

#[test]
fn no_file_of_the_runtime_crate_imports_another_in_a_cycle() {
    let edges = dependencies();
    let mut done = BTreeSet::new();
    for module in edges.keys() {
        if let Some(cycle) = cycle_from(&edges, module, &mut Vec::new(), &mut done) {
            let cycle: Vec<String> = cycle.iter().map(name).collect();
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let edges = dependencies();
    let mut upward = Vec::new();
    for (module, targets) in &edges {
        let Some(top) = module.first() else {
            continue; // lib.rs declares every module
        };
        let layer = layer_of(top).unwrap_or_else(|| panic!("module {top} has no layer in LAYERS"));
        for target in targets {
            let Some(target_top) = target.first() else {
                continue;
            };
            if target_top == top {
                continue;
            }
            let target_layer = layer_of(target_top)
                .unwrap_or_else(|| panic!("module {target_top} has no layer in LAYERS"));
            if target_layer >= layer {
                upward.push(format!("{} → {}", name(module), name(target)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that do not go down a layer:\n{}",
        upward.join("\n")
    );
}

/// The modules that may name the PostgreSQL adapters: the stores themselves and bootstrap,
/// which chooses the backend once and hands every other module its ports (issue 24).
const POSTGRES_NAMED_BY: &[&str] = &["store", "bootstrap"];

#[test]
fn only_bootstrap_and_the_stores_name_the_postgresql_adapters() {
    let edges = dependencies();
    let postgres = ["store".to_owned(), "postgres".to_owned()];
    let mut naming = Vec::new();
    for (module, targets) in &edges {
        let Some(top) = module.first() else {
            continue;
        };
        if POSTGRES_NAMED_BY.contains(&top.as_str()) {
            continue;
        }
        for target in targets {
            if target.starts_with(&postgres) {
                naming.push(format!("{} → {}", name(module), name(target)));
            }
        }
    }
    assert!(
        naming.is_empty(),
        "modules that name store::postgres (take a port from bootstrap instead):\n{}",
        naming.join("\n")
    );
}

#[test]
fn the_check_sees_imports() {
    // The reader itself: a known downward import is found, so an empty result means something.
    let edges = dependencies();
    let teammate: Module = vec!["team".into(), "runtime".into(), "teammate".into()];
    let protocol: Module = vec!["team".into(), "protocol".into()];
    assert!(
        edges[&teammate].contains(&protocol),
        "{:?}",
        edges[&teammate]
    );
}

/// The cfg every module of test support (`mod testing`) is compiled under: troupe's own tests,
/// or the `test-support` feature that only the tests and `troupe-bench` turn on (issue 41).
const TEST_SUPPORT_CFGS: &[&str] = &[
    "#[cfg(test)]",
    "#[cfg(any(test, feature = \"test-support\"))]",
];

#[test]
fn test_support_is_compiled_only_for_tests_and_the_benchmark() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut ungated = Vec::new();
    let mut named = Vec::new();
    let mut declared = 0;
    for (module, (text, _)) in modules(&src) {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.trim();
            let declares = ["mod testing;", "mod testing {"]
                .iter()
                .any(|d| code.ends_with(d) && !code.starts_with("//"));
            if !declares {
                continue;
            }
            declared += 1;
            let attribute = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim())
                .find(|l| !l.is_empty() && !l.starts_with("///"));
            if !attribute.is_some_and(|a| TEST_SUPPORT_CFGS.contains(&a)) {
                ungated.push(format!("{}: {code}", name(&module)));
            }
        }
        // Library code outside tests never reaches into test support.
        if module.last().is_some_and(|m| m == "testing") {
            continue;
        }
        let code = library_code(&text);
        if code.contains("testing::") {
            named.push(name(&module));
        }
    }
    assert!(
        declared >= 3,
        "the check finds the test support modules ({declared})"
    );
    assert!(
        ungated.is_empty(),
        "test support compiled into the library (gate it with {}):\n{}",
        TEST_SUPPORT_CFGS[1],
        ungated.join("\n")
    );
    assert!(
        named.is_empty(),
        "library code that names test support: {named:?}"
    );

    // The `troupe` binary never turns the feature on: only the CLI's tests (dev-dependency) and
    // `troupe-bench` (its required feature) do.
    let cli = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe-cli/Cargo.toml"),
    )
    .unwrap();
    let section = |name: &str| -> String {
        cli.split("\n[")
            .find(|s| s.starts_with(name))
            .unwrap_or_else(|| panic!("troupe-cli's Cargo.toml has [{name}"))
            .to_owned()
    };
    let dependencies = section("dependencies]");
    assert!(
        !dependencies.contains("test-support"),
        "troupe-cli's [dependencies] turn on test-support:\n{dependencies}"
    );
    let bench = cli
        .split("\n[[bin]]")
        .find(|s| s.contains("name = \"troupe-bench\""))
        .unwrap();
    assert!(
        bench.contains("required-features = [\"troupe/test-support\"]"),
        "troupe-bench requires the test support:\n{bench}"
    );
    let troupe_bin = cli
        .split("\n[[bin]]")
        .find(|s| s.contains("name = \"troupe\""))
        .unwrap();
    assert!(!troupe_bin.contains("required-features"), "{troupe_bin}");
    // Nor does its code name test support (it would not build without the feature).
    let cli_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe-cli/src");
    let naming: Vec<String> = modules(&cli_src)
        .into_iter()
        .filter(|(module, _)| module.first().is_none_or(|m| m != "bench"))
        .filter(|(_, (text, _))| library_code(text).contains("testing::"))
        .map(|(module, _)| module.join("/"))
        .collect();
    assert!(
        naming.is_empty(),
        "the troupe binary names test support: {naming:?}"
    );
}

/// The traits the stores declare (`pub trait X` in a file under `src/store/`): the ports a
/// backend is chosen for.
fn store_ports(modules: &BTreeMap<Module, (String, bool)>) -> BTreeSet<String> {
    let mut ports = BTreeSet::new();
    for (module, (text, _)) in modules {
        if module.first().is_none_or(|top| top != "store") {
            continue;
        }
        for (at, _) in library_code(text).match_indices("pub trait ") {
            let rest = &library_code(text)[at + "pub trait ".len()..];
            let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            ports.insert(rest[..end].to_owned());
        }
    }
    ports
}

/// The fields (and parameters) of `code` whose type is an optional store port,
/// `name: Option<Arc<dyn Port>>`, as `name: Port`.
fn optional_ports(code: &str, ports: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines() {
        let Some((name, ty)) = line.trim().split_once(": ") else {
            continue;
        };
        let name = name.rsplit(' ').next().unwrap_or(name);
        if name.is_empty() || !name.chars().all(is_ident) {
            continue;
        }
        let ty: String = ty.chars().filter(|c| !c.is_whitespace()).collect();
        let Some(inner) = ["Option<Arc<dyn", "Option<std::sync::Arc<dyn"]
            .iter()
            .find_map(|p| ty.strip_prefix(p))
        else {
            continue;
        };
        let path = &inner[..inner.find(['>', '+']).unwrap_or(inner.len())];
        let port = path.rsplit("::").next().unwrap_or(path);
        if ports.contains(port) {
            found.push(format!("{name}: {port}"));
        }
    }
    found
}

/// No type outside `store` holds an optional store port — a file type with an optional database
/// beside it, branching method by method (issue 41): a concern with two backends is a port with
/// two adapters, and the holder gets one of them from bootstrap. (Optional non-store things, a
/// `Waker` or a `SystemPromptSource`, are not store ports and are not counted.)
#[test]
fn no_type_outside_the_stores_holds_an_optional_store_port() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let ports = store_ports(&modules);
    for known in [
        "MailboxStore",
        "TeamDocument",
        "LeasedRoster",
        "MemoryRecords",
        "TeamUsage",
    ] {
        assert!(ports.contains(known), "{known} not found among {ports:?}");
    }
    let mut optional = Vec::new();
    for (module, (text, _)) in &modules {
        if module.first().is_some_and(|top| top == "store") {
            continue;
        }
        for field in optional_ports(&library_code(text), &ports) {
            optional.push(format!("{}: {field}", name(module)));
        }
    }
    assert!(
        optional.is_empty(),
        "optional store ports outside store/ (make the concern a port with a file and a \
         database adapter, chosen in bootstrap):\n{}",
        optional.join("\n")
    );
}

#[test]
fn the_optional_port_check_sees_fields() {
    let ports: BTreeSet<String> = ["TeamDocument".to_owned()].into();
    let code = "struct S {\n    shared: Option<Arc<dyn TeamDocument>>,\n    pub(super) doc: \
                Option<std::sync::Arc<dyn crate::store::document::TeamDocument>>,\n    waker: \
                Option<Arc<dyn Waker>>,\n}";
    assert_eq!(
        optional_ports(code, &ports),
        vec!["shared: TeamDocument", "doc: TeamDocument"]
    );
}
