//! A recording read back, strictly: every line whole and well formed (no torn last line, no
//! repeated key, no unknown key), one start line first, at most one end line last, each
//! agent's calls numbered from 0 without a gap and each a change of the one before, and every
//! teammate answered only after a call that spawned it.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use troupe_wire::AgentName;

use super::record::{End, Line, SharedRequest, Start, VERSION};
use super::recorder::MAX_RECORDING_BYTES;
use super::ReplayError;
use crate::model::{ModelResponse, Purpose};
use crate::store::read::{read_regular, Links};

/// A run's recording, ready to play.
#[derive(Debug)]
pub struct Recording {
    pub start: Start,
    /// The calls in the run's global order.
    pub calls: Vec<RecordedCall>,
    pub end: Option<End>,
    /// Each agent's calls: their places in `calls`, in the agent's order.
    by_agent: HashMap<AgentName, Vec<usize>>,
}

/// One recorded call.
#[derive(Debug)]
pub struct RecordedCall {
    pub agent: AgentName,
    pub index: usize,
    pub purpose: Purpose,
    pub digest: String,
    /// The request, its messages shared with the agent's other requests.
    pub request: SharedRequest,
    pub answer: Result<ModelResponse, String>,
}

impl Recording {
    /// Reads the recording at `path`.
    pub fn load(path: &Path) -> Result<Self, ReplayError> {
        let refused = |why: String| ReplayError::Refused {
            path: path.display().to_string(),
            why,
        };
        let bytes = read_regular(path, Links::Refuse, MAX_RECORDING_BYTES + 1024 * 1024)
            .map_err(|e| refused(e.to_string()))?
            .ok_or_else(|| ReplayError::NotFound(path.display().to_string()))?;
        let text = std::str::from_utf8(&bytes).map_err(|_| refused("it is not UTF-8".into()))?;
        Self::parse(text).map_err(refused)
    }

    /// Parses a recording's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("it is empty".into());
        }
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        if lines.last().is_some_and(|l| !l.ends_with('\n')) {
            return Err(format!(
                "its last line ({}) is torn: the run was killed while it wrote it, or is still \
                 going",
                lines.len()
            ));
        }
        let mut parsed = Vec::with_capacity(lines.len());
        for (n, line) in lines.iter().enumerate() {
            let what = format!("line {}", n + 1);
            let value = troupe_wire::strict::parse_json_str(line.trim_end(), &what)
                .map_err(|e| e.to_string())?;
            let line: Line = serde_json::from_value(value).map_err(|e| format!("{what}: {e}"))?;
            parsed.push(line);
        }
        let mut parsed = parsed.into_iter();
        let start = match parsed.next() {
            Some(Line::Start(start)) if start.version == VERSION => start,
            Some(Line::Start(start)) => {
                return Err(format!(
                    "its version is {}; this troupe reads version {VERSION}",
                    start.version
                ))
            }
            _ => return Err("line 1 is not its start line".into()),
        };
        let mut calls = Vec::new();
        let mut end = None;
        for (n, line) in parsed.enumerate() {
            let at = n + 2;
            if end.is_some() {
                return Err(format!("line {at} comes after the end line"));
            }
            match line {
                Line::Start(_) => return Err(format!("line {at} is a second start line")),
                Line::End(e) => end = Some(e),
                Line::Call(call) => calls.push((at, *call)),
            }
        }
        // Decode each agent's requests in its own order.
        calls.sort_by_key(|(_, c)| (c.agent.clone(), c.index));
        let mut seqs = HashSet::new();
        let mut decoded: Vec<(u64, RecordedCall)> = Vec::with_capacity(calls.len());
        let mut previous: Option<(String, usize)> = None;
        for (at, call) in calls {
            let agent = AgentName::parse(&call.agent)
                .map_err(|e| format!("line {at}: agent {:?}: {e}", call.agent))?;
            if !seqs.insert(call.seq) {
                return Err(format!(
                    "line {at}: call number {} is there twice",
                    call.seq
                ));
            }
            let expected = match &previous {
                Some((name, index)) if *name == call.agent => index + 1,
                _ => 0,
            };
            if call.index != expected {
                return Err(format!(
                    "line {at}: {}'s call {} where call {expected} was expected",
                    call.agent, call.index
                ));
            }
            if call.request.base != call.index.checked_sub(1) {
                return Err(format!(
                    "line {at}: the request is not a change of {}'s previous one",
                    call.agent
                ));
            }
            let base = decoded
                .last()
                .filter(|_| call.index > 0)
                .map(|(_, c)| &c.request);
            let request = call
                .request
                .apply(base, call.purpose)
                .map_err(|e| format!("line {at}: {e}"))?;
            let answer = match (call.answer, call.error) {
                (Some(answer), None) => Ok(answer),
                (None, Some(error)) => Err(error),
                _ => {
                    return Err(format!(
                        "line {at}: a call has an answer or an error, one of the two"
                    ))
                }
            };
            previous = Some((call.agent.clone(), call.index));
            decoded.push((
                call.seq,
                RecordedCall {
                    agent,
                    index: call.index,
                    purpose: call.purpose,
                    digest: call.digest,
                    request,
                    answer,
                },
            ));
        }
        decoded.sort_by_key(|(seq, _)| *seq);
        let calls: Vec<RecordedCall> = decoded.into_iter().map(|(_, c)| c).collect();
        check_spawned(&calls)?;
        let mut by_agent: HashMap<AgentName, Vec<usize>> = HashMap::new();
        for (i, call) in calls.iter().enumerate() {
            by_agent.entry(call.agent.clone()).or_default().push(i);
        }
        Ok(Self {
            start,
            calls,
            end,
            by_agent,
        })
    }

    /// The places in the global order of `agent`'s calls.
    pub fn of_agent(&self, agent: &AgentName) -> &[usize] {
        self.by_agent.get(agent).map_or(&[], Vec::as_slice)
    }

    /// The agents that made calls, the lead first.
    pub fn agents(&self) -> Vec<AgentName> {
        let mut agents: Vec<AgentName> = self.by_agent.keys().cloned().collect();
        agents.sort_by_key(|a| (!a.is_lead(), a.to_string()));
        agents
    }
}

/// Every agent but the lead is answered only after a call whose answer spawned it.
fn check_spawned(calls: &[RecordedCall]) -> Result<(), String> {
    let mut spawned: HashSet<String> = HashSet::new();
    for (position, call) in calls.iter().enumerate() {
        if !call.agent.is_lead() && !spawned.contains(call.agent.as_str()) {
            return Err(format!(
                "call {} answers agent `{}`, which no earlier call spawned",
                position + 1,
                call.agent
            ));
        }
        if let Ok(answer) = &call.answer {
            for tool in &answer.message.tool_calls {
                if tool.name != "spawn_teammate" {
                    continue;
                }
                if let Some(name) = serde_json::from_str::<serde_json::Value>(&tool.arguments)
                    .ok()
                    .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned))
                {
                    spawned.insert(name);
                }
            }
        }
    }
    Ok(())
}
