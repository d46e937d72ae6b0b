//! The page's "Waiting for approval" panel in a real headless Chromium, during a real `troupe
//! run` with no terminal whose asks wait for an answer from elsewhere (`[approvals] no_terminal =
//! "wait"`): the scripted lead writes two files; the panel shows each call with its diff (the
//! model's text shown as text, never as markup), a click on **Approve once** lets the first write
//! happen, **Deny** with a reason refuses the second and the model is told the reason; the audit
//! names the page as the answerer. Screenshot: `target/browser-artifacts/serve-permission.png`.

use std::process::Stdio;

use serde_json::{json, Value};

use super::browser::{artifacts, exit_of, lines_of, open_page, serve, skipped, Running, WAIT};
use super::support::command;

/// Hostile text in the first file: the page must show it, not run or render it.
const FIRST: &str = "hello from the page\n<b id=\"injected\">bold</b>\n";

fn write_file(path: &str, content: &str) -> Value {
    json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]})
}

/// The condition that the panel shows the request for `path` with its buttons.
fn card_for(path: &str) -> String {
    format!(
        r#"[...document.querySelectorAll('#permissions .permission[data-tool="write_file"]')]
           .some(el => el.querySelector('.summary').textContent === 'write_file: {path}'
                       && el.querySelector('button[data-choice="once"]')
                       && !el.querySelector('button[data-choice="once"]').disabled)"#
    )
}

/// Evaluates `action` on the card for `path` (bound as `card`).
fn on_card(path: &str, action: &str) -> String {
    format!(
        r#"(() => {{ const card = [...document.querySelectorAll('#permissions .permission')]
             .find(el => el.querySelector('.summary').textContent === 'write_file: {path}');
           {action} }})()"#
    )
}

#[test]
fn a_person_approves_and_denies_a_waiting_write_on_the_page() {
    if skipped() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(
        ws.join("troupe.toml"),
        "[approvals]\nno_terminal = \"wait\"\n",
    )
    .unwrap();
    let script = json!({"agents": {"lead": [
        write_file("first.txt", FIRST),
        write_file("second.txt", "not wanted\n"),
        {"text": "Done."}
    ]}});
    let script_path = ws.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut child = command(&ws)
        .args(["run", "--prompt", "Write two files."])
        .arg("--model-script")
        .arg(&script_path)
        .args(["--workspace", ws.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let mut run = Running(child);
    let (_server, url) = serve(&ws);

    let mut page = open_page();
    page.navigate(&url).unwrap();
    page.wait_for(&card_for("first.txt"), WAIT)
        .unwrap_or_else(|e| panic!("no pending write on the page: {e}"));
    // The diff, its added lines marked, the model's markup shown as text.
    let shown = page
        .evaluate(&on_card(
            "first.txt",
            r#"return {
                 call: card.querySelector('.call').textContent,
                 added: [...card.querySelectorAll('.diff .add')].map(l => l.textContent),
                 injected: !!document.getElementById('injected'),
                 always: !!card.querySelector('button[data-choice="always"]'),
                 buttons: [...card.querySelectorAll('button')].map(b => b.textContent),
               };"#,
        ))
        .unwrap();
    assert_eq!(
        shown,
        json!({
            "call": "lead wants to run write_file",
            "added": ["+hello from the page", "+<b id=\"injected\">bold</b>"],
            "injected": false,
            "always": true,
            "buttons": [
                "Approve once",
                "Always this run: write_file(first.txt)",
                "Save to troupe.toml: write_file(first.txt)",
                "Deny"
            ],
        })
    );
    assert!(
        !ws.join("first.txt").exists(),
        "the write waits for the page"
    );
    page.screenshot(&artifacts().join("serve-permission.png"))
        .unwrap();

    page.evaluate(&on_card(
        "first.txt",
        r#"card.querySelector('button[data-choice="once"]').click(); return true;"#,
    ))
    .unwrap();
    page.wait_for(&card_for("second.txt"), WAIT)
        .unwrap_or_else(|e| panic!("the second write was not asked on the page: {e}"));
    assert_eq!(
        std::fs::read_to_string(ws.join("first.txt")).unwrap(),
        FIRST,
        "approved once on the page"
    );
    page.evaluate(&on_card(
        "second.txt",
        r#"card.querySelector('input.reason').value = 'keep the folder tidy';
           card.querySelector('button[data-choice="no"]').click(); return true;"#,
    ))
    .unwrap();

    let (status, said) = exit_of(&mut run, &stdout);
    assert!(
        status.success(),
        "{status}; stdout: {said:?}; stderr: {:?}",
        stderr.try_iter().collect::<Vec<_>>()
    );
    assert!(!ws.join("second.txt").exists(), "denied on the page");
    // Both answers gone from the panel once the run read them.
    page.wait_for(
        "!document.querySelector('#permissions .permission') && document.querySelector('#permissions .empty')",
        WAIT,
    )
    .unwrap();

    let audit: Vec<Value> = std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["tool"] == "write_file")
        .collect();
    let decisions: Vec<(&str, &str)> = audit
        .iter()
        .map(|r| (r["decision"].as_str().unwrap(), r["rule"].as_str().unwrap()))
        .collect();
    assert_eq!(
        decisions,
        [
            ("allow", "default+approval:page"),
            ("deny", "default+approval:page")
        ],
        "{audit:#?}"
    );
    let denial = audit[1]["reason"].as_str().unwrap();
    assert!(denial.ends_with(": keep the folder tidy"), "{denial}");
    // The model was told why: the denied call's result carries the reason.
    let events =
        troupe::store::events::read::read_all(&troupe::layout::Layout::new(&ws).events_log())
            .unwrap();
    let told: Vec<String> = events
        .iter()
        .filter(|e| e.kind == "tool_finished" && e.str("outcome") == Some("denied"))
        .filter_map(|e| e.str("denial_reason").map(str::to_owned))
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("keep the folder tidy"), "{told:?}");
}
