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

/// Found by the third sweep: Claude Code 2.0.76 and 2.1.x append `summary` lines late in a
/// session's file (lines 85, 351, 4033 of real files), and only the first 64 lines were read,
/// so those sessions had no title; a title line written with spaces (`"type": "ai-title"`) was
/// not found either. Now a summary whose leaf is in the file counts wherever it is, the one of
/// the latest leaf when there are several.
#[test]
fn a_summary_anywhere_in_the_file_is_the_title_of_its_latest_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let user = |n: u32| {
        format!(
            r#"{{"parentUuid":null,"type":"user","message":{{"role":"user","content":"question {n}"}},"uuid":"u{n}","timestamp":"2026-01-10T12:00:00.{n:03}Z","sessionId":"t5","version":"2.0.76"}}"#
        )
    };
    let summary = |leaf: u32, t: &str| {
        format!(r#"{{"type":"summary","summary":"{t}","leafUuid":"u{leaf}"}}"#)
    };
    let mut lines: Vec<String> = (1..=100).map(user).collect();
    lines.insert(80, summary(40, "Early part"));
    lines.push(summary(99, "The whole conversation"));
    lines.push(summary(50, "Middle part"));
    lines.push(summary(7777, "Another file's conversation"));
    let store = Store::open(dir.path().join("store")).unwrap();
    // The title of the session made from `lines`, written as the file `name`.
    let title_of = |name: &str, lines: &[&str]| {
        let file = write(dir.path(), name, lines, "\n");
        let created = import_keep_open(&store, &file, false).created;
        store.info(&created[0]).unwrap().title
    };
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    assert_eq!(
        title_of("t5.jsonl", &refs).as_deref(),
        Some("The whole conversation")
    );
    // Spaces around the colons: read as any line is.
    let first = user(1);
    let spaced = [
        first.as_str(),
        r#"{"type": "ai-title", "aiTitle": "Spaced title", "sessionId": "t6"}"#,
    ];
    assert_eq!(
        title_of("t6.jsonl", &spaced).as_deref(),
        Some("Spaced title")
    );
    // A summary's leaf written with spaces around its colons (claude-code-log's fixtures).
    let spaced_leaf = [
        r#"{"type": "user", "timestamp": "2025-06-14T10:04:00Z", "parentUuid": null, "sessionId": "t8", "uuid": "msg_011", "message": {"role": "user", "content": "decorators?"}}"#,
        r#"{"type":"summary","summary":"Python decorators","leafUuid":"msg_011"}"#,
    ];
    assert_eq!(
        title_of("t8.jsonl", &spaced_leaf).as_deref(),
        Some("Python decorators")
    );
}

/// Found by the third sweep: a `--keep-open` run of a file being written held back the answer
/// a `summary` line names, so the session got no title from it, and later runs took titles
/// only from `ai-title`/`custom-title` lines: the split import stayed untitled while a one-shot
/// import was titled. A later run whose lines hold a summary titles the session too.
#[test]
fn a_later_run_takes_the_title_of_a_summary_whose_leaf_it_brings() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"what is this icon?"},"uuid":"u1","timestamp":"2026-02-01T10:00:00.000Z","sessionId":"t7","version":"2.1.29"}"#,
        r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"A robot."}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":3}},"uuid":"a1","timestamp":"2026-02-01T10:00:02.000Z","sessionId":"t7","version":"2.1.29"}"#,
        r#"{"type":"summary","summary":"Friendly Robot Icon","leafUuid":"a1"}"#,
        r#"{"parentUuid":"a1","isSidechain":false,"type":"user","message":{"role":"user","content":"thanks"},"uuid":"u2","timestamp":"2026-02-01T10:00:05.000Z","sessionId":"t7","version":"2.1.29"}"#,
    ];
    let store = Store::open(dir.path().join("store")).unwrap();
    // The first run sees the file being written, up to the summary: the answer waits.
    let file = write(dir.path(), "t7.jsonl", &lines[..3], "\n");
    let first = import_keep_open(&store, &file, true);
    assert_eq!(first.created.len(), 1, "{first:?}");
    let file = write(dir.path(), "t7.jsonl", &lines, "\n");
    import_keep_open(&store, &file, false);
    assert_eq!(
        store.info("claude-t7").unwrap().title.as_deref(),
        Some("Friendly Robot Icon")
    );
}
