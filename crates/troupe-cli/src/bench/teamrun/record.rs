//! What a provider's prompt cache could reuse of the teamrun's requests, per role.
//!
//! Every request an agent's model is called with goes through [`Recorder::record`]. Of a turn
//! request (`Purpose::Turn`) it keeps only what the figures need: the request as a cache sees it
//! (`context::cache_bytes`: the tools' JSON, then the messages' JSON) until the same agent's next
//! turn request, and running sums per role. So memory stays bounded by one conversation per agent,
//! however long the run.
//!
//! - `shared`: the bytes of a request that are a byte-identical prefix of the same agent's
//!   previous turn request (`context::shared_prefix`; an agent's first request shares 0);
//! - `cache_prefix_share` = Σ shared / Σ bytes, over a role's turn requests;
//! - a **prefix break**: a request whose shared prefix ends inside the tools or the system message
//!   (shared < the bytes up to the system message's end), so nothing of the conversation after
//!   it is reused;
//! - the **fixed prompt** of a role: the tools' JSON and the system message's JSON (as serialised
//!   in the request) of its first turn request.
//!
//! The runtime's own tool-less calls (summaries, memory) are counted apart, per role and purpose.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde::Serialize;
use troupe::agent::context::{cache_bytes, shared_prefix};
use troupe::model::{ChatMessage, ModelRequest};
use troupe::sync::lock;
use troupe::wire::AgentName;

/// The fixed part of every request of a role: what it pays for on every call before any of the
/// conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FixedPrompt {
    /// `serde_json::to_vec(&request.tools)`.
    pub tools_bytes: usize,
    /// The system message as serialised among the request's messages (0: none).
    pub system_bytes: usize,
    pub total: usize,
}

impl FixedPrompt {
    pub fn of(request: &ModelRequest) -> Self {
        let tools_bytes = serde_json::to_vec(&request.tools).map_or(0, |b| b.len());
        let system_bytes = match request.messages.first() {
            Some(system @ ChatMessage::System { .. }) => {
                serde_json::to_vec(system).map_or(0, |b| b.len())
            }
            _ => 0,
        };
        Self {
            tools_bytes,
            system_bytes,
            total: tools_bytes + system_bytes,
        }
    }

    /// Where the system message ends in `cache_bytes(request)`: the tools, the messages' `[`,
    /// the system message. A shared prefix shorter than this ended inside the fixed prompt.
    pub fn end_in_cache_bytes(&self) -> usize {
        if self.system_bytes == 0 {
            self.tools_bytes
        } else {
            self.tools_bytes + 1 + self.system_bytes
        }
    }
}

/// One role's turn requests, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleTally {
    pub requests: u64,
    /// Σ `cache_bytes(request).len()`.
    pub bytes_sent: u64,
    /// Σ the bytes shared with the same agent's previous request.
    pub shared: u64,
    /// Requests whose shared prefix ended inside the tools or the system message (an agent's
    /// first request is not counted: it has nothing to share).
    pub prefix_breaks: u64,
    /// The first request's fixed prompt.
    pub fixed: Option<FixedPrompt>,
    /// The runtime's own calls for the role's agents, by purpose (`summary`, `memory_select`,
    /// …): not in the figures above.
    pub side: BTreeMap<&'static str, SideTally>,
}

impl RoleTally {
    /// Adds one request (`bytes`, as a cache sees it) after `previous` (the same agent's last
    /// turn request, if any), whose fixed prompt is `fixed`.
    pub fn add(&mut self, previous: Option<&[u8]>, bytes: &[u8], fixed: FixedPrompt) {
        let shared = previous.map_or(0, |p| shared_prefix(p, bytes));
        self.requests += 1;
        self.bytes_sent += bytes.len() as u64;
        self.shared += shared as u64;
        if previous.is_some() && shared < fixed.end_in_cache_bytes() {
            self.prefix_breaks += 1;
        }
        self.fixed.get_or_insert(fixed);
    }

    /// Σ shared / Σ bytes (0 with nothing sent), to three decimals.
    pub fn share(&self) -> f64 {
        if self.bytes_sent == 0 {
            0.0
        } else {
            (self.shared as f64 / self.bytes_sent as f64 * 1000.0).round() / 1000.0
        }
    }

    pub fn uncached(&self) -> u64 {
        self.bytes_sent - self.shared
    }
}

/// The runtime's own calls of one purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SideTally {
    pub requests: u64,
    /// Σ `cache_bytes(request).len()`.
    pub bytes_sent: u64,
}

/// Everything the recorder keeps.
#[derive(Default)]
struct Tallies {
    /// Each agent's last turn request, as a cache sees it.
    previous: HashMap<AgentName, Vec<u8>>,
    lead: RoleTally,
    teammates: RoleTally,
}

/// Records the requests of every agent of the run (see the module docs).
#[derive(Default)]
pub struct Recorder(Mutex<Tallies>);

impl Recorder {
    pub fn record(&self, agent: &AgentName, request: &ModelRequest) {
        let bytes = cache_bytes(request);
        let mut tallies = lock(&self.0);
        let Tallies {
            previous,
            lead,
            teammates,
        } = &mut *tallies;
        let role = if agent.is_lead() { lead } else { teammates };
        if !request.purpose.is_turn() {
            let side = role.side.entry(request.purpose.as_str()).or_default();
            side.requests += 1;
            side.bytes_sent += bytes.len() as u64;
            return;
        }
        let fixed = FixedPrompt::of(request);
        role.add(previous.get(agent).map(Vec::as_slice), &bytes, fixed);
        previous.insert(agent.clone(), bytes);
    }

    /// The lead's tally and the teammates', as they are now.
    pub fn snapshot(&self) -> (RoleTally, RoleTally) {
        let tallies = lock(&self.0);
        (tallies.lead.clone(), tallies.teammates.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use troupe::model::Purpose;

    fn request(system: &str, rest: &[&str]) -> ModelRequest {
        let mut messages = vec![ChatMessage::system(system)];
        messages.extend(rest.iter().map(|t| ChatMessage::user(*t)));
        ModelRequest::turn(messages, Vec::new())
    }

    #[test]
    fn an_appended_message_shares_the_whole_previous_request_but_its_closing_bracket() {
        let recorder = Recorder::default();
        let lead = AgentName::lead();
        let first = request("You are lead.", &["one"]);
        let second = request("You are lead.", &["one", "two"]);
        recorder.record(&lead, &first);
        recorder.record(&lead, &second);
        let (tally, teammates) = recorder.snapshot();
        let (a, b) = (cache_bytes(&first).len(), cache_bytes(&second).len());
        assert_eq!(tally.requests, 2);
        assert_eq!(tally.bytes_sent, (a + b) as u64);
        // The previous request's `]` became a `,`.
        assert_eq!(tally.shared, (a - 1) as u64);
        assert_eq!(tally.prefix_breaks, 0);
        assert_eq!(tally.uncached(), (b + 1) as u64);
        assert_eq!(teammates, RoleTally::default());
        assert!(tally.side.is_empty());
    }

    #[test]
    fn a_changed_system_message_is_a_prefix_break() {
        let recorder = Recorder::default();
        let lead = AgentName::lead();
        recorder.record(&lead, &request("You are lead. Team: a", &["one"]));
        let second = request("You are lead. Team: a, b", &["one", "two"]);
        recorder.record(&lead, &second);
        let (tally, _) = recorder.snapshot();
        // `[]` (no tools), `[{"role":"system","content":"You are lead. Team: a` shared.
        let shared = cache_bytes(&second)
            .windows(b"Team: a".len())
            .position(|w| w == b"Team: a")
            .map(|at| at + b"Team: a".len());
        assert_eq!(Some(tally.shared as usize), shared);
        assert_eq!(tally.prefix_breaks, 1);
        assert_eq!(
            tally.fixed,
            Some(FixedPrompt::of(&request("You are lead. Team: a", &[])))
        );
    }

    #[test]
    fn agents_are_compared_with_their_own_previous_request_and_side_calls_apart() {
        let recorder = Recorder::default();
        let (a, b) = (
            AgentName::parse("mate-0").map_err(|e| e.to_string()),
            AgentName::parse("mate-1").map_err(|e| e.to_string()),
        );
        let (Ok(a), Ok(b)) = (a, b) else {
            panic!("valid names")
        };
        let one = request("You are a teammate.", &["one"]);
        recorder.record(&a, &one);
        recorder.record(&b, &one);
        recorder.record(
            &a,
            &ModelRequest::side(Purpose::Summary, vec![ChatMessage::user("x")]),
        );
        recorder.record(&a, &one);
        let (lead, mates) = recorder.snapshot();
        let n = cache_bytes(&one).len() as u64;
        assert_eq!(lead, RoleTally::default());
        assert_eq!(mates.requests, 3);
        assert_eq!(mates.bytes_sent, 3 * n);
        // Only a's second request had a previous one; it is the same request.
        assert_eq!(mates.shared, n);
        assert_eq!(mates.share(), 0.333);
        assert_eq!(mates.side.get("summary").map(|s| s.requests), Some(1));
    }

    #[test]
    fn the_fixed_prompt_ends_after_the_system_message() {
        let r = request("sys", &["u"]);
        let fixed = FixedPrompt::of(&r);
        let bytes = cache_bytes(&r);
        assert_eq!(fixed.tools_bytes, 2);
        assert_eq!(fixed.total, fixed.tools_bytes + fixed.system_bytes);
        assert_eq!(bytes[fixed.end_in_cache_bytes()], b',');
        assert_eq!(bytes[fixed.end_in_cache_bytes() - 1], b'}');
    }
}
