//! Wakes sent after their rows commit, a batch at a time.
//!
//! A `NOTIFY` in the transaction that inserts a message would make its wake atomic with the row,
//! but PostgreSQL serialises every committing transaction that notified — it holds one lock for
//! the whole database from the notify's queueing until the commit's WAL flush — so durable sends
//! from many connections could not share a flush and ran at under half the commits the server
//! allows (`troupe-bench pg`). So a send commits its row alone, and then asks this process's
//! [`Notifier`] to announce it: one task on the store's runtime sends every agent asked for since
//! its last round in one statement, on a connection whose commits do not wait for the WAL flush
//! (a wake is not data; it only says where to look). A send returns once a round that began after
//! its commit is done, so its wake is never seen before its row and never left unsent by a
//! process that goes on running. Waiting for the round is itself a second round trip, so sends
//! measure no faster yet (0.45–0.49 × the server's commits); not waiting measured 0.60–0.67 ×
//! but needs every short-lived command to flush its wakes before it exits (BENCHMARKS.md).
//!
//! What it gives up: a process killed between its commit and its round leaves the row without a
//! wake. Every process of a team looks at its agents' mailboxes again at every look — a tenth
//! of the lease, between 50 ms and 1 s (`bootstrap::distributed::wakeups`) — which makes up for
//! it: nothing is lost, only late by up to one look.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tokio::sync::{watch, Notify};

use super::{db_error, PgStore};
use crate::store::BackendError;
use crate::sync::lock;

/// The agents waiting for a wake, and the numbering of rounds.
pub(crate) struct Notifier {
    state: Mutex<Pending>,
    /// Told when something is pending.
    kick: Notify,
    /// The last round done.
    done: watch::Sender<u64>,
}

struct Pending {
    agents: BTreeSet<String>,
    /// The round the agents now pending go out in.
    next_round: u64,
}

impl Notifier {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(Pending {
                agents: BTreeSet::new(),
                next_round: 1,
            }),
            kick: Notify::new(),
            done: watch::Sender::new(0),
        }
    }

    /// Adds `agent` to the next round; the round it goes out in.
    fn ask(&self, agent: &str) -> u64 {
        let mut pending = lock(&self.state);
        pending.agents.insert(agent.to_owned());
        let round = pending.next_round;
        drop(pending);
        self.kick.notify_one();
        round
    }

    /// Asks for a wake of `agent` and waits until a round that carries it is done.
    async fn announced(&self, agent: &str) -> Result<(), BackendError> {
        let mut done = self.done.subscribe();
        let round = self.ask(agent);
        done.wait_for(|last| *last >= round)
            .await
            .map_err(|_| BackendError::new("store_unavailable", "the database runtime stopped"))?;
        Ok(())
    }

    /// Takes what is pending as a round: its number and agents.
    fn take(&self) -> (u64, BTreeSet<String>) {
        let mut pending = lock(&self.state);
        let round = pending.next_round;
        pending.next_round += 1;
        (round, std::mem::take(&mut pending.agents))
    }
}

impl PgStore {
    /// Announces a committed change to `agent`'s mailbox: returns once a wake sent after this
    /// call began is out (see the module's documentation). A wake that fails is logged: the
    /// next look makes up for it.
    pub(crate) async fn wake(&self, agent: &str) -> Result<(), BackendError> {
        self.bounded(self.notifier().announced(agent)).await
    }

    /// The task sending the rounds, on the store's own runtime. It holds the store weakly, so
    /// the store can go (and with it its runtime, which ends the task).
    pub(super) fn start_notifier(&self) {
        let weak = std::sync::Arc::downgrade(&self.shared);
        let notifier = self.notifier().clone();
        self.handle().spawn(async move {
            loop {
                notifier.kick.notified().await;
                let Some(shared) = weak.upgrade() else { return };
                let store = PgStore { shared };
                let (round, agents) = notifier.take();
                if !agents.is_empty() {
                    if let Err(e) = store.bounded(send_round(&store, &agents)).await {
                        tracing::warn!(
                            "could not wake {} agent(s) after their messages: {e} (they look \
                             again at the next look)",
                            agents.len()
                        );
                    }
                }
                notifier.done.send_replace(round);
            }
        });
    }
}

async fn send_round(store: &PgStore, agents: &BTreeSet<String>) -> Result<(), BackendError> {
    let agents: Vec<&str> = agents.iter().map(String::as_str).collect();
    super::retrying(|| async {
        let client = store.claim_client().await?;
        client
            .execute(
                "SELECT pg_notify($1, a) FROM unnest($2::text[]) a",
                &[&store.channel(), &agents],
            )
            .await
            .map_err(|e| db_error("wake the recipients", e))?;
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::super::testing::TestDb;
    use super::super::wake::{listen, Wake};
    use super::*;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    /// The next wake for an agent, skipping rescans; `None` after 10 s.
    async fn next_agent(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Wake>) -> Option<String> {
        loop {
            match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
                Ok(Some(Wake::Agent(name))) => return Some(name),
                Ok(Some(Wake::Rescan)) => {}
                _ => return None,
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_agent_asked_for_is_woken_and_each_wake_is_out_when_it_returns() {
        let Some(db) = TestDb::create() else { return };
        let store = db.store("team-a");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        listen(&store, tx, stop.clone());
        assert_eq!(rx.recv().await, Some(Wake::Rescan), "listening");

        // Many at once: rounds batch them, and none is left out.
        let mut asks = Vec::new();
        for i in 0..40 {
            let store = store.clone();
            asks.push(tokio::spawn(async move {
                store.wake(&format!("agent{i}")).await
            }));
        }
        for ask in asks {
            ask.await.unwrap().unwrap();
        }
        // Every wake was committed before its call returned: a notification sent only now, on
        // another connection, arrives after all of them (the server delivers in commit order).
        db.execute(&format!(
            "SELECT pg_notify('{}', 'marker')",
            store.channel()
        ))
        .unwrap();
        let mut seen = BTreeSet::new();
        loop {
            let name = next_agent(&mut rx).await.expect("a wake within 10 s");
            if name == "marker" {
                break;
            }
            seen.insert(name);
        }
        let wanted: BTreeSet<String> = (0..40).map(|i| format!("agent{i}")).collect();
        assert_eq!(seen, wanted);
        stop.cancel();
    }

    #[tokio::test]
    async fn an_announcement_waits_for_the_round_that_carries_it() {
        use futures_util::FutureExt;
        let notifier = Notifier::new();
        let mut first = Box::pin(notifier.announced("alice"));
        assert!(
            first.as_mut().now_or_never().is_none(),
            "asked, not yet sent"
        );
        let (round, _) = notifier.take();
        let mut second = Box::pin(notifier.announced("bob"));
        assert!(second.as_mut().now_or_never().is_none());
        notifier.done.send_replace(round);
        assert!(first.as_mut().now_or_never().is_some(), "its round is done");
        assert!(
            second.as_mut().now_or_never().is_none(),
            "asked during round 1: only round 2 carries it"
        );
        let (round, agents) = notifier.take();
        assert_eq!(
            agents.into_iter().collect::<Vec<_>>(),
            vec!["bob".to_owned()]
        );
        notifier.done.send_replace(round);
        assert!(second.as_mut().now_or_never().is_some());
    }

    #[tokio::test]
    async fn a_wake_asked_for_during_a_round_goes_out_in_the_next() {
        let notifier = Notifier::new();
        assert_eq!(notifier.ask("alice"), 1);
        let (round, agents) = notifier.take();
        assert_eq!((round, agents.len()), (1, 1));
        // Asked while round 1 is on its way: round 1 cannot carry it.
        assert_eq!(notifier.ask("bob"), 2);
        assert_eq!(notifier.ask("bob"), 2);
        let (round, agents) = notifier.take();
        assert_eq!(round, 2);
        assert_eq!(
            agents.into_iter().collect::<Vec<_>>(),
            vec!["bob".to_owned()]
        );
    }
}
