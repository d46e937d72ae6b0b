//! The report of a suite: per case its pass rate, tokens, cost and wall time (totals over its
//! repetitions), and its verdict against `min_pass` — as a table for a person (with each failed
//! check under it) and as JSON for a file.

use serde_json::{json, Value};
use troupe::terminal_text::line_for_terminal;

use super::outcome::Outcome;
use super::suite::Suite;

/// One case's result.
pub struct CaseReport<'a> {
    pub name: &'a str,
    pub repeat: u32,
    pub passed: u32,
    pub min_pass: f64,
    pub tokens: u64,
    /// USD; `None` when a repetition's cost is unknown.
    pub cost_usd: Option<f64>,
    pub seconds: f64,
    /// Its repetitions, in order.
    pub repetitions: Vec<&'a Outcome>,
}

impl CaseReport<'_> {
    pub fn pass_rate(&self) -> f64 {
        f64::from(self.passed) / f64::from(self.repeat.max(1))
    }

    /// Whether it passed often enough.
    pub fn ok(&self) -> bool {
        // With a margin, so that rounding never fails a rate equal to `min_pass`.
        self.pass_rate() + 1e-9 >= self.min_pass
    }
}

/// Every case's result, in the suite's order.
pub fn cases<'a>(suite: &'a Suite, outcomes: &'a [Outcome]) -> Vec<CaseReport<'a>> {
    suite
        .cases
        .iter()
        .enumerate()
        .map(|(index, case)| {
            let mut repetitions: Vec<&Outcome> =
                outcomes.iter().filter(|o| o.case == index).collect();
            repetitions.sort_by_key(|o| o.number);
            let cost_usd = repetitions.iter().try_fold(0.0, |sum, o| {
                match (o.cost.usd, o.cost.unpriced.is_empty(), o.tokens) {
                    (Some(usd), true, _) => Some(sum + usd),
                    (None, true, 0) => Some(sum),
                    _ => None,
                }
            });
            CaseReport {
                name: &case.name,
                repeat: case.repeat,
                passed: u32::try_from(repetitions.iter().filter(|o| o.passed()).count())
                    .unwrap_or(u32::MAX),
                min_pass: case.min_pass,
                tokens: repetitions.iter().map(|o| o.tokens).sum(),
                cost_usd,
                seconds: repetitions.iter().map(|o| o.seconds).sum(),
                repetitions,
            }
        })
        .collect()
}

fn cost_text(cost: Option<f64>) -> String {
    cost.map_or_else(|| "unknown".to_owned(), |usd| format!("${usd:.4}"))
}

/// The table, then each failed check of each repetition.
pub fn table(reports: &[CaseReport<'_>]) -> String {
    let names: Vec<String> = reports
        .iter()
        .map(|r| line_for_terminal(r.name).into_owned())
        .collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .chain(std::iter::once(4))
        .max()
        .unwrap_or(4);
    let mut out = format!(
        "{:<width$}  {:>7}  {:>5}  {:>10}  {:>9}  {:>8}  verdict\n",
        "case", "passed", "rate", "tokens", "cost", "time"
    );
    for (report, name) in reports.iter().zip(&names) {
        let verdict = if report.ok() {
            "pass".to_owned()
        } else {
            format!("FAIL (min_pass {})", report.min_pass)
        };
        out.push_str(&format!(
            "{name:<width$}  {:>7}  {:>4.0}%  {:>10}  {:>9}  {:>6.1} s  {verdict}\n",
            format!("{}/{}", report.passed, report.repeat),
            report.pass_rate() * 100.0,
            report.tokens,
            cost_text(report.cost_usd),
            report.seconds,
        ));
    }
    let failed: Vec<String> = reports
        .iter()
        .zip(&names)
        .flat_map(|(report, name)| {
            report.repetitions.iter().flat_map(move |o| {
                o.failures.iter().map(move |f| {
                    format!(
                        "  {name} #{}: {}: {}\n",
                        o.number,
                        line_for_terminal(&f.check),
                        line_for_terminal(&f.why)
                    )
                })
            })
        })
        .collect();
    if !failed.is_empty() {
        out.push_str("\nfailed checks:\n");
        out.extend(failed);
    }
    out
}

/// The report as JSON.
pub fn json(suite: &Suite, reports: &[CaseReport<'_>]) -> Value {
    let cases: Vec<Value> = reports
        .iter()
        .map(|r| {
            let repetitions: Vec<Value> = r
                .repetitions
                .iter()
                .map(|o| {
                    json!({
                        "number": o.number,
                        "passed": o.passed(),
                        "exit_code": o.exit_code,
                        "tokens": o.tokens,
                        "cost_usd": o.cost.usd,
                        "unpriced_models": o.cost.unpriced,
                        "seconds": round3(o.seconds),
                        "failed_checks": o.failures.iter().map(|f| json!({
                            "check": f.check,
                            "why": f.why,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({
                "name": r.name,
                "repeat": r.repeat,
                "passed": r.passed,
                "pass_rate": round3(r.pass_rate()),
                "min_pass": r.min_pass,
                "ok": r.ok(),
                "tokens": r.tokens,
                "cost_usd": r.cost_usd,
                "seconds": round3(r.seconds),
                "repetitions": repetitions,
            })
        })
        .collect();
    json!({
        "suite": suite.file.display().to_string(),
        "ok": reports.iter().all(CaseReport::ok),
        "cases": cases,
    })
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}
