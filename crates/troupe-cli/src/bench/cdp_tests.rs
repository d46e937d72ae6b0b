//! Tests of the DevTools client against a real headless Chromium on `data:` pages. Set
//! `TROUPE_SKIP_BROWSER=1` to skip them (with a notice) on a machine that cannot install Chromium.

use std::time::Duration;

use serde_json::json;

use crate::cdp::{decode_base64, Page};

fn skipped() -> bool {
    let skip = std::env::var_os("TROUPE_SKIP_BROWSER").is_some_and(|v| v == "1");
    if skip {
        eprintln!("TROUPE_SKIP_BROWSER=1: the browser test is skipped");
    }
    skip
}

const PAGE: &str = "data:text/html,<title>t</title><body><p id=x>hello</p></body>";

#[test]
fn evaluate_returns_the_value_of_an_expression_and_of_a_promise() {
    if skipped() {
        return;
    }
    let mut page = Page::open().unwrap();
    page.navigate(PAGE).unwrap();
    assert_eq!(
        page.evaluate("document.getElementById('x').textContent")
            .unwrap(),
        json!("hello")
    );
    assert_eq!(
        page.evaluate("Promise.resolve({ sum: 1 + 2 })").unwrap(),
        json!({ "sum": 3 })
    );
    let error = page
        .evaluate("Promise.reject(new Error('no way'))")
        .unwrap_err();
    assert!(error.contains("no way"), "{error}");
}

#[test]
fn wait_for_sees_a_later_mutation_and_times_out_clearly() {
    if skipped() {
        return;
    }
    let mut page = Page::open().unwrap();
    page.navigate(PAGE).unwrap();
    page.evaluate("setTimeout(() => document.body.dataset.ready = '1', 50); 0")
        .unwrap();
    page.wait_for(
        "document.body.dataset.ready === '1'",
        Duration::from_secs(10),
    )
    .unwrap();
    let error = page
        .wait_for(
            "document.querySelector('#never')",
            Duration::from_millis(100),
        )
        .unwrap_err();
    assert!(error.contains("#never"), "{error}");
}

#[test]
fn a_screenshot_is_a_png() {
    if skipped() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shot.png");
    let mut page = Page::open().unwrap();
    page.navigate(PAGE).unwrap();
    page.screenshot(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn base64_decodes_with_and_without_padding() {
    assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
    assert_eq!(decode_base64("aGVsbG8").unwrap(), b"hello");
    assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
    assert_eq!(decode_base64("").unwrap(), b"");
    assert!(decode_base64("a").is_err());
    assert!(decode_base64("a*==").is_err());
}
