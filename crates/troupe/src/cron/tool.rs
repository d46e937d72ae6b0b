//! `schedule_cron` (SPEC §4.1, tool 14; effect `write`, scope troupe state): the lead schedules
//! a prompt for itself on a cron expression in a time zone. It changes only troupe's own cron
//! jobs, so the default policy allows it without asking (SPEC §7).
//!
//! The result is JSON: the job id and its first fire time in UTC and on the zone's wall clock.
//! An invalid expression, an unknown zone or a blank prompt is `invalid_arguments`.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::runtime::{CronRuntime, ScheduleRequest};
use crate::tools::{Effect, Scope, ToolContext, ToolDefinition, ToolError, ToolHandler};

/// The `schedule_cron` handler, bound to the run's [`CronRuntime`].
#[derive(Clone)]
pub struct ScheduleCronTool {
    runtime: CronRuntime,
}

impl ScheduleCronTool {
    pub fn new(runtime: CronRuntime) -> Self {
        Self { runtime }
    }
}

fn string_arg(args: &Value, key: &str) -> Result<String, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ToolError::InvalidArguments(format!("missing string argument `{key}`")))
}

fn bool_arg(args: &Value, key: &str) -> Result<bool, ToolError> {
    args.get(key)
        .and_then(Value::as_bool)
        .ok_or_else(|| ToolError::InvalidArguments(format!("missing boolean argument `{key}`")))
}

#[async_trait]
impl ToolHandler for ScheduleCronTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "schedule_cron".to_owned(),
            description: "Schedule a prompt for yourself: when the cron expression matches in the \
                given time zone, `prompt` comes back to you as an event. `cron` has exactly 5 \
                fields: minute hour day-of-month month day-of-week (e.g. \"30 9 * * MON-FRI\"; \
                day-of-week 0 or 7 is Sunday). `recurring: false` fires once, at the next match, \
                then the job is gone. `durable: true` keeps the job in the workspace for later \
                runs; otherwise it ends with this run. Returns the job id and the first fire time \
                in UTC and in the zone."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "cron": {"type": "string", "minLength": 1,
                             "description": "5 fields: minute hour day-of-month month day-of-week."},
                    "prompt": {"type": "string", "minLength": 1,
                               "description": "What you are told when the job fires."},
                    "timezone": {"type": "string", "minLength": 1,
                                 "description": "An IANA time zone, e.g. Europe/Berlin or UTC."},
                    "recurring": {"type": "boolean",
                                  "description": "true: fire on every match; false: fire once."},
                    "durable": {"type": "boolean",
                                "description": "true: keep the job across runs of troupe."}
                },
                "required": ["cron", "prompt", "timezone", "recurring", "durable"],
                "additionalProperties": false
            }),
            effect: Effect::Write,
        }
    }

    fn scope(&self) -> Scope {
        Scope::TroupeState
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let request = ScheduleRequest {
            cron: string_arg(&args, "cron")?,
            prompt: string_arg(&args, "prompt")?,
            timezone: string_arg(&args, "timezone")?,
            recurring: bool_arg(&args, "recurring")?,
            durable: bool_arg(&args, "durable")?,
        };
        let (recurring, durable) = (request.recurring, request.durable);
        let job = self
            .runtime
            .schedule(request)
            .await
            .map_err(|e| ToolError::coded(&e))?;
        Ok(json!({
            "job_id": job.id,
            "next_fire_utc": job.next_fire_utc,
            "next_fire_local": job.next_fire_local,
            "timezone": job.timezone,
            "recurring": recurring,
            "durable": durable,
        })
        .to_string())
    }
}
