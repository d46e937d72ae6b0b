//! `troupe watch` in a real terminal: tmux runs it in a detached session (`new-session -d -x
//! 100 -y 30`), keys go in with `send-keys`, the screen comes back with `capture-pane -p`.
//! Every wait polls the screen (or a file) against a deadline; nothing sleeps to synchronise.
//! Skipped, with a notice, where tmux is not installed.
//!
//! - A scripted team (a queue per agent, `--require-plans`) runs in the background while the
//!   view shows it: the panes fill, alice's plan waits, `a` approves it from the view, alice then
//!   writes and the run ends; `m` messages alice; after `q` the alternate screen is left, the
//!   cursor shown, the line discipline back to canonical (raw mode off) and the prompt back.
//! - With `--store`, from another folder: the shared team's stream and plans come from its
//!   database, and the approval reaches the team through it (skipped without PostgreSQL).
//! - `NO_COLOR` gives a screen without colours; colours otherwise.
//! - SIGTERM ends the view as `q` does, the terminal given back.
//! - Without a terminal on stdout: exit 2, one line naming `troupe log -f`.
//! - `troupe run --watch`: the same view for the run it starts — the plan approved from it, the
//!   answer and exit 0 after `q`; `q` while the run goes stops it (exit 130); without a
//!   terminal, or with `--approval ask`, exit 2 before anything runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::plans::wait;
use super::support::{
    assert_fails, command, demo_workspace, no_user_config, troupe_in, without_settings_variables,
};

const DEADLINE: Duration = Duration::from_secs(40);

/// How often the screen is looked at while waiting for something on it.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// The shell's prompt in the tmux session: the test knows the shell is back when it shows.
pub(super) const PROMPT: &str = "watch-test$ ";

pub(super) fn tmux_installed() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server of the test's own (its own socket), killed when dropped.
pub(super) struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached 100×30 session running an interactive bash with the tests' environment (no
    /// model or store variables, no user config) plus `env`.
    pub(super) fn start(name: &str, env: &[(&str, &str)]) -> Self {
        let tmux = Self {
            socket: format!("troupe-watch-{}-{name}", std::process::id()),
        };
        let mut start = Command::new("tmux");
        without_settings_variables(&mut start);
        start
            .env("XDG_CONFIG_HOME", no_user_config())
            .env_remove("NO_COLOR")
            .envs(env.iter().copied())
            .args([
                "-L",
                &tmux.socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "100",
            ])
            .args(["-y", "30"])
            .arg(format!("PS1='{PROMPT}' exec bash --norc --noprofile -i"));
        let out = start.output().unwrap();
        assert!(out.status.success(), "tmux new-session: {out:?}");
        tmux.wait_for("the shell's prompt", |screen| {
            screen.contains(PROMPT.trim_end())
        });
        tmux
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// A line typed into the shell, then Enter.
    pub(super) fn type_line(&self, line: &str) {
        self.tmux(&["send-keys", "-l", line]);
        self.tmux(&["send-keys", "Enter"]);
    }

    /// Keys by tmux's names (`Tab`, `Enter`, `C-c`) or literal characters.
    pub(super) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// The screen as text (`colours`: with its escape sequences).
    fn screen(&self, colours: bool) -> String {
        if colours {
            self.tmux(&["capture-pane", "-p", "-e"])
        } else {
            self.tmux(&["capture-pane", "-p"])
        }
    }

    /// `#{…}` of the pane, e.g. `alternate_on`.
    pub(super) fn format(&self, format: &str) -> String {
        self.tmux(&["display-message", "-p", format])
            .trim()
            .to_owned()
    }

    /// Looks at the screen until `found` holds; returns that screen.
    pub(super) fn wait_for(&self, what: &str, found: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen = self.screen(false);
            if found(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{screen}"
            );
            std::thread::sleep(LOOK_EVERY);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .stdin(Stdio::null())
            .output();
    }
}

pub(super) fn tool(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

/// The lead spawns alice; alice submits a plan and waits; once it is approved she writes
/// out.txt. The lead has an answer for every event turn it may get.
pub(super) fn team_script(dir: &Path) -> String {
    let script = json!({"agents": {
        "lead": [
            tool("spawn_teammate", json!({"name": "alice", "role": "writer",
                                          "prompt": "Write out.txt."})),
            {"text": "alice is on it"},
            {"text": "noted"},
            {"text": "noted"},
            {"text": "noted"},
            {"text": "all done"},
        ],
        "alice": [
            tool("submit_plan", json!({"plan": "Write out.txt with a greeting."})),
            {"text": "plan submitted; waiting for review"},
            tool("write_file", json!({"path": "out.txt", "content": "hello\n"})),
            {"text": "wrote out.txt as planned"},
        ],
    }});
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

pub(super) fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

pub(super) fn troupe_bin() -> &'static str {
    env!("CARGO_BIN_EXE_troupe")
}

/// What most tests start from: a workspace, the team's script (outside it) and a tmux server
/// of their own; `None`, with a notice, where tmux is not installed.
struct Scene {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    _scripts: tempfile::TempDir,
    script: String,
    tmux: Tmux,
}

impl Scene {
    fn start(name: &str) -> Option<Self> {
        if !tmux_installed() {
            eprintln!("skipped: tmux is not installed");
            return None;
        }
        let (dir, ws) = workspace();
        let scripts = tempfile::tempdir().unwrap();
        let script = team_script(scripts.path());
        Some(Self {
            _dir: dir,
            ws,
            _scripts: scripts,
            script,
            tmux: Tmux::start(name, &[]),
        })
    }
}

#[test]
fn the_view_follows_a_team_approves_its_plan_and_gives_the_terminal_back() {
    let Some(scene) = Scene::start("team") else {
        return;
    };
    let (ws, script, tmux) = (&scene.ws, &scene.script, &scene.tmux);
    let ws_arg = ws.to_str().unwrap();
    // The view starts before the run: it follows the stream from its first line.
    tmux.type_line(&format!("{} watch --workspace {ws_arg}", troupe_bin()));
    tmux.wait_for("the view", |s| s.contains("troupe watch · no run yet"));
    assert_eq!(
        tmux.format("#{alternate_on} #{cursor_flag}"),
        "1 0",
        "alternate screen, no cursor"
    );

    let run = command(ws)
        .args([
            "run",
            "--prompt",
            "Have alice write out.txt.",
            "--model-script",
            script,
        ])
        .args([
            "--approval",
            "auto",
            "--require-plans",
            "--workspace",
            ws_arg,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The panes show the team's progress: alice spawned, her text, her plan waiting.
    let screen = tmux.wait_for("alice's pending plan", |s| {
        s.contains("1 plan pending") && s.contains("plan submitted; waiting for review")
    });
    assert!(screen.contains("troupe watch · run running"), "{screen}");
    assert!(
        screen.contains("lead · alice") || screen.contains("[lead] · alice"),
        "{screen}"
    );
    assert!(
        screen.contains("alice running") || screen.contains("alice idle"),
        "{screen}"
    );
    assert!(
        screen.contains("Write out.txt with a greeting."),
        "{screen}"
    );
    assert!(
        !ws.join("out.txt").exists(),
        "gated until the plan is approved"
    );

    // Approved from the view; alice then proceeds and the run ends.
    tmux.keys(&["a"]);
    tmux.wait_for("the approval's notice", |s| s.contains("approved plan"));
    let screen = tmux.wait_for("the end of the run", |s| {
        s.contains("run ended (done, exit 0)") && s.contains("wrote out.txt as planned")
    });
    assert!(!screen.contains("plan pending"), "{screen}");
    let out = wait(run);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );

    // A message to alice: Tab to her pane, `m`, the text, Enter.
    tmux.keys(&["Tab", "m"]);
    tmux.keys(&["-l", "thanks alice"]);
    tmux.wait_for("the message being typed", |s| {
        s.contains("message to alice: thanks alice")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for("the message's notice", |s| s.contains("sent message"));
    let mailbox: Value =
        serde_json::from_str(&troupe_in(ws, &["mailbox", "alice", "--json"]).stdout).unwrap();
    let from_user: Vec<&Value> = mailbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["sender"] == "user")
        .collect();
    assert_eq!(from_user.len(), 1, "{mailbox:#}");
    assert_eq!(
        from_user[0]["message"]["content"], "thanks alice",
        "{mailbox:#}"
    );

    // `q`: the terminal is as it was — main screen, cursor shown, canonical mode, the prompt.
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("the prompt after the view", |s| {
        !s.contains("troupe watch ·") && s.trim_end().ends_with(PROMPT.trim_end())
    });
    assert!(
        screen.contains(&format!("{PROMPT}{} watch", troupe_bin())),
        "{screen}"
    );
    assert_eq!(tmux.format("#{alternate_on} #{cursor_flag}"), "0 1");
    tmux.type_line("stty -a | tr ' ;' '\\n\\n' | grep -x -e -icanon -e icanon -e -echo -e echo");
    let screen = tmux.wait_for("stty's answer", |s| {
        s.lines()
            .any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    let modes: Vec<&str> = screen
        .lines()
        .map(str::trim)
        .filter(|l| matches!(*l, "icanon" | "-icanon" | "echo" | "-echo"))
        .collect();
    assert_eq!(modes, ["icanon", "echo"], "raw mode is off: {screen}");
}

/// SGR parameters that set a colour (foreground or background, 8, 16 or 256 colours).
fn has_colour(screen: &str) -> bool {
    screen.split('\x1b').skip(1).any(|sgr| {
        let Some(params) = sgr.strip_prefix('[').and_then(|s| s.split('m').next()) else {
            return false;
        };
        params.split(';').any(|p| {
            matches!(
                p.parse::<u8>(),
                Ok(30..=37 | 38 | 40..=47 | 48 | 90..=97 | 100..=107)
            )
        })
    })
}

#[test]
fn no_color_gives_a_view_without_colours() {
    if !tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (_dir, ws) = demo_workspace();
    // NO_COLOR set to anything, the empty string included, means no colour (crossterm's own
    // check only counts a non-empty value, so the empty one tests troupe's).
    let cases = [
        ("no-color-1", Some("1"), false),
        ("no-color-empty", Some(""), false),
        ("coloured", None, true),
    ];
    for (name, no_color, coloured) in cases {
        let env: Vec<(&str, &str)> = no_color.map(|v| ("NO_COLOR", v)).into_iter().collect();
        let tmux = Tmux::start(name, &env);
        tmux.type_line(&format!(
            "{} watch --workspace {}",
            troupe_bin(),
            ws.to_str().unwrap()
        ));
        tmux.wait_for("the demo's end", |s| s.contains("run ended (done, exit 0)"));
        let screen = tmux.screen(true);
        assert_eq!(has_colour(&screen), coloured, "{name}: {screen:?}");
        tmux.keys(&["C-c"]);
        tmux.wait_for("the prompt after Ctrl-C", |s| !s.contains("troupe watch ·"));
        assert_eq!(
            tmux.format("#{alternate_on} #{cursor_flag}"),
            "0 1",
            "{name}"
        );
    }
}

#[test]
fn sigterm_ends_the_view_and_gives_the_terminal_back() {
    if !tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let (_dir, ws) = demo_workspace();
    let tmux = Tmux::start("term", &[]);
    tmux.type_line(&format!(
        "{} watch --workspace {}; echo \"exit=$?\"",
        troupe_bin(),
        ws.to_str().unwrap()
    ));
    tmux.wait_for("the view", |s| s.contains("run ended (done, exit 0)"));
    // The view is the shell's one child.
    let shell = tmux.format("#{pane_pid}");
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let pids: Vec<libc::pid_t> = children
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 1, "{children:?}");
    // SAFETY: kill(2) on the troupe this test started in its own tmux session.
    assert_eq!(unsafe { libc::kill(pids[0], libc::SIGTERM) }, 0);
    let screen = tmux.wait_for("the shell after SIGTERM", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
    assert!(!screen.contains("troupe watch ·"), "{screen}");
    assert_eq!(tmux.format("#{alternate_on} #{cursor_flag}"), "0 1");
}

#[test]
fn without_a_terminal_it_says_to_use_troupe_log_f_and_exits_2() {
    let (_dir, ws) = workspace();
    let ran = troupe_in(&ws, &["watch"]);
    assert_fails(&ran, 2, "use `troupe log -f` [not_a_terminal]");
    assert!(!ws.join(".troupe").exists(), "nothing created");
}

/// `troupe run --watch …` with the team script, then its exit code, in the tmux shell.
fn run_watch_line(ws: &Path, script: &str) -> String {
    format!(
        "{} run --watch --prompt 'Have alice write out.txt.' --model-script {script} \
         --approval auto --require-plans --workspace {}; echo \"exit=$?\"",
        troupe_bin(),
        ws.to_str().unwrap()
    )
}

/// The exit code the shell echoed (`exit=N` on a line of its own).
pub(super) fn exit_of(screen: &str) -> Option<String> {
    screen.lines().find_map(|l| {
        let code = l.trim().strip_prefix("exit=")?;
        (!code.is_empty() && code.chars().all(|c| c.is_ascii_digit())).then(|| code.to_owned())
    })
}

#[test]
fn run_watch_shows_the_run_it_starts_and_prints_the_answer_after_the_view() {
    let Some(scene) = Scene::start("run") else {
        return;
    };
    let (ws, script, tmux) = (&scene.ws, &scene.script, &scene.tmux);
    tmux.type_line(&run_watch_line(ws, script));
    tmux.wait_for("alice's pending plan", |s| {
        s.contains("troupe watch · run running") && s.contains("1 plan pending")
    });
    tmux.keys(&["a"]);
    let screen = tmux.wait_for("the end of the run", |s| {
        s.contains("run ended (done, exit 0)") && s.contains("wrote out.txt as planned")
    });
    assert!(
        !screen.contains("exit="),
        "the view stays until q: {screen}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("the run's exit", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("0"), "{screen}");
    assert!(!screen.contains("troupe watch ·"), "{screen}");
    // The lead's answer, then the closing usage line held back while the view was up.
    let after: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.starts_with(PROMPT))
        .skip(2)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(
        after.iter().any(|l| *l == "all done" || *l == "noted"),
        "{screen}"
    );
    assert_eq!(tmux.format("#{alternate_on} #{cursor_flag}"), "0 1");
}

#[test]
fn leaving_the_view_of_run_watch_stops_the_run() {
    let Some(scene) = Scene::start("stop") else {
        return;
    };
    let (ws, script, tmux) = (&scene.ws, &scene.script, &scene.tmux);
    tmux.type_line(&run_watch_line(ws, script));
    tmux.wait_for("alice's pending plan", |s| s.contains("1 plan pending"));
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("the run's exit", |s| exit_of(s).is_some());
    assert_eq!(exit_of(&screen).as_deref(), Some("130"), "{screen}");
    assert!(screen.contains("closing the team"), "{screen}");
    assert!(!ws.join("out.txt").exists(), "the plan was never approved");
    assert_eq!(tmux.format("#{alternate_on} #{cursor_flag}"), "0 1");
}

#[test]
fn run_watch_needs_a_terminal_and_an_approval_mode_the_view_need_not_ask_for() {
    let (_dir, ws) = workspace();
    let ran = troupe_in(
        &ws,
        &["run", "--watch", "--prompt", "hi", "--approval", "auto"],
    );
    assert_fails(&ran, 2, "use `troupe log -f` [not_a_terminal]");
    let ran = troupe_in(&ws, &["run", "--watch", "--prompt", "hi"]);
    assert_fails(&ran, 2, "[watch_needs_approval_mode]");
    assert!(!ws.join(".troupe").exists(), "nothing created");
}

/// `troupe watch --store URL` from a folder of its own: the shared team's stream and plans come
/// from the database, and its approval reaches the team through it.
#[test]
fn the_view_of_a_shared_team_reads_and_answers_through_its_database() {
    if !tmux_installed() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let Some(db) = troupe::store::postgres::testing::TestDb::create() else {
        return;
    };
    let url = db.url();
    let (_dir, ws) = workspace();
    let (_elsewhere_dir, elsewhere) = workspace();
    let scripts = tempfile::tempdir().unwrap();
    let script = team_script(scripts.path());
    let run = command(&ws)
        .args([
            "run",
            "--prompt",
            "Have alice write out.txt.",
            "--model-script",
            &script,
        ])
        .args(["--approval", "auto", "--require-plans", "--store", &url])
        .args(["--workspace", ws.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The view opens a team the database holds: wait until the run has set it up.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let log = troupe_in(&elsewhere, &["log", "--store", &url]);
        if log.code == 0 && !log.stdout.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run never set the team up: {log:#?}"
        );
        std::thread::sleep(LOOK_EVERY);
    }
    let tmux = Tmux::start("shared", &[]);
    tmux.type_line(&format!(
        "{} watch --store '{url}' --workspace {}",
        troupe_bin(),
        elsewhere.to_str().unwrap()
    ));
    tmux.wait_for("alice's pending plan", |s| {
        s.contains("1 plan pending") && s.contains("Write out.txt with a greeting.")
    });
    tmux.keys(&["a"]);
    tmux.wait_for("the end of the run", |s| {
        s.contains("run ended (done, exit 0)") && s.contains("wrote out.txt as planned")
    });
    let out = wait(run);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );
    assert!(
        !elsewhere.join(".troupe/events.jsonl").exists(),
        "nothing read from files"
    );
    tmux.keys(&["q"]);
    tmux.wait_for("the prompt after the view", |s| {
        !s.contains("troupe watch ·")
    });
}
