//! The attribute names troupe's spans carry: the OpenTelemetry GenAI semantic conventions'
//! (`gen_ai.*`), then troupe's own (`troupe.*`).

pub const OPERATION: &str = "gen_ai.operation.name";
pub const PROVIDER: &str = "gen_ai.provider.name";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const AGENT_NAME: &str = "gen_ai.agent.name";
pub const AGENT_ID: &str = "gen_ai.agent.id";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// Captured contents only (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
pub const TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub const TOOL_RESULT: &str = "gen_ai.tool.call.result";
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub const ERROR_TYPE: &str = "error.type";

pub const TEAM: &str = "troupe.team";
pub const SANDBOX: &str = "troupe.sandbox.mode";
pub const DECISION: &str = "troupe.permission.decision";
pub const DECISION_SOURCE: &str = "troupe.permission.source";
pub const RULES_SAID: &str = "troupe.permission.rules_said";
pub const PLAN_GATE: &str = "troupe.plan_gate.outcome";
pub const TURN_END: &str = "troupe.turn.end";
/// `true` on a model call whose token counts troupe estimated (its server reported none).
pub const USAGE_ESTIMATED: &str = "troupe.usage.estimated";
pub const MESSAGE_ID: &str = "troupe.message.id";
pub const MESSAGE_IDS: &str = "troupe.message.ids";
pub const MESSAGE_KIND: &str = "troupe.message.kind";
pub const MESSAGE_SENDER: &str = "troupe.message.sender";
pub const MESSAGE_RECIPIENT: &str = "troupe.message.recipient";
pub const MESSAGE_CONTENT: &str = "troupe.message.content";
