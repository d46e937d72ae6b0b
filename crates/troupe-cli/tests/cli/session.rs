//! `troupe session` in a real terminal, driven through tmux as `watch` drives `troupe watch`
//! (its `Tmux`): every wait polls the screen against a deadline, nothing sleeps to synchronise.
//! A scripted model answers; no network.
//!
//! - Two prompts typed in the session: each answered in the lead's pane, the second after the
//!   first is quiescent, in one lead conversation (`troupe log` and the transcript show both);
//!   `/cost` shows the usage table; `/exit` gives the terminal back (main screen, cursor,
//!   canonical mode) and exits 0; ↑ recalls the prompts of the earlier session.
//! - Bare `troupe` on a terminal opens the session; off a terminal it is clap's help, as before.

use std::path::Path;

use serde_json::json;

use super::support::troupe_in;
use super::watch::{exit_of, troupe_bin, workspace, Tmux, PROMPT};

/// The lead answers each prompt with one text.
fn answers_script(dir: &Path, answers: &[&str]) -> String {
    let usage = json!({"prompt_tokens": 1200, "completion_tokens": 34, "total_tokens": 1234});
    let lead: Vec<serde_json::Value> = answers
        .iter()
        .map(|a| json!({ "text": a, "usage": usage }))
        .collect();
    let path = dir.join("script.json");
    std::fs::write(&path, json!({"agents": {"lead": lead}}).to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn session_line(ws: &Path, script: &str) -> String {
    format!(
        "{} session --model-script {script} --approval auto --workspace {}; echo \"exit=$?\"",
        troupe_bin(),
        ws.to_str().unwrap()
    )
}

/// The modes stty reports, of `icanon` and `echo`.
fn tty_modes(tmux: &Tmux) -> Vec<String> {
    tmux.type_line("stty -a | tr ' ;' '\\n\\n' | grep -x -e -icanon -e icanon -e -echo -e echo");
    let screen = tmux.wait_for("stty's answer", |s| {
        s.lines()
            .any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    screen
        .lines()
        .map(str::trim)
        .filter(|l| matches!(*l, "icanon" | "-icanon" | "echo" | "-echo"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn two_prompts_continue_one_lead_conversation_and_exit_gives_the_terminal_back() {
    if !super::watch::tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = answers_script(
        scripts.path(),
        &["first answer from the lead", "second answer from the lead"],
    );
    let tmux = Tmux::start("session", &[]);
    tmux.type_line(&session_line(&ws, &script));
    tmux.wait_for("the session", |s| {
        s.contains("troupe session ·") && s.contains("prompt · Enter sends")
    });
    assert_eq!(tmux.format("#{alternate_on}"), "1", "alternate screen");

    tmux.keys(&["-l", "What is the first thing?"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the first answer, quiescent", |s| {
        s.contains("first answer from the lead") && s.contains("the team is quiescent")
    });
    assert!(screen.contains("› What is the first thing?"), "{screen}");

    tmux.keys(&["-l", "And the second?"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the second answer, quiescent", |s| {
        s.contains("second answer from the lead")
            && s.contains("the team is quiescent")
            && s.contains("› And the second?")
    });

    tmux.keys(&["-l", "/cost"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the usage table", |s| {
        s.contains("usage by agent") && s.contains("lead") && s.contains("2,400")
    });

    tmux.keys(&["-l", "/exit"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the shell after /exit", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
    assert!(!screen.contains("troupe session ·"), "{screen}");
    assert_eq!(tmux.format("#{alternate_on} #{cursor_flag}"), "0 1");
    assert_eq!(tty_modes(&tmux), ["icanon", "echo"], "raw mode is off");

    // Both prompts are runs of the same lead conversation.
    let log = troupe_in(&ws, &["log", "--json"]);
    assert_eq!(log.code, 0, "{log:#?}");
    let prompts: Vec<String> = log
        .stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|e| e["kind"] == "run_started")
        .filter_map(|e| e["prompt"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        prompts,
        ["What is the first thing?", "And the second?"],
        "{log:#?}"
    );
    let transcript = std::fs::read_to_string(ws.join(".troupe/transcripts/lead.jsonl")).unwrap();
    let first = transcript.find("What is the first thing?").unwrap();
    let second = transcript.find("And the second?").unwrap();
    assert!(first < second, "{transcript}");
    assert!(transcript.contains("first answer from the lead"));
    assert!(transcript.contains("second answer from the lead"));

    // The next session recalls the prompts with ↑.
    tmux.type_line(&session_line(&ws, &script));
    tmux.wait_for("the session again", |s| s.contains("prompt · Enter sends"));
    tmux.keys(&["Up"]);
    tmux.wait_for("the last prompt recalled", |s| {
        s.contains("And the second?▏")
    });
    tmux.keys(&["C-c", "C-d"]);
    tmux.wait_for("the shell after Ctrl-D", |s| {
        s.trim_end().ends_with(PROMPT.trim_end()) && s.matches("exit=0").count() == 2
    });
}

#[test]
fn bare_troupe_on_a_terminal_opens_the_session_and_off_one_prints_help() {
    let (_dir, ws) = workspace();
    let ran = super::support::command(&ws)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.contains("Usage: troupe"), "{stderr}");
    if !super::watch::tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    // The scripted model from the workspace's own settings, trusted for this command.
    answers_script(&ws, &["hello from the bare session"]);
    std::fs::write(
        ws.join("troupe.toml"),
        "[model]\nscript = \"script.json\"\n",
    )
    .unwrap();
    let tmux = Tmux::start("bare", &[("TROUPE_TRUST_WORKSPACE", "1")]);
    tmux.type_line(&format!(
        "cd {} && {}; echo \"exit=$?\"",
        ws.to_str().unwrap(),
        troupe_bin()
    ));
    tmux.wait_for("the session", |s| s.contains("troupe session ·"));
    tmux.keys(&["-l", "hi"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the answer", |s| s.contains("hello from the bare session"));
    tmux.keys(&["C-d"]);
    let screen = tmux.wait_for("the shell after Ctrl-D", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
}
