//! A repetition's result: what it measured and which checks failed, and why.

/// A check that failed (or a step that kept the checks from running: `fixture`, `trust`,
/// `run`, `timeout`), and why, as one line of plain text (escaped when shown).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub check: String,
    pub why: String,
}

impl Failure {
    pub fn new(check: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            why: why.into(),
        }
    }
}

/// The estimated cost of a repetition's run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cost {
    /// USD, from `troupe usage`; `None` when it could not be read.
    pub usd: Option<f64>,
    /// Models whose tokens have no price (their tokens are not in `usd`).
    pub unpriced: Vec<String>,
}

/// One repetition of one case.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case's index in the suite.
    pub case: usize,
    /// 1-based.
    pub number: u32,
    /// The run's wall time.
    pub seconds: f64,
    pub tokens: u64,
    pub cost: Cost,
    /// The run's exit code (`None`: it did not run, or was killed).
    pub exit_code: Option<i32>,
    pub failures: Vec<Failure>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}
