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
