//! deny > ask > allow, every rule evaluated, the strongest wins; the defaults of SPEC §7.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::permissions::rules::{combine, FALLBACK_RULE};
use troupe::permissions::{Decision, EffectDefaults, PermissionRule, RuleVerdict};
use troupe::tools::{Effect, Scope};
use troupe::wire::AgentName;

use super::{fixed, request};

use Decision::{Allow, Ask, Deny};

#[tokio::test]
async fn the_strongest_verdict_wins_in_any_order() {
    let agent = AgentName::lead();
    let args = json!({});
    let req = request(&agent, "t", Effect::Write, &args);
    let table: &[(&[Decision], Decision)] = &[
        (&[Allow], Allow),
        (&[Ask], Ask),
        (&[Deny], Deny),
        (&[Allow, Ask], Ask),
        (&[Ask, Allow], Ask),
        (&[Allow, Deny], Deny),
        (&[Deny, Allow], Deny),
        (&[Ask, Deny], Deny),
        (&[Deny, Ask], Deny),
        (&[Allow, Ask, Deny], Deny),
        (&[Deny, Ask, Allow], Deny),
        (&[Allow, Allow], Allow),
    ];
    for (decisions, expected) in table {
        let rules: Vec<_> = decisions
            .iter()
            .enumerate()
            .map(|(i, d)| fixed(&format!("r{i}"), *d))
            .collect();
        let verdict = combine(rules.iter().map(|r| r.as_ref()), &req).await;
        assert_eq!(verdict.decision, *expected, "{decisions:?}");
        // The reported rule is the first one that gave the winning decision.
        let first = decisions.iter().position(|d| d == expected).unwrap();
        assert_eq!(verdict.rule, format!("r{first}"), "{decisions:?}");
    }
}

#[tokio::test]
async fn no_verdict_at_all_falls_back_to_ask() {
    let agent = AgentName::lead();
    let args = json!({});
    let verdict = combine(
        std::iter::empty(),
        &request(&agent, "t", Effect::Read, &args),
    )
    .await;
    assert_eq!(verdict.decision, Ask);
    assert_eq!(verdict.rule, FALLBACK_RULE);
}

#[tokio::test]
async fn defaults_follow_the_effect() {
    let agent = AgentName::parse("alice").unwrap();
    let args = json!({});
    let table = [
        (Effect::Read, Allow, "read tools are allowed"),
        (Effect::Write, Ask, "write tools need approval"),
        (Effect::Execute, Ask, "execute tools need approval"),
        (
            Effect::External,
            Allow,
            "protocol and team tools are allowed",
        ),
    ];
    for (effect, decision, reason) in table {
        assert_eq!(
            EffectDefaults
                .evaluate(&request(&agent, "t", effect, &args))
                .await,
            Some(RuleVerdict::new(decision, "default", reason))
        );
    }
}

#[tokio::test]
async fn defaults_allow_bookkeeping_writes_but_not_bookkeeping_processes() {
    // A tool whose changes land only in troupe's own state (todo list, task board, cron) is
    // allowed without asking; the scope never turns an execute tool into an allowed one.
    let agent = AgentName::lead();
    let args = json!({});
    let table = [
        (
            Effect::Write,
            Allow,
            "bookkeeping tools are allowed: they change only troupe's own state",
        ),
        (Effect::Execute, Ask, "execute tools need approval"),
        (Effect::Read, Allow, "read tools are allowed"),
    ];
    for (effect, decision, reason) in table {
        let mut req = request(&agent, "t", effect, &args);
        req.scope = Scope::TroupeState;
        assert_eq!(
            EffectDefaults.evaluate(&req).await,
            Some(RuleVerdict::new(decision, "default", reason)),
            "{effect:?}"
        );
    }
}
