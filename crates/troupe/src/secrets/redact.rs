//! The [`Redactor`]: a small value holding troupe's secrets (the model API key, the credential
//! variables taken from the environment) that removes them from text.
//!
//! Redacting a whole text is a plain replacement. Text that is *cut* needs more care: a cut
//! through the middle of a secret leaves a prefix (or a suffix) that no longer matches it. So a
//! caller that keeps only part of a longer text either redacts the whole text first, or reads
//! [`Redactor::margin`] bytes past its cut and moves the cut with [`Redactor::cut_end`] /
//! [`Redactor::cut_start`] so that no secret straddles it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";
/// Shorter values are not treated as secrets: a placeholder key such as `ollama` (local servers
/// ignore the key) would otherwise be blotted out of every tool result, and a key this short
/// protects nothing anyway.
pub const MIN_SECRET_LEN: usize = 8;

/// Removes secrets from text. Cheap to clone; the default holds none and changes nothing.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Distinct secrets, longest first, so that a secret containing another is replaced whole.
    secrets: Arc<[String]>,
}

impl Redactor {
    /// A redactor for `secrets`; values shorter than [`MIN_SECRET_LEN`] bytes are left out.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::default().with_secrets(secrets)
    }

    /// This redactor plus `secrets`.
    pub fn with_secrets<I, S>(self, secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut all: Vec<String> = self.secrets.to_vec();
        all.extend(
            secrets
                .into_iter()
                .map(|secret| secret.as_ref().to_owned())
                .filter(|secret| secret.len() >= MIN_SECRET_LEN),
        );
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Self {
            secrets: all.into(),
        }
    }

    /// No secret to remove.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every occurrence of every secret replaced by [`REDACTED`]; borrowed when there
    /// was none.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for secret in self.secrets.iter() {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), REDACTED));
            }
        }
        text
    }

    /// `bytes` with every occurrence of every secret replaced by [`REDACTED`], as
    /// [`redact`](Self::redact) does for text (for output kept as it was printed, which need
    /// not be UTF-8); borrowed when there was none.
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let mut bytes = Cow::Borrowed(bytes);
        for secret in self.secrets.iter() {
            if let Some(replaced) = replace_all(&bytes, secret.as_bytes()) {
                bytes = Cow::Owned(replaced);
            }
        }
        bytes
    }

    /// Replaces every secret in `text`, in place.
    pub fn redact_in_place(&self, text: &mut String) {
        if let Cow::Owned(redacted) = self.redact(text) {
            *text = redacted;
        }
    }

    /// Replaces every secret in every string of `value`, in place (what a front end sends
    /// out: an editor's updates, an MCP client's results).
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(text) => self.redact_in_place(text),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            serde_json::Value::Object(fields) => {
                fields.values_mut().for_each(|v| self.redact_json(v));
            }
            _ => {}
        }
    }

    /// How many bytes past a cut [`cut_end`](Self::cut_end) needs to see (and how many before
    /// it [`cut_start`](Self::cut_start) needs) to find every secret that straddles it: the
    /// longest secret's length less one.
    pub fn margin(&self) -> usize {
        self.secrets
            .first()
            .map_or(0, |longest| longest.len().saturating_sub(1))
    }

    /// Where to end a head of `bytes` kept up to `cut`: `cut`, or earlier so that no secret
    /// occurring in `bytes` starts before the end and ends after it (the secret is left out
    /// rather than shown in part). `bytes` must extend [`margin`](Self::margin) bytes past `cut`
    /// where it can.
    pub fn cut_end(&self, bytes: &[u8], cut: usize) -> usize {
        let mut cut = cut.min(bytes.len());
        while let Some(start) = self.straddling(bytes, cut) {
            cut = start;
        }
        cut
    }

    /// Where to start a tail of `bytes` kept from `cut`: `cut`, or later so that no secret
    /// straddles the start (the secret is left out rather than shown in part). `bytes` must
    /// extend [`margin`](Self::margin) bytes before `cut` where it can.
    pub fn cut_start(&self, bytes: &[u8], cut: usize) -> usize {
        let mut cut = cut.min(bytes.len());
        while let Some(end) = self.straddling_end(bytes, cut) {
            cut = end;
        }
        cut
    }

    /// The earliest start of a secret occurrence that begins before `cut` and ends after it.
    fn straddling(&self, bytes: &[u8], cut: usize) -> Option<usize> {
        self.occurrences_across(bytes, cut)
            .map(|(start, _)| start)
            .min()
    }

    /// The latest end of a secret occurrence that begins before `cut` and ends after it.
    fn straddling_end(&self, bytes: &[u8], cut: usize) -> Option<usize> {
        self.occurrences_across(bytes, cut)
            .map(|(_, end)| end)
            .max()
    }

    /// Every occurrence `[start, end)` of a secret with `start < cut < end`.
    fn occurrences_across<'a>(
        &'a self,
        bytes: &'a [u8],
        cut: usize,
    ) -> impl Iterator<Item = (usize, usize)> + 'a {
        self.secrets.iter().flat_map(move |secret| {
            let secret = secret.as_bytes();
            let first = (cut + 1).saturating_sub(secret.len());
            (first..cut).filter_map(move |start| {
                let end = start + secret.len();
                (end > cut && bytes.get(start..end) == Some(secret)).then_some((start, end))
            })
        })
    }
}

/// `haystack` with every occurrence of `needle` (left to right, not overlapping) replaced by
/// [`REDACTED`], or `None` when there is none.
fn replace_all(haystack: &[u8], needle: &[u8]) -> Option<Vec<u8>> {
    let mut found = find(haystack, needle, 0)?;
    let mut out = Vec::with_capacity(haystack.len());
    let mut from = 0;
    loop {
        out.extend_from_slice(&haystack[from..found]);
        out.extend_from_slice(REDACTED.as_bytes());
        from = found + needle.len();
        match find(haystack, needle, from) {
            Some(next) => found = next,
            None => break,
        }
    }
    out.extend_from_slice(&haystack[from..]);
    Some(out)
}

/// The first occurrence of a non-empty `needle` in `haystack` at or after `from`.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    let first = *needle.first()?;
    let mut at = from;
    while at + needle.len() <= haystack.len() {
        let candidate = at + haystack[at..].iter().position(|byte| *byte == first)?;
        if haystack.get(candidate..candidate + needle.len()) == Some(needle) {
            return Some(candidate);
        }
        at = candidate + 1;
    }
    None
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secrets themselves.
        write!(f, "Redactor({} secret(s))", self.secrets.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789";

    #[test]
    fn every_occurrence_is_replaced_and_short_values_are_not_secrets() {
        let redactor = Redactor::new([KEY, "ollama", ""]);
        assert_eq!(
            redactor.redact(&format!("a {KEY} b {KEY}")),
            "a [redacted] b [redacted]"
        );
        assert!(matches!(redactor.redact("ollama"), Cow::Borrowed("ollama")));
        assert!(Redactor::new(["ollama"]).is_empty());
        assert_eq!(format!("{redactor:?}"), "Redactor(1 secret(s))");
    }

    #[test]
    fn bytes_are_redacted_like_text() {
        let inner = &KEY[3..14];
        let redactor = Redactor::new([inner, KEY]);
        for text in [
            format!("a {KEY} b {KEY}"),
            format!("{KEY}{KEY}{inner}"),
            format!("{inner} {KEY}x"),
            "nothing".to_owned(),
            String::new(),
        ] {
            assert_eq!(
                redactor.redact_bytes(text.as_bytes()).as_ref(),
                redactor.redact(&text).as_bytes(),
                "{text}"
            );
        }
        // Not UTF-8 around the key: still found.
        let mut bytes = vec![0xff, 0xfe];
        bytes.extend_from_slice(KEY.as_bytes());
        bytes.push(0x80);
        assert_eq!(
            redactor.redact_bytes(&bytes).as_ref(),
            b"\xff\xfe[redacted]\x80"
        );
    }

    #[test]
    fn a_secret_containing_another_is_replaced_whole() {
        let inner = &KEY[3..14];
        let redactor = Redactor::new([inner, KEY]);
        assert_eq!(
            redactor.redact(&format!("{KEY} {inner}")),
            "[redacted] [redacted]"
        );
    }

    #[test]
    fn cuts_never_split_a_secret() {
        let redactor = Redactor::new([KEY]);
        let text = format!("abcd{KEY}efgh");
        let bytes = text.as_bytes();
        let (start, end) = (4, 4 + KEY.len());
        // A cut inside the key moves to its start (a head) or its end (a tail).
        for cut in start + 1..end {
            assert_eq!(redactor.cut_end(bytes, cut), start, "{cut}");
            assert_eq!(redactor.cut_start(bytes, cut), end, "{cut}");
        }
        // A cut at either edge, or away from it, stays.
        for cut in [0, 2, start, end, end + 2, bytes.len()] {
            assert_eq!(redactor.cut_end(bytes, cut), cut);
            assert_eq!(redactor.cut_start(bytes, cut), cut);
        }
        assert_eq!(redactor.margin(), KEY.len() - 1);
        assert_eq!(Redactor::default().cut_end(bytes, 7), 7);
    }

    #[test]
    fn overlapping_secrets_move_the_cut_past_all_of_them() {
        // Two secrets that overlap: a cut inside their overlap clears both.
        let (a, b) = ("AAAAAAAABBBB", "BBBBCCCCCCCC");
        let redactor = Redactor::new([a, b]);
        let text = "..AAAAAAAABBBBCCCCCCCC..";
        let cut = 2 + 10; // inside both
        assert_eq!(redactor.cut_end(text.as_bytes(), cut), 2);
        assert_eq!(redactor.cut_start(text.as_bytes(), cut), 22);
    }
}
