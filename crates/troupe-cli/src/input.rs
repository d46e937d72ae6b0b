//! Text and durations as the commands take them from their arguments: `-` for standard input,
//! `1h30m` for a duration. Shared by the commands (`run`, `send`, `worker`); depends on nothing
//! of theirs.

use crate::error::{CliError, Kind};

/// The largest text read from standard input for `--prompt -` or `troupe send AGENT -`.
pub const MAX_STDIN_TEXT_BYTES: u64 = 1024 * 1024;

/// `raw` itself, or for `-` the whole of standard input (UTF-8, at most
/// [`MAX_STDIN_TEXT_BYTES`]), as other agent CLIs read a piped prompt. `what` names it in errors.
pub fn text_or_stdin(raw: &str, what: &str) -> Result<String, CliError> {
    if raw != "-" {
        return Ok(raw.to_owned());
    }
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_STDIN_TEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            CliError::new(
                Kind::Failed,
                format!("cannot read {what} from standard input: {e}"),
            )
        })?;
    if bytes.len() as u64 > MAX_STDIN_TEXT_BYTES {
        return Err(CliError::usage(format!(
            "{what} on standard input is over {} MiB",
            MAX_STDIN_TEXT_BYTES / (1024 * 1024)
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| CliError::usage(format!("{what} on standard input is not valid UTF-8")))
}

/// `90s`, `5m`, `1h30m`, `1h 30m`, `1.5h`, `250ms` (humantime's units), or plain seconds; never
/// zero.
pub fn parse_duration(raw: &str) -> Result<std::time::Duration, CliError> {
    let raw = raw.trim();
    troupe::settings::parse_duration(raw).ok_or_else(|| {
        CliError::usage(format!(
            "invalid duration {raw:?}: expected e.g. 90s, 5m, 1h30m"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h30m").unwrap().as_secs(), 5_400);
        assert_eq!(parse_duration("1h 30m").unwrap().as_secs(), 5_400);
        assert_eq!(parse_duration("2m30s").unwrap().as_secs(), 150);
        assert_eq!(parse_duration("1d").unwrap().as_secs(), 86_400);
        assert_eq!(parse_duration("1.5m").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("5m").unwrap().as_secs(), 300);
        assert_eq!(parse_duration("90s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
        assert_eq!(parse_duration("1h").unwrap().as_secs(), 3600);
        for bad in ["", "m", "5x", "-5s", "0s", "0", "5m garbage", "1h30"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
