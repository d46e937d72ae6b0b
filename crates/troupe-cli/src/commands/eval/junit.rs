//! The report as JUnit XML: one `<testsuite>` named after the suite file, one `<testcase>` per
//! repetition (`<case name> #<n>`, its class the case's name), a failed one holding one
//! `<failure>` whose message lists its failed checks.

use std::fmt::Write as _;

use super::report::CaseReport;

/// The XML document.
pub fn xml(suite_name: &str, reports: &[CaseReport<'_>]) -> String {
    let tests: usize = reports.iter().map(|r| r.repetitions.len()).sum();
    let failures: usize = reports
        .iter()
        .map(|r| r.repetitions.iter().filter(|o| !o.passed()).count())
        .sum();
    let time: f64 = reports.iter().map(|r| r.seconds).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">",
        escape(suite_name)
    );
    for report in reports {
        for outcome in &report.repetitions {
            let _ = write!(
                out,
                "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                escape(report.name),
                escape(&format!("{} #{}", report.name, outcome.number)),
                outcome.seconds
            );
            if outcome.passed() {
                out.push_str("/>\n");
                continue;
            }
            let lines: Vec<String> = outcome
                .failures
                .iter()
                .map(|f| format!("{}: {}", f.check, f.why))
                .collect();
            let _ = writeln!(
                out,
                ">\n    <failure message=\"{}\">{}</failure>\n  </testcase>",
                escape(&lines.join("; ")),
                escape(&lines.join("\n"))
            );
        }
    }
    out.push_str("</testsuite>\n");
    out
}

/// Text made safe for an XML attribute or element: the five markup characters as entities, and
/// characters XML 1.0 cannot hold at all (most control characters) as `\xHH` text.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("a<b>&\"c'\u{1b}[31m\n"),
            "a&lt;b&gt;&amp;&quot;c&apos;\\x1b[31m&#10;"
        );
    }
}
