//! The title of an imported Claude Code session: the `custom-title` or `ai-title` Claude Code
//! gave it, else a `summary` line's text only when the summary is of this file's conversation
//! (its `leafUuid` is a line of the file).

use agentlog::store::Store;

use crate::import_formats::{import_keep_open, write};

/// Claude Code writes, at the top of a session's file, summaries of conversations kept in other
/// files (every real file tried had only such ones): before, the first of them became the
/// title, naming another conversation. A summary whose leaf is in the file is the title.
#[test]
fn a_summary_is_the_title_only_when_its_leaf_is_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let body = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"list the files"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"t1"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"a b"}]},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"t1"}"#,
    ];
    let other = r#"{"type":"summary","summary":"Another conversation","leafUuid":"elsewhere"}"#;
    let own = r#"{"type":"summary","summary":"Listing files","leafUuid":"a1"}"#;
    let cases = [
        ("t1", vec![other], None),
        ("t2", vec![other, own], Some("Listing files")),
    ];
    let store = Store::open(dir.path().join("store")).unwrap();
    for (name, summaries, title) in cases {
        let mut lines = summaries;
        lines.extend(body);
        let file = write(dir.path(), &format!("{name}.jsonl"), &lines, "\n");
        let summary = import_keep_open(&store, &file, false);
        let info = store.info(&summary.created[0]).unwrap();
        assert_eq!(info.title.as_deref(), title, "{name}");
    }
}

/// Claude Code 2.1.2xx names a session in `ai-title` lines (its own title) and `custom-title`
/// lines (the user's `/rename`), anywhere in the file and again later. Those were kept as
/// `import/line`s only: nearly every newer session had no title. The last `custom-title` is
/// the title, else the last `ai-title`, else a summary of the file's own conversation; a later
/// run that brings a new one retitles the session, unless its title was set by hand.
#[test]
fn ai_and_custom_title_lines_name_the_session_and_a_later_one_renames_it() {
    let dir = tempfile::tempdir().unwrap();
    let line = |n: u32, text: &str| {
        format!(
            r#"{{"parentUuid":null,"type":"user","message":{{"role":"user","content":"{text}"}},"uuid":"u{n}","timestamp":"2026-06-10T12:00:0{n}.000Z","sessionId":"t3","version":"2.1.220"}}"#
        )
    };
    let ai = |t: &str| format!(r#"{{"type":"ai-title","aiTitle":"{t}","sessionId":"t3"}}"#);
    let custom =
        |t: &str| format!(r#"{{"type":"custom-title","sessionId":"t3","customTitle":"{t}"}}"#);
    let store = Store::open(dir.path().join("store")).unwrap();
    let title = || store.info("claude-t3").unwrap().title;
    let mut lines = vec![
        line(1, "fix the login page"),
        ai("Fix login page"),
        // A title's words inside a message are not a title line.
        line(2, r#"{\"type\":\"ai-title\",\"aiTitle\":\"no\"}"#),
        ai("Fix login page redirect"),
    ];
    let run = |lines: &[String]| {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let file = write(dir.path(), "t3.jsonl", &refs, "\n");
        let summary = import_keep_open(&store, &file, false);
        assert!(summary.failed == 0, "{summary:?}");
    };
    run(&lines);
    assert_eq!(title().as_deref(), Some("Fix login page redirect"));
    // The user renames it; a later ai-title does not override the user's name.
    lines.push(custom("Login work"));
    run(&lines);
    assert_eq!(title().as_deref(), Some("Login work"));
    lines.push(line(3, "and the logout"));
    lines.push(ai("Fix login and logout"));
    run(&lines);
    assert_eq!(title().as_deref(), Some("Login work"));
    // A title set by hand stays.
    let session = store.open_session("claude-t3").unwrap();
    session
        .update_meta(|m| m.title = agentlog::event::Opt::Present("mine".into()))
        .unwrap();
    session.close().unwrap();
    lines.push(custom("Login and logout"));
    run(&lines);
    assert_eq!(title().as_deref(), Some("mine"));
}
