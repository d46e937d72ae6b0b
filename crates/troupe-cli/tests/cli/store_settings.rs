//! `[store]` in the settings files through the binary (SPEC §11): `troupe config` shows the
//! store values with their sources (flag > environment > `troupe.toml` > the user's
//! `config.toml` > defaults), never a password; a command that opens the store uses the file's
//! URL unless `--store` says otherwise; a password in `[store] url` stops every command with
//! exit 2. No database: the URLs point at closed loopback ports, which refuse at once, so the
//! URL a command tried is read from its connection error. XDG_CONFIG_HOME and HOME point at
//! temp folders, and the store variables are removed from the environment.

use serde_json::json;

use super::support::{assert_fails, command, json as parse_json, ran, Ran};

/// A URL no server answers (port 1 on loopback refuses the connection at once).
const PROJECT_URL: &str = "postgres://troupe@127.0.0.1:1/project_db";

struct Folders {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    xdg: std::path::PathBuf,
    home: std::path::PathBuf,
}

impl Folders {
    fn new(project: Option<&str>, user: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, xdg, home) = (root.join("ws"), root.join("xdg"), root.join("home"));
        for d in [&ws, &xdg.join("troupe"), &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        if let Some(text) = project {
            std::fs::write(ws.join("troupe.toml"), text).unwrap();
        }
        if let Some(text) = user {
            std::fs::write(xdg.join("troupe/config.toml"), text).unwrap();
        }
        Self {
            _dir: dir,
            ws,
            xdg,
            home,
        }
    }

    fn project_file(&self) -> String {
        self.ws.join("troupe.toml").display().to_string()
    }

    fn user_file(&self) -> String {
        self.xdg.join("troupe/config.toml").display().to_string()
    }

    fn troupe(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let mut c = command(&self.ws);
        c.args(args)
            .args(["--workspace", self.ws.to_str().unwrap()])
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("HOME", &self.home)
            .env_remove("TROUPE_STORE_URL")
            .env_remove("TROUPE_TEAM")
            .env_remove("TROUPE_LEASE")
            // The store URL of the workspace's own troupe.toml applies once it is trusted.
            .env("TROUPE_TRUST_WORKSPACE", "1")
            .stdin(std::process::Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        ran(c.output().unwrap())
    }
}

#[test]
fn config_shows_the_store_values_and_where_each_came_from() {
    let f = Folders::new(
        Some(&format!("[store]\nurl = \"{PROJECT_URL}\"\nteam = \"backend\"\n")),
        Some("[store]\nurl = \"postgres://me@127.0.0.1:1/user_db\"\nteam = \"mine\"\nlease = \"2500ms\"\n"),
    );
    let (project, user) = (f.project_file(), f.user_file());
    let config = parse_json(&f.troupe(&["config", "--json"], &[]));
    assert_eq!(
        config["store"],
        json!({
            "url": {"value": PROJECT_URL, "source": project},
            "team": {"value": "backend", "source": project},
            "lease_ms": {"value": 2500, "source": user},
        })
    );
    let text = f.troupe(&["config"], &[]);
    assert_eq!(text.code, 0, "{text:#?}");
    let store: Vec<&str> = text
        .stdout
        .lines()
        .skip_while(|l| *l != "[store]")
        .take(4)
        .collect();
    assert_eq!(
        store,
        [
            "[store]".to_owned(),
            format!("url              = \"{PROJECT_URL}\"   ({project})"),
            format!("team             = \"backend\"   ({project})"),
            format!("lease            = \"2s 500ms\"   ({user})"),
        ]
    );

    // The environment over both files; the password of TROUPE_STORE_URL is never shown.
    let env = [
        (
            "TROUPE_STORE_URL",
            "postgres://u:s3cret-pw@127.0.0.1:1/env_db",
        ),
        ("TROUPE_TEAM", "from-env"),
        ("TROUPE_LEASE", "700ms"),
    ];
    let ran = f.troupe(&["config", "--json"], &env);
    assert!(!ran.stdout.contains("s3cret"), "{ran:#?}");
    assert_eq!(
        parse_json(&ran)["store"],
        json!({
            "url": {"value": "postgres://u:***@127.0.0.1:1/env_db", "source": "env TROUPE_STORE_URL"},
            "team": {"value": "from-env", "source": "env TROUPE_TEAM"},
            "lease_ms": {"value": 700, "source": "env TROUPE_LEASE"},
        })
    );
    // TROUPE_LEASE is read and bounded like `[store] lease`: compound forms, at most 1h.
    let mut lease_env = env;
    lease_env[2] = ("TROUPE_LEASE", "1m30s");
    let ran = f.troupe(&["config", "--json"], &lease_env);
    assert_eq!(parse_json(&ran)["store"]["lease_ms"]["value"], 90_000);
    for bad in ["2h", "299ms", "soon"] {
        lease_env[2] = ("TROUPE_LEASE", bad);
        let ran = f.troupe(&["config"], &lease_env);
        assert_eq!(ran.code, 2, "{bad}: {ran:#?}");
        assert!(
            ran.stderr
                .contains("TROUPE_LEASE must be 300ms to 1h: an integer of seconds"),
            "{bad}: {ran:#?}"
        );
    }
    let ran = f.troupe(&["config"], &env);
    assert_eq!(ran.code, 0, "{ran:#?}");
    assert!(!ran.stdout.contains("s3cret"), "{ran:#?}");
    assert!(
        ran.stdout.contains(
            "url              = \"postgres://u:***@127.0.0.1:1/env_db\"   (env TROUPE_STORE_URL)"
        ),
        "{ran:#?}"
    );

    // No file, no environment: the defaults.
    let f = Folders::new(None, None);
    assert_eq!(
        parse_json(&f.troupe(&["config", "--json"], &[]))["store"],
        json!({
            "url": {"value": null, "source": null},
            "team": {"value": "default", "source": "default"},
            "lease_ms": {"value": 10000, "source": "default"},
        })
    );
}

#[test]
fn commands_open_the_store_of_the_file_unless_a_flag_says_otherwise() {
    let f = Folders::new(Some(&format!("[store]\nurl = \"{PROJECT_URL}\"\n")), None);
    // The file's URL is the one tried (and no files under .troupe/ are read or made).
    let ran = f.troupe(&["status"], &[]);
    assert_fails(
        &ran,
        1,
        "cannot reach PostgreSQL at 127.0.0.1:1/project_db as troupe",
    );
    assert!(ran.stderr.contains("[store_unavailable]"), "{ran:#?}");
    // `--team` needs no `--store` when the file names the store.
    let ran = f.troupe(&["requests", "--team", "other"], &[]);
    assert_fails(&ran, 1, "127.0.0.1:1/project_db");
    // The flag and the environment decide over the file.
    let ran = f.troupe(
        &["status", "--store", "postgres://flag@127.0.0.1:1/flag_db"],
        &[("TROUPE_STORE_URL", "postgres://env@127.0.0.1:1/env_db")],
    );
    assert_fails(&ran, 1, "127.0.0.1:1/flag_db as flag");
    let ran = f.troupe(
        &["mailbox", "lead"],
        &[("TROUPE_STORE_URL", "postgres://env@127.0.0.1:1/env_db")],
    );
    assert_fails(&ran, 1, "127.0.0.1:1/env_db as env");
    assert!(!f.ws.join(".troupe").exists());
    // `--local` reads this workspace's files whatever names a store.
    for args in [&["status", "--local", "--json"][..], &["tasks", "--local"]] {
        let ran = f.troupe(
            args,
            &[("TROUPE_STORE_URL", "postgres://env@127.0.0.1:1/env_db")],
        );
        assert_eq!(ran.code, 0, "{args:?}: {ran:#?}");
    }
    let ran = f.troupe(&["status", "--local", "--store", PROJECT_URL], &[]);
    assert_eq!(ran.code, 2, "{ran:#?}");
    // `troupe config` shows what a command with the same flags would use.
    let shown = |args: &[&str]| parse_json(&f.troupe(args, &[]))["store"]["url"].clone();
    assert_eq!(
        shown(&[
            "config",
            "--json",
            "--store",
            "postgres://flag@127.0.0.1:1/flag_db"
        ]),
        json!({"value": "postgres://flag@127.0.0.1:1/flag_db", "source": "flag --store"})
    );
    assert_eq!(
        shown(&["config", "--json", "--local"]),
        json!({"value": null, "source": null})
    );

    // Without a URL from any source, `--team` is still a usage error; `[store] team` alone
    // leaves the file store.
    let f = Folders::new(Some("[store]\nteam = \"backend\"\n"), None);
    let ran = f.troupe(&["status", "--team", "other"], &[]);
    assert_fails(&ran, 2, "--team names a team in a shared store");
    let ran = f.troupe(&["status", "--json"], &[]);
    assert_eq!(ran.code, 0, "{ran:#?}");
}

#[test]
fn a_password_in_the_store_url_stops_every_command() {
    for url in [
        "postgres://troupe:s3cret-pw@127.0.0.1:1/project_db",
        "postgres://troupe@127.0.0.1:1/project_db?password=s3cret-pw",
    ] {
        let f = Folders::new(Some(&format!("[store]\nurl = \"{url}\"\n")), None);
        for args in [
            &["config"][..],
            &["status"],
            &["requests"],
            &["run", "--prompt", "hi"],
            &["worker"],
        ] {
            let ran = f.troupe(args, &[]);
            assert_fails(
                &ran,
                2,
                &format!(
                    "{}:2: `store.url` carries a password: a password never goes in a settings \
                     file",
                    f.project_file()
                ),
            );
            assert!(ran.stderr.contains("TROUPE_STORE_URL"), "{ran:#?}");
            assert!(ran.stderr.contains("[settings_secret]"), "{ran:#?}");
            assert!(
                !ran.stderr.contains("s3cret") && !ran.stdout.contains("s3cret"),
                "{args:?}: {ran:#?}"
            );
        }
        assert!(!f.ws.join(".troupe").exists());
    }
    // In the user's file too.
    let f = Folders::new(
        None,
        Some("[store]\nurl = \"postgres://me:s3cret-pw@127.0.0.1:1/user_db\"\n"),
    );
    let ran = f.troupe(&["status"], &[]);
    assert_fails(
        &ran,
        2,
        &format!("{}:2: `store.url` carries a password", f.user_file()),
    );
    assert!(!ran.stderr.contains("s3cret"), "{ran:#?}");
}
