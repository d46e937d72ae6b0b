//! `load_skill` and the skill catalog: loading, names, confinement, front matter.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::permissions::{Decision, DenyApproval};
use troupe::tools::skills::{
    catalog, front_matter, render_catalog, FrontMatter, LoadSkillTool, SkillInfo,
};

use super::{assert_code, assert_ok, ctx, Harness};

fn skill(workspace: &Path, name: &str, text: &str) {
    let dir = workspace.join("skills").join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("SKILL.md"), text).unwrap();
}

const RELEASE: &str =
    "---\nname: release-notes\ndescription: How to write release notes.\n---\n# Release notes\nSay what changed.\n";

#[tokio::test]
async fn load_skill_returns_the_skill_file() {
    let dir = tempfile::tempdir().unwrap();
    skill(dir.path(), "release-notes", RELEASE);
    // Read tools are allowed by the rules: even a deny-everything provider is never asked.
    let h = Harness::new(vec![Arc::new(LoadSkillTool)], Arc::new(DenyApproval));
    let outcome = h
        .call(
            &ctx("lead", dir.path()),
            "load_skill",
            json!({"name": "release-notes"}),
        )
        .await;
    assert_ok(&h, "load_skill", &outcome, Decision::Allow);
    assert_eq!(outcome.content, RELEASE);
}

#[tokio::test]
async fn invalid_names_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    skill(dir.path(), "ok", "x");
    let h = Harness::auto(vec![Arc::new(LoadSkillTool)]);
    let lead = ctx("lead", dir.path());
    for name in ["../x", "..", "a/b", "Ok", "ok/../ok", "-ok", "", "/etc"] {
        let outcome = h.call(&lead, "load_skill", json!({ "name": name })).await;
        assert_code(&outcome, "invalid_arguments");
    }
}

#[tokio::test]
async fn a_missing_skill_lists_the_available_ones() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::auto(vec![Arc::new(LoadSkillTool)]);
    let lead = ctx("lead", dir.path());
    let outcome = h.call(&lead, "load_skill", json!({"name": "nope"})).await;
    assert_eq!(
        outcome.content,
        "Error [not_found]: there is no skill named \"nope\" (skills/nope/SKILL.md does not exist); \
         there are no skills in this workspace"
    );
    skill(dir.path(), "beta", "b");
    skill(dir.path(), "alpha", "a");
    let outcome = h.call(&lead, "load_skill", json!({"name": "nope"})).await;
    assert_eq!(
        outcome.content,
        "Error [not_found]: there is no skill named \"nope\" (skills/nope/SKILL.md does not exist); \
         available skills: alpha, beta"
    );
}

#[tokio::test]
async fn skills_reached_through_symlinks_out_of_the_workspace_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    skill(
        outside.path(),
        "secret",
        "---\ndescription: outside\n---\nsecret\n",
    );
    let dir = tempfile::tempdir().unwrap();
    skill(dir.path(), "inside", "inside\n");
    let skills = dir.path().join("skills");
    // A skill folder that is a symlink out of the workspace.
    std::os::unix::fs::symlink(outside.path().join("skills/secret"), skills.join("secret"))
        .unwrap();
    // A skill folder whose SKILL.md is a symlink out of the workspace.
    fs::create_dir(skills.join("linked-file")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("skills/secret/SKILL.md"),
        skills.join("linked-file/SKILL.md"),
    )
    .unwrap();
    // A symlink that stays inside the workspace is fine.
    std::os::unix::fs::symlink(skills.join("inside"), skills.join("alias")).unwrap();

    let h = Harness::auto(vec![Arc::new(LoadSkillTool)]);
    let lead = ctx("lead", dir.path());
    for name in ["secret", "linked-file"] {
        let outcome = h.call(&lead, "load_skill", json!({ "name": name })).await;
        assert_code(&outcome, "permission_denied");
        assert!(!outcome.content.contains("secret\n"), "{}", outcome.content);
    }
    let outcome = h.call(&lead, "load_skill", json!({"name": "alias"})).await;
    assert_eq!(outcome.content, "inside\n");

    let names: Vec<String> = catalog(dir.path()).into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["alias", "inside"]);
}

#[tokio::test]
async fn a_skills_folder_that_is_a_symlink_out_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    skill(outside.path(), "secret", "secret\n");
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path().join("skills"), dir.path().join("skills")).unwrap();
    let h = Harness::auto(vec![Arc::new(LoadSkillTool)]);
    let outcome = h
        .call(
            &ctx("lead", dir.path()),
            "load_skill",
            json!({"name": "secret"}),
        )
        .await;
    assert_code(&outcome, "permission_denied");
    assert_eq!(catalog(dir.path()), vec![]);
}

#[test]
fn the_catalog_reads_descriptions_and_never_fails() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(catalog(dir.path()), vec![]);
    assert_eq!(render_catalog(&[]), "");
    assert_eq!(catalog(&dir.path().join("missing")), vec![]);

    skill(dir.path(), "release-notes", RELEASE);
    skill(dir.path(), "plain", "# no front matter\n");
    skill(
        dir.path(),
        "broken",
        "---\ndescription: never closed\n# body\n",
    );
    skill(
        dir.path(),
        "folded",
        "---\nname: other-name\ndescription: >\n  Spans\n  two lines.\nextra: x\n---\nbody\n",
    );
    skill(dir.path(), "Not-A-Slug", "---\ndescription: x\n---\n");
    fs::create_dir_all(dir.path().join("skills/empty-folder")).unwrap();
    fs::write(dir.path().join("skills/loose-file"), "x").unwrap();
    // Not UTF-8: cannot be loaded, so it is not offered.
    fs::create_dir_all(dir.path().join("skills/binary")).unwrap();
    fs::write(dir.path().join("skills/binary/SKILL.md"), [0xff, 0xfe]).unwrap();

    let info = |name: &str, description: &str| SkillInfo {
        name: name.into(),
        description: description.into(),
    };
    let skills = catalog(dir.path());
    assert_eq!(
        skills,
        vec![
            info("broken", ""),
            info("folded", "Spans two lines."),
            info("plain", ""),
            info("release-notes", "How to write release notes."),
        ]
    );
    assert_eq!(
        render_catalog(&skills),
        "- broken\n- folded: Spans two lines.\n- plain\n- release-notes: How to write release notes.\n"
    );
}

#[test]
fn front_matter_parsing() {
    let matter = |name: Option<&str>, description: Option<&str>| FrontMatter {
        name: name.map(Into::into),
        description: description.map(Into::into),
    };
    let cases = [
        (
            RELEASE,
            matter(Some("release-notes"), Some("How to write release notes.")),
        ),
        (
            "---\r\nname: 'quoted'\r\ndescription: \"Double: quoted\"\r\n---\r\nbody",
            matter(Some("quoted"), Some("Double: quoted")),
        ),
        (
            "---\ndescription: |\n  one\n  two\n---\n",
            matter(None, Some("one two")),
        ),
        ("---\n---\nbody", matter(None, None)),
        (
            "no front matter\n---\ndescription: x\n---\n",
            matter(None, None),
        ),
        ("---\ndescription: unclosed\n", matter(None, None)),
        ("", matter(None, None)),
        ("---\njust words\n: \n---\n", matter(None, None)),
        (
            "\u{feff}---\ndescription: bom\n---\n",
            matter(None, Some("bom")),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(front_matter(text), expected, "{text:?}");
    }
}

#[tokio::test]
async fn a_skill_file_that_is_a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    skill(dir.path(), "ok", RELEASE);
    fs::create_dir_all(dir.path().join("skills/pipe")).unwrap();
    crate::jobs::make_fifo(&dir.path().join("skills/pipe/SKILL.md"));
    // The catalog leaves it out rather than waiting for a writer.
    assert_eq!(
        catalog(dir.path())
            .into_iter()
            .map(|s| s.name)
            .collect::<Vec<_>>(),
        ["ok"]
    );
    let h = Harness::auto(vec![Arc::new(LoadSkillTool)]);
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        h.call(
            &ctx("lead", dir.path()),
            "load_skill",
            json!({"name": "pipe"}),
        ),
    )
    .await
    .expect("load_skill blocked on a FIFO");
    assert_code(&outcome, "tool_failed");
    assert_eq!(
        outcome.content,
        "Error [tool_failed]: cannot load skills/pipe/SKILL.md: not a regular file (a FIFO)"
    );
}
