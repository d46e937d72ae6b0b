//! Agents' conversations in PostgreSQL (`troupe_transcripts`): the same JSON lines as
//! `.troupe/transcripts/<agent>.jsonl`, one row each, in append order. Generation 0 is the
//! current conversation; setting it aside (a new session, a respawned name) renumbers it to the
//! next free generation. Only `troupe gc` deletes, and only earlier generations past their
//! retention. A worker on any host continues a teammate from here. Each append is its own
//! committed statement: durable before it returns.

use super::{db_error, PgStore};
use crate::store::BackendError;

/// The transaction lock on one agent's conversation (team `$1`, agent `$2`) that setting it
/// aside and gc's removal of its earlier generations both take.
const SET_ASIDE_LOCK: &str =
    "SELECT pg_advisory_xact_lock(3, hashtext(current_schema() || '/' || $1 || '/' || $2))";

/// Begins a transaction holding the set-aside lock of `agent`'s conversation (released by its
/// commit or rollback).
pub(super) async fn locked_conversation<'a>(
    client: &'a mut deadpool_postgres::Object,
    team: &str,
    agent: &str,
) -> Result<deadpool_postgres::Transaction<'a>, BackendError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| db_error("begin", e))?;
    tx.execute(SET_ASIDE_LOCK, &[&team, &agent])
        .await
        .map_err(|e| db_error("lock a transcript", e))?;
    Ok(tx)
}

/// The next free generation of `agent`'s conversations, read under its set-aside lock.
async fn next_generation(
    tx: &deadpool_postgres::Transaction<'_>,
    team: &str,
    agent: &str,
) -> Result<i32, BackendError> {
    Ok(tx
        .query_one(
            "SELECT coalesce(max(generation), 0) + 1 FROM troupe_transcripts
              WHERE team = $1 AND agent = $2",
            &[&team, &agent],
        )
        .await
        .map_err(|e| db_error("read transcript generations", e))?
        .get(0))
}

/// One agent's transcript lines.
#[derive(Clone)]
pub struct PgTranscriptLog {
    store: PgStore,
    agent: String,
    /// For a teammate: the holder this process leases teammates as. An append is refused
    /// while another holder has a live lease on the teammate, so a worker that lost it (paused
    /// past its lease) cannot interleave lines with the one that runs it now.
    holder: Option<String>,
}

impl PgTranscriptLog {
    pub fn new(store: PgStore, agent: &str) -> Self {
        Self {
            store,
            agent: agent.to_owned(),
            holder: None,
        }
    }

    /// Appends only while no other holder has a live lease on this teammate.
    pub fn fenced_by(mut self, holder: &str) -> Self {
        self.holder = Some(holder.to_owned());
        self
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// Appends one line (without its `\n`).
    pub async fn append(&self, line: &[u8]) -> Result<(), BackendError> {
        let store = &self.store;
        let agent = &self.agent;
        let line = String::from_utf8_lossy(line).into_owned();
        let holder = &self.holder;
        self.store
            .bounded(async {
                let client = store.client().await?;
                let n = client
                    .execute(
                        "INSERT INTO troupe_transcripts (team, agent, generation, line)
                     SELECT $1, $2, 0, $3
                      WHERE $4::text IS NULL OR NOT EXISTS (
                            SELECT 1 FROM troupe_teammates
                             WHERE team = $1 AND name = $2 AND holder IS NOT NULL
                               AND holder <> $4::text AND lease_until >= clock_timestamp())",
                        &[&store.team(), &agent, &line, &holder],
                    )
                    .await
                    .map_err(|e| db_error("append to a transcript", e))?;
                if n == 0 {
                    return Err(BackendError::new(
                        "mailbox_lease_lost",
                        format!(
                        "another worker holds {agent} now; this worker's lease ran out, so its \
                         transcript line was not written"
                    ),
                    ));
                }
                Ok(())
            })
            .await
    }

    /// The current conversation's lines, each followed by `\n`.
    pub async fn read(&self) -> Result<Vec<u8>, BackendError> {
        let store = &self.store;
        let agent = &self.agent;
        self.store
            .bounded(async {
                let client = store.client().await?;
                let rows = client
                    .query(
                        "SELECT line FROM troupe_transcripts
                      WHERE team = $1 AND agent = $2 AND generation = 0 ORDER BY seq",
                        &[&store.team(), &agent],
                    )
                    .await
                    .map_err(|e| db_error("read a transcript", e))?;
                let mut bytes = Vec::new();
                for row in rows {
                    bytes.extend_from_slice(row.get::<_, &str>(0).as_bytes());
                    bytes.push(b'\n');
                }
                Ok(bytes)
            })
            .await
    }

    /// Sets the current conversation aside; its new generation, or `None` when it was empty.
    pub async fn set_aside(&self) -> Result<Option<i32>, BackendError> {
        let store = &self.store;
        let agent = &self.agent;
        self.store
            .bounded(async {
                let mut client = store.client().await?;
                let tx = locked_conversation(&mut client, store.team(), agent).await?;
                let next = next_generation(&tx, store.team(), agent).await?;
                let moved = tx
                    .execute(
                        "UPDATE troupe_transcripts SET generation = $3
                      WHERE team = $1 AND agent = $2 AND generation = 0",
                        &[&store.team(), &agent, &next],
                    )
                    .await
                    .map_err(|e| db_error("set a transcript aside", e))?;
                tx.commit()
                    .await
                    .map_err(|e| db_error("commit a set-aside transcript", e))?;
                Ok((moved > 0).then_some(next))
            })
            .await
    }

    /// Sets aside what the current conversation holds before its last compaction boundary (a
    /// line that starts `{"compaction"`), when that is at least `above` bytes: those lines move
    /// to the next free generation, which the `transcripts` rule then ages out, as the file
    /// store moves them to `<agent>.<n>.jsonl`. No load reads them: a conversation is loaded
    /// from its last boundary. Lines appended meanwhile come after the boundary and stay. The
    /// lines move `batch` at a time, each batch its own transaction under
    /// the set-aside lock; a gc cut between batches leaves the rest for the next. The lines
    /// moved.
    pub async fn set_aside_compacted(&self, above: i64, batch: usize) -> Result<u64, BackendError> {
        let store = &self.store;
        let agent = &self.agent;
        let found = self
            .store
            .bounded(async {
                let client = store.client().await?;
                client
                    .query_one(
                        "SELECT b.seq, (SELECT coalesce(sum(octet_length(line)), 0)::bigint
                                          FROM troupe_transcripts
                                         WHERE team = $1 AND agent = $2 AND generation = 0
                                           AND seq < b.seq)
                           FROM (SELECT max(seq) AS seq FROM troupe_transcripts
                                  WHERE team = $1 AND agent = $2 AND generation = 0
                                    AND line LIKE '{\"compaction\"%') b",
                        &[&store.team(), &agent],
                    )
                    .await
                    .map_err(|e| db_error("find a transcript's last compaction", e))
            })
            .await?;
        let (Some(boundary), before) = (found.get::<_, Option<i64>>(0), found.get::<_, i64>(1))
        else {
            return Ok(0);
        };
        if before < above {
            return Ok(0);
        }
        let limit = i64::try_from(batch).unwrap_or(i64::MAX);
        let (mut moved, mut to) = (0u64, None::<i32>);
        loop {
            let known = to;
            let (generation, n) = self
                .store
                .bounded(async {
                    let mut client = store.client().await?;
                    let tx = locked_conversation(&mut client, store.team(), agent).await?;
                    // The next free generation, chosen once: every batch goes to it.
                    let generation = match known {
                        Some(generation) => generation,
                        None => next_generation(&tx, store.team(), agent).await?,
                    };
                    let n = tx
                        .execute(
                            "UPDATE troupe_transcripts SET generation = $4
                              WHERE team = $1 AND agent = $2 AND generation = 0
                                AND seq IN (SELECT seq FROM troupe_transcripts
                                             WHERE team = $1 AND agent = $2 AND generation = 0
                                               AND seq < $3 ORDER BY seq LIMIT $5)",
                            &[&store.team(), &agent, &boundary, &generation, &limit],
                        )
                        .await
                        .map_err(|e| db_error("set a transcript's history aside", e))?;
                    tx.commit()
                        .await
                        .map_err(|e| db_error("commit a transcript's history set aside", e))?;
                    Ok((generation, n))
                })
                .await?;
            to = Some(generation);
            moved += n;
            if n < batch as u64 {
                return Ok(moved);
            }
        }
    }
}
