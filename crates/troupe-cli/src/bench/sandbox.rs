//! `spawn_overhead_ms_p50`: what confining a command costs — the median time from spawning
//! `sh -c true` to its exit, confined (Landlock and namespaces, the default mechanism) minus
//! unconfined, sampled alternately so that the machine's noise falls on both. The bubblewrap
//! fallback is measured too when `bwrap` is installed. The sandbox is built for this user's real
//! home (its protected paths decide how much the ruleset has to grant around them).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::process::{CappedOutput, Ending, GroupChild, Stop};
use troupe::sandbox::{Host, Mechanism, Network, Policy, Sandbox};

use super::stats::{p50_us, round2};
use crate::result::{fail, BenchResult};

pub fn run(dir: &Path, rounds: usize) -> BenchResult<Value> {
    let workspace = tempfile::Builder::new()
        .prefix("troupe-bench-sandbox-")
        .tempdir_in(dir)
        .map_err(|e| fail("workspace")(e.to_string()))?;
    let ws = workspace.path();
    std::fs::create_dir_all(ws.join(".troupe")).map_err(|e| fail("workspace")(e.to_string()))?;
    let host = Host::from_env();
    let on = |mechanism: &str| {
        Sandbox::new_on(
            &Policy::default(),
            ws,
            &Host {
                mechanism: Some(mechanism.to_owned()),
                ..host.clone()
            },
        )
    };
    // The network allowed: no network namespace to create (what that part costs).
    let networked = Sandbox::new_on(
        &Policy {
            network: Network::On,
            ..Policy::default()
        },
        ws,
        &Host {
            mechanism: Some("landlock".to_owned()),
            ..host.clone()
        },
    )
    .map_err(|e| fail("landlock")(e.to_string()))?;
    let landlock = on("landlock").map_err(|e| fail("landlock")(e.to_string()))?;
    let abi = match landlock.mechanism() {
        Some(Mechanism::Landlock { abi }) => *abi,
        _ => 0,
    };
    let bubblewrap = on("bubblewrap").ok();
    let plain = Sandbox::off(ws);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail("runtime")(e.to_string()))?;
    let rounds = rounds.max(1);
    let (mut unconfined, mut confined, mut wrapped) = (Vec::new(), Vec::new(), Vec::new());
    let mut with_network = Vec::new();
    runtime.block_on(async {
        for _ in 0..rounds {
            unconfined.push(spawn_true(&plain, ws).await?);
            confined.push(spawn_true(&landlock, ws).await?);
            with_network.push(spawn_true(&networked, ws).await?);
            if let Some(b) = &bubblewrap {
                wrapped.push(spawn_true(b, ws).await?);
            }
        }
        Ok::<_, String>(())
    })?;
    let base = p50_us(&mut unconfined) / 1e3;
    let with_landlock = p50_us(&mut confined) / 1e3;
    let mut result = json!({
        "suite": "sandbox",
        "rounds": rounds,
        "landlock_abi": abi,
        "spawn_unconfined_ms_p50": round2(base),
        "spawn_landlock_ms_p50": round2(with_landlock),
        "spawn_overhead_ms_p50": round2(with_landlock - base),
        "spawn_landlock_network_on_ms_p50": round2(p50_us(&mut with_network) / 1e3),
    });
    if !wrapped.is_empty() {
        let with_bwrap = p50_us(&mut wrapped) / 1e3;
        result["spawn_bubblewrap_ms_p50"] = json!(round2(with_bwrap));
        result["spawn_overhead_bubblewrap_ms_p50"] = json!(round2(with_bwrap - base));
    }
    Ok(result)
}

/// Spawns `sh -c true` under `sandbox` and waits for it: the time from spawn to exit.
async fn spawn_true(sandbox: &Sandbox, ws: &Path) -> Result<Duration, String> {
    let started = Instant::now();
    let group = GroupChild::spawn_confined("true", ws, sandbox)
        .map_err(|e| format!("spawn under {}: {e}", sandbox.describe()))?;
    let mut output = CappedOutput::head_and_tail(1024);
    let ending = group
        .run(&mut output, None, &CancellationToken::new(), Stop::Kill)
        .await
        .map_err(|e| format!("wait: {e}"))?;
    match ending {
        Ending::Exited(status) if status.success() => Ok(started.elapsed()),
        other => Err(format!(
            "`true` under {} ended {other:?}: {}",
            sandbox.describe(),
            output.render()
        )),
    }
}
