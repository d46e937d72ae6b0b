//! Ids a person types, and reviews racing as real processes.
//!
//! - Two `troupe review` processes racing on one pending plan, repeated, while this process
//!   consumes the teammate's mailbox as a running team does: the winner answers, the loser prints
//!   exactly one line (no warning about "finishing" the winner's delivery, which it would print
//!   — and deliver a second copy — when it missed the winner's message being claimed) and the
//!   plan is answered once.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use troupe::clock::SystemClock;
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxStore};
use troupe::wire::{AgentName, TeammateStatus};

use super::review::{answers_to_writer, workspace_with_plans};
use super::support::{assert_fails, command, ran};

#[tokio::test]
async fn a_losing_review_prints_one_line_and_touches_no_live_delivery() {
    const ROUNDS: usize = 10;
    let ids: Vec<&'static str> = (0..ROUNDS)
        .map(|i| &*Box::leak(format!("0195a1b2-0000-4000-8000-0000000001{i:02}").into_boxed_str()))
        .collect();
    let (_dir, ws, plans) = workspace_with_plans(TeammateStatus::Idle, &ids).await;
    // The running team's side: the writer's answers are claimed and acked as they arrive.
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (ws, stop) = (ws.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let mailbox = FileMailboxStore::new(&Layout::new(&ws), Arc::new(SystemClock));
            let writer = AgentName::parse("writer").unwrap();
            while !stop.load(Ordering::SeqCst) {
                runtime.block_on(async {
                    if !Layout::new(&ws).mailbox_dir(&writer).is_dir() {
                        return;
                    }
                    if let Ok(Some(m)) = mailbox.claim(&writer).await {
                        let _ = mailbox.ack(&writer, &m).await;
                    }
                });
                std::thread::yield_now();
            }
        })
    };
    for (round, plan) in plans.iter().enumerate() {
        let children: Vec<_> = ["--approve", "--reject"]
            .iter()
            .map(|decision| {
                command(&ws)
                    .args(["review", &plan.to_string(), decision])
                    .args(["--workspace", ws.to_str().unwrap()])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let results: Vec<_> = children
            .into_iter()
            .map(|c| ran(c.wait_with_output().unwrap()))
            .collect();
        let winners = results.iter().filter(|r| r.code == 0).count();
        assert_eq!(winners, 1, "round {round}: {results:#?}");
        for loser in results.iter().filter(|r| r.code != 0) {
            assert_fails(loser, 1, "was already answered");
        }
        let answers: Vec<_> = answers_to_writer(&ws)
            .await
            .into_iter()
            .filter(|a| a.request_id() == *plan)
            .collect();
        assert_eq!(answers.len(), 1, "round {round}: one answer");
    }
    stop.store(true, Ordering::SeqCst);
    consumer.join().unwrap();
}
