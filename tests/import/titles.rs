//! The title of an imported Claude Code session: a `summary` line's text only when the summary
//! is of this file's conversation (its `leafUuid` is a line of the file).

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
