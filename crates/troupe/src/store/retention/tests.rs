use super::*;

fn at(secs: i64) -> UtcTime {
    UtcTime::from_unix_millis(secs * 1000).unwrap()
}

fn sweep(rule: Rule) -> Sweep {
    let mut policy = Policy::default();
    policy.set(Kind::Messages, rule);
    Sweep {
        policy,
        now: at(1_000_000),
        dry_run: false,
    }
}

fn c(
    name: &'static str,
    secs_ago: i64,
    bytes: u64,
    needed: Option<&'static str>,
) -> Candidate<&'static str> {
    Candidate {
        item: name,
        at: at(1_000_000 - secs_ago),
        bytes,
        needed,
    }
}

#[test]
fn age_removes_only_what_is_older_and_not_needed() {
    let s = sweep(Rule {
        age: Some(Duration::from_secs(100)),
        size: None,
    });
    let mut report = Report::new(false);
    let out = decide(
        Kind::Messages,
        &s,
        vec![
            c("new", 10, 1, None),
            c("old", 200, 2, None),
            c("old-needed", 300, 3, Some(needed::PENDING_REQUEST)),
            c("edge", 100, 4, None),
        ],
        &mut report,
    );
    assert_eq!(out, vec![("old", 2)]);
    let k = &report.kinds[&Kind::Messages];
    assert_eq!(k.kept[WITHIN_AGE], Tally { items: 2, bytes: 5 });
    assert_eq!(
        k.kept[needed::PENDING_REQUEST],
        Tally { items: 1, bytes: 3 }
    );
    assert_eq!(k.removed, Tally::default(), "the caller records removals");
}

#[test]
fn size_keeps_the_newest_that_fit() {
    let s = sweep(Rule {
        age: None,
        size: Some(10),
    });
    let mut report = Report::new(false);
    let mut out = decide(
        Kind::Messages,
        &s,
        vec![
            c("a", 1, 4, None),
            c("b", 2, 4, None),
            c("c", 3, 4, None),
            c("d", 4, 4, None),
        ],
        &mut report,
    );
    out.sort();
    assert_eq!(out, vec![("c", 4), ("d", 4)]);
    assert_eq!(report.kinds[&Kind::Messages].kept[WITHIN_SIZE].items, 2);
}

#[test]
fn no_rule_removes_nothing() {
    let s = sweep(Rule::default());
    let mut report = Report::new(true);
    let out = decide(
        Kind::Messages,
        &s,
        vec![c("x", 1_000_000, 9, None)],
        &mut report,
    );
    assert!(out.is_empty());
}

#[test]
fn cutoff_follows_the_age() {
    let s = sweep(Rule {
        age: Some(Duration::from_secs(60)),
        size: None,
    });
    assert_eq!(s.cutoff(Kind::Messages), Some(at(1_000_000 - 60)));
    let mut none = s.clone();
    none.policy.set(Kind::Messages, Rule::default());
    assert_eq!(none.cutoff(Kind::Messages), None);
}

#[test]
fn reports_merge() {
    let mut a = Report::new(false);
    a.removed(Kind::Events, 10);
    a.kept(Kind::Events, WITHIN_AGE, 1);
    let mut b = Report::new(false);
    b.removed(Kind::Events, 5);
    b.kept(Kind::Events, WITHIN_AGE, 2);
    b.removed(Kind::Jobs, 1);
    a.merge(b);
    assert_eq!(
        a.kinds[&Kind::Events].removed,
        Tally {
            items: 2,
            bytes: 15
        }
    );
    assert_eq!(
        a.kinds[&Kind::Events].kept[WITHIN_AGE],
        Tally { items: 2, bytes: 3 }
    );
    assert_eq!(
        a.removed_total(),
        Tally {
            items: 3,
            bytes: 16
        }
    );
}
