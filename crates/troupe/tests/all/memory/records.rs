//! One record: its validation rules, its file format, and the strict parse of that format.

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::store::memory::{MemoryRecord, MemoryType, MAX_BODY_BYTES, MAX_BODY_LINES};

fn new(name: &str, description: &str, body: &str) -> Result<MemoryRecord, String> {
    MemoryRecord::new(name, MemoryType::Feedback, description, body).map_err(|e| {
        assert_eq!(e.code(), "memory_invalid", "{e}");
        e.to_string()
    })
}

const FILE: &str = "---\nname: short-answers\ntype: feedback\ndescription: The user wants short answers\n---\nKeep answers under ten lines.\nWhy: they read on a phone.\n";

#[test]
fn a_record_renders_and_parses_back_exactly() {
    let record = MemoryRecord::new(
        "short-answers",
        MemoryType::Feedback,
        "The user wants short answers",
        "Keep answers under ten lines.\nWhy: they read on a phone.\n",
    )
    .unwrap();
    assert_eq!(record.render(), FILE);
    assert_eq!(MemoryRecord::parse("short-answers", FILE).unwrap(), record);
    for kind in MemoryType::ALL {
        for body in [
            "",
            "one line",
            "no newline at the end\n\n",
            "---\nname: x\n",
        ] {
            let record = MemoryRecord::new("r-2", kind, " spaced:  description ", body).unwrap();
            let text = record.render();
            let back = MemoryRecord::parse("r-2", &text).unwrap();
            assert_eq!(back, record);
            assert_eq!(back.render(), text);
        }
    }
    assert!(
        MemoryRecord::parse("x", "---\nname: x\ntype: user\ndescription: d\n---\n")
            .unwrap()
            .body
            .is_empty()
    );
}

#[test]
fn names_must_be_slugs_of_at_most_64_bytes() {
    for good in ["a", "a1", "user-prefers-tabs", "0-9", &"a".repeat(64)] {
        assert!(new(good, "d", "").is_ok(), "{good}");
    }
    for bad in [
        "",
        "A",
        "a_b",
        "a--b",
        "-a",
        "a-",
        "a b",
        "../x",
        "a/b",
        "a.md",
        "é",
        ".hidden",
        &"a".repeat(65),
    ] {
        assert!(new(bad, "d", "").is_err(), "{bad:?}");
    }
}

#[test]
fn descriptions_are_one_non_blank_line_of_at_most_200_characters() {
    assert!(new("n", &"é".repeat(200), "").is_ok());
    for bad in [
        "",
        "   ",
        "two\nlines",
        "carriage\rreturn",
        "tab\tinside",
        &"x".repeat(201),
    ] {
        assert!(new("n", bad, "").is_err(), "{bad:?}");
    }
}

#[test]
fn bodies_are_at_most_4096_bytes_and_200_lines() {
    assert!(new("n", "d", &"x".repeat(MAX_BODY_BYTES)).is_ok());
    assert!(new("n", "d", &"x".repeat(MAX_BODY_BYTES + 1)).is_err());
    assert!(new("n", "d", &"é".repeat(MAX_BODY_BYTES / 2 + 1)).is_err());
    assert!(new("n", "d", &"x\n".repeat(MAX_BODY_LINES)).is_ok());
    assert!(new("n", "d", &"x\n".repeat(MAX_BODY_LINES + 1)).is_err());
}

#[test]
fn the_record_checks_hold_for_fields_set_directly() {
    let mut record = MemoryRecord::new("n", MemoryType::User, "d", "").unwrap();
    record.name = "../escape".to_owned();
    assert_eq!(record.validate().unwrap_err().code(), "memory_invalid");
}

#[test]
fn parsing_is_strict() {
    let cases: &[(&str, &str)] = &[
        ("no front matter", "name: n\n"),
        ("unclosed", "---\nname: n\ntype: user\ndescription: d\n"),
        (
            "duplicate key",
            "---\nname: n\nname: n\ntype: user\ndescription: d\n---\n",
        ),
        (
            "unknown key",
            "---\nname: n\ntype: user\ndescription: d\ntags: x\n---\n",
        ),
        ("missing name", "---\ntype: user\ndescription: d\n---\n"),
        ("missing type", "---\nname: n\ndescription: d\n---\n"),
        ("missing description", "---\nname: n\ntype: user\n---\n"),
        (
            "unknown type",
            "---\nname: n\ntype: secret\ndescription: d\n---\n",
        ),
        (
            "upper-case type",
            "---\nname: n\ntype: User\ndescription: d\n---\n",
        ),
        (
            "no space after colon",
            "---\nname: n\ntype:user\ndescription: d\n---\n",
        ),
        (
            "blank description",
            "---\nname: n\ntype: user\ndescription:  \n---\n",
        ),
        (
            "CRLF",
            "---\r\nname: n\r\ntype: user\r\ndescription: d\r\n---\r\n",
        ),
        (
            "CR in a value",
            "---\nname: n\ntype: user\ndescription: d\r\n---\n",
        ),
        (
            "name differs from the stem",
            "---\nname: other\ntype: user\ndescription: d\n---\n",
        ),
    ];
    for (what, text) in cases {
        assert!(MemoryRecord::parse("n", text).is_err(), "{what}");
    }
    let duplicate = MemoryRecord::parse("n", cases[2].1).unwrap_err();
    assert!(duplicate.contains("twice"), "{duplicate}");
    let stem = MemoryRecord::parse("n", cases[13].1).unwrap_err();
    assert!(stem.contains("file name"), "{stem}");
    let oversized = format!(
        "---\nname: n\ntype: user\ndescription: d\n---\n{}",
        "x".repeat(MAX_BODY_BYTES + 1)
    );
    assert!(MemoryRecord::parse("n", &oversized).is_err());
    // Keys in another order are the same record.
    assert_eq!(
        MemoryRecord::parse("n", "---\ntype: user\ndescription: d\nname: n\n---\nb").unwrap(),
        MemoryRecord::new("n", MemoryType::User, "d", "b").unwrap()
    );
}
