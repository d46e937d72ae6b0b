//! What the soak samples of this process and of the team's state.

use std::path::Path;

/// This process's resident memory, open file descriptors and threads (Linux `/proc/self`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Process {
    pub rss_bytes: u64,
    pub fds: u64,
    pub threads: u64,
}

impl Process {
    pub fn now() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Self {
            // VmRSS is in kB.
            rss_bytes: field("VmRSS:") * 1024,
            // The listing's own descriptor is counted too, the same in every sample.
            fds: std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64),
            threads: field("Threads:"),
        }
    }
}

/// Bytes of the regular files under `dir`, at any depth (0 when it does not exist).
pub fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}
