//! Trust in a workspace's own files (issue 22). A cloned repository's `troupe.toml` and `.env`
//! are written by someone else: what they may do without the person's word is **tighten**
//! (`deny` and `ask` rules, a stricter sandbox, agent definitions, skills, memory). What
//! **needs trust** is listed as [`TrustItem`]s:
//!
//! - anything that runs a program: hooks, MCP servers, `[sandbox] hooks = false`;
//! - anything that decides where the key goes or which server is called: `[model] base_url` and
//!   `provider`, `[store] url`, and the `.env` variables that choose the server or the provider,
//!   or replace the provider or key the person's own environment chose (`model::config` says
//!   which); and where the team's code is pushed: `[team] remote`;
//! - anything that widens what agents may do: `allow` rules, `[sandbox] mode = "off"` (or a
//!   mode looser than the person's own config's), `[sandbox] network` other than off, a
//!   `[prices]` entry below the person's own price or the built-in table and a `[run] max_cost`
//!   above the person's own (they let a run go further before it is stopped);
//!   and where traces are sent: `[telemetry] endpoint` and `capture_content = true`;
//! - anything that deletes more than the person asked for: `[retention] auto = true`, and a
//!   `[retention]` rule keeping less than the default.
//!
//! Trust is recorded in the person's own config folder ([`TrustStore`], `trusted.json` next to
//! the user `config.toml`), never in the workspace: per workspace, its real path and one digest
//! per item the person trusted ([`item_digest`]). The workspace is trusted while every item its
//! files hold now is one of those; an item that is new or changed (a pulled commit that adds a
//! hook) needs trust again, and any other edit of the files does not. Per item, so that a record
//! holds exactly what the person saw: saving one allow rule at an approval prompt adds that one
//! entry ([`TrustStore::record_seen`]) and nothing else a file gained meanwhile.
//!
//! The records of format version 1 held a digest of each file's whole trust-requiring content
//! instead ([`digests`]); they are read as they are (trusted while that content is unchanged)
//! and become per-item records the next time troupe writes them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ErrorCode;
use crate::store::read::{read_regular, Links};
use crate::store::{durable, lock, IoError};

/// The file of trust records, in the person's troupe config folder.
pub const TRUST_FILE_NAME: &str = "trusted.json";
/// The largest trust file read (a record is a few hundred bytes).
pub const MAX_TRUST_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The variable that trusts the workspace for one command (CI), like `--trust-workspace`.
pub const TRUST_WORKSPACE_VAR: &str = "TROUPE_TRUST_WORKSPACE";

/// The format this troupe writes; it reads [`OLD_FORMAT_VERSION`] too.
const FORMAT_VERSION: u32 = 2;
/// The format of whole-file digests (records written before per-item digests).
const OLD_FORMAT_VERSION: u32 = 1;

/// What a trust-requiring value would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrustKind {
    /// A `[[hooks]]` command.
    Hook,
    /// An `[[mcp_servers]]` entry (a command started, or a server called).
    McpServer,
    /// `[sandbox] hooks = false`: hook commands unconfined.
    UnconfinedHooks,
    /// The model server the key is sent to.
    ModelServer,
    /// The provider (which key is sent, and how).
    Provider,
    /// A `.env` key sent in place of the person's own.
    ApiKey,
    /// `[store] url`: the database a team's state goes to.
    Store,
    /// `[team] remote`: the git remote teammates' branches are pushed to.
    GitRemote,
    /// An `allow` rule.
    Allow,
    /// `[sandbox] mode = "off"`, or a mode looser than the person's own `config.toml` says.
    SandboxMode,
    /// `[sandbox] network` other than off.
    Network,
    /// A `[prices]` entry below the person's own price or troupe's built-in table (it loosens
    /// `--max-cost`).
    Prices,
    /// A `[run] max_cost` above the person's own.
    CostLimit,
    /// `[approvals] route = "lead"`: a model answers teammates' permission asks.
    ApprovalRoute,
    /// `[telemetry]`: where the run's traces are sent, and whether contents go with them.
    Telemetry,
    /// `[retention]`: `auto`, or a rule keeping less than the default (it deletes history).
    Retention,
}

impl TrustKind {
    /// How the review names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hook => "hook",
            Self::McpServer => "mcp_server",
            Self::UnconfinedHooks => "unconfined_hooks",
            Self::ModelServer => "model_server",
            Self::Provider => "provider",
            Self::ApiKey => "api_key",
            Self::Store => "store",
            Self::GitRemote => "git_remote",
            Self::Allow => "allow",
            Self::SandboxMode => "sandbox_mode",
            Self::Network => "network",
            Self::Prices => "prices",
            Self::CostLimit => "cost_limit",
            Self::ApprovalRoute => "approval_route",
            Self::Telemetry => "telemetry",
            Self::Retention => "retention",
        }
    }
}

/// One value of a workspace's files that waits for trust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustItem {
    /// The file it is in, by name: `troupe.toml` or `.env`.
    pub file: &'static str,
    pub kind: TrustKind,
    /// What it would do, one line for the person: `runs hook UserPromptSubmit: echo hi`.
    pub shown: String,
    /// Everything about it that matters, for the digest (an MCP server's environment values
    /// included, which are not shown).
    pub content: String,
}

impl TrustItem {
    pub fn new(file: &'static str, kind: TrustKind, shown: String, content: String) -> Self {
        Self {
            file,
            kind,
            shown,
            content,
        }
    }
}

/// The digest of each file's trust-requiring content (files without any are absent):
/// `sha256:<hex>` of the items in file order. What a record of format version 1 holds.
pub fn digests(items: &[TrustItem]) -> BTreeMap<String, String> {
    let mut hashers: BTreeMap<&str, Sha256> = BTreeMap::new();
    for item in items {
        let hasher = hashers.entry(item.file).or_default();
        hash_parts(hasher, &[item.kind.as_str(), item.content.as_str()]);
    }
    hashers
        .into_iter()
        .map(|(file, hasher)| (file.to_owned(), hex_digest(hasher)))
        .collect()
}

/// The digest of one item, its file included: `sha256:<hex>`. What a record holds per item.
pub fn item_digest(item: &TrustItem) -> String {
    let mut hasher = Sha256::new();
    hash_parts(
        &mut hasher,
        &[item.file, item.kind.as_str(), item.content.as_str()],
    );
    hex_digest(hasher)
}

/// Length-prefixed fields: no two different lists hash the same bytes.
fn hash_parts(hasher: &mut Sha256, parts: &[&str]) {
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
}

fn hex_digest(hasher: Sha256) -> String {
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// Whether a workspace's trust-requiring values may apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustState {
    /// Its files hold nothing that needs trust.
    NotNeeded,
    /// The person trusted exactly this content.
    Trusted,
    /// Never trusted (or the trust was revoked).
    Untrusted,
    /// Trusted once, but the trust-requiring content changed since.
    Changed,
}

impl TrustState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotNeeded => "not_needed",
            Self::Trusted => "trusted",
            Self::Untrusted => "untrusted",
            Self::Changed => "changed",
        }
    }

    /// Whether the trust-requiring values apply.
    pub fn allows(self) -> bool {
        matches!(self, Self::NotNeeded | Self::Trusted)
    }
}

/// Why the trust records could not be read or written (`trust_record`).
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{path} is not a trust record troupe wrote: {reason}; remove it to start over")]
    Corrupt { path: String, reason: String },
    #[error("the workspace path {0} is not UTF-8: troupe cannot record trust for it")]
    PathNotUtf8(String),
    #[error(
        "no config folder to record trust in: set HOME or XDG_CONFIG_HOME (or pass \
         --trust-workspace for this command)"
    )]
    NoConfigFolder,
}

impl ErrorCode for TrustError {
    fn code(&self) -> &'static str {
        "trust_record"
    }
}

/// The person's trust records: `<config folder>/troupe/trusted.json`, changed under
/// `trusted.json.lock` and replaced atomically.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

/// The file as written.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    version: u32,
    workspaces: BTreeMap<String, TrustRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustRecord {
    /// When the person last trusted something of the workspace.
    trusted_at_utc: String,
    /// Format version 1: the digest of each file's whole trust-requiring content ([`digests`]).
    /// Read, never written: the record covers exactly that content.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    digests: BTreeMap<String, String>,
    /// One [`item_digest`] per item the person trusted (an item that appears twice, twice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    items: Vec<String>,
}

impl TrustRecord {
    /// The item digests this record trusts, for a workspace whose files held `before` when it
    /// was last looked at: a version-1 record trusts `before`'s items when its whole-file
    /// digests are `before`'s, else none.
    fn trusted_items(&self, before: &[TrustItem]) -> Vec<String> {
        if self.items.is_empty() {
            if !self.digests.is_empty() && self.digests == digests(before) {
                return before.iter().map(item_digest).collect();
            }
            return Vec::new();
        }
        self.items.clone()
    }

    /// The items of `items` this record does not cover (each trusted digest covers one item).
    fn not_covered(&self, items: &[TrustItem]) -> Vec<TrustItem> {
        not_covered(&self.trusted_items(items), items)
    }
}

/// The items of `items` that `trusted` (item digests) does not cover, one digest per item.
fn not_covered(trusted: &[String], items: &[TrustItem]) -> Vec<TrustItem> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for digest in trusted {
        *left.entry(digest.as_str()).or_default() += 1;
    }
    items
        .iter()
        .filter(|item| match left.get_mut(item_digest(item).as_str()) {
            Some(count) if *count > 0 => {
                *count -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

impl TrustStore {
    /// The records at `path`.
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// The person's records, next to their `config.toml`; none without a config folder.
    pub fn user() -> Option<Self> {
        let config = super::user_config_path()?;
        Some(Self::at(config.with_file_name(TRUST_FILE_NAME)))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state of `workspace` (its real path) whose files hold `items`.
    pub fn state(&self, workspace: &Path, items: &[TrustItem]) -> Result<TrustState, TrustError> {
        if items.is_empty() {
            return Ok(TrustState::NotNeeded);
        }
        let key = key_of(workspace)?;
        Ok(match self.read()?.workspaces.get(&key) {
            None => TrustState::Untrusted,
            Some(record) if record.not_covered(items).is_empty() => TrustState::Trusted,
            Some(_) => TrustState::Changed,
        })
    }

    /// The items of `items` (what `workspace`'s files hold now) that the person has not trusted.
    pub fn untrusted(
        &self,
        workspace: &Path,
        items: &[TrustItem],
    ) -> Result<Vec<TrustItem>, TrustError> {
        let key = key_of(workspace)?;
        Ok(match self.read()?.workspaces.get(&key) {
            None => items.to_vec(),
            Some(record) => record.not_covered(items),
        })
    }

    /// Records that the person trusts `seen` — one item they were shown and accepted (an allow
    /// rule saved at an approval prompt) — on top of what they trusted before, and nothing else.
    /// `before` and `after` are what the workspace's files held just before and just after the
    /// change that added `seen` (`before` lets a version-1 record carry over). Returns the items
    /// of `after` that stay untrusted.
    pub fn record_seen(
        &self,
        workspace: &Path,
        before: &[TrustItem],
        seen: &TrustItem,
        after: &[TrustItem],
        at_utc: &str,
    ) -> Result<Vec<TrustItem>, TrustError> {
        let key = key_of(workspace)?;
        self.change(|file| {
            let mut trusted = file
                .workspaces
                .get(&key)
                .map(|record| record.trusted_items(before))
                .unwrap_or_default();
            let digest = item_digest(seen);
            let needed = after.iter().filter(|i| item_digest(i) == digest).count();
            let have = trusted.iter().filter(|d| **d == digest).count();
            // Once per time it is in the file (at least once), as far as not yet trusted.
            let missing = needed.max(1).saturating_sub(have);
            trusted.extend(std::iter::repeat_n(digest, missing));
            let left = not_covered(&trusted, after);
            file.workspaces.insert(
                key.clone(),
                TrustRecord {
                    trusted_at_utc: at_utc.to_owned(),
                    digests: BTreeMap::new(),
                    items: trusted,
                },
            );
            left
        })
    }

    /// Records that the person trusts `workspace` with exactly `items` (`at_utc` for the
    /// record). Nothing to trust: any earlier record is removed.
    pub fn record(
        &self,
        workspace: &Path,
        items: &[TrustItem],
        at_utc: &str,
    ) -> Result<(), TrustError> {
        let key = key_of(workspace)?;
        self.change(|file| {
            if items.is_empty() {
                file.workspaces.remove(&key);
            } else {
                file.workspaces.insert(
                    key.clone(),
                    TrustRecord {
                        trusted_at_utc: at_utc.to_owned(),
                        digests: BTreeMap::new(),
                        items: items.iter().map(item_digest).collect(),
                    },
                );
            }
        })
        .map(|_| ())
    }

    /// Forgets `workspace`; whether there was a record.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, TrustError> {
        let key = key_of(workspace)?;
        self.change(|file| file.workspaces.remove(&key).is_some())
    }

    /// When `workspace` was trusted, if it is recorded.
    pub fn trusted_at(&self, workspace: &Path) -> Result<Option<String>, TrustError> {
        let key = key_of(workspace)?;
        Ok(self
            .read()?
            .workspaces
            .get(&key)
            .map(|r| r.trusted_at_utc.clone()))
    }

    /// Reads, changes and writes the records under their lock.
    fn change<T>(&self, edit: impl FnOnce(&mut TrustFile) -> T) -> Result<T, TrustError> {
        let folder = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(folder).map_err(|e| IoError::new("create folder", folder, e))?;
        let _guard = lock::lock_exclusive(&self.path.with_extension("json.lock"))?;
        let mut file = self.read()?;
        let out = edit(&mut file);
        file.version = FORMAT_VERSION;
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| self.corrupt(e))?;
        bytes.push(b'\n');
        durable::replace(&self.path, &bytes)?;
        Ok(out)
    }

    fn read(&self) -> Result<TrustFile, TrustError> {
        let Some(bytes) = read_regular(&self.path, Links::Refuse, MAX_TRUST_FILE_BYTES)? else {
            return Ok(TrustFile {
                version: FORMAT_VERSION,
                ..TrustFile::default()
            });
        };
        let file: TrustFile = troupe_wire::strict::from_json_bytes(&bytes, "trust record")
            .map_err(|e| self.corrupt(e))?;
        if file.version != FORMAT_VERSION && file.version != OLD_FORMAT_VERSION {
            return Err(self.corrupt(format!(
                "version {} (this troupe writes {FORMAT_VERSION})",
                file.version
            )));
        }
        // A record trusts by one form: whole-file digests (version 1) or per-item ones.
        let mixed = file.workspaces.values().any(|r| {
            let old = file.version == OLD_FORMAT_VERSION;
            r.items.is_empty() == r.digests.is_empty() || (old && !r.items.is_empty())
        });
        if mixed {
            return Err(self.corrupt(format!(
                "a record of version {} holds no digests, or both kinds",
                file.version
            )));
        }
        Ok(file)
    }

    fn corrupt(&self, reason: impl std::fmt::Display) -> TrustError {
        TrustError::Corrupt {
            path: self.path.display().to_string(),
            reason: reason.to_string(),
        }
    }
}

fn key_of(workspace: &Path) -> Result<String, TrustError> {
    workspace
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| TrustError::PathNotUtf8(workspace.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(command: &str) -> TrustItem {
        TrustItem::new(
            "troupe.toml",
            TrustKind::Hook,
            format!("runs {command}"),
            command.into(),
        )
    }

    #[test]
    fn digests_follow_the_content_per_file() {
        let a = digests(&[hook("echo a")]);
        assert_eq!(a, digests(&[hook("echo a")]));
        assert_ne!(a, digests(&[hook("echo b")]));
        assert_ne!(a, digests(&[hook("echo a"), hook("echo a")]));
        // The split between fields is part of what is hashed.
        let joined = TrustItem::new("troupe.toml", TrustKind::Hook, "x".into(), "ab".into());
        assert_ne!(digests(&[joined]), digests(&[hook("a")]));
        let dotenv = TrustItem::new(".env", TrustKind::ModelServer, "x".into(), "u".into());
        let both = digests(&[hook("echo a"), dotenv]);
        assert_eq!(both.len(), 2);
        assert_eq!(both["troupe.toml"], a["troupe.toml"]);
        assert!(digests(&[]).is_empty());
    }

    #[test]
    fn records_states_and_revocation() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join("troupe").join(TRUST_FILE_NAME));
        let ws = Path::new("/work/project");
        let items = [hook("echo a")];
        assert_eq!(store.state(ws, &[]).unwrap(), TrustState::NotNeeded);
        assert_eq!(store.state(ws, &items).unwrap(), TrustState::Untrusted);
        store
            .record(ws, &items, "2026-12-02T00:00:00.000Z")
            .unwrap();
        assert_eq!(store.state(ws, &items).unwrap(), TrustState::Trusted);
        assert_eq!(
            store.state(Path::new("/work/other"), &items).unwrap(),
            TrustState::Untrusted
        );
        assert_eq!(
            store.state(ws, &[hook("echo b")]).unwrap(),
            TrustState::Changed
        );
        assert!(store.revoke(ws).unwrap());
        assert!(!store.revoke(ws).unwrap());
        assert_eq!(store.state(ws, &items).unwrap(), TrustState::Untrusted);
    }

    fn allow(rule: &str) -> TrustItem {
        TrustItem::new(
            "troupe.toml",
            TrustKind::Allow,
            format!("allows {rule}"),
            rule.into(),
        )
    }

    #[test]
    fn item_digests_name_the_file_the_kind_and_the_content() {
        let a = item_digest(&hook("echo a"));
        assert_eq!(a, item_digest(&hook("echo a")));
        assert_ne!(a, item_digest(&hook("echo b")));
        let mut elsewhere = hook("echo a");
        elsewhere.file = ".env";
        assert_ne!(a, item_digest(&elsewhere));
        assert_ne!(a, item_digest(&allow("echo a")));
    }

    #[test]
    fn a_record_covers_each_item_it_holds_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join(TRUST_FILE_NAME));
        let ws = Path::new("/w");
        let items = [hook("echo a"), allow("shell")];
        store.record(ws, &items, "t").unwrap();
        // Fewer items, or the same in another order: still what the person trusted.
        assert_eq!(store.state(ws, &items[..1]).unwrap(), TrustState::Trusted);
        let swapped = [allow("shell"), hook("echo a")];
        assert_eq!(store.state(ws, &swapped).unwrap(), TrustState::Trusted);
        // The same hook twice runs twice: the second needs trust.
        let twice = [hook("echo a"), hook("echo a")];
        assert_eq!(store.state(ws, &twice).unwrap(), TrustState::Changed);
        assert_eq!(store.untrusted(ws, &twice).unwrap(), [hook("echo a")]);
    }

    #[test]
    fn recording_what_was_seen_trusts_that_one_item_and_nothing_the_file_gained() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join(TRUST_FILE_NAME));
        let ws = Path::new("/w");
        store.record(ws, &[hook("echo a")], "t1").unwrap();
        // Meanwhile someone added a hook; the person saves an allow rule.
        let before = [hook("echo a"), hook("curl evil")];
        let after = [hook("echo a"), hook("curl evil"), allow("write_file(x)")];
        let left = store
            .record_seen(ws, &before, &allow("write_file(x)"), &after, "t2")
            .unwrap();
        assert_eq!(left, [hook("curl evil")]);
        assert_eq!(store.state(ws, &after).unwrap(), TrustState::Changed);
        assert_eq!(store.untrusted(ws, &after).unwrap(), [hook("curl evil")]);
        // Without the added hook, everything is trusted: the entry is.
        let without = [hook("echo a"), allow("write_file(x)")];
        assert_eq!(store.state(ws, &without).unwrap(), TrustState::Trusted);
        assert_eq!(store.trusted_at(ws).unwrap().as_deref(), Some("t2"));

        // No record at all: only the entry.
        let other = Path::new("/other");
        let left = store
            .record_seen(
                other,
                &[hook("x")],
                &allow("read_file"),
                &[hook("x"), allow("read_file")],
                "t",
            )
            .unwrap();
        assert_eq!(left, [hook("x")]);
        assert_eq!(
            store.state(other, &[allow("read_file")]).unwrap(),
            TrustState::Trusted
        );
    }

    #[test]
    fn a_version_1_record_keeps_working_and_carries_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TRUST_FILE_NAME);
        let store = TrustStore::at(path.clone());
        let ws = Path::new("/w");
        let items = [hook("echo a")];
        let digest = &digests(&items)["troupe.toml"];
        std::fs::write(
            &path,
            format!(
                r#"{{"version":1,"workspaces":{{"/w":{{"trusted_at_utc":"t","digests":{{"troupe.toml":"{digest}"}}}},"/v":{{"trusted_at_utc":"t","digests":{{"troupe.toml":"{digest}"}}}}}}}}"#
            ),
        )
        .unwrap();
        assert_eq!(store.state(ws, &items).unwrap(), TrustState::Trusted);
        assert_eq!(
            store.state(ws, &[hook("echo b")]).unwrap(),
            TrustState::Changed
        );
        // Saving an entry on the content it covers turns it into a per-item record.
        let after = [hook("echo a"), allow("read_file")];
        let left = store
            .record_seen(ws, &items, &allow("read_file"), &after, "t2")
            .unwrap();
        assert!(left.is_empty());
        assert_eq!(store.state(ws, &after).unwrap(), TrustState::Trusted);
        // The other workspace's old record is kept as it was, and still works.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""version": 2"#), "{text}");
        assert_eq!(
            store.state(Path::new("/v"), &items).unwrap(),
            TrustState::Trusted
        );
        // On content it does not cover, it carries nothing over.
        let left = store
            .record_seen(
                Path::new("/v"),
                &[hook("echo b")],
                &allow("glob"),
                &[hook("echo b"), allow("glob")],
                "t3",
            )
            .unwrap();
        assert_eq!(left, [hook("echo b")]);
    }

    #[test]
    fn a_bad_record_file_is_refused_not_taken_as_trust() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TRUST_FILE_NAME);
        let store = TrustStore::at(path.clone());
        let ws = Path::new("/w");
        let items = [hook("echo a")];
        let digest = &digests(&items)["troupe.toml"];
        let duplicate = format!(
            r#"{{"version":1,"workspaces":{{"/w":{{"trusted_at_utc":"t","digests":{{"troupe.toml":"x","troupe.toml":"{digest}"}}}}}}}}"#
        );
        for bad in [
            "",
            "{",
            "[]",
            r#"{"version":3,"workspaces":{}}"#,
            r#"{"version":2,"workspaces":{"/w":{"trusted_at_utc":"t"}}}"#,
            r#"{"version":1,"workspaces":{"/w":{"trusted_at_utc":"t","items":["sha256:0"]}}}"#,
            &duplicate,
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = store.state(ws, &items).unwrap_err();
            assert_eq!(err.code(), "trust_record", "{bad}: {err}");
        }
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/null", &path).unwrap();
        assert!(store.state(ws, &items).is_err());
    }
}
