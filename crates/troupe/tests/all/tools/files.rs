//! read_file, write_file, edit_file, and the confinement every file tool shares.

use std::fs;
use std::os::unix::fs::symlink;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::call;

#[tokio::test]
async fn write_then_read_creates_parent_folders() {
    let dir = tempfile::tempdir().unwrap();
    let (content, is_error) = call(
        dir.path(),
        "write_file",
        json!({"path": "a/b/c.txt", "content": "héllo\n"}),
    )
    .await;
    assert_eq!(
        (content.as_str(), is_error),
        ("Wrote 7 bytes to a/b/c.txt", false)
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
        "héllo\n"
    );
    let (content, is_error) = call(dir.path(), "read_file", json!({"path": "a/b/c.txt"})).await;
    assert_eq!((content.as_str(), is_error), ("héllo\n", false));
}

#[tokio::test]
async fn read_file_limit_returns_the_first_lines_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f.txt"), "1\n2\n3\n4\n").unwrap();
    let (content, _) = call(
        dir.path(),
        "read_file",
        json!({"path": "f.txt", "limit": 2}),
    )
    .await;
    assert_eq!(content, "1\n2\n[showing the first 2 of 4 lines]");
    let (content, _) = call(
        dir.path(),
        "read_file",
        json!({"path": "f.txt", "limit": 4}),
    )
    .await;
    assert_eq!(content, "1\n2\n3\n4\n");
    let (content, _) = call(
        dir.path(),
        "read_file",
        json!({"path": "f.txt", "limit": 9}),
    )
    .await;
    assert_eq!(content, "1\n2\n3\n4\n");
}

#[tokio::test]
async fn read_file_offset_skips_lines_and_pages_with_limit() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f.txt"), "1\n2\n3\n4\n5").unwrap();
    let read = |args: serde_json::Value| {
        let dir = dir.path().to_owned();
        async move { call(&dir, "read_file", args).await }
    };
    assert_eq!(
        read(json!({"path": "f.txt", "offset": 1, "limit": 2})).await,
        ("2\n3\n[showing lines 2-3 of 5 lines]".to_owned(), false)
    );
    assert_eq!(
        read(json!({"path": "f.txt", "offset": 3})).await,
        ("4\n5\n[showing lines 4-5 of 5 lines]".to_owned(), false)
    );
    assert_eq!(
        read(json!({"path": "f.txt", "offset": 0, "limit": 9})).await,
        ("1\n2\n3\n4\n5".to_owned(), false)
    );
    for (offset, lines) in [(5, 5), (7, 5)] {
        assert_eq!(
            read(json!({"path": "f.txt", "offset": offset})).await,
            (
                format!("[f.txt has {lines} lines; offset {offset} is past its end]"),
                false
            )
        );
    }
    let (content, is_error) = read(json!({"path": "f.txt", "offset": -1})).await;
    assert!(is_error, "{content}");
    assert!(
        content.starts_with("Error [invalid_arguments]"),
        "{content}"
    );
}

#[tokio::test]
async fn read_file_pages_through_a_file_larger_than_one_result() {
    let dir = tempfile::tempdir().unwrap();
    // 30,000 lines of 11 bytes: 330,000 bytes, more than one result shows.
    let text: String = (0..30_000).map(|i| format!("line {i:05}\n")).collect();
    fs::write(dir.path().join("big.txt"), &text).unwrap();
    let (first, _) = call(dir.path(), "read_file", json!({"path": "big.txt"})).await;
    assert!(first.ends_with(
        "[cut at 200000 of 330000 bytes; page on with `offset` and `limit` (lines), or use shell tools]"
    ), "{}", &first[first.len() - 200..]);
    let (last, is_error) = call(
        dir.path(),
        "read_file",
        json!({"path": "big.txt", "offset": 29_998}),
    )
    .await;
    assert!(!is_error);
    assert_eq!(
        last,
        "line 29998\nline 29999\n[showing lines 29999-30000 of 30000 lines]"
    );
    let (middle, _) = call(
        dir.path(),
        "read_file",
        json!({"path": "big.txt", "offset": 20_000, "limit": 1}),
    )
    .await;
    assert_eq!(
        middle,
        "line 20000\n[showing lines 20001-20001 of 30000 lines]"
    );
}

#[tokio::test]
async fn read_file_of_a_missing_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let (content, is_error) = call(dir.path(), "read_file", json!({"path": "nope.txt"})).await;
    assert!(is_error);
    assert!(
        content.starts_with("Error [not_found]: nope.txt"),
        "{content}"
    );
}

#[tokio::test]
async fn edit_file_needs_exactly_one_match() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.txt");
    fs::write(&file, "alpha beta beta\n").unwrap();

    let (content, is_error) = call(
        dir.path(),
        "edit_file",
        json!({"path": "f.txt", "old_text": "gamma", "new_text": "x"}),
    )
    .await;
    assert!(is_error);
    assert!(
        content.starts_with("Error [invalid_arguments]: old_text was found 0 times in f.txt"),
        "{content}"
    );
    let (content, is_error) = call(
        dir.path(),
        "edit_file",
        json!({"path": "f.txt", "old_text": "beta", "new_text": "x"}),
    )
    .await;
    assert!(is_error);
    assert!(
        content.starts_with("Error [invalid_arguments]: old_text was found 2 times in f.txt"),
        "{content}"
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "alpha beta beta\n");

    let (content, is_error) = call(
        dir.path(),
        "edit_file",
        json!({"path": "f.txt", "old_text": "alpha", "new_text": "omega"}),
    )
    .await;
    assert_eq!(
        (content.as_str(), is_error),
        ("Edited f.txt: replaced 1 occurrence", false)
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "omega beta beta\n");
}

/// Every way out of the workspace is refused with permission_denied, for every file tool.
#[tokio::test]
async fn confinement_refuses_every_escape() {
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let secret_dir = outer.path().join("secret");
    fs::create_dir(&secret_dir).unwrap();
    fs::write(secret_dir.join("s.txt"), "secret").unwrap();
    fs::write(outer.path().join("x"), "outside").unwrap();
    symlink("/", ws.join("root")).unwrap();
    symlink(&secret_dir, ws.join("linked")).unwrap();
    symlink(secret_dir.join("s.txt"), ws.join("file-link")).unwrap();
    symlink(outer.path().join("missing"), ws.join("dangling")).unwrap();
    let abs_secret = secret_dir.join("s.txt").display().to_string();

    let attacks = [
        "../x",
        "sub/../../x",
        "/etc/passwd",
        abs_secret.as_str(),
        "root/etc/passwd",
        "linked/s.txt",
        "file-link",
        "dangling",
        "linked/new/deeper.txt",
    ];
    for path in attacks {
        let (content, is_error) = call(&ws, "read_file", json!({"path": path})).await;
        assert!(is_error, "read {path}: {content}");
        assert!(
            content.starts_with("Error [permission_denied]:"),
            "read {path}: {content}"
        );
        let (content, is_error) =
            call(&ws, "write_file", json!({"path": path, "content": "pwned"})).await;
        assert!(
            is_error && content.starts_with("Error [permission_denied]:"),
            "write {path}: {content}"
        );
        let (content, is_error) = call(
            &ws,
            "edit_file",
            json!({"path": path, "old_text": "secret", "new_text": "pwned"}),
        )
        .await;
        assert!(
            is_error && content.starts_with("Error [permission_denied]:"),
            "edit {path}: {content}"
        );
    }
    assert_eq!(
        fs::read_to_string(secret_dir.join("s.txt")).unwrap(),
        "secret"
    );
    assert_eq!(
        fs::read_to_string(outer.path().join("x")).unwrap(),
        "outside"
    );
    assert!(!outer.path().join("missing").exists());
    assert!(!secret_dir.join("new").exists());
}

#[tokio::test]
async fn symlinks_that_stay_inside_the_workspace_work() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("real")).unwrap();
    symlink(dir.path().join("real"), dir.path().join("alias")).unwrap();
    let (content, is_error) = call(
        dir.path(),
        "write_file",
        json!({"path": "alias/f.txt", "content": "ok"}),
    )
    .await;
    assert_eq!(
        (content.as_str(), is_error),
        ("Wrote 2 bytes to real/f.txt", false)
    );
    let abs = dir.path().join("real/f.txt").display().to_string();
    let (content, is_error) = call(dir.path(), "read_file", json!({"path": abs})).await;
    assert_eq!((content.as_str(), is_error), ("ok", false));
}

#[tokio::test]
async fn the_state_folder_is_readable_but_not_writable() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".troupe/protocol")).unwrap();
    fs::write(dir.path().join(".troupe/team.json"), "{}").unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();

    let (content, is_error) = call(
        dir.path(),
        "read_file",
        json!({"path": ".troupe/team.json"}),
    )
    .await;
    assert_eq!((content.as_str(), is_error), ("{}", false));

    for path in [
        ".troupe/team.json",
        ".troupe/protocol/state.json",
        ".troupe/new/dir/file",
        "sub/../.troupe/x",
        "./.troupe/audit.jsonl",
    ] {
        let (content, is_error) = call(
            dir.path(),
            "write_file",
            json!({"path": path, "content": "x"}),
        )
        .await;
        assert!(
            is_error && content.starts_with("Error [permission_denied]:"),
            "write {path}: {content}"
        );
        assert!(content.contains(".troupe/"), "{content}");
    }
    let (content, is_error) = call(
        dir.path(),
        "edit_file",
        json!({"path": ".troupe/team.json", "old_text": "{}", "new_text": "[]"}),
    )
    .await;
    assert!(
        is_error && content.starts_with("Error [permission_denied]:"),
        "{content}"
    );
    // A symlink elsewhere in the workspace into .troupe/ is no way round it.
    symlink(dir.path().join(".troupe"), dir.path().join("state")).unwrap();
    let (content, is_error) = call(
        dir.path(),
        "write_file",
        json!({"path": "state/team.json", "content": "x"}),
    )
    .await;
    assert!(
        is_error && content.starts_with("Error [permission_denied]:"),
        "{content}"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join(".troupe/team.json")).unwrap(),
        "{}"
    );
    assert!(!dir.path().join(".troupe/new").exists());
    assert!(!dir.path().join(".troupe/protocol/state.json").exists());
}

#[tokio::test]
async fn binary_files_are_refused_by_read_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("b.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let (content, is_error) = call(dir.path(), "read_file", json!({"path": "b.bin"})).await;
    assert!(is_error);
    assert!(
        content.starts_with("Error [tool_failed]: b.bin is not UTF-8 text (3 bytes)"),
        "{content}"
    );
}

/// Guards a call that must not block: a hang fails the test instead of stalling the suite.
async fn promptly<F: std::future::Future>(call: F) -> F::Output {
    tokio::time::timeout(std::time::Duration::from_secs(20), call)
        .await
        .expect("the tool blocked instead of refusing the file")
}

#[tokio::test]
async fn read_file_and_edit_file_refuse_a_fifo_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    crate::jobs::make_fifo(&dir.path().join("pipe.txt"));
    let (content, is_error) =
        promptly(call(dir.path(), "read_file", json!({"path": "pipe.txt"}))).await;
    assert!(is_error, "{content}");
    assert!(content.starts_with("Error ["), "{content}");
    assert!(content.contains("pipe.txt"), "{content}");
    assert!(content.contains("not a regular file (a FIFO)"), "{content}");
    let (content, is_error) = promptly(call(
        dir.path(),
        "edit_file",
        json!({"path": "pipe.txt", "old_text": "a", "new_text": "b"}),
    ))
    .await;
    assert!(is_error, "{content}");
    assert!(content.contains("pipe.txt"), "{content}");
    assert!(content.contains("not a regular file (a FIFO)"), "{content}");
    // A symlink inside the workspace to the FIFO is refused the same way.
    symlink(dir.path().join("pipe.txt"), dir.path().join("link.txt")).unwrap();
    let (content, is_error) =
        promptly(call(dir.path(), "read_file", json!({"path": "link.txt"}))).await;
    assert!(is_error, "{content}");
    assert!(content.contains("not a regular file (a FIFO)"), "{content}");
}

#[tokio::test]
async fn read_file_of_a_huge_file_reads_only_what_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    // A sparse terabyte: reading it whole is impossible; the tool must stop at its cap.
    let size: u64 = 1 << 40;
    fs::File::create(dir.path().join("huge.txt"))
        .unwrap()
        .set_len(size)
        .unwrap();
    let max = troupe::tools::read_file::MAX_READ_BYTES;
    let (content, is_error) =
        promptly(call(dir.path(), "read_file", json!({"path": "huge.txt"}))).await;
    assert!(
        !is_error,
        "{}",
        &content[content.len().saturating_sub(300)..]
    );
    let note = format!("\n[cut at {max} of {size} bytes; page on with `offset` and `limit` (lines), or use shell tools]");
    assert!(content.ends_with(&note), "{}", &content[max..]);
    assert_eq!(content.len(), max + note.len());
    assert!(content[..max].bytes().all(|b| b == 0));
    // edit_file holds the whole file in memory: it refuses one this large before reading it.
    let (content, is_error) = promptly(call(
        dir.path(),
        "edit_file",
        json!({"path": "huge.txt", "old_text": "a", "new_text": "b"}),
    ))
    .await;
    assert!(is_error);
    assert_eq!(
        content,
        format!(
            "Error [tool_failed]: huge.txt is {size} bytes, more than the {} bytes edit_file \
             handles; use shell tools to change it",
            troupe::tools::edit_file::MAX_EDIT_BYTES
        )
    );

    // With `limit`, the first lines of a file too large to count them all.
    let mut file = fs::File::create(dir.path().join("lines.txt")).unwrap();
    std::io::Write::write_all(&mut file, b"one\ntwo\nthree\n").unwrap();
    file.set_len(size).unwrap();
    let (content, is_error) = promptly(call(
        dir.path(),
        "read_file",
        json!({"path": "lines.txt", "limit": 2}),
    ))
    .await;
    assert_eq!(
        (content.as_str(), is_error),
        (
            format!("one\ntwo\n[showing the first 2 lines of a file of {size} bytes]").as_str(),
            false
        )
    );
}

#[tokio::test]
async fn read_file_cut_keeps_whole_characters_and_reads_past_binary_tails() {
    let dir = tempfile::tempdir().unwrap();
    let max = troupe::tools::read_file::MAX_READ_BYTES;
    // A two-byte character straddles the cut; binary bytes follow far after it.
    let mut bytes = vec![b'a'; max - 1];
    bytes.extend_from_slice("é".as_bytes());
    bytes.extend_from_slice(&[b'b'; 10]);
    bytes.extend_from_slice(&[0xff; 10]);
    fs::write(dir.path().join("f.txt"), &bytes).unwrap();
    let (content, is_error) = call(dir.path(), "read_file", json!({"path": "f.txt"})).await;
    assert!(!is_error, "{}", &content[..100]);
    let total = bytes.len();
    assert_eq!(
        &content[max - 3..],
        format!("aa\n[cut at {max} of {total} bytes; page on with `offset` and `limit` (lines), or use shell tools]")
    );
}
