//! Settings rules (SPEC §7): patterns against calls, deny > ask > allow among matching entries,
//! a matching entry over the defaults, the plan gate above all, session allows, and the audit
//! line naming the entry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::{Clock, ManualClock};
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::permissions::patterns::{RulePattern, Use};
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, AutoApproval, Decision, DenyApproval,
    MemoryAuditSink, PermissionPolicy, PermissionRequest, PermissionRule, SettingsRules,
};
use troupe::settings::{RuleEntry, RuleList, Source};
use troupe::store::protocol::JsonProtocolStore;
use troupe::team::{GateStart, PlanGateRule};
use troupe::tools::{Effect, Scope};
use troupe::wire::AgentName;

const WS: &str = "/ws";

fn matches(pattern: &str, tool: &str, args: Value, usage: Use) -> bool {
    RulePattern::parse(pattern).matches(tool, &args, Path::new(WS), usage)
}

fn sh(command: &str) -> Value {
    json!({ "command": command })
}

fn path(p: &str) -> Value {
    json!({ "path": p })
}

#[test]
fn bare_tools_match_every_call_of_the_tool() {
    assert!(matches("read_file", "read_file", path("x"), Use::Allow));
    assert!(!matches("read_file", "write_file", path("x"), Use::Allow));
    assert!(matches(
        "mcp__github__create_issue",
        "mcp__github__create_issue",
        json!({}),
        Use::Allow
    ));
    assert!(!matches(
        "mcp__github__create_issue",
        "mcp__github__list",
        json!({}),
        Use::Restrict
    ));
    assert!(matches(
        "shell",
        "shell",
        sh("rm -rf / && echo $(x)"),
        Use::Allow
    ));
}

#[test]
fn shell_prefixes_and_exact_commands() {
    let table: &[(&str, &str, bool)] = &[
        ("shell(cargo test:*)", "cargo test", true),
        ("shell(cargo test:*)", "cargo test --all", true),
        ("shell(cargo test:*)", "  cargo   test  -p x", true),
        ("shell(cargo test:*)", "cargo testx", false),
        ("shell(cargo test:*)", "cargo", false),
        ("shell(cargo test:*)", "cargo build", false),
        ("shell(cargo test:*)", "'cargo' \"test\" --all", true),
        ("shell(cargo test)", "cargo test", true),
        ("shell(cargo test)", "cargo test --all", false),
        ("shell(git status)", "git status", true),
        ("shell(echo 'a b':*)", "echo \"a b\" c", true),
        ("shell(echo 'a b':*)", "echo a b", false),
    ];
    for (pattern, command, expected) in table {
        assert_eq!(
            matches(pattern, "shell", sh(command), Use::Allow),
            *expected,
            "{pattern} vs {command}"
        );
    }
    assert!(!matches(
        "shell(cargo test:*)",
        "read_file",
        sh("cargo test"),
        Use::Allow
    ));
}

#[test]
fn allow_needs_every_part_of_a_chain_and_a_transparent_command() {
    let allow = "shell(cargo test:*)";
    for (command, expected) in [
        ("cargo test && cargo test --doc", true),
        ("cargo test; cargo test", true),
        ("cargo test\ncargo test -q", true),
        ("cargo test 'a && rm -rf x'", true),
        ("cargo test \"a; rm\"", true),
        ("cargo test a\\;rm", true),
        ("cargo test && rm -rf x", false),
        ("cargo test || rm -rf x", false),
        ("cargo test; rm -rf x", false),
        ("cargo test | rm -rf x", false),
        ("cargo test & rm -rf x", false),
        ("cargo test\nrm -rf x", false),
        ("cargo test $(rm -rf x)", false),
        ("cargo test `rm -rf x`", false),
        ("cargo test \"$(rm -rf x)\"", false),
        ("cargo test > out.txt", false),
        ("cargo test < in.txt", false),
        ("(cargo test)", false),
        ("cargo test $HOME", false),
        ("cargo test 'unterminated", false),
        ("", false),
    ] {
        assert_eq!(
            matches(allow, "shell", sh(command), Use::Allow),
            expected,
            "{command:?}"
        );
    }
}

#[test]
fn deny_and_ask_apply_when_any_part_matches_even_hidden() {
    let deny = "shell(rm -rf:*)";
    for (command, expected) in [
        ("rm -rf x", true),
        ("cargo test && rm -rf x", true),
        ("cargo test || rm -rf x", true),
        ("cargo test; rm -rf x", true),
        ("ls | rm -rf x", true),
        ("ls & rm -rf x", true),
        ("ls\nrm -rf x", true),
        ("echo $(rm -rf x)", true),
        ("echo `rm -rf x`", true),
        ("(rm -rf x)", true),
        ("rm -rf x > log", true),
        ("echo 'rm -rf x'", false),
        ("rm -r x", false),
    ] {
        assert_eq!(
            matches(deny, "shell", sh(command), Use::Restrict),
            expected,
            "{command:?}"
        );
    }
}

#[test]
fn path_patterns_are_globs_over_the_normalised_path() {
    let table: &[(&str, &str, &str, Use, bool)] = &[
        (
            "write_file(docs/**)",
            "write_file",
            "docs/a.md",
            Use::Allow,
            true,
        ),
        (
            "write_file(docs/**)",
            "write_file",
            "docs/deep/er/a.md",
            Use::Allow,
            true,
        ),
        (
            "write_file(docs/**)",
            "write_file",
            "./docs/a.md",
            Use::Allow,
            true,
        ),
        (
            "write_file(docs/**)",
            "write_file",
            "src/../docs/a.md",
            Use::Allow,
            true,
        ),
        (
            "write_file(docs/**)",
            "write_file",
            "/ws/docs/a.md",
            Use::Allow,
            true,
        ),
        (
            "write_file(docs/**)",
            "write_file",
            "docs/../src/a.rs",
            Use::Allow,
            false,
        ),
        // Out and back in again: lexically the same file.
        (
            "write_file(docs/**)",
            "write_file",
            "docs/../../ws/docs/a.md",
            Use::Allow,
            true,
        ),
        (
            "write_file(docs/**)",
            "write_file",
            "/other/docs/a.md",
            Use::Allow,
            false,
        ),
        (
            "write_file(docs/**)",
            "read_file",
            "docs/a.md",
            Use::Allow,
            false,
        ),
        ("read_file(.env)", "read_file", ".env", Use::Restrict, true),
        (
            "read_file(.env)",
            "read_file",
            "a/../.env",
            Use::Restrict,
            true,
        ),
        (
            "read_file(.env)",
            "read_file",
            "/ws/.env",
            Use::Restrict,
            true,
        ),
        (
            "read_file(.env)",
            "read_file",
            "./.env",
            Use::Restrict,
            true,
        ),
        (
            "read_file(.env)",
            "read_file",
            "sub/.env",
            Use::Restrict,
            false,
        ),
        (
            "read_file(**/.env)",
            "read_file",
            "sub/.env",
            Use::Restrict,
            true,
        ),
        (
            "read_file(*.md)",
            "read_file",
            "README.md",
            Use::Allow,
            true,
        ),
        (
            "read_file(*.md)",
            "read_file",
            "docs/a.md",
            Use::Allow,
            false,
        ),
        // Outside the workspace: never allowed; denied by a `**` pattern only.
        ("read_file(**)", "read_file", "../secret", Use::Allow, false),
        (
            "read_file(**)",
            "read_file",
            "/etc/passwd",
            Use::Allow,
            false,
        ),
        (
            "read_file(**)",
            "read_file",
            "/etc/passwd",
            Use::Restrict,
            true,
        ),
        (
            "read_file(**/.env)",
            "read_file",
            "../other/.env",
            Use::Restrict,
            true,
        ),
        (
            "read_file(.env)",
            "read_file",
            "../.env",
            Use::Restrict,
            false,
        ),
        (
            "edit_file(src/*.rs)",
            "edit_file",
            "src/main.rs",
            Use::Allow,
            true,
        ),
        ("glob(docs/**)", "glob", "docs/x", Use::Allow, true),
    ];
    for (pattern, tool, p, usage, expected) in table {
        assert_eq!(
            matches(pattern, tool, path(p), *usage),
            *expected,
            "{pattern} vs {tool} {p} as {usage:?}"
        );
    }
    // glob without a path searches the workspace root.
    assert!(!matches(
        "glob(docs/**)",
        "glob",
        json!({"pattern": "*"}),
        Use::Allow
    ));
}

#[test]
fn entries_not_understood_never_allow_and_restrict_their_tool() {
    for pattern in [
        "mcp__s__t(x)",
        "shell(",
        "shell()",
        "read_file([)",
        "shell($(x):*)",
    ] {
        let tool = pattern.split('(').next().unwrap();
        let args = json!({"command": "ls", "path": "a"});
        assert!(
            !matches(pattern, tool, args.clone(), Use::Allow),
            "{pattern}"
        );
        assert!(
            matches(pattern, tool, args.clone(), Use::Restrict),
            "{pattern}"
        );
        assert!(!matches(pattern, "other", args, Use::Restrict), "{pattern}");
    }
}

fn entry(list: RuleList, index: usize, text: &str) -> RuleEntry {
    RuleEntry {
        list,
        text: text.to_owned(),
        source: Source::Project(PathBuf::from("troupe.toml")),
        index,
        line: index + 1,
    }
}

/// The example troupe.toml's `[permissions]`.
fn example() -> Vec<RuleEntry> {
    vec![
        entry(RuleList::Allow, 0, "shell(cargo test:*)"),
        entry(RuleList::Allow, 1, "read_file"),
        entry(RuleList::Allow, 2, "write_file(docs/**)"),
        entry(RuleList::Ask, 0, "write_file(migrations/**)"),
        entry(RuleList::Deny, 0, "read_file(.env)"),
        entry(RuleList::Deny, 1, "shell(rm -rf:*)"),
    ]
}

fn call<'a>(agent: &'a AgentName, tool: &'a str, args: &'a Value) -> PermissionRequest<'a> {
    let effect = match tool {
        "shell" => Effect::Execute,
        "read_file" | "glob" => Effect::Read,
        _ => Effect::Write,
    };
    PermissionRequest {
        agent,
        tool,
        effect,
        scope: Scope::World,
        arguments: args,
        sandbox: None,
        preview: None,
        protected: None,
    }
}

#[tokio::test]
async fn deny_beats_ask_beats_allow_and_the_verdict_names_the_entry() {
    let agent = AgentName::lead();
    let rules = SettingsRules::new(
        &[
            entry(RuleList::Allow, 0, "write_file"),
            entry(RuleList::Ask, 0, "write_file(migrations/**)"),
            entry(RuleList::Deny, 0, "write_file(migrations/secret/**)"),
            entry(RuleList::Allow, 1, "write_file(migrations/**)"),
        ],
        Path::new(WS),
    );
    for (p, decision, rule) in [
        (
            "src/a.rs",
            Decision::Allow,
            "troupe.toml allow[0] \"write_file\"",
        ),
        (
            "migrations/1.sql",
            Decision::Ask,
            "troupe.toml ask[0] \"write_file(migrations/**)\"",
        ),
        (
            "migrations/secret/k",
            Decision::Deny,
            "troupe.toml deny[0] \"write_file(migrations/secret/**)\"",
        ),
    ] {
        let args = path(p);
        let verdict = rules
            .evaluate(&call(&agent, "write_file", &args))
            .await
            .unwrap();
        assert_eq!(
            (verdict.decision, verdict.rule.as_str()),
            (decision, rule),
            "{p}"
        );
    }
}

#[tokio::test]
async fn no_matching_entry_leaves_the_defaults() {
    let agent = AgentName::lead();
    let rules = SettingsRules::new(&example(), Path::new(WS));
    let args = sh("cargo build");
    let verdict = rules.evaluate(&call(&agent, "shell", &args)).await.unwrap();
    assert_eq!(
        (verdict.decision, verdict.rule.as_str()),
        (Decision::Ask, "default")
    );
    let args = path("src/a.rs");
    let verdict = rules.evaluate(&call(&agent, "glob", &args)).await.unwrap();
    assert_eq!(
        (verdict.decision, verdict.rule.as_str()),
        (Decision::Allow, "default")
    );
}

fn memory_audit() -> Arc<MemoryAuditSink> {
    Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())))
}

#[tokio::test]
async fn an_allow_entry_runs_without_asking_even_under_deny_and_the_audit_names_it() {
    let agent = AgentName::lead();
    let audit = memory_audit();
    let policy = PermissionPolicy::from_settings(
        &example(),
        Path::new(WS),
        Arc::new(DenyApproval),
        audit.clone(),
    );
    let cases = [
        (
            "shell",
            sh("cargo test --all"),
            true,
            "troupe.toml allow[0] \"shell(cargo test:*)\"",
        ),
        (
            "shell",
            sh("cargo test && rm -rf x"),
            false,
            "troupe.toml deny[1] \"shell(rm -rf:*)\"",
        ),
        ("shell", sh("cargo build"), false, "default+approval:deny"),
        (
            "read_file",
            path("a/../.env"),
            false,
            "troupe.toml deny[0] \"read_file(.env)\"",
        ),
        (
            "write_file",
            path("docs/x.md"),
            true,
            "troupe.toml allow[2] \"write_file(docs/**)\"",
        ),
        (
            "write_file",
            path("migrations/1.sql"),
            false,
            "troupe.toml ask[0] \"write_file(migrations/**)\"+approval:deny",
        ),
    ];
    for (tool, args, allowed, rule) in &cases {
        let decision = policy.decide(&call(&agent, tool, args)).await.unwrap();
        assert_eq!(
            (decision.allowed, decision.rule.as_str()),
            (*allowed, *rule),
            "{tool} {args}"
        );
    }
    let records = audit.records();
    assert_eq!(records.len(), cases.len());
    for (record, (tool, _, allowed, rule)) in records.iter().zip(&cases) {
        assert_eq!(record.tool, *tool);
        assert_eq!(record.rule, *rule);
        assert_eq!(record.decision, if *allowed { "allow" } else { "deny" });
    }
}

#[tokio::test]
async fn the_plan_gate_denies_a_gated_teammate_even_when_an_entry_allows() {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::at_spec_epoch());
    let store = Arc::new(
        JsonProtocolStore::open(
            &Layout::new(dir.path()),
            clock.clone(),
            Arc::new(SequentialIds::new()),
        )
        .unwrap(),
    );
    let gate = PlanGateRule::new(store, clock).starting(GateStart::PlanRequired);
    let policy = PermissionPolicy::from_settings(
        &example(),
        Path::new(WS),
        Arc::new(AutoApproval),
        memory_audit(),
    )
    .with_rules([Arc::new(gate) as Arc<dyn PermissionRule>]);
    let writer = AgentName::parse("writer").unwrap();
    let args = sh("cargo test");
    let decision = policy.decide(&call(&writer, "shell", &args)).await.unwrap();
    assert!(!decision.allowed);
    assert_eq!(decision.rule, "plan_gate");
    // The lead (not gated by this policy's gate in the team, but here too) — reads still pass.
    let args = path("README.md");
    let decision = policy
        .decide(&call(&writer, "read_file", &args))
        .await
        .unwrap();
    assert!(decision.allowed);
    assert_eq!(decision.rule, "troupe.toml allow[1] \"read_file\"");
}

/// Answers "always" with the suggestion it is given, and counts how often it is asked.
#[derive(Default)]
struct Always(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl ApprovalProvider for Always {
    fn name(&self) -> &'static str {
        "always"
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match request.suggestion {
            Some(entry) => ApprovalAnswer::approve_always("always", entry),
            None => ApprovalAnswer::deny("no suggestion"),
        }
    }
}

#[tokio::test]
async fn always_remembers_a_session_allow_shared_by_derived_policies() {
    let agent = AgentName::lead();
    let asked = Arc::new(Always::default());
    let audit = memory_audit();
    let policy =
        PermissionPolicy::from_settings(&example(), Path::new(WS), asked.clone(), audit.clone());
    let teammate_policy = policy.with_rules([]);
    let first = sh("cargo build --release");
    let decision = policy.decide(&call(&agent, "shell", &first)).await.unwrap();
    assert!(decision.allowed);
    assert_eq!(decision.rule, "default+approval:always");
    // Same tool and pattern: allowed without asking, in the policy derived before the answer too.
    let second = sh("cargo build -p x");
    let decision = teammate_policy
        .decide(&call(&agent, "shell", &second))
        .await
        .unwrap();
    assert!(decision.allowed);
    assert_eq!(decision.rule, "session allow \"shell(cargo build:*)\"");
    assert_eq!(asked.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A deny entry still wins over a session allow; another command still asks.
    let chained = sh("cargo build && rm -rf x");
    let decision = policy
        .decide(&call(&agent, "shell", &chained))
        .await
        .unwrap();
    assert!(!decision.allowed);
    let other = sh("make");
    policy.decide(&call(&agent, "shell", &other)).await.unwrap();
    assert_eq!(asked.0.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(
        audit.records()[1].rule,
        "session allow \"shell(cargo build:*)\""
    );
}
