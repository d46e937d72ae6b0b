//! A model-based property test: random interleavings of send, claim, ack, release, quarantine,
//! duplicate sends and crash-and-recover (drop every instance, build new ones, recover), checked
//! against a model of which folder each message must be in — compared with the disk after every
//! step. With one instance claim order must be exact; with two instances (each with its own
//! index) every claim must still return a ready message and never one twice.

use proptest::collection::vec;
use proptest::prelude::*;
use troupe::store::mailbox::{
    AckOutcome, FileMailboxStore, MailboxCounts, MailboxError, MailboxState, MailboxStore,
};
use troupe::wire::MailboxMessage;

use super::{agent, block_on, message, Fixture};

#[derive(Debug, Clone)]
enum Op {
    Send { at: i64, via: usize },
    SendAgain(usize),
    Claim { via: usize },
    Ack(usize),
    AckChanged(usize),
    Release(usize),
    Quarantine(usize),
    Crash,
}

fn op(instances: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4i64, 0..instances).prop_map(|(at, via)| Op::Send { at, via }),
        1 => any::<usize>().prop_map(Op::SendAgain),
        4 => (0..instances).prop_map(|via| Op::Claim { via }),
        3 => any::<usize>().prop_map(Op::Ack),
        1 => any::<usize>().prop_map(Op::AckChanged),
        2 => any::<usize>().prop_map(Op::Release),
        1 => any::<usize>().prop_map(Op::Quarantine),
        1 => Just(Op::Crash),
    ]
}

/// Each message sent so far and the folder it must be in.
type Model = Vec<(MailboxMessage, MailboxState)>;

fn in_state(model: &Model, state: MailboxState) -> Vec<&MailboxMessage> {
    let mut found: Vec<_> = model
        .iter()
        .filter(|(_, s)| *s == state)
        .map(|(m, _)| m)
        .collect();
    found.sort_by_key(|m| (m.created_at_utc(), m.id()));
    found
}

async fn check_disk(fx: &Fixture, store: &FileMailboxStore, model: &Model) {
    let mut counts = MailboxCounts::default();
    for state in MailboxState::ALL {
        let expected: std::collections::BTreeSet<String> = in_state(model, state)
            .iter()
            .map(|m| m.id().to_string())
            .collect();
        assert_eq!(fx.ids_in("alice", state), expected, "folder {state}");
        match state {
            MailboxState::Ready => counts.ready = expected.len(),
            MailboxState::Processing => counts.processing = expected.len(),
            MailboxState::Done => counts.done = expected.len(),
            MailboxState::Quarantine => counts.quarantine = expected.len(),
        }
    }
    assert_eq!(store.counts(&agent("alice")).await.unwrap(), counts);
}

async fn run(ops: Vec<Op>, instances: usize) {
    let fx = Fixture::new();
    let alice = agent("alice");
    let mut stores: Vec<FileMailboxStore> = (0..instances).map(|_| fx.store()).collect();
    let mut model: Model = Vec::new();
    for op in ops {
        let pick = |i: usize| (!model.is_empty()).then(|| i % model.len());
        match op {
            Op::Send { at, via } => {
                let m = fx.msg("alice", at);
                stores[via].send(&m).await.unwrap();
                model.push((m, MailboxState::Ready));
            }
            Op::SendAgain(i) => {
                if let Some(i) = pick(i) {
                    let (m, state) = &model[i];
                    match stores[i % instances].send(m).await {
                        Err(MailboxError::Duplicate { state: s, .. }) => assert_eq!(s, *state),
                        other => panic!("duplicate send gave {other:?}"),
                    }
                }
            }
            Op::Claim { via } => {
                let got = stores[via].claim(&alice).await.unwrap();
                let ready = in_state(&model, MailboxState::Ready);
                match got {
                    None => assert!(ready.is_empty(), "claim missed {} ready", ready.len()),
                    Some(m) => {
                        if instances == 1 {
                            assert_eq!(&m, ready[0], "not the oldest");
                        } else {
                            assert!(ready.contains(&&m), "claimed a message not in ready/");
                        }
                        let entry = model.iter_mut().find(|(x, _)| x.id() == m.id()).unwrap();
                        entry.1 = MailboxState::Processing;
                    }
                }
            }
            Op::Ack(i) => {
                if let Some(i) = pick(i) {
                    let result = stores[i % instances].ack(&alice, &model[i].0).await;
                    match model[i].1 {
                        MailboxState::Processing => {
                            assert_eq!(result.unwrap(), AckOutcome::Acked);
                            model[i].1 = MailboxState::Done;
                        }
                        MailboxState::Done => assert_eq!(result.unwrap(), AckOutcome::AlreadyDone),
                        _ => assert!(matches!(result, Err(MailboxError::NotProcessing { .. }))),
                    }
                }
            }
            Op::AckChanged(i) => {
                if let Some(i) = pick(i) {
                    let (m, state) = &model[i];
                    if *state == MailboxState::Done {
                        let changed = message(m.id(), "alice", m.created_at_utc(), "changed");
                        assert!(matches!(
                            stores[i % instances].ack(&alice, &changed).await,
                            Err(MailboxError::AckConflict { .. })
                        ));
                    }
                }
            }
            Op::Release(i) => {
                if let Some(i) = pick(i) {
                    let result = stores[i % instances].release(&alice, model[i].0.id()).await;
                    if model[i].1 == MailboxState::Processing {
                        result.unwrap();
                        model[i].1 = MailboxState::Ready;
                    } else {
                        assert!(matches!(result, Err(MailboxError::NotProcessing { .. })));
                    }
                }
            }
            Op::Quarantine(i) => {
                if let Some(i) = pick(i) {
                    let result = stores[i % instances]
                        .quarantine(&alice, model[i].0.id(), "test")
                        .await;
                    if matches!(model[i].1, MailboxState::Processing | MailboxState::Ready) {
                        assert_eq!(result.unwrap().from, model[i].1);
                        model[i].1 = MailboxState::Quarantine;
                    } else {
                        assert!(matches!(result, Err(MailboxError::NotProcessing { .. })));
                    }
                }
            }
            Op::Crash => {
                drop(stores);
                stores = (0..instances).map(|_| fx.store()).collect();
                let report = stores[0].recover(&alice).await.unwrap();
                let mut expected: Vec<_> = in_state(&model, MailboxState::Processing)
                    .iter()
                    .map(|m| m.id())
                    .collect();
                expected.sort();
                assert_eq!(report.released, expected);
                assert!(report.quarantined.is_empty());
                for entry in model.iter_mut() {
                    if entry.1 == MailboxState::Processing {
                        entry.1 = MailboxState::Ready;
                    }
                }
            }
        }
        check_disk(&fx, &stores[0], &model).await;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn one_instance_matches_the_model_exactly(ops in vec(op(1), 1..40)) {
        block_on(run(ops, 1));
    }

    #[test]
    fn two_instances_lose_and_duplicate_nothing(ops in vec(op(2), 1..40)) {
        block_on(run(ops, 2));
    }
}
