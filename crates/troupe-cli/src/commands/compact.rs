//! `troupe compact [--agent A] [--store URL]`: compacts one agent's conversation now (SPEC §9),
//! with the model the run would use (or `--model-script`), under the workspace's run lock — on
//! a shared team (`--store`, `TROUPE_STORE_URL`, `[store] url`), the conversation in the
//! team's database, under the team's lead lock too.

use std::path::Path;

use serde_json::json;
use troupe::agent::transcript::BoundaryKind;
use troupe::bootstrap::{compact_conversation, Compacted, LongLived};
use troupe::wire::AgentName;

use crate::agent_setup::{context_window, models};
use crate::args::{ModelFlags, StoreFlags};
use crate::error::CliError;
use crate::render;

pub async fn compact(
    workspace: &Path,
    agent: &str,
    flags: &ModelFlags,
    no_memory: bool,
    json: bool,
    store: &StoreFlags,
) -> Result<(), CliError> {
    let agent = AgentName::parse(agent).map_err(|e| CliError::usage(format!("--agent: {e}")))?;
    let loaded = crate::trust::load(workspace, crate::trust::Use::Run)?;
    let store = crate::store_choice::store_choice(store, &loaded.settings, false)?;
    let context_window = context_window(flags, &loaded.settings)?;
    let models = models(flags, &loaded)?;
    let long_lived = LongLived {
        model_name: models.name.clone(),
        context_window,
        remember: !no_memory,
        ..LongLived::default()
    };
    let model = models.chooser.model_for(&agent);
    let outcome = compact_conversation(workspace, &agent, model, &long_lived, &store)
        .await
        .map_err(|e| CliError::coded(&e))?;
    let (value, text) = match outcome {
        Compacted::Done(report) => {
            let how = match report.kind {
                BoundaryKind::Summary => "summary",
                BoundaryKind::Dropped => "dropped",
            };
            (
                json!({
                    "agent": agent.as_str(), "compacted": true, "kind": how,
                    "messages_before": report.messages_before,
                    "messages_after": report.messages_after,
                    "bytes_before": report.bytes_before, "bytes_after": report.bytes_after,
                }),
                format!(
                    "{agent}: {} messages → {} ({} KB → {} KB); {}\n",
                    report.messages_before,
                    report.messages_after,
                    report.bytes_before / 1024,
                    report.bytes_after / 1024,
                    match report.kind {
                        BoundaryKind::Summary => "the older history was summarised",
                        BoundaryKind::Dropped =>
                            "no valid summary came back, so the older history was dropped with a note",
                    }
                ),
            )
        }
        // Every documented field, unchanged values included.
        Compacted::Nothing { messages, bytes } => (
            json!({
                "agent": agent.as_str(), "compacted": false, "kind": null,
                "messages_before": messages, "messages_after": messages,
                "bytes_before": bytes, "bytes_after": bytes,
            }),
            format!("{agent}: nothing older to compact ({messages} messages)\n"),
        ),
    };
    if json {
        render::print_json(&value)
    } else {
        render::print_text(&text)
    }
}
