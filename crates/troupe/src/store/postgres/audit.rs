//! A shared team's audit (`troupe_audit`): every process's permission decisions, each copied
//! after its line is appended to the process's own `.troupe/audit.jsonl`, so that the team's
//! decisions — which worker allowed or denied what — are in one place, in one order. The copy
//! is one insert per decision; the line is kept exactly as the file has it.

use super::roster::hostname;
use super::{db_error, PgStore};
use crate::store::team_copy::{AuditLine, TeamCopy};
use crate::store::BackendError;

/// One decision as the table keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    /// The team-wide order.
    pub id: i64,
    pub agent: String,
    pub tool: String,
    pub decision: String,
    pub host: String,
    /// The record as the file's line.
    pub line: String,
}

pub struct PgAudit {
    store: PgStore,
    host: String,
    pid: i32,
}

#[async_trait::async_trait]
impl TeamCopy<AuditLine> for PgAudit {
    async fn copy(&self, record: &AuditLine) -> Result<(), BackendError> {
        self.insert(&record.agent, &record.tool, &record.decision, &record.line)
            .await
    }
}

impl PgAudit {
    pub fn new(store: PgStore) -> Self {
        Self {
            store,
            host: hostname(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        }
    }

    /// Copies one decision (`decision` is `allow` or `deny`).
    pub async fn insert(
        &self,
        agent: &str,
        tool: &str,
        decision: &str,
        line: &str,
    ) -> Result<(), BackendError> {
        let store = &self.store;
        let (host, pid) = (&self.host, self.pid);
        store
            .bounded(async {
                let client = store.client().await?;
                client
                    .execute(
                        "INSERT INTO troupe_audit (team, agent, tool, decision, host, pid, line)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        &[&store.team(), &agent, &tool, &decision, host, &pid, &line],
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| db_error("copy an audit record", e))
            })
            .await
    }

    /// Up to `limit` decisions after the team-wide position `after`, in order.
    pub async fn after(&self, after: i64, limit: i64) -> Result<Vec<AuditRow>, BackendError> {
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .query(
                        "SELECT id, agent, tool, decision, host, line FROM troupe_audit
                          WHERE team = $1 AND id > $2 ORDER BY id LIMIT $3",
                        &[&store.team(), &after, &limit],
                    )
                    .await
                    .map(|rows| {
                        rows.iter()
                            .map(|r| AuditRow {
                                id: r.get(0),
                                agent: r.get(1),
                                tool: r.get(2),
                                decision: r.get(3),
                                host: r.get(4),
                                line: r.get(5),
                            })
                            .collect()
                    })
                    .map_err(|e| db_error("read the team's audit", e))
            })
        })
        .await
    }
}
