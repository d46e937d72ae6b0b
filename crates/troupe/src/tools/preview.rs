//! What a write or an edit would change, shown to whoever answers its permission request
//! (SPEC §13): a diff of the file's lines, made only when someone is asked.
//!
//! The diff is one hunk: the lines between the common beginning and the common end of the old
//! and the new text, with up to [`CONTEXT`] lines around. Exact for one change, and a faithful
//! (if wider) picture of several; it never reads more than [`MAX_PREVIEW_SOURCE`] bytes, and a
//! file that is not a regular file (a FIFO, a device, a link out) is never opened for it.

use std::path::Path;

use crate::store::read::{read_regular, Links};

/// Lines of context kept around the change.
pub const CONTEXT: usize = 3;
/// The largest existing file a preview reads.
pub const MAX_PREVIEW_SOURCE: u64 = 1024 * 1024;

/// The diff of replacing `old` with `new` in the file shown as `shown`.
pub fn diff(shown: &str, old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let prefix = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let room = old_lines.len().min(new_lines.len()) - prefix;
    let suffix = old_lines
        .iter()
        .rev()
        .zip(new_lines.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let start = prefix.saturating_sub(CONTEXT);
    let old_end = old_lines.len() - suffix;
    let new_end = new_lines.len() - suffix;
    let after = (old_end + CONTEXT).min(old_lines.len());
    let mut out = format!(
        "--- {shown}\n+++ {shown}\n@@ -{},{} +{},{} @@\n",
        start + 1,
        after - start,
        start + 1,
        (new_end + (after - old_end)) - start
    );
    for line in &old_lines[start..prefix] {
        out.push_str(&format!(" {line}\n"));
    }
    for line in &old_lines[prefix..old_end] {
        out.push_str(&format!("-{line}\n"));
    }
    for line in &new_lines[prefix..new_end] {
        out.push_str(&format!("+{line}\n"));
    }
    for line in &old_lines[old_end..after] {
        out.push_str(&format!(" {line}\n"));
    }
    out
}

/// The diff `write_file` would make: against the file's present content, or all added for a
/// new file. `None` when the present content cannot be read safely (too big, not text, not a
/// regular file) — the person then sees the arguments only.
pub fn write_preview(path: &Path, shown: &str, content: &str) -> Option<String> {
    let old = match read_regular(path, Links::Refuse, MAX_PREVIEW_SOURCE) {
        Ok(Some(bytes)) => String::from_utf8(bytes).ok()?,
        Ok(None) => String::new(),
        Err(_) => return None,
    };
    Some(diff(shown, &old, content))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_in_the_middle_is_one_hunk_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        let d = diff("x.txt", old, new);
        assert_eq!(
            d,
            "--- x.txt\n+++ x.txt\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
    }

    #[test]
    fn a_new_file_is_all_added_and_a_missing_one_is_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.txt");
        let d = write_preview(&path, "new.txt", "one\ntwo\n").unwrap();
        assert!(d.ends_with("+one\n+two\n"), "{d}");
        std::fs::write(&path, "one\n").unwrap();
        let d = write_preview(&path, "new.txt", "one\ntwo\n").unwrap();
        assert!(d.ends_with(" one\n+two\n"), "{d}");
    }

    #[test]
    fn a_fifo_or_a_link_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert_eq!(write_preview(&fifo, "pipe", "x"), None);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert_eq!(write_preview(&link, "link", "x"), None);
    }
}
