//! Cost (SPEC §14): `troupe usage` — tokens and estimated cost per agent, model or day, from a
//! `.troupe/usage.jsonl` written here by hand (or a shared team's database), priced by the
//! built-in table and the settings' `[prices]` — and `--max-cost` / `[run] max_cost`, which stop
//! a run with exit 3 and `[cost_budget]`, against the scripted model and a mock Chat Completions
//! server.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::wire::UtcTime;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::sessions::run_scripted;
use super::support::{assert_fails, assert_fails_json, command, json, ran, troupe_in, Ran};

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// One record of the usage log.
fn record(at: &str, agent: &str, model: &str, prompt: u64, completion: u64, cached: u64) -> String {
    let mut line = json!({
        "at": at, "run_id": "run-1", "agent": agent, "model": model, "purpose": "turn",
        "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    if cached > 0 {
        line["cache_read_tokens"] = json!(cached);
    }
    format!("{line}\n")
}

fn write_log(ws: &std::path::Path, text: &str) {
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    std::fs::write(ws.join(".troupe/usage.jsonl"), text).unwrap();
}

/// Three agents, three models (one with no price), two days.
fn sample() -> String {
    [
        // gpt-4.1: 1M prompt (half of it cached) and 1,000 completion tokens:
        // 500,000 × $2 + 500,000 × $0.50 + 1,000 × $8 per million = $1.258.
        record("2026-07-30T08:00:00.000Z", "lead", "gpt-4.1-2025-04-14", 1_000_000, 1_000, 500_000),
        // claude-haiku-4-5: 100,000 in at $1, 10,000 out at $5 = $0.15.
        record(
            "2026-07-31T09:00:00.000Z",
            "writer",
            "claude-haiku-4-5-20251001",
            100_000,
            10_000,
            0,
        ),
        record("2026-07-31T10:00:00.000Z", "lead", "local-llama", 300, 20, 0),
        record("2026-07-31T11:00:00.000Z", "reviewer", "local-llama", 50, 5, 0),
    ]
    .concat()
        // The torn tail of an interrupted append: ignored.
        + "{\"at\":\"2026-07-31T12:00"
}

fn tokens(prompt: u64, completion: u64, cached: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion,
           "total_tokens": prompt + completion, "cache_read_tokens": cached,
           "cache_write_tokens": 0})
}

fn with(mut tokens: Value, cost: Value, unpriced: &[&str]) -> Value {
    tokens["cost_usd"] = cost;
    tokens["unpriced_models"] = json!(unpriced);
    tokens
}

fn group(key: &str, line: Value) -> Value {
    let mut line = line;
    line["key"] = json!(key);
    line
}

#[test]
fn usage_groups_by_agent_model_and_day_with_each_models_price() {
    let (_dir, ws) = workspace();
    write_log(&ws, &sample());
    let before = std::fs::read(ws.join(".troupe/usage.jsonl")).unwrap();
    let total = with(
        tokens(1_100_350, 11_025, 500_000),
        json!(1.408),
        &["local-llama"],
    );

    let by_agent = json(&troupe_in(&ws, &["usage", "--json"]));
    assert_eq!(
        by_agent,
        json!({
            "by": "agent",
            "since": null,
            "groups": [
                group(
                    "lead",
                    with(tokens(1_000_300, 1_020, 500_000), json!(1.258), &["local-llama"])
                ),
                group("reviewer", with(tokens(50, 5, 0), Value::Null, &["local-llama"])),
                group("writer", with(tokens(100_000, 10_000, 0), json!(0.15), &[])),
            ],
            "total": total,
        })
    );

    let by_model = json(&troupe_in(&ws, &["usage", "--by", "model", "--json"]));
    let costs: Vec<(&str, &Value)> = by_model["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["key"].as_str().unwrap(), &g["cost_usd"]))
        .collect();
    assert_eq!(
        costs,
        [
            ("claude-haiku-4-5-20251001", &json!(0.15)),
            ("gpt-4.1-2025-04-14", &json!(1.258)),
            ("local-llama", &Value::Null),
        ]
    );
    assert_eq!(by_model["total"], total);

    let by_day = json(&troupe_in(&ws, &["usage", "--by", "day", "--json"]));
    let days: Vec<(&str, &Value, u64)> = by_day["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["key"].as_str().unwrap(),
                &g["cost_usd"],
                g["total_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        days,
        [
            ("2026-07-30", &json!(1.258), 1_001_000),
            ("2026-07-31", &json!(0.15), 110_375),
        ]
    );
    // Read only: the torn tail is where it was.
    assert_eq!(
        std::fs::read(ws.join(".troupe/usage.jsonl")).unwrap(),
        before
    );
}

#[test]
fn usage_text_is_a_table_with_a_total_and_what_has_no_price() {
    let (_dir, ws) = workspace();
    write_log(&ws, &sample());

    let ran = troupe_in(&ws, &["usage"]);

    assert_eq!(ran.code, 0, "{ran:#?}");
    assert_eq!(
        ran.stdout,
        "usage by agent\n\
         \x20 agent           prompt    completion    cache read   cache write        cost\n\
         \x20 lead         1,000,300         1,020       500,000             0    $1.2580*\n\
         \x20 reviewer            50             5             0             0    no price\n\
         \x20 writer         100,000        10,000             0             0     $0.1500\n\
         \x20 total        1,100,350        11,025       500,000             0    $1.4080*\n\
         no price for local-llama: their tokens are not in the cost (* marks a partial cost); \
         set [prices.\"MODEL\"] in troupe.toml\n\
         costs are estimates from list prices per million tokens\n"
    );
}

#[test]
fn prices_in_troupe_toml_win_over_the_table_and_price_new_models() {
    let (_dir, ws) = workspace();
    write_log(&ws, &sample());
    std::fs::write(
        ws.join("troupe.toml"),
        "[prices.\"gpt-4.1\"]\ninput = 1\noutput = 1\ncache_read = 0\n\
         [prices.local-llama]\ninput = 100\noutput = 1000\n",
    )
    .unwrap();

    // Untrusted, the workspace's gpt-4.1 (below troupe's table) waits; local-llama applies:
    // lead 500,000 uncached × $2 + 500,000 cached × $0.5 + 1,000 × $8 per million = $1.258 on
    // gpt-4.1, and $0.05 on local-llama (below).
    let untrusted = json(&troupe_in(&ws, &["usage", "--json"]));
    assert_eq!(untrusted["groups"][0]["cost_usd"], json!(1.308));

    let report = json(&troupe_in(&ws, &["usage", "--json", "--trust-workspace"]));

    // lead: 500,000 uncached × $1 + 1,000 × $1 per million = $0.501 on gpt-4.1, and
    // 300 × $100 + 20 × $1,000 per million = $0.05 on local-llama.
    assert_eq!(report["groups"][0]["cost_usd"], json!(0.551));
    assert_eq!(report["groups"][0]["unpriced_models"], json!([]));
    // reviewer: 50 × $100 + 5 × $1,000 per million = $0.01.
    assert_eq!(report["groups"][1]["cost_usd"], json!(0.01));
    assert_eq!(report["total"]["cost_usd"], json!(0.711));

    std::fs::write(
        ws.join("troupe.toml"),
        "[prices.m]\ninput = 1\noutput = -8\n",
    )
    .unwrap();
    let ran = troupe_in(&ws, &["usage"]);
    assert_fails(&ran, 2, "troupe.toml:3");
    assert!(ran.stderr.contains("prices.\"m\".output"), "{ran:#?}");
}

/// `at` of a record made `minutes` ago.
fn minutes_ago(minutes: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let millis = i64::try_from(now).unwrap() - minutes * 60_000;
    UtcTime::from_unix_millis(millis).unwrap().to_string()
}

#[test]
fn since_counts_only_recent_records_and_a_bad_duration_is_a_usage_error() {
    let (_dir, ws) = workspace();
    write_log(
        &ws,
        &[
            record(
                &minutes_ago(3 * 24 * 60),
                "lead",
                "gpt-4.1",
                1_000_000,
                0,
                0,
            ),
            record(&minutes_ago(2 * 60), "lead", "gpt-4.1", 0, 1_000_000, 0),
            record(&minutes_ago(5), "writer", "gpt-4.1", 1_000_000, 0, 0),
        ]
        .concat(),
    );

    let day = json(&troupe_in(&ws, &["usage", "--since", "1d", "--json"]));
    let hour = json(&troupe_in(&ws, &["usage", "--since", "1h", "--json"]));
    let all = json(&troupe_in(&ws, &["usage", "--json"]));

    assert_eq!(day["total"]["cost_usd"], json!(10.0));
    assert_eq!(day["groups"].as_array().unwrap().len(), 2);
    assert_eq!(hour["total"]["cost_usd"], json!(2.0));
    assert_eq!(hour["groups"][0]["key"], "writer");
    assert_eq!(all["total"]["cost_usd"], json!(12.0));
    let since = UtcTime::parse(day["since"].as_str().unwrap()).unwrap();
    let back = UtcTime::parse(&minutes_ago(24 * 60)).unwrap();
    assert!(back.millis_since(since).abs() < 60_000, "{since} vs {back}");

    for bad in ["soon", "0s", "-1h"] {
        let ran = troupe_in(&ws, &["usage", "--since", bad]);
        assert_eq!(ran.code, 2, "{bad}: {ran:#?}");
    }
    let ran = troupe_in(&ws, &["usage", "--by", "week"]);
    assert_eq!(ran.code, 2, "{ran:#?}");
    assert_fails_json(
        &troupe_in(&ws, &["usage", "--since", "soon", "--json"]),
        2,
        "usage",
    );
}

#[test]
fn usage_without_a_log_is_empty_creates_nothing_and_a_corrupt_line_fails() {
    let (_dir, ws) = workspace();
    let empty = json(&troupe_in(&ws, &["usage", "--json"]));
    assert_eq!(empty["groups"], json!([]));
    assert_eq!(empty["total"], with(tokens(0, 0, 0), Value::Null, &[]));
    let text = troupe_in(&ws, &["usage"]);
    assert_eq!(text.stdout, "usage by agent\n  (none recorded)\n");
    assert!(!ws.join(".troupe").exists());

    write_log(
        &ws,
        &format!(
            "{}not json\n",
            record("2026-07-30T08:00:00.000Z", "lead", "m", 1, 1, 0)
        ),
    );
    let ran = troupe_in(&ws, &["usage"]);
    assert_fails(&ran, 1, "usage.jsonl");
    assert!(
        ran.stderr.contains("line 2") && ran.stderr.contains("[storage_error]"),
        "{ran:#?}"
    );
    write_log(&ws, &record("2026-07-30 08:00", "lead", "m", 1, 1, 0));
    let ran = troupe_in(&ws, &["usage"]);
    assert_fails(&ran, 1, "line 1");
}

/// A shared team's usage is every process's, from its database.
#[tokio::test]
async fn usage_of_a_shared_team_is_read_from_its_database() {
    use std::sync::Arc;
    use troupe::store::postgres::testing::TestDb;
    use troupe::store::postgres::usage::PgUsage;
    use troupe::store::team_copy::TeamCopy;
    use troupe::store::usage::UsageRecord;

    let Some(db) = TestDb::create() else { return };
    let usage: Arc<dyn TeamCopy<UsageRecord>> = Arc::new(PgUsage::new(db.store("team-a")));
    for line in sample().lines().filter(|l| l.ends_with('}')) {
        usage
            .copy(&serde_json::from_str(line).unwrap())
            .await
            .unwrap();
    }
    let theirs = PgUsage::new(db.store("team-b"));
    theirs
        .copy(
            &serde_json::from_str(&record("2026-07-31T00:00:00.000Z", "lead", "o3", 9, 9, 0))
                .unwrap(),
        )
        .await
        .unwrap();
    let (_dir, ws) = workspace();
    let url = db.url();
    let shared = |args: &[&str]| {
        let mut all = vec!["usage", "--store", &url, "--team", "team-a", "--json"];
        all.extend(args);
        json(&troupe_in(&ws, &all))
    };

    let from_file = {
        let (_other, file_ws) = workspace();
        write_log(&file_ws, &sample());
        json(&troupe_in(&file_ws, &["usage", "--by", "model", "--json"]))
    };
    assert_eq!(shared(&["--by", "model"]), from_file);
    let by_day = shared(&["--by", "day"]);
    assert_eq!(by_day["groups"][1]["key"], "2026-07-31");
    assert_eq!(by_day["total"]["cost_usd"], json!(1.408));
    // `--since` is the database's cut too: only the record of a few minutes ago.
    let recent = record(&minutes_ago(5), "writer", "gpt-4.1", 1_000_000, 0, 0);
    usage
        .copy(&serde_json::from_str(&recent).unwrap())
        .await
        .unwrap();
    let last_hour = shared(&["--since", "1h"]);
    assert_eq!(last_hour["groups"].as_array().unwrap().len(), 1);
    assert_eq!(last_hour["total"]["cost_usd"], json!(2.0));
    assert!(!ws.join(".troupe").exists());
}

/// Each scripted response: 60 prompt and 10 completion tokens; with `[prices.scripted]` at $1,000
/// per million each way, $0.07 a call.
fn glob_script() -> Value {
    let usage = json!({"prompt_tokens": 60, "completion_tokens": 10, "total_tokens": 70});
    let glob =
        json!({"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}], "usage": usage});
    json!({"responses": [glob, glob, glob, {"text": "all done", "usage": usage}]})
}

const SCRIPTED_PRICE: &str = "[prices.scripted]\ninput = 1000\noutput = 1000\n";

fn model_calls(ws: &std::path::Path) -> usize {
    std::fs::read_to_string(ws.join(".troupe/usage.jsonl"))
        .unwrap()
        .lines()
        .count()
}

fn assert_cost_budget_stop(out: &Ran, ws: &std::path::Path) {
    assert_eq!(out.code, 3, "{out:#?}");
    assert_eq!(out.stdout, "");
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.contains("past its cost budget of $0.1000") && last.ends_with("[cost_budget]"),
        "{out:#?}"
    );
    assert!(last.contains("estimated $0.1400"), "{last}");
    // Two calls: $0.07 after the first is under $0.10, $0.14 after the second is not.
    assert_eq!(model_calls(ws), 2);
    let events = std::fs::read_to_string(ws.join(".troupe/events.jsonl")).unwrap();
    let ended: Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(ended["kind"], "run_ended", "{ended}");
    assert_eq!(ended["outcome"], "budget", "{ended}");
    assert_eq!(ended["exit_code"], 3, "{ended}");
}

#[test]
fn a_spent_cost_budget_stops_the_run_with_exit_3() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("troupe.toml"), SCRIPTED_PRICE).unwrap();
    let out = run_scripted(
        &ws,
        "go",
        &glob_script(),
        &["--max-cost", "0.1", "--no-memory"],
    );
    assert_cost_budget_stop(&out, &ws);
    assert!(out.stderr.contains("estimated cost: $0.1400"), "{out:#?}");
    // `troupe usage` agrees.
    let report = json(&troupe_in(&ws, &["usage", "--json"]));
    assert_eq!(report["total"]["cost_usd"], json!(0.14));
}

#[test]
fn run_max_cost_in_the_settings_holds_and_the_flag_decides_over_it() {
    let (_dir, ws) = workspace();
    std::fs::write(
        ws.join("troupe.toml"),
        format!("{SCRIPTED_PRICE}[run]\nmax_cost = 0.1\n"),
    )
    .unwrap();
    let out = run_scripted(&ws, "go", &glob_script(), &["--no-memory"]);
    assert_cost_budget_stop(&out, &ws);

    let (_dir, ws) = workspace();
    std::fs::write(
        ws.join("troupe.toml"),
        format!("{SCRIPTED_PRICE}[run]\nmax_cost = 0.1\n"),
    )
    .unwrap();
    let out = run_scripted(
        &ws,
        "go",
        &glob_script(),
        &["--max-cost", "1", "--no-memory"],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "all done\n");
    assert_eq!(model_calls(&ws), 4);
    assert!(out.stderr.contains("estimated cost: $0.2800"), "{out:#?}");
}

#[test]
fn a_model_with_no_price_counts_nothing_and_is_warned_about_once() {
    let (_dir, ws) = workspace();
    let out = run_scripted(
        &ws,
        "go",
        &glob_script(),
        &["--max-cost", "0.01", "--no-memory"],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "all done\n");
    assert_eq!(
        out.stderr
            .matches("model \"scripted\" has no price")
            .count(),
        1,
        "{out:#?}"
    );
    assert!(out.stderr.contains("estimated cost: $0.0000"), "{out:#?}");
    // Without a cost budget nothing is priced, and nothing is said about prices.
    let (_dir, ws) = workspace();
    let out = run_scripted(&ws, "go", &glob_script(), &["--no-memory"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!out.stderr.contains("price"), "{out:#?}");
}

#[test]
fn bad_budgets_are_usage_errors_before_any_state() {
    let (_dir, ws) = workspace();
    for args in [
        &["--max-cost", "0"][..],
        &["--max-cost", "nan"][..],
        &["--max-cost", "lots"][..],
        &["--max-cost=-1"][..],
    ] {
        let out = run_scripted(&ws, "go", &glob_script(), args);
        assert_eq!(out.code, 2, "{args:?}: {out:#?}");
        assert!(!ws.join(".troupe").exists(), "{args:?}");
    }
    std::fs::write(ws.join("troupe.toml"), "[run]\nmax_cost = -2\n").unwrap();
    let out = run_scripted(&ws, "go", &glob_script(), &[]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("troupe.toml:2"), "{out:#?}");
    assert!(!ws.join(".troupe").exists());
}

/// The cost of a real provider's reported usage: a Chat Completions mock answering as
/// `gpt-4.1-2025-04-14` with 100,000 prompt tokens (half cached) and 1,000 completion tokens,
/// $0.133 a call at the built-in gpt-4.1 price.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_cost_stops_a_run_against_a_servers_reported_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "model": "gpt-4.1-2025-04-14",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "glob", "arguments": "{\"pattern\": \"*\"}"}}]}}],
            "usage": {"prompt_tokens": 100_000, "completion_tokens": 1_000,
                      "total_tokens": 101_000,
                      "prompt_tokens_details": {"cached_tokens": 50_000}}
        })))
        .mount(&server)
        .await;
    let (_dir, ws) = workspace();
    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args(["--approval", "auto", "--no-memory", "--max-cost", "0.2"])
        .env("OPENAI_API_KEY", "sk-cost-test-0123456789")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_MODEL", "gpt-4.1")
        .stdin(std::process::Stdio::null());
    let out = tokio::task::spawn_blocking(move || ran(c.output().unwrap()))
        .await
        .unwrap();

    assert_eq!(out.code, 3, "{out:#?}");
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.contains("estimated $0.2660, past its cost budget of $0.2000")
            && last.ends_with("[cost_budget]"),
        "{out:#?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
    let report = json(&troupe_in(&ws, &["usage", "--by", "model", "--json"]));
    assert_eq!(report["groups"][0]["key"], "gpt-4.1-2025-04-14");
    assert_eq!(report["total"]["cost_usd"], json!(0.266));
}

#[test]
fn config_shows_the_prices_and_the_budget_with_their_files() {
    let (_dir, ws) = workspace();
    // At or above troupe's table (2 / 8 / 0.5 / 2): it applies untrusted. (One below waits for
    // trust: config_and_demo.rs.)
    std::fs::write(
        ws.join("troupe.toml"),
        "[prices.\"gpt-4.1\"]\ninput = 2.5\noutput = 8\ncache_read = 0.5\ncache_write = 2\n\
         [run]\nmax_cost = 5\n",
    )
    .unwrap();
    let file = ws.join("troupe.toml").display().to_string();

    let config = json(&troupe_in(&ws, &["config", "--json"]));
    let text = troupe_in(&ws, &["config"]);

    assert_eq!(
        config["prices"],
        json!({"gpt-4.1": {"input": 2.5, "output": 8.0, "cache_read": 0.5, "cache_write": 2.0,
                           "source": file}})
    );
    assert_eq!(
        config["run"],
        json!({"max_cost": {"value": 5.0, "source": file}})
    );
    assert!(
        text.stdout.contains(&format!(
            "gpt-4.1          = 2.5 / 8 / 0.5 / 2   ({file})\n"
        )),
        "{text:#?}"
    );
    assert!(
        text.stdout
            .contains(&format!("max_cost         = $5.0000   ({file})\n")),
        "{text:#?}"
    );
    assert!(!ws.join(".troupe").exists());
}
