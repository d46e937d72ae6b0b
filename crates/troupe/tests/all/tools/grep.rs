//! grep: `path:line:text` in path order, the ignore files honoured, `.git/` and `.troupe/` never
//! searched, binary files skipped, capped and cut with a notice, confined, never blocked.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::ManualClock;
use troupe::permissions::{AutoApproval, MemoryAuditSink, PermissionPolicy};
use troupe::tools::grep::{
    GrepTool, CUT_MARK, MAX_LINE_BYTES, MAX_MATCHES, MAX_RESULT_BYTES, MAX_SEARCHED_LINE_BYTES,
};
use troupe::tools::{Dispatcher, ToolRegistry};

use super::lead_ctx;

/// Runs one `grep` call through a dispatcher (schema, policy, handler) and returns
/// (content, is_error); a call that blocks fails the test instead of stalling the suite.
async fn grep(workspace: &Path, args: Value) -> (String, bool) {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(GrepTool)).unwrap();
    let audit = Arc::new(MemoryAuditSink::new(Arc::new(ManualClock::at_spec_epoch())));
    let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), audit);
    let dispatcher = Dispatcher::new(Arc::new(registry), policy, Default::default());
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        dispatcher.dispatch(&lead_ctx(workspace), "grep", &args.to_string()),
    )
    .await
    .expect("grep blocked");
    (outcome.content, outcome.is_error)
}

/// Writes `text` into `root/rel`, creating its folders.
fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn assert_error(content: &str, is_error: bool, code: &str) {
    assert!(
        is_error && content.starts_with(&format!("Error [{code}]:")),
        "expected {code}: {content}"
    );
}

#[tokio::test]
async fn grep_returns_path_line_text_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "src/z.rs", "fn zed() {}\n");
    write(ws, "src/a.rs", "// header\nfn alpha() {}\nfn beta() {}\n");
    write(ws, "src/deep/m.rs", "no match here\r\nfn mid() {}\r\n");
    write(ws, "README.md", "Call fn alpha first.");
    let (content, is_error) = grep(ws, json!({"pattern": "fn \\w+\\(\\)"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        (
            "src/a.rs:2:fn alpha() {}\n\
             src/a.rs:3:fn beta() {}\n\
             src/deep/m.rs:2:fn mid() {}\n\
             src/z.rs:1:fn zed() {}",
            false
        )
    );
    // `$` matches before a CRLF ending, and the `\r` is not shown.
    let (content, _) = grep(ws, json!({"pattern": "\\{\\}$", "path": "src/deep"})).await;
    assert_eq!(content, "src/deep/m.rs:2:fn mid() {}");
    let (content, is_error) = grep(ws, json!({"pattern": "fn ALPHA"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        ("No lines match fn ALPHA in the workspace.", false)
    );
    let (content, _) = grep(ws, json!({"pattern": "fn ALPHA", "case_insensitive": true})).await;
    assert_eq!(
        content,
        "README.md:1:Call fn alpha first.\nsrc/a.rs:2:fn alpha() {}"
    );
}

#[tokio::test]
async fn grep_honours_the_ignore_files_and_skips_hidden_names() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // No `.git` folder: the rules apply to any workspace, as they do for glob.
    write(ws, ".gitignore", "target/\n*.log\n!keep.log\n");
    write(ws, "src/main.rs", "needle\n");
    write(ws, "target/debug/out.rs", "needle\n");
    write(ws, "a.log", "needle\n");
    write(ws, "keep.log", "needle\n");
    write(ws, "sub/.gitignore", "generated/\n");
    write(ws, "sub/generated/g.rs", "needle\n");
    write(ws, "sub/kept.rs", "needle\n");
    write(ws, "notes/.ignore", "draft.md\n");
    write(ws, "notes/draft.md", "needle\n");
    write(ws, "notes/final.md", "needle\n");
    write(ws, ".git/info/exclude", "private/\n");
    write(ws, "private/plan.md", "needle\n");
    write(ws, ".github/workflows/ci.yml", "needle\n");
    write(ws, "src/.hidden.rs", "needle\n");
    let (content, is_error) = grep(ws, json!({"pattern": "needle"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        (
            "keep.log:1:needle\nnotes/final.md:1:needle\nsrc/main.rs:1:needle\nsub/kept.rs:1:needle",
            false
        )
    );
    // Named in `path`, an ignored or hidden file or folder is searched.
    let (content, _) = grep(ws, json!({"pattern": "needle", "path": "target"})).await;
    assert_eq!(content, "target/debug/out.rs:1:needle");
    let (content, _) = grep(ws, json!({"pattern": "needle", "path": "a.log"})).await;
    assert_eq!(content, "a.log:1:needle");
    let (content, _) = grep(ws, json!({"pattern": "needle", "path": ".github"})).await;
    assert_eq!(content, ".github/workflows/ci.yml:1:needle");
    // A folder's rules hold below it when the search starts there.
    let (content, _) = grep(ws, json!({"pattern": "needle", "path": "sub"})).await;
    assert_eq!(content, "sub/kept.rs:1:needle");
}

#[tokio::test]
async fn grep_never_searches_git_or_troupe_state() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "src/lib.rs", "needle\n");
    write(ws, ".git/config", "needle\n");
    write(ws, ".troupe/audit.jsonl", "needle\n");
    write(ws, "vendor/dep/.git/HEAD", "needle\n");
    // Through a symlink with an innocent name, or a folder named in `path`: still not.
    symlink(ws.join(".troupe/audit.jsonl"), ws.join("audit.txt")).unwrap();
    symlink(ws.join(".git"), ws.join("gitdir")).unwrap();
    let (content, is_error) = grep(ws, json!({"pattern": "needle"})).await;
    assert_eq!((content.as_str(), is_error), ("src/lib.rs:1:needle", false));
    for path in [
        ".troupe",
        ".git",
        ".troupe/audit.jsonl",
        "gitdir",
        "audit.txt",
        "vendor/dep/.git",
    ] {
        let (content, is_error) = grep(ws, json!({"pattern": "needle", "path": path})).await;
        assert_error(&content, is_error, "invalid_arguments");
        assert!(
            content.contains("grep never searches .git/ or .troupe/"),
            "{content}"
        );
    }
}

#[tokio::test]
async fn grep_filters_by_path_and_glob() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "src/a.rs", "needle\n");
    write(ws, "src/b.toml", "needle\n");
    write(ws, "src/web/app.ts", "needle\n");
    write(ws, "src/web/view.tsx", "needle\n");
    write(ws, "docs/a.rs", "needle\n");
    let (content, _) = grep(ws, json!({"pattern": "needle", "path": "src/web"})).await;
    assert_eq!(
        content,
        "src/web/app.ts:1:needle\nsrc/web/view.tsx:1:needle"
    );
    let (content, _) = grep(ws, json!({"pattern": "needle", "path": "./src/a.rs"})).await;
    assert_eq!(content, "src/a.rs:1:needle");
    let (content, _) = grep(ws, json!({"pattern": "needle", "glob": "*.rs"})).await;
    assert_eq!(content, "docs/a.rs:1:needle\nsrc/a.rs:1:needle");
    let (content, _) = grep(ws, json!({"pattern": "needle", "glob": "*.{ts,tsx}"})).await;
    assert_eq!(
        content,
        "src/web/app.ts:1:needle\nsrc/web/view.tsx:1:needle"
    );
    // With a `/`, the glob matches the path from the workspace root; `*` stays in one folder.
    let (content, _) = grep(ws, json!({"pattern": "needle", "glob": "src/*"})).await;
    assert_eq!(content, "src/a.rs:1:needle\nsrc/b.toml:1:needle");
    let (content, _) = grep(ws, json!({"pattern": "needle", "glob": "src/**/*.ts"})).await;
    assert_eq!(content, "src/web/app.ts:1:needle");
    let (content, _) = grep(
        ws,
        json!({"pattern": "needle", "path": "docs", "glob": "*.toml"}),
    )
    .await;
    assert_eq!(content, "No lines match needle in docs.");
    let (content, is_error) = grep(ws, json!({"pattern": "needle", "glob": "[a"})).await;
    assert_error(&content, is_error, "invalid_arguments");
    assert!(
        content.contains("[a is not a valid glob pattern"),
        "{content}"
    );
    let (content, is_error) = grep(ws, json!({"pattern": "needle", "path": "nope"})).await;
    assert_error(&content, is_error, "not_found");
    let (content, is_error) = grep(ws, json!({"pattern": "needle", "context": 2})).await;
    assert_error(&content, is_error, "invalid_arguments");
}

#[tokio::test]
async fn grep_stops_at_its_match_cap_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let lines: String = (1..=MAX_MATCHES + 5)
        .map(|i| format!("hit {i}\n"))
        .collect();
    write(ws, "a.txt", &lines);
    write(ws, "b.txt", "hit b\n");
    let (content, is_error) = grep(ws, json!({"pattern": "hit"})).await;
    assert!(!is_error, "{content}");
    let shown: Vec<&str> = content.lines().collect();
    assert_eq!(shown.len(), MAX_MATCHES + 1, "{content}");
    assert_eq!(shown[0], "a.txt:1:hit 1");
    assert_eq!(
        shown[MAX_MATCHES - 1],
        format!("a.txt:{MAX_MATCHES}:hit {MAX_MATCHES}")
    );
    assert_eq!(
        shown[MAX_MATCHES],
        format!(
            "[more lines match: showing the first {MAX_MATCHES}; narrow the search with `path` \
             or `glob`, or a more precise pattern]"
        )
    );
    // Exactly the cap: no notice. The last line is the cap's; the next file is not needed.
    let exact: String = (1..=MAX_MATCHES).map(|i| format!("hit {i}\n")).collect();
    write(ws, "a.txt", &exact);
    fs::remove_file(ws.join("b.txt")).unwrap();
    let (content, _) = grep(ws, json!({"pattern": "hit"})).await;
    assert_eq!(content.lines().count(), MAX_MATCHES);
    assert!(!content.contains("more lines match"), "{content}");
}

#[tokio::test]
async fn grep_stops_at_its_byte_cap_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // Lines just under the cut: fewer than MAX_MATCHES of them fill the byte cap.
    let long = format!("hit {}", "x".repeat(MAX_LINE_BYTES - 4));
    let lines: String = (0..MAX_MATCHES).map(|_| format!("{long}\n")).collect();
    write(ws, "a.txt", &lines);
    let (content, is_error) = grep(ws, json!({"pattern": "hit"})).await;
    assert!(!is_error);
    let (body, note) = content.rsplit_once('\n').unwrap();
    assert!(body.len() <= MAX_RESULT_BYTES, "{}", body.len());
    let kept = body.lines().count();
    assert!(kept < MAX_MATCHES && kept > 0, "{kept}");
    assert!(body.lines().all(|l| l.ends_with(&long)), "lines are whole");
    assert_eq!(
        note,
        format!(
            "[more lines match: showing the first {kept} lines ({MAX_RESULT_BYTES} bytes at \
             most); narrow the search with `path` or `glob`, or a more precise pattern]"
        )
    );
}

#[tokio::test]
async fn grep_skips_binary_files() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "a.txt", "needle\n");
    fs::write(ws.join("b.bin"), b"needle\n\0\x01\x02needle\n").unwrap();
    // The NUL far past the match (not in the first piece the searcher reads): what matched
    // before it is dropped with the file.
    let mut late = b"needle\n".to_vec();
    late.extend_from_slice(&b"filler\n".repeat(100_000));
    late.extend_from_slice(b"\0tail");
    fs::write(ws.join("c.dat"), &late).unwrap();
    let (content, is_error) = grep(ws, json!({"pattern": "needle"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        (
            "a.txt:1:needle\n[2 binary files (holding NUL bytes) were skipped]",
            false
        )
    );
    let (content, _) = grep(ws, json!({"pattern": "needle", "path": "b.bin"})).await;
    assert_eq!(
        content,
        "No lines match needle in b.bin.\n[1 binary file (holding NUL bytes) was skipped]"
    );
}

#[tokio::test]
async fn an_invalid_regex_is_invalid_arguments_with_the_regex_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "fn(\n");
    let (content, is_error) = grep(dir.path(), json!({"pattern": "fn("})).await;
    assert_error(&content, is_error, "invalid_arguments");
    assert!(
        content.contains("fn( is not a valid regular expression"),
        "{content}"
    );
    assert!(content.contains("unclosed group"), "{content}");
    // A match never spans lines: a pattern that needs a newline is refused, not silently empty.
    let (content, is_error) = grep(dir.path(), json!({"pattern": "a\nb"})).await;
    assert_error(&content, is_error, "invalid_arguments");
}

#[tokio::test]
async fn grep_is_confined_to_the_workspace() {
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().join("ws");
    fs::create_dir(&ws).unwrap();
    write(outer.path(), "secret/s.txt", "needle outside\n");
    write(outer.path(), "x.txt", "needle outside\n");
    write(&ws, "in/a.txt", "needle inside\n");
    symlink("/", ws.join("root")).unwrap();
    symlink(outer.path().join("secret"), ws.join("out")).unwrap();
    symlink(outer.path().join("secret/s.txt"), ws.join("out-file.txt")).unwrap();
    symlink(outer.path().join("missing"), ws.join("dangling.txt")).unwrap();
    // Links that stay inside: a linked file is searched; a linked folder is not walked twice.
    symlink(ws.join("in/a.txt"), ws.join("alias.txt")).unwrap();
    symlink(ws.join("in"), ws.join("in-alias")).unwrap();

    let (content, is_error) = grep(&ws, json!({"pattern": "needle"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        ("alias.txt:1:needle inside\nin/a.txt:1:needle inside", false)
    );
    let abs_secret = outer.path().join("secret/s.txt").display().to_string();
    for path in [
        "..",
        "../x.txt",
        "in/../../x.txt",
        "/etc",
        abs_secret.as_str(),
        "out",
        "out/s.txt",
        "out-file.txt",
        "root/etc",
    ] {
        let (content, is_error) = grep(&ws, json!({"pattern": "needle", "path": path})).await;
        assert_error(&content, is_error, "permission_denied");
        assert!(!content.contains("needle outside"), "{path}: {content}");
    }
    // An absolute path inside the workspace is fine, shown relative.
    let abs_inside = ws.join("in").display().to_string();
    let (content, _) = grep(&ws, json!({"pattern": "needle", "path": abs_inside})).await;
    assert_eq!(content, "in/a.txt:1:needle inside");
}

#[tokio::test]
async fn a_fifo_in_the_tree_never_blocks_grep() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "a/b.txt", "needle\n");
    crate::jobs::make_fifo(&ws.join("a/pipe.txt"));
    crate::jobs::make_fifo(&ws.join(".gitignore"));
    crate::jobs::make_fifo(&ws.join("a/.ignore"));
    symlink(ws.join("a/pipe.txt"), ws.join("pipe-link.txt")).unwrap();
    // `grep` itself times out (and fails the test) if anything blocks.
    let (content, is_error) = grep(ws, json!({"pattern": "needle"})).await;
    assert_eq!((content.as_str(), is_error), ("a/b.txt:1:needle", false));
    // Named directly, a FIFO is refused at once, as read_file refuses it.
    let (content, is_error) = grep(ws, json!({"pattern": "needle", "path": "a/pipe.txt"})).await;
    assert!(is_error, "{content}");
    assert!(content.contains("not a regular file (a FIFO)"), "{content}");
}

#[tokio::test]
async fn long_lines_are_cut_around_the_first_match_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let line = format!("{}NEEDLE{}", "a".repeat(5000), "b".repeat(5000));
    write(ws, "min.js", &format!("short NEEDLE\n{line}\n"));
    let (content, is_error) = grep(ws, json!({"pattern": "NEEDLE"})).await;
    assert!(!is_error);
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 3, "{content}");
    assert_eq!(lines[0], "min.js:1:short NEEDLE");
    let shown = lines[1].strip_prefix("min.js:2:").unwrap();
    let inner = shown
        .strip_prefix(CUT_MARK)
        .and_then(|s| s.strip_suffix(CUT_MARK))
        .unwrap_or_else(|| panic!("not marked as cut: {shown}"));
    assert_eq!(inner.len(), MAX_LINE_BYTES);
    assert!(inner.contains("NEEDLE"), "{inner}");
    assert_eq!(
        lines[2],
        format!(
            "[1 line longer than {MAX_LINE_BYTES} bytes was cut around its first match, marked \
             {CUT_MARK}; read_file shows it whole]"
        )
    );
}

#[tokio::test]
async fn a_cut_line_keeps_whole_characters() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // Three-byte characters: a cut at MAX_LINE_BYTES from either side falls inside one.
    write(
        ws,
        "a.txt",
        &format!("{}ß{}\n", "€".repeat(1000), "€".repeat(1000)),
    );
    let (content, is_error) = grep(ws, json!({"pattern": "ß"})).await;
    assert!(!is_error);
    let first = content.lines().next().unwrap();
    let shown = first.strip_prefix("a.txt:1:").unwrap();
    let inner = shown
        .strip_prefix(CUT_MARK)
        .and_then(|s| s.strip_suffix(CUT_MARK))
        .unwrap();
    assert!(
        !inner.contains('\u{FFFD}'),
        "a character was split: {inner}"
    );
    assert!(inner.chars().all(|c| c == '€' || c == 'ß'), "{inner}");
    assert!(inner.contains('ß'));
    assert!(
        inner.len() <= MAX_LINE_BYTES && inner.len() > MAX_LINE_BYTES - 3,
        "{}",
        inner.len()
    );
}

#[tokio::test]
async fn a_file_with_a_line_too_long_to_hold_is_named_not_searched() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "a.txt", "needle\n");
    let huge = format!("needle{}\n", "x".repeat(MAX_SEARCHED_LINE_BYTES + 1));
    write(ws, "b.txt", &huge);
    let (content, is_error) = grep(ws, json!({"pattern": "needle"})).await;
    assert!(!is_error, "{content}");
    let (found, note) = content.split_once('\n').unwrap();
    assert_eq!(found, "a.txt:1:needle");
    assert!(
        note.starts_with("[1 file could not be searched: b.txt (") && note.contains("limit"),
        "{note}"
    );
}
