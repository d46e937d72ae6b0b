//! The protected paths (issue 39): one list, consulted by every writer. Every tool that writes
//! a workspace path names it to dispatch (`written_paths`); dispatch checks it against
//! `troupe::protected` before the policy; the policy asks a person — never an automatic
//! provider — unless a rule names the path exactly; and the sandbox's read-only paths are the
//! same list.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};
use troupe::clock::ManualClock;
use troupe::permissions::{
    ApprovalAnswer, ApprovalProvider, ApprovalRequest, AutoApproval, MemoryAuditSink,
    PermissionPolicy, Person,
};
use troupe::protected::ProtectedPaths;
use troupe::sandbox::{Host, Mode, Network, Policy, Protected};
use troupe::settings::{RuleEntry, RuleList, Source};
use troupe::tools::shell::ShellTool;
use troupe::tools::{base_tools, Dispatcher, Effect, ToolRegistry};

use super::lead_ctx;

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    (dir, root)
}

/// Arguments that write `path` for a tool whose schema takes one (`write_file`, `edit_file`).
fn writing(tool: &str, path: &str) -> Value {
    match tool {
        "edit_file" => json!({"path": path, "old_text": "[core]", "new_text": "[x]"}),
        _ => json!({"path": path, "content": "x"}),
    }
}

#[test]
fn every_base_tool_that_writes_a_path_names_it_to_dispatch() {
    for tool in base_tools(ShellTool::new()) {
        let definition = tool.definition();
        let takes_path = definition.parameters["properties"].get("path").is_some();
        if definition.effect != Effect::Write || !takes_path {
            continue;
        }
        let args = writing(&definition.name, ".git/config");
        assert_eq!(
            tool.written_paths(&args),
            [".git/config"],
            "{} writes a path but does not name it",
            definition.name
        );
    }
}

#[test]
fn the_sandbox_protects_exactly_the_one_list() {
    let (_dir, root) = workspace();
    let host = Host {
        home: Some(root.join("home")),
        temp: std::env::temp_dir(),
        mechanism: None,
    };
    let extra = vec!["ci/deploy.sh".to_owned(), "~/.bashrc".to_owned()];
    let sandboxed = Protected::resolve(&root, &[], &extra, &host);
    let list = ProtectedPaths::of(&root, &extra, host.home.as_deref());
    let mut from_list: Vec<PathBuf> = list.entries().iter().map(|e| e.path.clone()).collect();
    let mut from_sandbox = sandboxed.read_only();
    from_list.sort();
    from_sandbox.sort();
    assert_eq!(from_sandbox, from_list);
    for path in [
        ".git",
        ".git/config",
        "troupe.toml",
        ".env",
        ".troupe",
        "ci/deploy.sh",
    ] {
        assert!(sandboxed.is_read_only(&root.join(path)), "{path}");
    }
    // Under a teammate's worktree, that worktree's own `.git` file is protected too.
    let worktree = root.join(".troupe/worktrees/alice");
    std::fs::create_dir_all(&worktree).unwrap();
    let rooted = sandboxed.rooted_at(&worktree);
    assert!(rooted.is_read_only(&worktree.join(".git")));
    assert!(rooted.is_read_only(&worktree.join("ci/deploy.sh")));
}

/// A provider that asks a person (as the terminal does), recording what it was asked.
#[derive(Default)]
struct Person_ {
    asked: Mutex<Vec<(String, bool, Option<String>)>>,
}

#[async_trait]
impl ApprovalProvider for Person_ {
    fn name(&self) -> &'static str {
        "person"
    }
    fn person(&self) -> Person {
        Person::AtTerminal
    }
    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.asked.lock().unwrap().push((
            request.reason.to_owned(),
            request.person_only,
            request.suggestion.map(str::to_owned),
        ));
        ApprovalAnswer::deny("no")
    }
}

fn dispatcher(
    approval: Arc<dyn ApprovalProvider>,
    rules: &[RuleEntry],
    workspace: &Path,
    additions: &[String],
) -> Dispatcher {
    let mut registry = ToolRegistry::new();
    for tool in base_tools(ShellTool::new()) {
        registry.register(tool).unwrap();
    }
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let policy = PermissionPolicy::from_settings(rules, workspace, approval, audit);
    Dispatcher::new(Arc::new(registry), policy, Default::default())
        .with_protected_additions(additions)
}

fn allow(text: &str) -> RuleEntry {
    RuleEntry {
        list: RuleList::Allow,
        text: text.to_owned(),
        source: Source::Default,
        index: 0,
        line: 1,
    }
}

#[tokio::test]
async fn a_protected_write_is_never_allowed_by_auto_or_a_broad_rule() {
    let (_dir, root) = workspace();
    let d = dispatcher(
        Arc::new(AutoApproval),
        &[
            allow("write_file"),
            allow("edit_file"),
            allow("write_file(**)"),
        ],
        &root,
        &["ci/deploy.sh".to_owned()],
    );
    let ctx = lead_ctx(&root);
    for (tool, path) in [
        ("edit_file", ".git/config"),
        ("write_file", ".git/hooks/post-checkout"),
        ("write_file", "./troupe.toml"),
        ("write_file", ".env"),
        ("write_file", "src/../.git/info/attributes"),
        ("write_file", "ci/deploy.sh"),
    ] {
        let outcome = d
            .dispatch(&ctx, tool, &writing(tool, path).to_string())
            .await;
        assert!(outcome.is_error, "{tool} {path}: {}", outcome.content);
        assert!(
            outcome.content.contains("is a protected path"),
            "{tool} {path}: {}",
            outcome.content
        );
        assert_eq!(outcome.decision.unwrap().rule, "protected");
    }
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );
    // An ordinary path is still allowed by the broad rule.
    let outcome = d
        .dispatch(
            &ctx,
            "write_file",
            &writing("write_file", "a.txt").to_string(),
        )
        .await;
    assert!(!outcome.is_error, "{}", outcome.content);
}

#[tokio::test]
async fn a_person_is_asked_and_only_a_rule_naming_the_path_exactly_allows_it() {
    let (_dir, root) = workspace();
    let person = Arc::new(Person_::default());
    let d = dispatcher(
        person.clone(),
        &[
            allow("write_file(.git/info/exclude)"),
            allow("write_file(.git/*)"),
        ],
        &root,
        &[],
    );
    let ctx = lead_ctx(&root);
    // Named exactly: allowed without asking.
    let outcome = d
        .dispatch(
            &ctx,
            "write_file",
            &writing("write_file", ".git/info/exclude").to_string(),
        )
        .await;
    assert!(!outcome.is_error, "{}", outcome.content);
    assert!(person.asked.lock().unwrap().is_empty());
    // A glob over it: the person is asked, as a person's question, with the exact rule offered.
    let outcome = d
        .dispatch(
            &ctx,
            "write_file",
            &writing("write_file", ".git/description").to_string(),
        )
        .await;
    assert!(outcome.is_error);
    let asked = person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let (reason, person_only, suggestion) = &asked[0];
    assert!(
        reason.contains(".git/description is a protected path"),
        "{reason}"
    );
    assert!(*person_only);
    assert_eq!(suggestion.as_deref(), Some("write_file(.git/description)"));
}

#[test]
fn a_sandbox_policy_carries_the_settings_additions() {
    let (_dir, root) = workspace();
    let policy = Policy {
        mode: Mode::Off,
        network: Network::Off,
        deny_read: Vec::new(),
        deny_write: vec!["ci".to_owned()],
    };
    let sandbox = troupe::sandbox::Sandbox::new(&policy, &root).unwrap();
    assert!(sandbox.protected().is_read_only(&root.join("ci/x")));
}
