//! Spans from what the runners and the team report: one observer, put in front of the others
//! by the composition root when traces are on (and absent when they are off, so that a run
//! without telemetry pays nothing).
//!
//! - a **turn** (`invoke_agent <agent>`) from `turn_started` to `turn_finished`, a child of the
//!   run's span, linked to the `send_message` span of each message it handles;
//! - a **model call** (`chat <model>`) and a **tool call** (`execute_tool <tool>`) inside the
//!   agent's open turn; the tool span carries the permission decision and its source, the plan
//!   gate's outcome and the sandbox mode (what dispatch decided, from its outcome);
//! - a **message** (`send_message <recipient>`), when one is written into a mailbox: a point
//!   span under the sender's open tool call or turn, whose span id is derived from the message
//!   id ([`super::ids::message_span_id`]) so the handler can link to it from the id alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opentelemetry::trace::{Link, SpanKind, Status};
use opentelemetry::{Array, KeyValue, StringValue, Value};
use troupe_wire::{AgentName, MailboxMessage, MessageId};

use super::attributes as attr;
use super::ids::{message_span_id, remote};
use super::trace::{OpenSpan, RunTrace};
use crate::agent::observer::TurnSummary;
use crate::agent::RunObserver;
use crate::model::{ModelResponse, ToolCall};
use crate::team::observer::{TeamObserver, TeamUpdate};
use crate::tools::ToolOutcome;

/// The open spans of one agent (its calls are sequential). Turns and tool calls nest: the
/// `task` tool runs a subagent under the same name, whose turn is a child of that tool call.
#[derive(Default)]
struct AgentSpans {
    turns: Vec<OpenSpan>,
    model: Option<OpenSpan>,
    /// Open tool calls by call id, innermost last.
    tools: Vec<(String, OpenSpan)>,
    /// The messages its next turn handles.
    handling: Vec<MessageId>,
}

impl AgentSpans {
    /// The innermost open span: a tool call under way, else the turn.
    fn innermost(&self) -> Option<opentelemetry::trace::SpanId> {
        match self.tools.last() {
            Some((_, tool)) => Some(tool.id),
            None => self.turn(),
        }
    }

    fn turn(&self) -> Option<opentelemetry::trace::SpanId> {
        self.turns.last().map(|t| t.id)
    }
}

/// Turns what a run reports into spans of its trace.
pub struct TraceObserver {
    trace: Arc<RunTrace>,
    agents: Mutex<HashMap<AgentName, AgentSpans>>,
}

impl TraceObserver {
    pub fn new(trace: Arc<RunTrace>) -> Self {
        Self {
            trace,
            agents: Mutex::new(HashMap::new()),
        }
    }

    fn with_agent<R>(&self, agent: &AgentName, f: impl FnOnce(&mut AgentSpans) -> R) -> R {
        let mut agents = crate::sync::lock(&self.agents);
        f(agents.entry(agent.clone()).or_default())
    }

    fn agent_attributes(&self, agent: &AgentName) -> [KeyValue; 3] {
        [
            KeyValue::new(attr::AGENT_NAME, agent.to_string()),
            KeyValue::new(attr::AGENT_ID, format!("{}/{agent}", self.trace.team)),
            KeyValue::new(attr::TEAM, self.trace.team.clone()),
        ]
    }
}

fn strings(values: impl IntoIterator<Item = String>) -> Value {
    Value::Array(Array::String(
        values.into_iter().map(StringValue::from).collect(),
    ))
}

/// The code of an `Error [<code>]: …` tool result.
fn error_code(content: &str) -> Option<&str> {
    content.strip_prefix("Error [")?.split(']').next()
}

#[async_trait::async_trait]
impl RunObserver for TraceObserver {
    async fn turn_starting(&self, _agent: &AgentName) {
        self.trace.refresh_key().await;
    }

    fn handling(&self, agent: &AgentName, messages: &[MessageId]) {
        self.with_agent(agent, |spans| spans.handling = messages.to_vec());
    }

    fn turn_started(&self, agent: &AgentName) {
        let parent = self.with_agent(agent, |spans| spans.innermost());
        let mut span = self
            .trace
            .open(format!("invoke_agent {agent}"), SpanKind::Internal, parent);
        span.attributes
            .push(KeyValue::new(attr::OPERATION, "invoke_agent"));
        span.attributes.extend(self.agent_attributes(agent));
        span.attributes
            .push(KeyValue::new(attr::PROVIDER, self.trace.provider.clone()));
        let trace_id = self.trace.trace_id();
        self.with_agent(agent, |spans| {
            let handled = std::mem::take(&mut spans.handling);
            if !handled.is_empty() {
                span.attributes.push(KeyValue::new(
                    attr::MESSAGE_IDS,
                    strings(handled.iter().map(ToString::to_string)),
                ));
            }
            span.links = handled
                .iter()
                .map(|id| {
                    Link::new(
                        remote(trace_id, message_span_id(*id)),
                        vec![KeyValue::new(attr::MESSAGE_ID, id.to_string())],
                        0,
                    )
                })
                .collect();
            spans.turns.push(span);
        });
    }

    fn turn_finished(&self, agent: &AgentName, end: Result<&TurnSummary, &str>) {
        let Some(mut span) = self.with_agent(agent, |spans| spans.turns.pop()) else {
            return;
        };
        let status = match end {
            Ok(summary) => {
                span.attributes
                    .push(KeyValue::new(attr::TURN_END, summary.end));
                if summary.end == "answered" {
                    Status::Ok
                } else {
                    Status::Unset
                }
            }
            Err(code) => {
                span.attributes
                    .push(KeyValue::new(attr::ERROR_TYPE, code.to_owned()));
                Status::error(format!("the turn failed [{code}]"))
            }
        };
        self.trace.end(span, status);
    }

    fn model_call_started(&self, agent: &AgentName, _call_number: usize) {
        let model = self.trace.model.clone();
        self.with_agent(agent, |spans| {
            let parent = spans.turn();
            let mut span = self
                .trace
                .open(format!("chat {model}"), SpanKind::Client, parent);
            span.attributes.extend([
                KeyValue::new(attr::OPERATION, "chat"),
                KeyValue::new(attr::PROVIDER, self.trace.provider.clone()),
                KeyValue::new(attr::REQUEST_MODEL, model),
            ]);
            span.attributes.extend(self.agent_attributes(agent));
            spans.model = Some(span);
        });
    }

    fn model_call_finished(&self, agent: &AgentName, response: &ModelResponse) {
        let Some(mut span) = self.with_agent(agent, |spans| spans.model.take()) else {
            return;
        };
        span.attributes.extend([
            KeyValue::new(attr::RESPONSE_MODEL, response.model.clone()),
            KeyValue::new(
                attr::FINISH_REASONS,
                strings([response.finish_reason.as_str().to_owned()]),
            ),
        ]);
        if let Some(usage) = &response.usage {
            span.attributes.extend([
                KeyValue::new(attr::INPUT_TOKENS, saturating(usage.prompt_tokens)),
                KeyValue::new(attr::OUTPUT_TOKENS, saturating(usage.completion_tokens)),
            ]);
            if usage.estimated {
                span.attributes
                    .push(KeyValue::new(attr::USAGE_ESTIMATED, true));
            }
        }
        if let Some(text) = response.message.content.as_deref() {
            if let Some(content) = self.trace.content(text) {
                let message = serde_json::json!([{
                    "role": "assistant",
                    "parts": [{"type": "text", "content": content}],
                    "finish_reason": response.finish_reason.as_str(),
                }]);
                span.attributes
                    .push(KeyValue::new(attr::OUTPUT_MESSAGES, message.to_string()));
            }
        }
        self.trace.end(span, Status::Unset);
    }

    fn model_call_failed(&self, agent: &AgentName, error: &str, code: &str) {
        let Some(mut span) = self.with_agent(agent, |spans| spans.model.take()) else {
            return;
        };
        span.attributes
            .push(KeyValue::new(attr::ERROR_TYPE, code.to_owned()));
        // The error text may quote a server's answer: redacted like everything else.
        let description = match &self.trace.capture {
            Some(redactor) => redactor.redact(error).into_owned(),
            None => format!("the model call failed [{code}]"),
        };
        self.trace.end(span, Status::error(description));
    }

    fn tool_started(&self, agent: &AgentName, call: &ToolCall) {
        self.with_agent(agent, |spans| {
            let parent = spans.turn();
            let mut span = self.trace.open(
                format!("execute_tool {}", call.name),
                SpanKind::Internal,
                parent,
            );
            span.attributes.extend([
                KeyValue::new(attr::OPERATION, "execute_tool"),
                KeyValue::new(attr::TOOL_NAME, call.name.clone()),
                KeyValue::new(attr::TOOL_CALL_ID, call.id.clone()),
                KeyValue::new(attr::SANDBOX, self.trace.sandbox.clone()),
            ]);
            span.attributes.extend(self.agent_attributes(agent));
            if let Some(arguments) = self.trace.content(&call.arguments) {
                span.attributes
                    .push(KeyValue::new(attr::TOOL_ARGUMENTS, arguments));
            }
            spans.tools.push((call.id.clone(), span));
        });
    }

    fn tool_finished(&self, agent: &AgentName, call: &ToolCall, outcome: &ToolOutcome) {
        let taken = self.with_agent(agent, |spans| {
            let at = spans.tools.iter().rposition(|(id, _)| *id == call.id)?;
            Some(spans.tools.remove(at).1)
        });
        let Some(mut span) = taken else {
            return;
        };
        if let Some(decision) = &outcome.decision {
            span.attributes.extend([
                KeyValue::new(
                    attr::DECISION,
                    if decision.allowed { "allow" } else { "deny" },
                ),
                KeyValue::new(attr::DECISION_SOURCE, decision.rule.clone()),
                KeyValue::new(attr::RULES_SAID, decision.rules_said.as_str()),
            ]);
            if !agent.is_lead() {
                let gate = if decision
                    .rule
                    .starts_with(crate::team::plan_gate::PlanGateRule::RULE)
                {
                    "denied"
                } else {
                    "passed"
                };
                span.attributes.push(KeyValue::new(attr::PLAN_GATE, gate));
            }
        }
        // The outcome is redacted by dispatch (its architecture invariant); redacted again
        // here all the same, since this leaves the machine.
        if let Some(result) = self.trace.content(&outcome.content) {
            span.attributes
                .push(KeyValue::new(attr::TOOL_RESULT, result));
        }
        let status = match outcome.is_error {
            false => Status::Unset,
            true => {
                let code = error_code(&outcome.content)
                    .unwrap_or("tool_error")
                    .to_owned();
                span.attributes
                    .push(KeyValue::new(attr::ERROR_TYPE, code.clone()));
                Status::error(format!("the tool call failed [{code}]"))
            }
        };
        self.trace.end(span, status);
    }
}

impl TeamObserver for TraceObserver {
    fn update(&self, update: &TeamUpdate) {
        let TeamUpdate::Sent(message) = update else {
            return;
        };
        let sender = message.sender().clone();
        let parent = self.with_agent(&sender, |spans| spans.innermost());
        let mut span = self.trace.open(
            format!("send_message {}", message.recipient()),
            SpanKind::Producer,
            parent,
        );
        span.id = message_span_id(message.id());
        let kind = match message {
            MailboxMessage::Ordinary(m) => m.kind.as_str().to_owned(),
            MailboxMessage::Protocol(p) => p.kind().as_str().to_owned(),
        };
        span.attributes.extend([
            KeyValue::new(attr::MESSAGE_ID, message.id().to_string()),
            KeyValue::new(attr::MESSAGE_KIND, kind),
            KeyValue::new(attr::MESSAGE_SENDER, sender.to_string()),
            KeyValue::new(attr::MESSAGE_RECIPIENT, message.recipient().to_string()),
            KeyValue::new(attr::TEAM, self.trace.team.clone()),
        ]);
        if let Some(content) = self.trace.content(message.content().as_str()) {
            span.attributes
                .push(KeyValue::new(attr::MESSAGE_CONTENT, content));
        }
        self.trace.end(span, Status::Unset);
    }
}

fn saturating(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use troupe_wire::{Content, OrdinaryKind, OrdinaryMessage, UtcTime};

    use super::super::export::SpanQueue;
    use super::super::ids::RunKey;
    use super::super::trace::TraceParts;
    use super::*;

    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    fn observer(kept: &Kept, lead: bool, capture: bool) -> TraceObserver {
        let queue = Arc::new(SpanQueue::start(kept.clone(), Duration::from_secs(1)));
        TraceObserver::new(Arc::new(RunTrace::new(TraceParts {
            queue,
            key: RunKey::shared("t", "lead-1"),
            lead,
            team: "t".into(),
            provider: "openai".into(),
            model: "m".into(),
            sandbox: "workspace-write".into(),
            capture: capture.then(|| crate::secrets::Redactor::new(["sk-secret-0123456789"])),
        })))
    }

    async fn flushed(observer: &TraceObserver, kept: &Kept) -> Vec<SpanData> {
        observer
            .trace
            .queue_for_tests()
            .close(Duration::from_secs(5))
            .await;
        kept.0.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_message_s_span_in_one_process_is_linked_from_its_handler_in_another() {
        let message = MailboxMessage::Ordinary(OrdinaryMessage {
            id: troupe_wire::MessageId::parse("0190f5e2-8c1a-7cc0-9b3e-4b8f7a9d2c11").unwrap(),
            sender: AgentName::lead(),
            recipient: AgentName::parse("writer").unwrap(),
            kind: OrdinaryKind::Task,
            content: Content::parse("write it").unwrap(),
            created_at_utc: UtcTime::parse("2026-07-30T08:00:00.000Z").unwrap(),
        });
        // The lead's process: the message is sent inside a tool call.
        let (lead_kept, worker_kept) = (Kept::default(), Kept::default());
        let lead = observer(&lead_kept, true, false);
        let agent = AgentName::lead();
        let call = ToolCall {
            id: "call_1".into(),
            name: "spawn_teammate".into(),
            arguments: "{}".into(),
        };
        lead.turn_started(&agent);
        lead.tool_started(&agent, &call);
        lead.update(&TeamUpdate::Sent(message.clone()));
        // The worker's process: the handler's turn.
        let worker = observer(&worker_kept, false, false);
        let writer = AgentName::parse("writer").unwrap();
        worker.handling(&writer, &[message.id()]);
        worker.turn_started(&writer);
        worker.turn_finished(
            &writer,
            Ok(&TurnSummary {
                end: "answered",
                model_calls: 1,
                tool_calls: 0,
            }),
        );
        let sent = flushed(&lead, &lead_kept).await;
        let handled = flushed(&worker, &worker_kept).await;
        let send = sent
            .iter()
            .find(|s| s.name == "send_message writer")
            .unwrap();
        let turn = &handled[0];
        assert_eq!(send.span_context.trace_id(), turn.span_context.trace_id());
        assert_eq!(send.span_context.span_id(), message_span_id(message.id()));
        assert_eq!(turn.links.len(), 1);
        assert_eq!(turn.links[0].span_context, send.span_context.clone());
        // Both hang under the run's span; the worker's parent is remote.
        let root = RunKey::shared("t", "lead-1").root_span_id();
        assert_eq!(turn.parent_span_id, root);
        assert!(turn.parent_span_is_remote);
        // The message's span is a child of the tool call that sent it (still open here).
        assert_ne!(send.parent_span_id, root);
    }

    #[tokio::test]
    async fn a_call_whose_usage_troupe_estimated_says_so() {
        for estimated in [false, true] {
            let kept = Kept::default();
            let observer = observer(&kept, true, false);
            let agent = AgentName::lead();
            observer.model_call_started(&agent, 1);
            let mut response = ModelResponse::text("hi", "m");
            response.usage = Some(crate::model::Usage {
                prompt_tokens: 10,
                completion_tokens: 2,
                total_tokens: 12,
                estimated,
                ..crate::model::Usage::default()
            });
            observer.model_call_finished(&agent, &response);
            let spans = flushed(&observer, &kept).await;
            let marked = spans[0]
                .attributes
                .iter()
                .find(|kv| kv.key.as_str() == attr::USAGE_ESTIMATED)
                .map(|kv| kv.value.as_str().into_owned());
            assert_eq!(marked, estimated.then(|| "true".to_owned()));
        }
    }

    #[tokio::test]
    async fn captured_contents_are_redacted_and_absent_unless_asked() {
        for capture in [false, true] {
            let kept = Kept::default();
            let observer = observer(&kept, true, capture);
            let agent = AgentName::lead();
            let call = ToolCall {
                id: "c".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"sk-secret-0123456789"}"#.into(),
            };
            observer.tool_started(&agent, &call);
            observer.tool_finished(
                &agent,
                &call,
                &ToolOutcome {
                    content: "key sk-secret-0123456789".into(),
                    is_error: false,
                    decision: None,
                },
            );
            let spans = flushed(&observer, &kept).await;
            let values: Vec<String> = spans[0]
                .attributes
                .iter()
                .map(|kv| kv.value.as_str().into_owned())
                .collect();
            assert!(
                values.iter().all(|v| !v.contains("sk-secret")),
                "{values:?}"
            );
            let has = |key: &str| spans[0].attributes.iter().any(|kv| kv.key.as_str() == key);
            assert_eq!(has(attr::TOOL_RESULT), capture);
            assert_eq!(has(attr::TOOL_ARGUMENTS), capture);
        }
    }

    #[tokio::test]
    async fn a_subagent_s_turn_under_the_same_name_nests_in_the_task_call() {
        let kept = Kept::default();
        let observer = observer(&kept, true, false);
        let agent = AgentName::lead();
        let call = |id: &str, name: &str| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        };
        let done = TurnSummary {
            end: "answered",
            model_calls: 1,
            tool_calls: 1,
        };
        let outcome = ToolOutcome {
            content: "ok".into(),
            is_error: false,
            decision: None,
        };
        observer.turn_started(&agent);
        observer.tool_started(&agent, &call("call_1", "task"));
        // The subagent: same name, same call id as its parent's call.
        observer.turn_started(&agent);
        observer.tool_started(&agent, &call("call_1", "read_file"));
        observer.tool_finished(&agent, &call("call_1", "read_file"), &outcome);
        observer.turn_finished(&agent, Ok(&done));
        observer.tool_finished(&agent, &call("call_1", "task"), &outcome);
        observer.turn_finished(&agent, Ok(&done));
        let spans = flushed(&observer, &kept).await;
        let id = |name: &str, nth: usize| {
            spans
                .iter()
                .filter(|s| s.name == name)
                .nth(nth)
                .map(|s| (s.span_context.span_id(), s.parent_span_id))
                .unwrap()
        };
        let (read, read_parent) = id("execute_tool read_file", 0);
        let (inner, inner_parent) = id("invoke_agent lead", 0);
        let (task, task_parent) = id("execute_tool task", 0);
        let (outer, outer_parent) = id("invoke_agent lead", 1);
        assert_eq!(read_parent, inner);
        assert_eq!(inner_parent, task);
        assert_eq!(task_parent, outer);
        assert_eq!(outer_parent, RunKey::shared("t", "lead-1").root_span_id());
        assert_ne!(read, task);
    }
}
