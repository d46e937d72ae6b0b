//! The web view's page: `page/index.html`, `page/app.js` and `page/style.css`, built into the
//! binary (no build step, nothing fetched from elsewhere). `troupe serve` serves the three files;
//! `troupe timeline --html` inlines them, with the events, into one offline file. Both embed
//! the event kinds from troupe's one list ([`kinds_script`]).

use troupe::store::events::kinds;

pub const INDEX_HTML: &str = include_str!("page/index.html");
pub const APP_JS: &str = include_str!("page/app.js");
pub const STYLE_CSS: &str = include_str!("page/style.css");

const TOKEN_MARK: &str = "__TOKEN__";
const STYLE_LINK: &str = r#"<link rel="stylesheet" href="style.css?token=__TOKEN__">"#;
const SCRIPT_TAG: &str = r#"<script src="app.js?token=__TOKEN__"></script>"#;

/// The page as served: its two files are asked for with the token, and the event kinds are
/// embedded before its script.
pub fn index(token: &str) -> String {
    INDEX_HTML
        .replace(SCRIPT_TAG, &format!("{}\n{SCRIPT_TAG}", kinds_script()))
        .replace(TOKEN_MARK, token)
}

/// Every kind of event (`troupe::store::events::kinds::ALL`, the one list) as JSON in
/// `<script type="application/json" id="event-kinds">`: the choices of the page's kind filter,
/// in both modes, so the page keeps no copy of its own.
pub fn kinds_script() -> String {
    let kinds = serde_json::Value::from(kinds::ALL.to_vec()).to_string();
    format!(
        "<script type=\"application/json\" id=\"event-kinds\">{}</script>",
        json_script_safe(&kinds)
    )
}

/// One self-contained page: the style and script inlined, and `events_json` (a JSON array)
/// embedded in `<script type="application/json" id="events">`, which switches the script to
/// offline mode (no requests).
#[cfg(test)]
pub fn standalone(events_json: &str) -> String {
    let (before, after) = standalone_around();
    format!("{before}{}{after}", json_script_safe(events_json))
}

/// The self-contained page cut where the events' JSON goes: a writer puts the array (each
/// piece through [`json_script_safe`]) between the two halves, a batch at a time.
pub fn standalone_around() -> (String, String) {
    const EVENTS: &str = "\u{0}EVENTS\u{0}";
    let style = format!("<style>\n{}</style>", STYLE_CSS.replace("</", "<\\/"));
    let scripts = format!(
        "{}\n<script type=\"application/json\" id=\"events\">{EVENTS}</script>\n<script>\n{}</script>",
        kinds_script(),
        APP_JS.replace("</", "<\\/")
    );
    let page = INDEX_HTML
        .replace(STYLE_LINK, &style)
        .replace(SCRIPT_TAG, &scripts)
        .replace("<title>troupe</title>", "<title>troupe timeline</title>");
    match page.split_once(EVENTS) {
        Some((before, after)) => (before.to_owned(), after.to_owned()),
        None => (page, String::new()),
    }
}

/// JSON that cannot end its `<script>` element early nor start an HTML comment in it: `</`
/// becomes `<\/` and `<!--` `<\u0021--` (both can only be inside JSON strings, where they read
/// as the same characters).
pub fn json_script_safe(json: &str) -> String {
    json.replace("</", "<\\/").replace("<!--", "<\\u0021--")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_its_files_so_both_modes_can_rewrite_them() {
        assert!(INDEX_HTML.contains(STYLE_LINK));
        assert!(INDEX_HTML.contains(SCRIPT_TAG));
        let page = standalone(r#"[{"text":"</script><script>alert(1)</script>"}]"#);
        assert!(!page.contains(TOKEN_MARK));
        assert!(!page.contains("app.js?"));
        assert!(!page.contains("</script><script>alert"));
        // The event kinds, the events and the script: nothing else closes a script element.
        assert_eq!(page.matches("</script>").count(), 3);
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(!APP_JS.contains("<!--") && !APP_JS.contains("</script"));
        let embedded = json_script_safe(r#"["</x", "<!--"]"#);
        let back: Vec<String> = serde_json::from_str(&embedded).unwrap();
        assert_eq!(back, ["</x", "<!--"]);
    }

    /// The list inside `<script … id="event-kinds">` of a page.
    fn embedded_kinds(page: &str) -> Vec<String> {
        let open = r#"<script type="application/json" id="event-kinds">"#;
        let start = page.find(open).expect("the page embeds the kinds") + open.len();
        let end = start + page[start..].find("</script>").unwrap();
        serde_json::from_str(&page[start..end]).unwrap()
    }

    #[test]
    fn both_modes_embed_every_event_kind_from_the_one_list() {
        let every: Vec<String> = kinds::ALL.iter().map(|k| (*k).to_owned()).collect();
        assert_eq!(embedded_kinds(&index("t0k")), every);
        assert_eq!(embedded_kinds(&standalone("[]")), every);
        // Before the script that reads it, and with no list of its own in the script.
        let page = index("t0k");
        assert!(page.find("id=\"event-kinds\"") < page.find("app.js?token=t0k"));
        // A hand-kept list would quote several kinds on a line; the renderers quote a few.
        let listing: Vec<&str> = APP_JS
            .lines()
            .filter(|line| {
                let quoted = kinds::ALL
                    .iter()
                    .filter(|k| line.contains(&format!("\"{k}\"")));
                quoted.count() > 4
            })
            .collect();
        assert!(listing.is_empty(), "app.js lists kinds itself: {listing:?}");
        assert!(APP_JS.contains("getElementById(\"event-kinds\")"));
    }

    #[test]
    fn the_reference_documents_every_event_kind() {
        let docs = include_str!("../../../../docs/events.md");
        let missing: Vec<&str> = kinds::ALL
            .iter()
            .copied()
            .filter(|kind| !docs.contains(&format!("`{kind}`")))
            .collect();
        assert!(missing.is_empty(), "docs/events.md lacks {missing:?}");
    }
}
