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
//! only after its row committed, so it is never seen before the row; waiting for it as well would
//! put a second round trip into every send (0.45–0.49 × the server's commits instead of 0.6 ×:
//! `BENCHMARKS.md`).
//!
//! A mailbox store that goes away waits (at most [`FLUSH_WAIT`]) for the rounds of the wakes it
//! asked for, so a command that sends and exits (`troupe send`, `troupe approve`) still wakes
//! its recipient. What is given up: a process killed between a commit and its round leaves the
//! row without a wake. Every process of a team looks at its agents' mailboxes again at every
//! look — a tenth of the lease, between 50 ms and 1 s (`bootstrap::shared::wakeups`) —
//! which makes up for it: nothing is lost, only late by up to one look.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::{db_error, PgStore, RUNTIME_THREAD};
use crate::store::BackendError;
use crate::sync::lock;

/// How long a mailbox store that goes away waits for the wakes it asked for.
pub(crate) const FLUSH_WAIT: Duration = Duration::from_secs(1);

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

    /// The round that carries the latest wake asked for (0: none yet).
    #[cfg(test)]
    fn asked(&self) -> u64 {
        let pending = lock(&self.state);
        if pending.agents.is_empty() {
            pending.next_round - 1
        } else {
            pending.next_round
        }
    }

    /// Whether the round `round` (and every round before it) is done.
    fn sent(&self, round: u64) -> bool {
        *self.done.borrow() >= round
    }

    /// Waits until the round `round` is done.
    async fn wait_sent(&self, round: u64) -> Result<(), BackendError> {
        let mut done = self.done.subscribe();
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
    /// Asks for a wake of `agent` after a committed change to its mailbox; returns the round
    /// that carries it, which [`Self::wakes_sent`] and [`Self::wait_for_wakes`] wait for (see
    /// the module's documentation).
    pub(crate) fn wake(&self, agent: &str) -> u64 {
        self.notifier().ask(agent)
    }

    /// Waits until the round `round` — and with it every wake asked for before it — is out. A
    /// round that failed counts as done: the next look makes up for its wakes.
    pub(crate) async fn wakes_sent(&self, round: u64) -> Result<(), BackendError> {
        if self.notifier().sent(round) {
            return Ok(());
        }
        self.bounded(self.notifier().wait_sent(round)).await
    }

    /// [`Self::wakes_sent`] from a thread that cannot await (a store being dropped), for at most
    /// `bound`: the store's runtime runs the wait. On one of the stores' own threads it does not
    /// wait (that could hold up the very round it waits for); the next look makes up for it.
    pub(crate) fn wait_for_wakes(&self, round: u64, bound: Duration) {
        if self.notifier().sent(round) {
            return;
        }
        if std::thread::current().name() == Some(RUNTIME_THREAD) {
            tracing::debug!("wakes left to their round: dropped on the store's own runtime");
            return;
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let store = self.clone();
        self.handle().spawn(async move {
            let _ = tx.send(store.wakes_sent(round).await);
        });
        match rx.recv_timeout(bound) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::info!("wakes not confirmed: {e} (the next look makes up)"),
            Err(_) => tracing::info!(
                "wakes not out within {bound:?} of the store going (the next look makes up)"
            ),
        }
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
                let round = store.wake(&format!("agent{i}"));
                store.wakes_sent(round).await
            }));
        }
        for ask in asks {
            ask.await.unwrap().unwrap();
        }
        // Every wake was committed before its wait returned: a notification sent only now, on
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_mailbox_store_dropped_right_after_a_send_still_wakes_its_recipient() {
        use crate::clock::{Clock, ManualClock};
        use crate::store::mailbox::MailboxStore;
        use crate::store::postgres::PgMailboxStore;
        use troupe_wire::{
            AgentName, Content, MailboxMessage, MessageId, OrdinaryKind, OrdinaryMessage, UtcTime,
        };

        let Some(db) = TestDb::create() else { return };
        let listening = db.store("team-sends-and-exits");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        listen(&listening, tx, stop.clone());
        assert_eq!(rx.recv().await, Some(Wake::Rescan), "listening");
        let now = UtcTime::from_unix_millis(1_785_398_400_000).unwrap();
        let clock: std::sync::Arc<dyn Clock> = std::sync::Arc::new(ManualClock::new(now));
        // A command that sends and exits: its mailbox store goes right after the send returns,
        // and the process with it — nothing runs the store's rounds after that. So the drop
        // returns only once the send's wake is out.
        let sending = db.store("team-sends-and-exits");
        for i in 0..5u128 {
            let sender =
                PgMailboxStore::new(sending.clone(), clock.clone(), "send:1", Duration::ZERO);
            let to = AgentName::parse(&format!("late{i}")).unwrap();
            let message = MailboxMessage::Ordinary(OrdinaryMessage {
                id: MessageId::parse(&format!("00000000-0000-4000-8000-{:012x}", i + 1)).unwrap(),
                sender: AgentName::parse("user").unwrap(),
                recipient: to.clone(),
                kind: OrdinaryKind::Message,
                content: Content::parse("hello").unwrap(),
                created_at_utc: now,
            });
            sender.send(&message).await.unwrap();
            drop(sender);
            let notifier = sending.notifier();
            assert!(
                notifier.sent(notifier.asked()),
                "dropped with its wake still to send"
            );
            assert_eq!(next_agent(&mut rx).await.as_deref(), Some(to.as_str()));
        }
        stop.cancel();
    }

    #[tokio::test]
    async fn a_wait_for_wakes_lasts_until_the_round_that_carries_them() {
        use futures_util::FutureExt;
        let notifier = Notifier::new();
        let asked = notifier.ask("alice");
        let mut first = Box::pin(notifier.wait_sent(asked));
        assert!(
            first.as_mut().now_or_never().is_none(),
            "asked, not yet sent"
        );
        let (round, _) = notifier.take();
        let mut second = Box::pin(notifier.wait_sent(notifier.ask("bob")));
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
