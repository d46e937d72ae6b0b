//! The recording's lines (`.troupe/recordings/<run>.jsonl`), written and read.
//!
//! ```text
//! {"type":"start","version":1,"run":"…","at":"…","prompt":"…","workspace":"/abs","settings":"<sha256>","git":{"head":"<sha>","changes":"<sha>"}}
//! {"type":"call","seq":0,"agent":"lead","index":0,"purpose":"turn","digest":"<sha256>","request":{"base":null,"len":3,"set":[[0,{…}],…],"tools":[…]},"answer":{…}}
//! {"type":"end","at":"…","tree":"<sha256>","files":12}
//! ```
//!
//! `seq` is the call's place in the run's global order, taken when the call was made (a call
//! cancelled before its answer leaves a gap); `index` its place among its agent's calls. A
//! request is kept as a change of the same agent's previous one (`base`, that call's `index`):
//! its messages are the base's, cut or extended to `len`, with the messages of `set` put at
//! their positions; `tools` is there when they differ from the base's. So a conversation that
//! grows costs its growth, not its square. `answer` is the model's whole answer, or `error`
//! the failure's text. The digest is of the request as compared (see `mask.rs`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{ChatMessage, ModelRequest, ModelResponse, Purpose, ToolSpec};

/// The format's version, in the start line.
pub const VERSION: u32 = 1;

/// One line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Line {
    Start(Start),
    Call(Box<CallLine>),
    End(End),
}

/// Where the run started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    pub version: u32,
    pub run: String,
    pub at: String,
    /// The person's prompt (empty for `--continue`).
    pub prompt: String,
    /// The workspace's absolute path when it was recorded (masked when requests are compared).
    pub workspace: String,
    /// The digest of the workspace's `troupe.toml` as it was (`none` without one).
    pub settings: String,
    /// The workspace's commit and its uncommitted changes, in a git repository.
    pub git: Option<GitStart>,
}

/// A git starting point: `HEAD`, and the object `git stash create` made of the uncommitted
/// changes to tracked files (none: the tree was clean).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitStart {
    pub head: String,
    /// The workspace's folder inside the repository (`git rev-parse --show-prefix`; empty at
    /// its top level).
    pub prefix: String,
    pub changes: Option<String>,
    /// Files git does not track that were there (not part of the starting point).
    #[serde(default)]
    pub untracked: usize,
}

/// One model call and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallLine {
    pub seq: u64,
    pub agent: String,
    pub index: usize,
    pub purpose: Purpose,
    pub digest: String,
    pub request: RequestDelta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<ModelResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A request as a change of the agent's previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestDelta {
    pub base: Option<usize>,
    pub len: usize,
    pub set: Vec<(usize, ChatMessage)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
}

/// How the run ended: its final tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct End {
    pub at: String,
    /// The digest of the workspace's files at the end (none: too large to digest).
    pub tree: Option<String>,
    pub files: usize,
}

impl RequestDelta {
    /// `request` as a change of `base` (the agent's previous request, at index `base_index`).
    pub fn between(base: Option<(usize, &ModelRequest)>, request: &ModelRequest) -> Self {
        let Some((base_index, base)) = base else {
            return Self {
                base: None,
                len: request.messages.len(),
                set: request.messages.iter().cloned().enumerate().collect(),
                tools: Some(request.tools.clone()),
            };
        };
        let set = request
            .messages
            .iter()
            .enumerate()
            .filter(|(i, m)| base.messages.get(*i) != Some(*m))
            .map(|(i, m)| (i, m.clone()))
            .collect();
        Self {
            base: Some(base_index),
            len: request.messages.len(),
            set,
            tools: (base.tools != request.tools).then(|| request.tools.clone()),
        }
    }

    /// The whole request, given its base's (none for the first); `purpose` is the call's. The
    /// messages it keeps from its base are shared with it, not copied.
    pub fn apply(
        &self,
        base: Option<&SharedRequest>,
        purpose: Purpose,
    ) -> Result<SharedRequest, String> {
        let mut messages: Vec<Option<Arc<ChatMessage>>> = match base {
            Some(b) => b.messages.iter().cloned().map(Some).collect(),
            None => Vec::new(),
        };
        messages.resize(self.len, None);
        for (i, message) in &self.set {
            let slot = messages
                .get_mut(*i)
                .ok_or_else(|| format!("message {i} is past the request's length {}", self.len))?;
            *slot = Some(Arc::new(message.clone()));
        }
        let messages = messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| m.ok_or_else(|| format!("message {i} is missing")))
            .collect::<Result<Vec<_>, _>>()?;
        let tools = match (&self.tools, base) {
            (Some(tools), _) => Arc::new(tools.clone()),
            (None, Some(b)) => b.tools.clone(),
            (None, None) => return Err("the first request has no tools list".into()),
        };
        Ok(SharedRequest {
            messages,
            tools,
            purpose,
        })
    }
}

/// A recorded request as a loaded recording holds it: the messages and tools it has in common
/// with the agent's previous request are shared with it, so a recording of a long
/// conversation holds each message once rather than once per call.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedRequest {
    pub messages: Vec<Arc<ChatMessage>>,
    pub tools: Arc<Vec<ToolSpec>>,
    pub purpose: Purpose,
}

impl SharedRequest {
    /// The request as a model call carries it (copied).
    pub fn to_request(&self) -> ModelRequest {
        ModelRequest {
            messages: self.messages.iter().map(|m| (**m).clone()).collect(),
            tools: (*self.tools).clone(),
            purpose: self.purpose,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: &[&str]) -> ModelRequest {
        ModelRequest::turn(
            messages.iter().map(|m| ChatMessage::user(*m)).collect(),
            Vec::new(),
        )
    }

    #[test]
    fn a_delta_keeps_only_what_changed_and_gives_the_request_back() {
        let first = request(&["system", "a"]);
        let second = request(&["system v2", "a", "b", "c"]);
        let delta = RequestDelta::between(Some((0, &first)), &second);
        assert_eq!(delta.set.len(), 3, "{delta:?}");
        assert_eq!(delta.tools, None);
        let shared_first = RequestDelta::between(None, &first)
            .apply(None, Purpose::Turn)
            .unwrap();
        let shared_second = delta.apply(Some(&shared_first), Purpose::Turn).unwrap();
        assert_eq!(shared_second.to_request(), second);
        // The message both have is one, shared.
        assert!(Arc::ptr_eq(
            &shared_first.messages[1],
            &shared_second.messages[1]
        ));
        let shorter = request(&["system"]);
        let cut = RequestDelta::between(Some((1, &second)), &shorter);
        assert_eq!(
            cut.apply(Some(&shared_second), Purpose::Turn)
                .unwrap()
                .to_request(),
            shorter
        );
        let whole = RequestDelta::between(None, &second);
        assert_eq!(
            whole.apply(None, Purpose::Turn).unwrap().to_request(),
            second
        );
    }

    #[test]
    fn a_delta_with_a_hole_is_refused() {
        let delta = RequestDelta {
            base: None,
            len: 2,
            set: vec![(0, ChatMessage::user("a"))],
            tools: Some(Vec::new()),
        };
        assert!(delta
            .apply(None, Purpose::Turn)
            .unwrap_err()
            .contains("message 1 is missing"));
    }
}
