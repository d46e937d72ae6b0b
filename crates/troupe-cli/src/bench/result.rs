//! What a suite returns: its figures, or one line saying why it failed. In a module of its own
//! so that the suites, which `main` runs, need nothing of `main`.

/// Every suite's failure is one line.
pub type BenchResult<T> = Result<T, String>;

/// Puts `context` before a failure's line.
pub fn fail(context: &str) -> impl Fn(String) -> String + '_ {
    move |e| format!("{context}: {e}")
}
