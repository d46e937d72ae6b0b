//! troupe's own state files against a hostile or crashed past: torn last lines of append-only
//! logs are cut before the next append, and duplicate JSON keys are refused in every format.

mod duplicate_keys;
mod torn_tails;
pub mod usage;

/// `bytes` (a JSON object) with `"key": value` inserted as its first entry, so the key appears
/// twice and a lenient parser would keep the original (last) value.
pub fn with_duplicate(bytes: &[u8], key: &str, value: &str) -> Vec<u8> {
    let text = std::str::from_utf8(bytes).unwrap();
    let open = text.find('{').unwrap();
    let mut out = String::with_capacity(text.len() + key.len() + value.len() + 4);
    out.push_str(&text[..=open]);
    out.push_str(&format!("{}:{value},", serde_json::to_string(key).unwrap()));
    out.push_str(&text[open + 1..]);
    out.into_bytes()
}

/// Every line of a JSON Lines file parses, and the file ends with a newline.
pub fn assert_clean_jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.ends_with(b"\n"), "a torn tail is left in {path:?}");
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l)
                .unwrap_or_else(|e| panic!("{path:?}: line {:?}: {e}", String::from_utf8_lossy(l)))
        })
        .collect()
}
