//! `troupe session` in a real terminal, driven through tmux as `watch` drives `troupe watch`
//! (its `Tmux`): every wait polls the screen against a deadline, nothing sleeps to synchronise.
//! A scripted model answers; no network.
//!
//! - Two prompts typed in the session: each answered in the lead's pane, the second after the
//!   first is quiescent, in one lead conversation (`troupe log` and the transcript show both);
//!   `/cost` shows the usage table, `/tasks` the board, `/compact` what it did, `/help` the keys; `/exit` gives the terminal back (main screen, cursor,
//!   canonical mode) and exits 0; ↑ recalls the prompts of the earlier session.
//! - Bare `troupe` on a terminal opens the session; off a terminal it is clap's help, as before.
//! - `--approval ask`: the write's ask shows its call and diff and `y` allows it; the next ask,
//!   answered by `troupe approve` from elsewhere, leaves the view; `n` denies with the reason
//!   typed on the prompt line.
//! - `--require-plans`: alice's plan waits in the view; `/approve` lets her write.
//! - A line typed while the team works reaches the lead's mailbox from `user`; Ctrl-C stops the
//!   work (its ask answered no) and the session stays.

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

    tmux.keys(&["-l", "/tasks"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the task board", |s| s.contains("no tasks"));
    tmux.keys(&["-l", "/compact"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the compaction's line", |s| {
        s.contains("lead: compacted") || s.contains("lead: nothing older to compact")
    });
    tmux.keys(&["-l", "/help"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the help", |s| s.contains("/send AGENT TEXT"));

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

/// The lead writes `out.txt` (an ask under `--approval ask`), then answers.
fn write_script(dir: &Path) -> String {
    let script = json!({"agents": {"lead": [
        super::watch::tool("write_file", json!({"path": "out.txt", "content": "hello\n"})),
        {"text": "wrote out.txt"},
        super::watch::tool("write_file", json!({"path": "two.txt", "content": "again\n"})),
        {"text": "wrote two.txt"},
    ]}});
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_permission_ask_is_answered_in_the_view_or_from_another_terminal() {
    if !super::watch::tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = write_script(scripts.path());
    let tmux = Tmux::start("asks", &[]);
    tmux.type_line(&format!(
        "{} session --model-script {script} --workspace {}; echo \"exit=$?\"",
        troupe_bin(),
        ws.to_str().unwrap()
    ));
    tmux.wait_for("the session", |s| s.contains("prompt · Enter sends"));

    // The ask shows the call and its diff; `y` allows it once.
    tmux.keys(&["-l", "Write out.txt."]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the ask", |s| {
        s.contains("permission asked (1 waiting)") && s.contains("+hello")
    });
    assert!(screen.contains("lead asks: write_file"), "{screen}");
    assert!(screen.contains("+hello"), "the diff: {screen}");
    assert!(!ws.join("out.txt").exists());
    tmux.keys(&["y"]);
    tmux.wait_for("the answer and the end", |s| {
        s.contains("wrote out.txt") && s.contains("the team is quiescent")
    });
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );

    // The next ask, answered by `troupe approve` from elsewhere: it leaves the view.
    tmux.keys(&["-l", "Write two.txt."]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the second ask", |s| {
        s.contains("permission asked (1 waiting)")
    });
    let requests = troupe_in(&ws, &["requests", "--json"]);
    let requests: serde_json::Value = serde_json::from_str(&requests.stdout).unwrap();
    let id = requests
        .as_array()
        .or_else(|| requests["requests"].as_array())
        .and_then(|all| {
            all.iter()
                .find(|r| r["kind"] == "permission" && r["status"] == "pending")
        })
        .and_then(|r| r["id"].as_str())
        .unwrap_or_else(|| panic!("{requests:#}"))
        .to_owned();
    let approved = troupe_in(&ws, &["approve", &id]);
    assert_eq!(approved.code, 0, "{approved:#?}");
    let screen = tmux.wait_for("the end after the approval elsewhere", |s| {
        s.contains("wrote two.txt") && s.contains("the team is quiescent")
    });
    assert!(!screen.contains("permission asked"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(ws.join("two.txt")).unwrap(),
        "again\n"
    );
    tmux.keys(&["C-d"]);
    let screen = tmux.wait_for("the shell", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
}

#[test]
fn a_line_typed_while_the_team_works_reaches_the_lead_and_ctrl_c_keeps_the_session() {
    if !super::watch::tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = write_script(scripts.path());
    let tmux = Tmux::start("working", &[]);
    tmux.type_line(&format!(
        "{} session --model-script {script} --workspace {}; echo \"exit=$?\"",
        troupe_bin(),
        ws.to_str().unwrap()
    ));
    tmux.wait_for("the session", |s| s.contains("prompt · Enter sends"));
    // The lead's write waits for its ask: the team is at work.
    tmux.keys(&["-l", "Write out.txt."]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the work", |s| {
        s.contains("permission asked") && s.contains("the team is at work")
    });
    // Typed text, not answer keys: the line is not empty after its first letter.
    tmux.keys(&["-l", "please also add a title"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the message's notice", |s| {
        s.contains("sent to the lead as a message")
    });
    let mailbox: serde_json::Value =
        serde_json::from_str(&troupe_in(&ws, &["mailbox", "lead", "--json"]).stdout).unwrap();
    let from_user: Vec<&serde_json::Value> = mailbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["sender"] == "user")
        .collect();
    assert_eq!(from_user.len(), 1, "{mailbox:#}");
    assert_eq!(
        from_user[0]["message"]["content"], "please also add a title",
        "{mailbox:#}"
    );

    // Ctrl-C stops the work (the ask answered no); the session stays for the next prompt.
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("the work stopped", |s| {
        s.contains("troupe: interrupted") && s.contains("prompt · Enter sends")
    });
    assert!(!screen.contains("permission asked"), "{screen}");
    assert!(!ws.join("out.txt").exists());
    assert_eq!(tmux.format("#{alternate_on}"), "1", "still in the session");
    tmux.keys(&["-l", "/exit"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the shell", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
}

#[test]
fn a_plan_is_approved_in_the_session_and_the_teammate_goes_on() {
    if !super::watch::tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = super::watch::team_script(scripts.path());
    let tmux = Tmux::start("plans", &[]);
    tmux.type_line(&format!(
        "{} session --model-script {script} --approval auto --require-plans --workspace {}; \
         echo \"exit=$?\"",
        troupe_bin(),
        ws.to_str().unwrap()
    ));
    tmux.wait_for("the session", |s| s.contains("prompt · Enter sends"));
    tmux.keys(&["-l", "Have alice write out.txt."]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("alice's plan", |s| {
        s.contains("1 plan pending") && s.contains("Write out.txt with a greeting.")
    });
    assert!(!ws.join("out.txt").exists(), "gated until approved");
    tmux.keys(&["-l", "/approve"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the approval and the end", |s| {
        s.contains("approved plan") && s.contains("the team is quiescent")
    });
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );
    tmux.keys(&["C-d"]);
    let screen = tmux.wait_for("the shell", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
}

#[test]
fn n_denies_an_ask_with_the_reason_typed_on_the_prompt_line() {
    if !super::watch::tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (_dir, ws) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = write_script(scripts.path());
    let tmux = Tmux::start("deny", &[]);
    tmux.type_line(&format!(
        "{} session --model-script {script} --workspace {}; echo \"exit=$?\"",
        troupe_bin(),
        ws.to_str().unwrap()
    ));
    tmux.wait_for("the session", |s| s.contains("prompt · Enter sends"));
    tmux.keys(&["-l", "Write out.txt."]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the ask", |s| s.contains("permission asked (1 waiting)"));
    tmux.keys(&["n"]);
    tmux.wait_for("the reason's prompt", |s| s.contains("type the reason"));
    tmux.keys(&["-l", "not in this folder"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the denial and the end", |s| {
        s.contains("denied") && s.contains("the team is quiescent")
    });
    assert!(screen.contains("not in this folder"), "{screen}");
    assert!(!ws.join("out.txt").exists());
    tmux.keys(&["C-d"]);
    let screen = tmux.wait_for("the shell", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
}
