//! After a gc pass, the space its deletes (and the team's updates) left is made reusable:
//! `PgState` vacuums each of troupe's tables whose dead rows have passed a fifth of its live
//! ones — autovacuum's default rule — so the tables stay the size of what they hold even where
//! autovacuum is off or behind (off on the machines troupe is tested on).
//!
//! A plain `VACUUM` takes no lock a reader or writer of the table waits on; `SKIP_LOCKED`
//! passes over a table another vacuum (autovacuum's, another process's gc) is working on. A
//! table the database's user does not own is passed over by the server with a warning.

use super::retention::PgState;
use super::{db_error, retrying};
use crate::store::BackendError;

/// Dead rows a table may have before it is vacuumed, whatever its size (autovacuum's
/// `autovacuum_vacuum_threshold`).
const DEAD_ROWS_FLOOR: i64 = 50;
/// Dead rows, as a share of live ones, past which a table is vacuumed (autovacuum's
/// `autovacuum_vacuum_scale_factor`).
const DEAD_SHARE: f64 = 0.2;

impl PgState {
    /// Vacuums the tables past the rule; returns their names.
    pub(super) async fn vacuum(&self) -> Result<Vec<String>, BackendError> {
        let rows = self
            .rows(
                "read the dead rows of the team's tables",
                "SELECT relname::text FROM pg_stat_user_tables
                  WHERE schemaname = current_schema() AND relname LIKE 'troupe\\_%'
                    AND n_dead_tup > $1::bigint + $2::float8 * n_live_tup
                  ORDER BY relname",
                &[&DEAD_ROWS_FLOOR, &DEAD_SHARE],
            )
            .await?;
        let mut vacuumed = Vec::new();
        for row in rows {
            let table: String = row.get(0);
            // The name is the catalog's; only one of troupe's own names is put in the statement.
            if !is_plain_name(&table) {
                continue;
            }
            let store = &self.store;
            let statement = format!("VACUUM (SKIP_LOCKED) \"{table}\"");
            retrying(|| {
                store.bounded(async {
                    let client = store.client().await?;
                    // The simple protocol: VACUUM cannot run in the extended one's transaction.
                    client
                        .batch_execute(&statement)
                        .await
                        .map_err(|e| db_error("vacuum a table of the team", e))
                })
            })
            .await?;
            vacuumed.push(table);
        }
        Ok(vacuumed)
    }
}

/// Lower-case letters, digits and `_`: a name that needs no quoting rule of its own.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::is_plain_name;

    #[test]
    fn only_plain_names_reach_the_statement() {
        assert!(is_plain_name("troupe_messages_kept"));
        assert!(!is_plain_name("troupe_x\"; DROP TABLE t; --"));
        assert!(!is_plain_name("Troupe"));
        assert!(!is_plain_name(""));
    }
}
