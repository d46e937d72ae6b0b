//! A `tools/call` result as the text a model reads.
//!
//! Text blocks are joined with newlines; a block that is not text is described in one line
//! (`[image: image/png, 1234 bytes of base64]`, `[resource https://…]` followed by its text
//! when it has some); structured content alone is shown as JSON. Read from the result's JSON,
//! so a block kind this code does not know is described by its `type`, not dropped silently.

use serde_json::Value;

/// The text of a result's `content` (and `structuredContent` when there is no content).
pub fn render(result: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(blocks) = result.get("content").and_then(Value::as_array) {
        for block in blocks {
            parts.push(render_block(block));
        }
    }
    if parts.is_empty() {
        if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            parts.push(structured.to_string());
        }
    }
    parts.join("\n")
}

fn render_block(block: &Value) -> String {
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match text("type") {
        "text" => text("text").to_owned(),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {} bytes of base64]",
            text("mimeType"),
            text("data").len()
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(body) => format!("[resource {uri}]\n{body}"),
                None => format!("[resource {uri}: binary content not shown]"),
            }
        }
        "resource_link" => format!("[resource link {}]", text("uri")),
        other => format!("[{other} content not shown]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_joined_and_other_blocks_described() {
        let result = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
            {"type": "text", "text": "two"},
            {"type": "hologram"}
        ]});
        assert_eq!(
            render(&result),
            "one\n[image: image/png, 4 bytes of base64]\n[resource file:///a]\nbody\n\
             [resource link file:///b]\ntwo\n[hologram content not shown]"
        );
    }

    #[test]
    fn structured_content_alone_is_json() {
        assert_eq!(
            render(&json!({"content": [], "structuredContent": {"a": 1}})),
            "{\"a\":1}"
        );
        assert_eq!(render(&json!({})), "");
    }
}
