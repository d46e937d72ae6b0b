//! glob: sorted, capped, confined, never following a symlink out.

use std::fs;
use std::os::unix::fs::symlink;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::call;

fn touch(root: &std::path::Path, rel: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, "x").unwrap();
}

#[tokio::test]
async fn glob_results_are_sorted_and_relative() {
    let dir = tempfile::tempdir().unwrap();
    for rel in [
        "src/z.rs",
        "src/a.rs",
        "src/deep/m.rs",
        "README.md",
        "src/notes.txt",
        ".hidden.rs",
    ] {
        touch(dir.path(), rel);
    }
    let (content, is_error) = call(dir.path(), "glob", json!({"pattern": "src/**/*.rs"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        ("src/a.rs\nsrc/deep/m.rs\nsrc/z.rs", false)
    );
    let (content, _) = call(dir.path(), "glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(content, "src/a.rs\nsrc/z.rs");
    let (content, _) = call(dir.path(), "glob", json!({"pattern": "*"})).await;
    assert_eq!(content, "README.md\nsrc");
    let (content, _) = call(dir.path(), "glob", json!({"pattern": ".*.rs"})).await;
    assert_eq!(content, ".hidden.rs");
    let (content, _) = call(dir.path(), "glob", json!({"pattern": "*.py"})).await;
    assert_eq!(content, "No paths match *.py.");
}

#[tokio::test]
async fn glob_results_are_capped_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let max = troupe::tools::glob::MAX_RESULTS;
    for i in 0..max + 3 {
        touch(dir.path(), &format!("f{i:04}.txt"));
    }
    let (content, _) = call(dir.path(), "glob", json!({"pattern": "*.txt"})).await;
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), max + 1);
    assert_eq!(lines[0], "f0000.txt");
    assert_eq!(
        lines[max],
        format!(
            "[3 more paths match; showing the first {max} of {}; use a narrower pattern]",
            max + 3
        )
    );
}

#[tokio::test]
async fn glob_is_confined_to_the_workspace() {
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().join("ws");
    fs::create_dir(&ws).unwrap();
    touch(outer.path(), "secret/s.txt");
    touch(&ws, "in/a.txt");
    symlink("/", ws.join("root")).unwrap();
    symlink(outer.path().join("secret"), ws.join("out")).unwrap();
    symlink(outer.path().join("secret/s.txt"), ws.join("out-file.txt")).unwrap();
    symlink(ws.join("in"), ws.join("in-alias")).unwrap();

    // Symlinked folders are not walked into; links out are not listed.
    let (content, is_error) = call(&ws, "glob", json!({"pattern": "**/*"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        ("in\nin-alias\nin/a.txt", false)
    );
    let (content, _) = call(&ws, "glob", json!({"pattern": "**/*.txt"})).await;
    assert_eq!(content, "in/a.txt");

    for pattern in ["../*", "../secret/*", "/etc/*", "out/*", "root/etc/*"] {
        let (content, is_error) = call(&ws, "glob", json!({"pattern": pattern})).await;
        assert!(
            is_error && content.starts_with("Error [permission_denied]:"),
            "{pattern}: {content}"
        );
    }
}

/// Writes `text` into `root/rel`, creating its folders.
fn write(root: &std::path::Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[tokio::test]
async fn glob_skips_what_the_ignore_files_ignore() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // No `.git` folder: the rules apply to any workspace, as they do for ripgrep's users.
    write(
        ws,
        ".gitignore",
        "target/\nnode_modules\n*.log\n!keep.log\n/only-root.txt\n",
    );
    for rel in [
        "src/main.rs",
        "target/debug/build.rs",
        "node_modules/pkg/index.js",
        "web/node_modules/pkg/index.js",
        "web/app.js",
        "a.log",
        "keep.log",
        "only-root.txt",
        "sub/only-root.txt",
        "sub/generated/out.rs",
        "sub/kept.rs",
        "notes/draft.md",
        "notes/final.md",
        "private/plan.md",
    ] {
        touch(ws, rel);
    }
    // A nested file's rules apply below its folder, and re-include what a parent ignored.
    write(ws, "sub/.gitignore", "generated/\n!*.log\n");
    touch(ws, "sub/x.log");
    // `.ignore` (ripgrep's convention) and `.git/info/exclude` count too.
    write(ws, "notes/.ignore", "draft.md\n");
    write(ws, ".git/info/exclude", "private/\n");

    let (content, is_error) = call(ws, "glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(
        (content.as_str(), is_error),
        ("src/main.rs\nsub/kept.rs", false)
    );
    let (content, _) = call(ws, "glob", json!({"pattern": "**/*.js"})).await;
    assert_eq!(content, "web/app.js");
    let (content, _) = call(ws, "glob", json!({"pattern": "**/*.log"})).await;
    assert_eq!(content, "keep.log\nsub/x.log");
    let (content, _) = call(ws, "glob", json!({"pattern": "**/only-root.txt"})).await;
    assert_eq!(content, "sub/only-root.txt");
    let (content, _) = call(ws, "glob", json!({"pattern": "**/*.md"})).await;
    assert_eq!(content, "notes/final.md");
    let (content, _) = call(ws, "glob", json!({"pattern": "*"})).await;
    assert_eq!(content, "keep.log\nnotes\nsrc\nsub\nweb");

    // A folder the pattern spells out is walked even when it is ignored.
    let (content, _) = call(ws, "glob", json!({"pattern": "target/**/*.rs"})).await;
    assert_eq!(content, "target/debug/build.rs");
    let (content, _) = call(ws, "glob", json!({"pattern": "sub/generated/*"})).await;
    assert_eq!(content, "sub/generated/out.rs");
}

#[tokio::test]
async fn glob_does_not_block_on_an_ignore_file_that_is_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), "a/b.rs");
    crate::jobs::make_fifo(&dir.path().join(".gitignore"));
    crate::jobs::make_fifo(&dir.path().join("a/.ignore"));
    let (content, is_error) = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        call(dir.path(), "glob", json!({"pattern": "**/*.rs"})),
    )
    .await
    .expect("glob blocked on a FIFO");
    assert_eq!((content.as_str(), is_error), ("a/b.rs", false));
}
