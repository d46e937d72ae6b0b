//! Which events a person asked for on the page: one agent, one kind, a piece of text (found
//! anywhere in the event's JSON, ignoring case). Empty parts let everything through.

use super::history::Served;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Filter {
    pub agent: Option<String>,
    pub kind: Option<String>,
    /// Lower-cased.
    text: Option<String>,
}

impl Filter {
    pub fn new(agent: Option<String>, kind: Option<String>, text: Option<String>) -> Self {
        let given = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        Self {
            agent: given(agent),
            kind: given(kind),
            text: given(text).map(|t| t.to_lowercase()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.agent.is_none() && self.kind.is_none() && self.text.is_none()
    }

    pub fn matches(&self, event: &Served) -> bool {
        self.agent.as_ref().is_none_or(|a| *a == event.agent)
            && self.kind.as_ref().is_none_or(|k| *k == event.kind)
            && self
                .text
                .as_ref()
                .is_none_or(|t| event.json.to_lowercase().contains(t.as_str()))
    }
}
