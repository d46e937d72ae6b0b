//! The settings files through the binary (SPEC §11): `troupe config --json` shows the winner of
//! flags > environment > `.env` > `troupe.toml` > the user's `config.toml` > defaults, with its
//! source, for every combination; a bad `troupe.toml` stops `troupe run` with exit 2 before any
//! state exists; the model named in `troupe.toml` is the one a server is asked for. Every test
//! points XDG_CONFIG_HOME and HOME at temp folders.

use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::sessions::run_scripted;
use super::support::{command, json as parse_json, ran, Ran};

struct Folders {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    xdg: std::path::PathBuf,
    home: std::path::PathBuf,
}

fn folders() -> Folders {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, xdg, home) = (root.join("ws"), root.join("xdg"), root.join("home"));
    for d in [&ws, &xdg, &home] {
        std::fs::create_dir(d).unwrap();
    }
    Folders {
        _dir: dir,
        ws,
        xdg,
        home,
    }
}

impl Folders {
    fn user_file(&self) -> std::path::PathBuf {
        self.xdg.join("troupe/config.toml")
    }

    fn write_user(&self, text: &str) {
        std::fs::create_dir_all(self.xdg.join("troupe")).unwrap();
        std::fs::write(self.user_file(), text).unwrap();
    }

    fn troupe(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let mut c = command(&self.ws);
        c.args(args)
            .args(["--workspace", self.ws.to_str().unwrap()])
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("HOME", &self.home)
            .stdin(std::process::Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        ran(c.output().unwrap())
    }
}

#[test]
fn every_combination_of_the_sources_has_the_right_winner_and_source() {
    // flag, environment, .env, troupe.toml, user config.toml: all 32 combinations.
    for mask in 0u32..32 {
        let f = folders();
        let has = |bit: u32| mask & (1 << bit) != 0;
        let mut args = vec!["config", "--json"];
        let mut env = vec![];
        if has(0) {
            args.extend(["--model", "m-flag"]);
        }
        if has(1) {
            env.push(("OPENAI_MODEL", "m-env"));
        }
        if has(2) {
            std::fs::write(f.ws.join(".env"), "OPENAI_MODEL=m-dotenv\n").unwrap();
        }
        if has(3) {
            std::fs::write(f.ws.join("troupe.toml"), "[model]\nmodel = \"m-project\"\n").unwrap();
        }
        if has(4) {
            f.write_user("[model]\nmodel = \"m-user\"\nfallback_model = \"fb-user\"\n");
        }
        let out = f.troupe(&args, &env);
        let v = parse_json(&out);
        let project = f.ws.join("troupe.toml").display().to_string();
        let user = f.user_file().display().to_string();
        let expected = if has(0) {
            json!({"value": "m-flag", "source": "flag --model"})
        } else if has(1) {
            json!({"value": "m-env", "source": "env OPENAI_MODEL"})
        } else if has(2) {
            json!({"value": "m-dotenv", "source": ".env OPENAI_MODEL"})
        } else if has(3) {
            json!({"value": "m-project", "source": project})
        } else if has(4) {
            json!({"value": "m-user", "source": user})
        } else {
            json!({"value": null, "source": null})
        };
        assert_eq!(v["model"]["model"], expected, "mask {mask:05b}: {out:#?}");
        // A value only the user file sets still comes from it; the defaults fill the rest.
        let fallback = if has(4) {
            json!({"value": "fb-user", "source": user})
        } else {
            json!({"value": null, "source": null})
        };
        assert_eq!(v["model"]["fallback_model"], fallback, "mask {mask:05b}");
        assert_eq!(
            v["model"]["base_url"],
            json!({"value": "https://api.openai.com/v1", "source": "default"})
        );
        assert_eq!(
            v["model"]["provider"],
            json!({"value": "openai", "source": "default"}),
            "mask {mask:05b}"
        );
        let mut files = vec![];
        if has(3) {
            files.push(project.clone());
        }
        if has(4) {
            files.push(user.clone());
        }
        assert_eq!(v["files"], json!(files), "mask {mask:05b}");
        assert!(!f.ws.join(".troupe").exists(), "config creates no state");
    }
}

#[test]
fn the_test_support_removes_every_model_variable() {
    assert_eq!(
        super::support::MODEL_VARIABLES,
        troupe::model::config::VARIABLES
    );
}

#[test]
fn config_shows_the_provider_and_where_it_came_from() {
    let f = folders();
    // Inferred: an Anthropic key and no OpenAI settings.
    let anthropic = [
        ("ANTHROPIC_API_KEY", "sk-ant-api03-Zx9Cv8Bn7Mm6"),
        ("ANTHROPIC_MODEL", "claude-env"),
    ];
    let out = f.troupe(&["config", "--json"], &anthropic);
    let v = parse_json(&out);
    assert_eq!(
        v["model"]["provider"],
        json!({"value": "anthropic", "source": format!("inferred: {}", troupe::model::config::INFERRED_ANTHROPIC)})
    );
    assert_eq!(
        v["model"]["model"],
        json!({"value": "claude-env", "source": "env ANTHROPIC_MODEL"})
    );
    assert_eq!(
        v["model"]["base_url"],
        json!({"value": "https://api.anthropic.com", "source": "default"})
    );
    assert_eq!(
        v["model"]["api_key"],
        json!({"set": true, "source": "env ANTHROPIC_API_KEY"})
    );
    assert!(
        !out.stdout.contains("Zx9Cv8Bn7Mm6"),
        "the key is never shown"
    );
    let text = f.troupe(&["config"], &anthropic);
    assert_eq!(text.code, 0, "{text:#?}");
    assert!(
        text.stdout.contains(&format!(
            "provider         = \"anthropic\"   (inferred: {})",
            troupe::model::config::INFERRED_ANTHROPIC
        )),
        "{}",
        text.stdout
    );
    // The flag beats TROUPE_PROVIDER, which beats troupe.toml.
    std::fs::write(
        f.ws.join("troupe.toml"),
        "[model]\nprovider = \"azure\"\napi_version = \"2024-10-21\"\n",
    )
    .unwrap();
    let v = parse_json(&f.troupe(&["config", "--json"], &[]));
    let project = f.ws.join("troupe.toml").display().to_string();
    assert_eq!(
        v["model"]["provider"],
        json!({"value": "azure", "source": project})
    );
    assert_eq!(
        v["model"]["api_version"],
        json!({"value": "2024-10-21", "source": project})
    );
    assert_eq!(
        v["model"]["base_url"],
        json!({"value": null, "source": null})
    );
    let text = f.troupe(&["config"], &[]);
    assert!(
        text.stdout
            .contains("AZURE_OPENAI_API_KEY or OPENAI_API_KEY"),
        "{}",
        text.stdout
    );
    let v = parse_json(&f.troupe(&["config", "--json"], &[("TROUPE_PROVIDER", "anthropic")]));
    assert_eq!(
        v["model"]["provider"],
        json!({"value": "anthropic", "source": "env TROUPE_PROVIDER"})
    );
    let v = parse_json(&f.troupe(
        &["config", "--json", "--provider", "openai"],
        &[("TROUPE_PROVIDER", "anthropic")],
    ));
    assert_eq!(
        v["model"]["provider"],
        json!({"value": "openai", "source": "flag --provider"})
    );
    // Not a provider: a usage error.
    let bad = f.troupe(&["config", "--provider", "gemini"], &[]);
    assert_eq!(bad.code, 2, "{bad:#?}");
    assert!(
        bad.stderr.contains("openai, azure or anthropic"),
        "{bad:#?}"
    );
    let bad = f.troupe(&["config"], &[("TROUPE_PROVIDER", "gemini")]);
    assert_eq!(bad.code, 2, "{bad:#?}");
    assert!(bad.stderr.contains("TROUPE_PROVIDER"), "{bad:#?}");
}

#[test]
fn config_shows_the_context_files_by_default_and_as_set() {
    let f = folders();
    let v = parse_json(&f.troupe(&["config", "--json"], &[]));
    assert_eq!(
        v["context"],
        json!({"files": ["AGENTS.md"], "fallback": "CLAUDE.md", "source": "default"})
    );
    std::fs::write(
        f.ws.join("troupe.toml"),
        "[context]\nfiles = [\"docs/CONVENTIONS.md\", \"AGENTS.md\"]\n",
    )
    .unwrap();
    let v = parse_json(&f.troupe(&["config", "--json"], &[]));
    let p = f.ws.join("troupe.toml").display().to_string();
    assert_eq!(
        v["context"],
        json!({"files": ["docs/CONVENTIONS.md", "AGENTS.md"], "source": p})
    );
    let text = f.troupe(&["config"], &[]).stdout;
    assert!(text.contains("[context]"), "{text}");
    assert!(text.contains("docs/CONVENTIONS.md"), "{text}");
}

#[test]
fn config_lists_rules_hooks_and_files_with_their_sources() {
    let f = folders();
    std::fs::write(
        f.ws.join("troupe.toml"),
        r#"
[model]
context_window = 128000
[model.agents]
reviewer = "gpt-4.1-nano"
[permissions]
allow = ["shell(cargo test:*)", "read_file"]
deny = ["read_file(.env)"]
[[hooks]]
event = "PreToolUse"
matcher = "shell"
command = "./check.sh"
timeout = "2m"
"#,
    )
    .unwrap();
    f.write_user(
        "[permissions]\nallow = [\"glob\"]\n[[hooks]]\nevent = \"Stop\"\ncommand = \"true\"\n",
    );
    let out = f.troupe(
        &["config", "--json"],
        &[("OPENAI_API_KEY", "sk-never-shown")],
    );
    assert!(!out.stdout.contains("sk-never-shown"));
    let v = parse_json(&out);
    let p = f.ws.join("troupe.toml").display().to_string();
    let u = f.user_file().display().to_string();
    assert_eq!(
        v["rules"],
        json!([
            {"list": "deny", "text": "read_file(.env)", "source": p, "index": 0},
            {"list": "allow", "text": "shell(cargo test:*)", "source": p, "index": 0},
            {"list": "allow", "text": "read_file", "source": p, "index": 1},
            {"list": "allow", "text": "glob", "source": u, "index": 0},
        ])
    );
    assert_eq!(
        v["hooks"],
        json!([
            {"event": "PreToolUse", "matcher": "shell", "command": "./check.sh", "timeout_secs": 120, "source": p, "index": 0},
            {"event": "Stop", "matcher": null, "command": "true", "timeout_secs": 60, "source": u, "index": 0},
        ])
    );
    assert_eq!(
        v["model"]["context_window"],
        json!({"value": 128000, "source": p})
    );
    assert_eq!(
        v["model"]["agents"]["reviewer"],
        json!({"value": "gpt-4.1-nano", "source": p})
    );
    assert_eq!(
        v["model"]["api_key"],
        json!({"set": true, "source": "env OPENAI_API_KEY"})
    );
    // The environment and the flag beat troupe.toml for the context window too.
    let v = parse_json(&f.troupe(&["config", "--json"], &[("TROUPE_CONTEXT_WINDOW", "8192")]));
    assert_eq!(
        v["model"]["context_window"],
        json!({"value": 8192, "source": "env TROUPE_CONTEXT_WINDOW"})
    );
    let v = parse_json(&f.troupe(
        &["config", "--json", "--context-window", "4096"],
        &[("TROUPE_CONTEXT_WINDOW", "8192")],
    ));
    assert_eq!(
        v["model"]["context_window"],
        json!({"value": 4096, "source": "flag --context-window"})
    );

    // The text form says the same.
    let out = f.troupe(&["config"], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout
            .contains(&format!("context_window   = 128000   ({p})")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("allow  \"glob\"   ({u} allow[0])")),
        "{}",
        out.stdout
    );
    assert!(!f.ws.join(".troupe").exists());
}

#[test]
fn without_xdg_config_home_the_user_file_is_under_home() {
    let f = folders();
    std::fs::create_dir_all(f.home.join(".config/troupe")).unwrap();
    std::fs::write(
        f.home.join(".config/troupe/config.toml"),
        "[model]\nmodel = \"m-home\"\n",
    )
    .unwrap();
    let mut c = command(&f.ws);
    c.args(["config", "--json", "--workspace", f.ws.to_str().unwrap()])
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", &f.home);
    let v = parse_json(&ran(c.output().unwrap()));
    let file = f
        .home
        .join(".config/troupe/config.toml")
        .display()
        .to_string();
    assert_eq!(
        v["model"]["model"],
        json!({"value": "m-home", "source": file})
    );
}

#[test]
fn a_bad_settings_file_is_exit_2_naming_file_and_line_before_any_state() {
    let f = folders();
    let script = json!({"responses": [{"text": "never"}]});
    for (text, says) in [
        (
            "[model]\nmodel = \"m\"\nmodle = \"x\"\n",
            "troupe.toml:3: unknown key `modle`",
        ),
        ("[model\n", "troupe.toml:1: not valid TOML"),
        (
            "[model]\napi_key = \"sk-in-file\"\n",
            "secrets stay in the environment or .env",
        ),
        (
            "[permissions]\nallow = [\"Shell(x)\"]\n",
            "troupe.toml:2: permissions.allow[0]",
        ),
        (
            "[[hooks]]\nevent = \"Start\"\ncommand = \"x\"\n",
            "troupe.toml:2: hooks[0].event",
        ),
    ] {
        std::fs::write(f.ws.join("troupe.toml"), text).unwrap();
        let out = run_scripted(&f.ws, "hi", &script, &[]);
        assert_eq!(out.code, 2, "{text}: {out:#?}");
        assert!(out.stderr.contains(says), "{text}: {out:#?}");
        assert!(!out.stderr.contains("sk-in-file"));
        assert!(
            !f.ws.join(".troupe").exists(),
            "{text}: no state before the settings are valid"
        );
        let out = f.troupe(&["config"], &[]);
        assert_eq!(out.code, 2, "{text}: {out:#?}");
    }
    // A bad user file stops the run too.
    std::fs::remove_file(f.ws.join("troupe.toml")).unwrap();
    f.write_user("[permisions]\n");
    let out = f.troupe(
        &["run", "--prompt", "hi", "--model", "m"],
        &[("OPENAI_API_KEY", "sk")],
    );
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr
            .contains("config.toml:1: unknown key `permisions`"),
        "{out:#?}"
    );
    assert!(!f.ws.join(".troupe").exists());
}

#[test]
fn a_fifo_in_place_of_troupe_toml_is_refused_without_blocking() {
    let f = folders();
    let fifo = f.ws.join("troupe.toml");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let out = f.troupe(&["config"], &[]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("FIFO"), "{out:#?}");
}

#[test]
fn a_valid_troupe_toml_lets_a_run_go() {
    let f = folders();
    std::fs::write(
        f.ws.join("troupe.toml"),
        "[permissions]\nallow = [\"read_file\"]\n[[hooks]]\nevent = \"Stop\"\ncommand = \"true\"\n",
    )
    .unwrap();
    let out = run_scripted(
        &f.ws,
        "hi",
        &json!({"responses": [{"text": "fine"}]}),
        &["--no-memory", "--trust-workspace"],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "fine\n");
}

/// The model and base URL named in troupe.toml reach the server; the environment beats them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_in_troupe_toml_is_the_one_the_server_is_asked_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
        })))
        .mount(&server)
        .await;
    let f = folders();
    std::fs::write(
        f.ws.join("troupe.toml"),
        format!(
            "[model]\nmodel = \"model-from-toml\"\nbase_url = \"{}/v1\"\n",
            server.uri()
        ),
    )
    .unwrap();
    f.write_user("[model]\nmodel = \"model-from-user\"\n");
    let run = |env: Vec<(&'static str, &'static str)>| {
        let f = &f;
        let args = [
            "run",
            "--prompt",
            "hi",
            "--no-memory",
            "--approval",
            "deny",
            "--trust-workspace",
        ];
        let mut all = env;
        all.push(("OPENAI_API_KEY", "sk-test"));
        let mut c = command(&f.ws);
        c.args(args)
            .args(["--workspace", f.ws.to_str().unwrap()])
            .env("XDG_CONFIG_HOME", &f.xdg)
            .env("HOME", &f.home)
            .stdin(std::process::Stdio::null());
        for (k, v) in all {
            c.env(k, v);
        }
        c
    };
    let mut c = run(vec![]);
    let out = tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{out:#?}");
    // The project file chose the server the key goes to: the run says so.
    assert!(
        out.stderr.contains(&format!(
            "the model server is {}/v1 (from {}); your API key is sent there",
            server.uri(),
            f.ws.join("troupe.toml").display()
        )),
        "{out:#?}"
    );
    assert!(!out.stderr.contains("sk-test"), "{out:#?}");
    let mut c = run(vec![("OPENAI_MODEL", "model-from-env")]);
    let out = tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{out:#?}");
    let models: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["model"].clone())
        .collect();
    assert_eq!(
        models,
        vec![json!("model-from-toml"), json!("model-from-env")]
    );
}
