//! Recording a run: every model call of every agent, as it is answered, into
//! `.troupe/recordings/<run>.jsonl` (see `record.rs` for the lines).
//!
//! [`RecordingModels`] wraps the run's [`ModelChooser`]: each agent's client is wrapped in a
//! [`RecordingModel`] that takes the call's place in the global order when the call is made,
//! then writes the request (as a change of the agent's previous one) and the answer once the
//! answer is there. Every value passes the run's redactor first: a recording never holds the
//! API key. A recording that cannot be written is given up with one warning — the run goes on.
//! On a shared team each line is also copied to the team's database, after the file.
//! A recording is bounded: past [`MAX_RECORDING_BYTES`] its calls are no longer written, and
//! replay refuses it as incomplete.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use troupe_wire::AgentName;

use super::mask::Masking;
use super::record::{CallLine, End, Line, RequestDelta, Start};
use crate::layout::Layout;
use crate::model::{ModelClient, ModelError, ModelRequest, ModelResponse};
use crate::secrets::Redactor;
use crate::store::journal::{Durability, Journal};
use crate::store::recordings::RecordingLine;
use crate::store::team_copy::CopyTo;
use crate::store::{durable, IoError};
use crate::sync::lock;
use crate::team::ModelChooser;

/// The largest recording written; past it, calls are no longer recorded.
pub const MAX_RECORDING_BYTES: u64 = 256 * 1024 * 1024;

/// One run's recording, being written.
pub struct Recorder {
    journal: Journal,
    masking: Masking,
    redactor: Redactor,
    seq: AtomicU64,
    written: AtomicU64,
    /// Set once a write failed or the bound was reached: nothing more is written.
    given_up: AtomicBool,
    /// Each agent's calls so far and its last request (the base of the next one's change).
    agents: Mutex<HashMap<AgentName, (usize, ModelRequest)>>,
    run: String,
    /// The next line's number; held while a line is appended, so numbers follow the file.
    lines: tokio::sync::Mutex<u64>,
    /// Where each line is copied (a shared team's database), after the file.
    copy: CopyTo<RecordingLine>,
}

impl Recorder {
    /// Starts `start.run`'s recording under `layout` (the folder made if needed), each line
    /// also copied through `copy`.
    pub async fn open(
        layout: &Layout,
        start: Start,
        redactor: Redactor,
        copy: CopyTo<RecordingLine>,
    ) -> Result<Arc<Self>, IoError> {
        let dir = layout.recordings_dir();
        durable::ensure_real_dir(&dir)?;
        let journal = Journal::open(&layout.recording(&start.run))?;
        let recorder = Self {
            journal,
            masking: Masking::new(&start.workspace),
            redactor,
            seq: AtomicU64::new(0),
            written: AtomicU64::new(0),
            given_up: AtomicBool::new(false),
            agents: Mutex::default(),
            run: start.run.clone(),
            lines: tokio::sync::Mutex::new(0),
            copy,
        };
        recorder.write(&Line::Start(start)).await;
        Ok(Arc::new(recorder))
    }

    pub fn path(&self) -> PathBuf {
        self.journal.path().to_owned()
    }

    /// The next place in the run's global order.
    fn take_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    /// Records one answered (or failed) call of `agent`.
    async fn call(
        &self,
        agent: &AgentName,
        seq: u64,
        request: &ModelRequest,
        result: &Result<ModelResponse, ModelError>,
    ) {
        if self.given_up.load(Ordering::Acquire) {
            return;
        }
        let (index, delta) = {
            let mut agents = lock(&self.agents);
            let previous = agents.get(agent);
            let index = previous.map_or(0, |(count, _)| *count);
            let delta =
                RequestDelta::between(previous.map(|(count, base)| (count - 1, base)), request);
            agents.insert(agent.clone(), (index + 1, request.clone()));
            (index, delta)
        };
        let (answer, error) = match result {
            Ok(response) => (Some(response.clone()), None),
            Err(e) => (None, Some(e.to_string())),
        };
        self.write(&Line::Call(Box::new(CallLine {
            seq,
            agent: agent.to_string(),
            index,
            purpose: request.purpose,
            digest: self.masking.digest(request, &self.redactor),
            request: delta,
            answer,
            error,
        })))
        .await;
    }

    /// Ends the recording with the run's final tree.
    pub async fn finish(&self, end: End) {
        self.write(&Line::End(end)).await;
    }

    async fn write(&self, line: &Line) {
        if self.given_up.load(Ordering::Acquire) {
            return;
        }
        let mut value = match serde_json::to_value(line) {
            Ok(value) => value,
            Err(e) => return self.give_up(&format!("cannot encode a line: {e}")),
        };
        self.redactor.redact_json(&mut value);
        let mut bytes = value.to_string().into_bytes();
        bytes.push(b'\n');
        let total =
            self.written.fetch_add(bytes.len() as u64, Ordering::SeqCst) + bytes.len() as u64;
        if total > MAX_RECORDING_BYTES {
            return self.give_up(&format!(
                "it reached {} MiB; later calls are not recorded",
                MAX_RECORDING_BYTES / (1024 * 1024)
            ));
        }
        let mut next = self.lines.lock().await;
        if let Err(e) = self.journal.append_sole(&bytes, Durability::Unsynced) {
            return self.give_up(&e.to_string());
        }
        let line_no = *next;
        *next += 1;
        bytes.pop();
        if self.copy.is_on() {
            let line = RecordingLine {
                run: self.run.clone(),
                line_no,
                line: String::from_utf8(bytes).unwrap_or_default(),
            };
            self.copy.copy(&line, &self.journal.path().display()).await;
        }
    }

    fn give_up(&self, why: &str) {
        if !self.given_up.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                recording = %self.journal.path().display(),
                "the run's recording stopped: {why}"
            );
        }
    }
}

/// The run's models, each call recorded.
pub struct RecordingModels {
    pub inner: Arc<dyn ModelChooser>,
    pub recorder: Arc<Recorder>,
}

impl RecordingModels {
    fn wrap(&self, agent: &AgentName, inner: Arc<dyn ModelClient>) -> Arc<dyn ModelClient> {
        Arc::new(RecordingModel {
            inner,
            agent: agent.clone(),
            recorder: self.recorder.clone(),
        })
    }
}

impl ModelChooser for RecordingModels {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        self.wrap(agent, self.inner.model_for(agent))
    }

    fn model_named(&self, agent: &AgentName, model: Option<&str>) -> Arc<dyn ModelClient> {
        self.wrap(agent, self.inner.model_named(agent, model))
    }

    fn pacing(&self) -> Option<Arc<dyn crate::team::EventPacing>> {
        self.inner.pacing()
    }
}

/// One agent's client, recorded.
pub struct RecordingModel {
    inner: Arc<dyn ModelClient>,
    agent: AgentName,
    recorder: Arc<Recorder>,
}

#[async_trait::async_trait]
impl ModelClient for RecordingModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let seq = self.recorder.take_seq();
        let result = self.inner.complete(request).await;
        self.recorder.call(&self.agent, seq, request, &result).await;
        result
    }
}
