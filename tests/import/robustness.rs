//! Real files that are not quite what the format description says: outputs whose error shows
//! only in their text, prompts written only as mirrors.

use agentlog::event::{EventData, Opt};
use agentlog::store::Store;

use crate::import_formats::{codex_prelude, events, import_keep_open, reader, types, write};

/// The exec tools of Codex 0.12x return text whose header gives the exit code (`Process exited
/// with code N`); a non-zero code is an error result, a command still running or exiting 0 is
/// not, and text after the `Output:` line is the command's, never read as a header. A command
/// the sandbox refused (0.4x: `failed in sandbox …`) is an error too.
#[test]
fn codex_exec_output_with_a_non_zero_exit_code_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let call = |id: &str| {
        format!(
            r#"{{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{{"type":"function_call","name":"exec_command","arguments":"{{\"cmd\":\"make\"}}","call_id":"{id}"}}}}"#
        )
    };
    let output = |id: &str, text: &str| {
        format!(
            r#"{{"timestamp":"2025-10-01T10:00:02.000Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"{id}","output":"{text}"}}}}"#
        )
    };
    let mut lines = codex_prelude("x2");
    for (id, text) in [
        (
            "c1",
            r"Chunk ID: de4b53\nWall time: 4.1190 seconds\nProcess exited with code 2\nOriginal token count: 12\nOutput:\nmake: *** [all] Error 2",
        ),
        (
            "c2",
            r"Chunk ID: 853167\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 3\nOutput:\nok",
        ),
        (
            "c3",
            r"Chunk ID: a21e41\nWall time: 1.0037 seconds\nProcess running with session ID 48230\nOriginal token count: 0\nOutput:\nProcess exited with code 1",
        ),
        (
            "c4",
            r"Exit code: 1\nWall time: 0.2 seconds\nOutput:\nno such file",
        ),
        (
            "c5",
            r"failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, exit code: 2, stdout: , stderr: denied",
        ),
    ] {
        lines.push(call(id));
        lines.push(output(id, text));
    }
    lines.push(r#"{"timestamp":"2025-10-01T10:00:04.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"1"}}"#.to_string());
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "x2.jsonl", &refs, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let errors: Vec<(String, bool)> = events(&reader(&store, "codex-x2"))
        .into_iter()
        .filter_map(|e| match e.data {
            EventData::ToolResult(t) => match t.call_id {
                Opt::Present(id) => Some((id, t.message.is_error)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        errors,
        [
            ("c1".to_owned(), true),
            ("c2".to_owned(), false),
            ("c3".to_owned(), false),
            ("c4".to_owned(), true),
            ("c5".to_owned(), true)
        ]
    );
}

/// A Codex file whose prompts are only `event_msg` `user_message` lines (a fixture filtered
/// down to them, 0.128): the answers before and after such a prompt are two messages, each in
/// its own step (before, nothing ended the first, and the second was joined to it, stamped
/// with the first's time).
#[test]
fn a_user_message_mirror_ends_the_model_output_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"timestamp":"2026-05-11T10:29:40.150Z","type":"session_meta","payload":{"id":"x3","timestamp":"2026-05-11T10:29:40.150Z","cwd":"/w","originator":"Codex Desktop","cli_version":"0.128.0"}}"#,
        r#"{"timestamp":"2026-05-11T10:29:40.167Z","type":"event_msg","payload":{"type":"user_message","message":"first","images":[]}}"#,
        r#"{"timestamp":"2026-05-11T10:30:28.225Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer one"}]}}"#,
        r#"{"timestamp":"2026-05-11T11:20:44.097Z","type":"event_msg","payload":{"type":"user_message","message":"second","images":[]}}"#,
        r#"{"timestamp":"2026-05-11T11:20:54.298Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer two"}]}}"#,
    ];
    let file = write(dir.path(), "x3.jsonl", &lines, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let r = reader(&store, "codex-x3");
    let t = types(&r);
    assert_eq!(
        t.iter().filter(|x| *x == "assistant/message").count(),
        2,
        "{t:?}"
    );
    assert_eq!(t.iter().filter(|x| *x == "step/start").count(), 2, "{t:?}");
    let times: Vec<i64> = events(&r).iter().map(|e| e.time).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}
