//! `troupe compact`: an agent's conversation compacted outside a run, on files or in a
//! shared team's database, with the run's summary rules.

use std::sync::Arc;

use troupe_wire::AgentName;

use crate::agent::compactor::Compactor;
use crate::agent::context::{ContextBudget, Keep, REACTIVE_KEEP_GROUPS};
use crate::agent::memory::{Memory, MemoryQueries};
use crate::agent::observer::{CompactionReport, Trigger};
use crate::agent::transcript::FileTranscript;
use crate::agent::usage::RunUsage;
use crate::clock::{Clock, SystemClock};
use crate::ids::{IdGenerator, RandomIds};
use crate::layout::Layout;
use crate::model::ModelClient;
use crate::store::events::EventLog;
use crate::store::memory::MemoryStore;
use crate::store::postgres::events::PgEventMirror;
use crate::store::postgres::memory::PgMemory;
use crate::store::usage::UsageLog;
use crate::team::recorder::EventRecorder;

use super::options::{BootstrapError, LongLived, StoreChoice};
use super::run_lock::take_run_lock;
use super::shared;

/// What `troupe compact` did.
#[derive(Debug)]
pub enum Compacted {
    /// The conversation was compacted.
    Done(CompactionReport),
    /// Its older part was too small to compact: its length and size, unchanged.
    Nothing { messages: usize, bytes: usize },
}

/// `troupe compact`: compacts `agent`'s conversation now — under the run lock, so never while a
/// run is continuing it — keeping the last few exchanges, with the run's summary rules (a
/// summary retried once, else the older part dropped with a note) and, with `remember`,
/// memories extracted from what is summarised first. The tokens it spends go to `usage.jsonl`.
///
/// On a shared team (`store`: PostgreSQL) the conversation is the one in the team's database,
/// compacted under the team's lead lock as well (a running lead of the team refuses it,
/// `workspace_busy`, as a run holding the run lock does) and — for a teammate — only while no
/// worker holds its lease; the event goes to the team's stream too, the usage to its totals,
/// memories to its records.
pub async fn compact_conversation(
    workspace: &std::path::Path,
    agent: &AgentName,
    model: Arc<dyn ModelClient>,
    long_lived: &LongLived,
    store: &StoreChoice,
) -> Result<Compacted, BootstrapError> {
    let layout = Layout::new(workspace);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let shared = match store {
        StoreChoice::Files => None,
        StoreChoice::Postgres(options) => Some(shared::open_to_compact(options, agent).await?),
    };
    let transcript: Arc<dyn crate::agent::transcript::Transcript> = match &shared {
        None => {
            let path = layout.transcript(agent);
            if !path.exists() {
                return Err(BootstrapError::NoConversation {
                    agent: agent.to_string(),
                });
            }
            Arc::new(FileTranscript::new(path))
        }
        Some(compaction) => compaction.transcript.clone(),
    };
    let _run_lock = take_run_lock(&layout, clock.as_ref())?;
    let loaded = transcript.load().await?;
    if let Some(compaction) = &shared {
        if loaded.messages.is_empty() && loaded.boundaries == 0 {
            return Err(BootstrapError::NoSharedConversation {
                agent: agent.to_string(),
                team: compaction.store.team().to_owned(),
            });
        }
    }
    let mut history = crate::agent::History::restore(String::new(), loaded, transcript).await;
    let run_id = RandomIds.next_uuid().to_string();
    // The compaction is recorded in the event stream like a run's (trigger `manual`).
    let events = EventLog::open(
        &layout,
        clock.clone(),
        run_id.clone(),
        crate::secrets::process_redactor(),
    )?;
    let mirror = shared
        .as_ref()
        .map(|compaction| PgEventMirror::start(&compaction.store));
    if let Some(mirror) = &mirror {
        events.subscribe(mirror.clone());
    }
    let events = Arc::new(events);
    let usage_copy = shared::copies::usage(shared.as_ref().map(|compaction| &compaction.store));
    let usage = Arc::new(RunUsage::new(
        run_id,
        UsageLog::open(&layout, clock).with_copy(usage_copy),
    ));
    let mut compactor = Compactor::new(
        agent.clone(),
        ContextBudget::for_model(&long_lived.model_name, long_lived.context_window),
        model.clone(),
        usage.clone(),
        Arc::new(EventRecorder::new(events.clone())),
    );
    if long_lived.remember {
        let memory = match &shared {
            Some(compaction) => MemoryStore::on(Arc::new(PgMemory::new(compaction.store.clone()))),
            None => MemoryStore::open(&layout),
        };
        compactor.set_memory(Some(Arc::new(Memory::new(
            memory,
            MemoryQueries::new(model).with_usage(agent.clone(), usage),
        ))));
    }
    let messages = history.len();
    let bytes = crate::agent::context::micro::sent_bytes(history.messages(), &[]);
    let keep = Keep::Exchanges(REACTIVE_KEEP_GROUPS);
    let cancel = tokio_util::sync::CancellationToken::new();
    let system = history.system_prompt().to_owned();
    let outcome = compactor
        .compact(&mut history, &[], &system, keep, Trigger::Manual, &cancel)
        .await;
    if let Some(mirror) = mirror {
        // The team's stream gets the event before the command ends (a bounded wait).
        crate::sync::blocking(|| mirror.close());
    }
    Ok(match outcome {
        Some(report) => Compacted::Done(report),
        None => Compacted::Nothing { messages, bytes },
    })
}
