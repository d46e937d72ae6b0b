//! The realwork suite's figures: each run's calls summed up ([`RunFigures`]), and the report
//! with its goals ([`report`]).

use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

use super::measure::{union_ms, Call, Coordination, CriticalPath, Fixed, Span};
use crate::stats::round2;

/// The outcome of `cargo test --offline` in a run's final checkout.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CargoTest {
    pub passed: bool,
    pub ms: f64,
    /// Tests that passed, from cargo's `test result:` lines.
    pub tests_passed: usize,
}

/// The merges of a team run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Merges {
    pub clean: usize,
    pub conflicted: usize,
    /// Conflicted branches that are part of the lead's `HEAD` at the end.
    pub resolved: usize,
    /// `merge_teammate` calls that neither merged nor reported a conflict.
    pub failed: usize,
}

/// One run, summed up.
#[derive(Debug, Clone, Default)]
pub struct RunFigures {
    pub wall_ms: f64,
    /// Every model call, in ms from the run's start.
    pub spans: Vec<Span>,
    pub lead_calls: usize,
    pub teammate_calls: usize,
    /// The runtime's own calls (summaries, memory): none expected.
    pub side_calls: usize,
    /// Every request's bytes as sent, summed.
    pub prompt_bytes: usize,
    /// The lead's part of them.
    pub lead_prompt_bytes: usize,
    pub coordination: Coordination,
    /// The team tools' definitions in every request, summed.
    pub team_tool_definitions: usize,
    /// Tools and system message of the first request of the lead, and of a teammate.
    pub fixed_lead: Fixed,
    pub fixed_teammate: Option<Fixed>,
    pub merges: Merges,
    /// Work lost: each a line saying what.
    pub lost: Vec<String>,
    pub cargo: CargoTest,
}

impl RunFigures {
    /// From the run's `calls` (in the order they were made), its start and its wall time.
    pub fn from_calls(start: Instant, wall_ms: f64, calls: &[Call]) -> Self {
        let ms = |at: Instant| at.saturating_duration_since(start).as_secs_f64() * 1000.0;
        let mut out = Self {
            wall_ms,
            ..Self::default()
        };
        let mut by_start: Vec<&Call> = calls.iter().collect();
        by_start.sort_by_key(|c| c.start);
        let mut lead_seen = false;
        for call in by_start {
            out.spans.push(Span {
                agent: call.agent.clone(),
                start: ms(call.start),
                end: ms(call.end),
            });
            out.prompt_bytes += call.bytes;
            out.coordination.add(&call.coordination);
            out.team_tool_definitions += call.team_tool_definitions;
            if !call.turn {
                out.side_calls += 1;
            } else if call.agent == "lead" {
                out.lead_prompt_bytes += call.bytes;
                if !lead_seen {
                    out.fixed_lead = call.fixed;
                    lead_seen = true;
                }
                out.lead_calls += 1;
            } else {
                out.fixed_teammate.get_or_insert(call.fixed);
                out.teammate_calls += 1;
            }
        }
        out
    }

    /// The share of the wall time not spent waiting on the model on the critical path.
    fn runtime(&self) -> (CriticalPath, f64, f64) {
        let path = CriticalPath::of(&self.spans);
        let runtime_ms = (self.wall_ms - path.model_ms()).max(0.0);
        (path, runtime_ms, share(runtime_ms, self.wall_ms))
    }
}

fn share(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        (part / whole * 1000.0).round() / 1000.0
    }
}

fn fixed_json(fixed: Fixed) -> Value {
    json!({"tools": fixed.tools, "system": fixed.system, "total": fixed.tools + fixed.system})
}

fn goal(text: &str, value: f64, met: bool) -> Value {
    json!({"goal": text, "value": value, "met": met})
}

/// What the suite was asked to run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub teammates: usize,
    pub tasks: usize,
    pub latency_ms: u64,
}

/// The report of a team run and its solo baseline.
pub fn report(shape: Shape, team: &RunFigures, solo: &RunFigures) -> Value {
    let speedup = if team.wall_ms > 0.0 {
        round2(solo.wall_ms / team.wall_ms)
    } else {
        0.0
    };
    let speedup_goal = 0.8 * shape.teammates as f64;
    let (path, runtime_ms, runtime_share) = team.runtime();
    let [before_ms, between_ms, after_ms] = path.runtime_parts(team.wall_ms);
    let (_, solo_runtime_ms, solo_runtime_share) = solo.runtime();
    let no_model_ms = (team.wall_ms - union_ms(&team.spans)).max(0.0);
    let coordination = team.coordination.total();
    let prompt_bytes = team.prompt_bytes;
    let coordination_share = share(coordination as f64, prompt_bytes as f64);
    let with_definitions = share(
        (coordination + team.team_tool_definitions) as f64,
        prompt_bytes as f64,
    );
    let lost_work = team.lost.len();
    json!({
        "suite": "realwork",
        "teammates": shape.teammates,
        "tasks": shape.tasks,
        "latency_ms": shape.latency_ms,
        "team_wall_ms": team.wall_ms.round(),
        "solo_wall_ms": solo.wall_ms.round(),
        "speedup": speedup,
        "ideal_speedup": shape.teammates,
        "runtime_share": runtime_share,
        "runtime": {
            "runtime_ms": runtime_ms.round(),
            "critical_path_model_ms": path.model_ms().round(),
            "setup_model_ms": path.setup_model_ms.round(),
            "critical_teammate": path.critical_teammate,
            "teammate_model_ms": path.teammate_model_ms.round(),
            "tail_model_ms": path.tail_model_ms.round(),
            "runtime_before_critical_teammate_ms": before_ms.round(),
            "runtime_in_critical_teammate_ms": between_ms.round(),
            "runtime_after_critical_teammate_ms": after_ms.round(),
            "no_model_in_flight_ms": no_model_ms.round(),
            "solo_runtime_ms": solo_runtime_ms.round(),
            "solo_runtime_share": solo_runtime_share,
        },
        "model_calls": {
            "team_lead": team.lead_calls,
            "team_teammates": team.teammate_calls,
            "solo": solo.lead_calls,
            "side": team.side_calls + solo.side_calls,
        },
        "merges": {
            "clean": team.merges.clean,
            "conflicted": team.merges.conflicted,
            "resolved": team.merges.resolved,
            "failed": team.merges.failed,
        },
        "coordination_share": coordination_share,
        "coordination": {
            "bytes": coordination,
            "prompt_bytes": prompt_bytes,
            "lead_prompt_bytes": team.lead_prompt_bytes,
            "messages_and_tasks": team.coordination.messages_and_tasks,
            "team_tool_calls": team.coordination.team_tool_calls,
            "prompt_team_sections": team.coordination.prompt_team_sections,
            "team_tool_definitions": team.team_tool_definitions,
            "share_with_team_tool_definitions": with_definitions,
            "solo_prompt_bytes": solo.prompt_bytes,
        },
        "fixed_prompt_bytes": {
            "lead": fixed_json(team.fixed_lead),
            "teammate": team.fixed_teammate.map(fixed_json),
            "solo_lead": fixed_json(solo.fixed_lead),
        },
        "cargo_test_passed": team.cargo.passed,
        "cargo_test": team.cargo,
        "solo_cargo_test": solo.cargo,
        "lost_work": lost_work,
        "lost": team.lost,
        "solo_lost": solo.lost,
        "goals": {
            "speedup": goal(&format!(">= {speedup_goal:.1} (0.8 of ideal)"), speedup, speedup >= speedup_goal),
            "runtime_share": goal("<= 0.05", runtime_share, runtime_share <= 0.05),
            "coordination_share": goal("<= 0.10", coordination_share, coordination_share <= 0.10),
            "lost_work": goal("0", lost_work as f64, lost_work == 0),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(agent: &str, start: f64, end: f64) -> Span {
        Span {
            agent: agent.to_owned(),
            start,
            end,
        }
    }

    #[test]
    fn the_report_compares_the_runs_and_checks_the_goals() {
        let team = RunFigures {
            wall_ms: 1000.0,
            spans: vec![
                span("lead", 0.0, 200.0),
                span("mate-0", 210.0, 810.0),
                span("lead", 820.0, 980.0),
            ],
            prompt_bytes: 10_000,
            coordination: Coordination {
                messages_and_tasks: 500,
                team_tool_calls: 300,
                prompt_team_sections: 100,
            },
            team_tool_definitions: 2_000,
            merges: Merges {
                clean: 3,
                conflicted: 1,
                resolved: 1,
                failed: 0,
            },
            cargo: CargoTest {
                passed: true,
                ms: 900.0,
                tests_passed: 12,
            },
            ..RunFigures::default()
        };
        let solo = RunFigures {
            wall_ms: 3_000.0,
            spans: vec![span("lead", 0.0, 2_900.0)],
            ..RunFigures::default()
        };
        let shape = Shape {
            teammates: 4,
            tasks: 8,
            latency_ms: 200,
        };
        let report = report(shape, &team, &solo);
        assert_eq!(report["speedup"], 3.0);
        assert_eq!(report["ideal_speedup"], 4);
        // 1000 − (200 + 600 + 160) = 40 ms of runtime.
        assert_eq!(report["runtime_share"], 0.04);
        assert_eq!(report["runtime"]["solo_runtime_share"], 0.033);
        assert_eq!(report["coordination_share"], 0.09);
        assert_eq!(
            report["coordination"]["share_with_team_tool_definitions"],
            0.29
        );
        assert_eq!(report["merges"]["resolved"], 1);
        assert_eq!(report["goals"]["speedup"]["met"], false);
        assert_eq!(report["goals"]["runtime_share"]["met"], true);
        assert_eq!(report["goals"]["coordination_share"]["met"], true);
        assert_eq!(report["goals"]["lost_work"]["met"], true);
        assert_eq!(report["cargo_test_passed"], true);
    }
}
