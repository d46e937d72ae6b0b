//! A run's event stream and traces, opened at its start: the stream every runner and the team
//! report into (copied to the team's stream in the database on a shared team), and the
//! OpenTelemetry traces when they are asked for.

use std::sync::Arc;

use crate::layout::Layout;
use crate::permissions::observed::ObservedApproval;
use crate::store::events::{kinds, EventLog, EventSink, RUN_AGENT};
use crate::store::postgres::events::PgEventMirror;
use crate::store::postgres::PgRoster;
use crate::team::recorder::{Both, EventRecorder};
use crate::telemetry::{RunKey, RunRole, Telemetry};

use super::options::{BootstrapError, TeamSettings};
use super::shared::PgParts;

/// Opens this run's event stream, says the run started, and puts the recorder in front of the
/// caller's observers, so that every runner and the team report into the stream.
///
/// In a shared team every event is also copied to the team's stream in the database
/// (`troupe log --store`), from the first one on.
pub(super) async fn open_events(
    layout: &Layout,
    settings: &mut TeamSettings,
    pg: Option<&PgParts>,
    role: &str,
) -> Result<(Arc<EventLog>, Option<Arc<Telemetry>>), BootstrapError> {
    let run_id = settings.ids.next_uuid().to_string();
    let log = EventLog::open(
        layout,
        settings.clock.clone(),
        run_id.clone(),
        settings.redactor.clone(),
    )?;
    for listener in &settings.events.listeners {
        log.subscribe(listener.clone());
    }
    if let Some(parts) = pg {
        log.subscribe(PgEventMirror::start(&parts.store));
    }
    let log = Arc::new(log);
    let recorder = Arc::new(EventRecorder::new(log.clone()));
    settings.run_observer = Arc::new(Both(recorder.clone(), settings.run_observer.clone()));
    settings.team_observer = Arc::new(Both(recorder, settings.team_observer.clone()));
    let telemetry = open_telemetry(settings, pg, role, &run_id).await;
    settings.approval = Arc::new(ObservedApproval::new(
        settings.approval.clone(),
        log.clone(),
    ));
    let mut started = kinds::fields(serde_json::json!({
        "prompt": kinds::preview(&settings.events.prompt),
        "workspace": settings.workspace.display().to_string(),
        "model": settings.long_lived.model_name,
        "sandbox": settings.sandbox.sandbox.describe(),
    }));
    if settings.events.prompt.is_empty() {
        started.insert("continued".into(), true.into());
    }
    log.emit(RUN_AGENT, kinds::RUN_STARTED, started);
    Ok((log, telemetry))
}

/// Starts the run's traces when they are asked for, and puts their observer in front of the
/// others. A run of a team on files is its own trace; a shared team's run is the trace of
/// its lead process, which each worker finds in the team's registry at each turn (so that the
/// next run's work goes to the next trace). Telemetry that cannot start is a warning:
/// it never fails a run.
async fn open_telemetry(
    settings: &mut TeamSettings,
    pg: Option<&PgParts>,
    role: &str,
    run_id: &str,
) -> Option<Arc<Telemetry>> {
    let options = settings.events.telemetry.as_ref()?;
    let lead = role == "lead";
    let (key, team) = match pg {
        None => (
            RunKey::run(run_id),
            settings
                .workspace
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        Some(parts) => {
            let team = parts.store.team().to_owned();
            let key = if lead {
                RunKey::shared(&team, &parts.holder)
            } else {
                team_lead_key(&parts.roster, &team)
                    .await
                    .unwrap_or_else(|| RunKey::shared(&team, ""))
            };
            (key, team)
        }
    };
    let role = RunRole {
        key,
        lead,
        team: team.clone(),
        sandbox: settings.sandbox.sandbox.mode().to_string(),
        redactor: settings.redactor.clone(),
    };
    let telemetry = match Telemetry::start(options, role) {
        Ok(telemetry) => Arc::new(telemetry),
        Err(e) => {
            tracing::warn!("{e}; the run goes on without traces");
            return None;
        }
    };
    if let (Some(parts), false) = (pg, lead) {
        let roster = parts.roster.clone();
        telemetry.follow(move || {
            let (roster, team) = (roster.clone(), team.clone());
            Box::pin(async move { team_lead_key(&roster, &team).await })
        });
    }
    let observer = telemetry.observer();
    settings.run_observer = Arc::new(Both(observer.clone(), settings.run_observer.clone()));
    settings.team_observer = Arc::new(Both(observer, settings.team_observer.clone()));
    Some(telemetry)
}

/// The run key of the team's running lead, from the worker registry.
async fn team_lead_key(roster: &PgRoster, team: &str) -> Option<RunKey> {
    let workers = roster.workers().await.ok()?;
    let lead = workers.iter().find(|w| w.role == "lead")?;
    Some(RunKey::shared(team, &lead.id))
}
