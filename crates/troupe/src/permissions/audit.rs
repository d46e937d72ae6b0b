//! The audit sink: one record per permission decision (SPEC §7).
//!
//! `.troupe/audit.jsonl` holds one JSON object per line:
//! `{"at","agent","tool","decision","rule","reason","input_digest"}` where `decision` is
//! `allow` or `deny` (the final answer, after any approval), `rule` names what decided
//! (`default`, `default+approval:auto`, `hook:<name>`, a rule's name, …) and `input_digest` is
//! the first 16 hex characters of the SHA-256 of the arguments in canonical JSON (keys sorted,
//! no spaces), so a call can be matched without the log holding file contents. A tool that runs
//! commands adds `"sandbox"`: the mode they run under (`workspace-write`, `read-only`, `off`).
//!
//! The log is a `store::journal`: each line is appended under a lock on the file, after cutting a
//! torn last line an interrupted write may have left, so lines never interleave or glue. Lines
//! are not fsynced: the log is a record for people, not state troupe recovers from, and an fsync
//! per tool call would dominate dispatch time. A FIFO or symlink in the log's place is refused
//! when the sink opens, without blocking (and at every append).
//!
//! `troupe gc` removes lines past `[retention] audit` by replacing the log whole
//! (`store::retention::lines`), so each append opens the log under its sidecar lock
//! (`journal::append_replaceable`): a line never lands in a log already replaced.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use troupe_wire::{AgentName, UtcTime};

use crate::clock::Clock;
use crate::error::ErrorCode;
use crate::layout::Layout;
use crate::store::durable;
use crate::store::journal::{self, Durability, Journal};
use crate::store::team_copy::{AuditLine, CopyTo};

/// A decision before it is stamped with the sink's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub agent: AgentName,
    pub tool: String,
    /// `true` for allow, `false` for deny: the audit log holds final answers only.
    pub allowed: bool,
    pub rule: String,
    pub reason: String,
    pub input_digest: String,
    /// For a tool that runs commands: the sandbox mode they run under.
    pub sandbox: Option<crate::sandbox::Mode>,
}

/// One line of `audit.jsonl`, keys in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    pub at: UtcTime,
    pub agent: AgentName,
    pub tool: String,
    pub decision: &'static str,
    pub rule: String,
    pub reason: String,
    pub input_digest: String,
    /// `workspace-write`, `read-only` or `off`: only on the lines of tools that run commands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<&'static str>,
}

impl AuditRecord {
    pub fn stamp(entry: AuditEntry, at: UtcTime) -> Self {
        Self {
            at,
            agent: entry.agent,
            tool: entry.tool,
            decision: if entry.allowed { "allow" } else { "deny" },
            rule: entry.rule,
            reason: entry.reason,
            input_digest: entry.input_digest,
            sandbox: entry.sandbox.map(|m| m.as_str()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write the audit log {path}: {source}")]
pub struct AuditError {
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

impl ErrorCode for AuditError {
    fn code(&self) -> &'static str {
        "audit_failed"
    }
}

/// Where permission decisions are recorded.
#[async_trait::async_trait]
pub trait AuditSink: Send + Sync {
    async fn record(&self, entry: AuditEntry) -> Result<(), AuditError>;
}

/// First 16 hex characters of the SHA-256 of `arguments` in canonical JSON.
pub fn input_digest(arguments: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(arguments, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    let mut hex = String::with_capacity(16);
    for byte in digest.iter().take(8) {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Keys sorted at every level, no whitespace. Written by hand because serde_json's map order
/// depends on a feature flag another crate in the build may turn on.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Appends to `.troupe/audit.jsonl`.
pub struct JsonlAuditSink {
    /// Opened for each append, under the lock gc replaces the log under.
    path: PathBuf,
    clock: Arc<dyn Clock>,
    /// A shared team's audit table, where every line is copied too.
    copy: CopyTo<AuditLine>,
}

impl JsonlAuditSink {
    /// Opens (creating) the workspace's audit log. Refuses a symlinked `.troupe/` or log file.
    pub fn open(layout: &Layout, clock: Arc<dyn Clock>) -> Result<Self, AuditError> {
        let path = layout.audit_log();
        durable::ensure_real_dir(&layout.state_dir()).map_err(|e| AuditError {
            path: path.display().to_string(),
            source: e.source,
        })?;
        Self::open_path(&path, clock)
    }

    /// Opens (creating) an audit log at `path`, whose folder must exist.
    pub fn open_path(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, AuditError> {
        // Created now, and refused now if something else is in its place.
        Journal::open(path).map_err(|e| AuditError {
            path: path.display().to_string(),
            source: e.source,
        })?;
        Ok(Self {
            path: path.to_owned(),
            clock,
            copy: CopyTo::nowhere(),
        })
    }

    /// This sink, copying every line to a shared team's audit table as well (after the file's
    /// append; a failed copy is reported once and the decision stands).
    pub fn with_copy(mut self, copy: CopyTo<AuditLine>) -> Self {
        self.copy = copy;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl JsonlAuditSink {
    /// Appends the line of `record` to the file; the line (without its `\n`).
    fn append(&self, record: &AuditRecord) -> Result<Vec<u8>, AuditError> {
        let fail = |source| AuditError {
            path: self.path.display().to_string(),
            source,
        };
        let mut line = serde_json::to_vec(record).map_err(|e| fail(std::io::Error::other(e)))?;
        line.push(b'\n');
        journal::append_replaceable(&self.path, &line, Durability::Unsynced)
            .map_err(|e| fail(e.source))?;
        line.pop();
        Ok(line)
    }
}

#[async_trait::async_trait]
impl AuditSink for JsonlAuditSink {
    async fn record(&self, entry: AuditEntry) -> Result<(), AuditError> {
        let record = AuditRecord::stamp(entry, self.clock.now());
        // An append under the log's lock: off the async threads.
        let line = crate::sync::blocking(|| self.append(&record))?;
        if self.copy.is_on() {
            let copied = AuditLine {
                agent: record.agent.as_str().to_owned(),
                tool: record.tool.clone(),
                decision: record.decision.to_owned(),
                line: String::from_utf8_lossy(&line).into_owned(),
            };
            self.copy.copy(&copied, &self.path.display()).await;
        }
        Ok(())
    }
}

/// Keeps records in memory, for tests.
pub struct MemoryAuditSink {
    records: Mutex<Vec<AuditRecord>>,
    clock: Arc<dyn Clock>,
}

impl MemoryAuditSink {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            records: Mutex::new(Vec::new()),
            clock,
        }
    }

    pub fn records(&self) -> Vec<AuditRecord> {
        crate::sync::lock(&self.records).clone()
    }
}

#[async_trait::async_trait]
impl AuditSink for MemoryAuditSink {
    async fn record(&self, entry: AuditEntry) -> Result<(), AuditError> {
        let record = AuditRecord::stamp(entry, self.clock.now());
        crate::sync::lock(&self.records).push(record);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order_and_whitespace() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#).unwrap();
        let b = json!({"a": {"x": "s", "y": [1, 2]}, "b": 1});
        assert_eq!(input_digest(&a), input_digest(&b));
        assert_eq!(input_digest(&a).len(), 16);
        assert_ne!(input_digest(&a), input_digest(&json!({"b": 2})));
        // sha256('{"a":1}')
        assert_eq!(input_digest(&json!({"a": 1})), "015abd7f5cc57a2d");
    }
}
