//! Wakes sent after their rows commit, a batch at a time.
//!
//! A `NOTIFY` in the transaction that inserts a message would make its wake atomic with the row,
//! but PostgreSQL serialises every committing transaction that notified — it holds one lock for
//! the whole database from the notify's queueing until the commit's WAL flush — so durable sends
//! from many connections could not share a flush and ran at under half the commits the server
//! allows (`troupe-bench pg`). So a send commits its row alone and then asks this process's
//! [`Notifier`] for the wake, without waiting for it: one task on the store's runtime sends every
//! agent asked for since its last round in one statement, on a connection whose commits do not
//! wait for the WAL flush (a wake is not data; it only says where to look). A wake is asked for
//! only after its row committed, so it is never seen before the row; waiting for it too would
//! put a second round trip into every send (0.45 × the server's commits instead of 0.6 ×).
//!
//! A store that is dropped waits (at most [`FLUSH_WAIT`]) for the wakes asked before, so a
//! command that sends and exits (`troupe send`) still wakes its recipient. What is given up: a
//! process killed between a commit and its round leaves the row without a wake. Every process of
//! a team looks at its agents' mailboxes again at every look — a tenth of the lease, between
//! 50 ms and 1 s (`bootstrap::distributed::wakeups`) — which makes up for it: nothing is lost,
//! only late by up to one look.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::{watch, Notify};

use super::{db_error, PgStore};
use crate::store::BackendError;
use crate::sync::lock;

/// How long a dropped store waits for the wakes asked before it was dropped.
pub(crate) const FLUSH_WAIT: Duration = Duration::from_secs(1);
/// How long one round may take (an unreachable server): its wakes are then given up.
const ROUND_WAIT: Duration = Duration::from_secs(3);

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

    /// The round that carries the latest wake asked for (0: none yet): what a flush waits for.
    fn asked(&self) -> u64 {
        let pending = lock(&self.state);
        if pending.agents.is_empty() {
            pending.next_round - 1
        } else {
            pending.next_round
        }
    }

    /// Waits until the wakes asked so far are out, for at most `bound`; `home` (the store's
    /// runtime, which sends them) runs the wait, so any thread may call this.
    pub(super) fn flush_blocking(&self, home: &tokio::runtime::Handle, bound: Duration) {
        let target = self.asked();
        if *self.done.borrow() >= target {
            return;
        }
        let mut done = self.done.subscribe();
        let (tx, rx) = std::sync::mpsc::channel();
        home.spawn(async move {
            let _ = done.wait_for(|last| *last >= target).await;
            let _ = tx.send(());
        });
        if rx.recv_timeout(bound).is_err() {
            tracing::warn!("some wakes were not sent before the store closed");
        }
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
    /// Asks for a wake of `agent` after a committed change to its mailbox; it goes out in the
    /// notifier's next round (see the module's documentation).
    pub(crate) fn wake(&self, agent: &str) {
        self.notifier().ask(agent);
    }

    /// The task sending the rounds, on the store's own runtime. It holds the claim pool and the
    /// notifier, not the store, so the store can go (and with it its runtime, which ends the
    /// task).
    pub(super) fn start_notifier(&self, claims: Pool) {
        let notifier = self.notifier().clone();
        let channel = self.channel();
        self.handle().spawn(async move {
            loop {
                notifier.kick.notified().await;
                let (round, agents) = notifier.take();
                if !agents.is_empty() {
                    let sent =
                        tokio::time::timeout(ROUND_WAIT, send_round(&claims, &channel, &agents))
                            .await
                            .unwrap_or_else(|_| {
                                Err(BackendError::new(
                                    "store_timeout",
                                    format!("no answer within {ROUND_WAIT:?}"),
                                ))
                            });
                    if let Err(e) = sent {
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

/// One round: every agent of `agents` notified on `channel`, in one statement.
async fn send_round(
    claims: &Pool,
    channel: &str,
    agents: &BTreeSet<String>,
) -> Result<(), BackendError> {
    let agents: Vec<&str> = agents.iter().map(String::as_str).collect();
    let client = claims
        .get()
        .await
        .map_err(|e| BackendError::new("store_unavailable", format!("wake the recipients: {e}")))?;
    client
        .execute(
            "SELECT pg_notify($1, a) FROM unnest($2::text[]) a",
            &[&channel, &agents],
        )
        .await
        .map_err(|e| db_error("wake the recipients", e))?;
    Ok(())
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
    async fn every_agent_asked_for_is_woken() {
        let Some(db) = TestDb::create() else { return };
        let store = db.store("team-a");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        listen(&store, tx, stop.clone());
        assert_eq!(rx.recv().await, Some(Wake::Rescan), "listening");
        // Many at once, from many tasks: rounds batch them, and none is left out.
        let mut asks = Vec::new();
        for i in 0..40 {
            let store = store.clone();
            asks.push(tokio::spawn(
                async move { store.wake(&format!("agent{i}")) },
            ));
        }
        for ask in asks {
            ask.await.unwrap();
        }
        let wanted: BTreeSet<String> = (0..40).map(|i| format!("agent{i}")).collect();
        let mut seen = BTreeSet::new();
        while seen != wanted {
            seen.insert(next_agent(&mut rx).await.expect("a wake within 10 s"));
        }
        stop.cancel();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_dropped_right_after_asking_still_sends_the_wake() {
        let Some(db) = TestDb::create() else { return };
        let listening = db.store("team-a");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        listen(&listening, tx, stop.clone());
        assert_eq!(rx.recv().await, Some(Wake::Rescan), "listening");
        // A command that sends and exits: its store goes right after the send.
        for i in 0..5 {
            let sender = db.store("team-a");
            sender.wake(&format!("late{i}"));
            drop(sender);
            assert_eq!(
                next_agent(&mut rx).await.as_deref(),
                Some(format!("late{i}").as_str())
            );
        }
        stop.cancel();
    }

    #[tokio::test]
    async fn a_flush_waits_for_the_round_of_the_latest_wake() {
        let notifier = Notifier::new();
        assert_eq!(notifier.asked(), 0, "nothing asked: nothing to wait for");
        notifier.ask("alice");
        assert_eq!(notifier.asked(), 1);
        let (round, _) = notifier.take();
        assert_eq!(notifier.asked(), 1, "round 1 is on its way");
        notifier.ask("bob");
        assert_eq!(notifier.asked(), 2);
        notifier.done.send_replace(round);
        assert_eq!(notifier.asked(), 2);
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
