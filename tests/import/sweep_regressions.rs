//! Importer bugs found by the sweep of 2026-12-07 over public Codex and Claude Code transcripts
//! (111 files from 17 repositories), one test each, on files cut down to the lines that matter.

use std::path::Path;

use agentlog::import::{import_paths, Format, Options};
use agentlog::store::Store;

/// Imports `lines` (written as one file named `name`) into a fresh store under `dir`.
fn import_lines(dir: &Path, name: &str, lines: &[&str], format: Option<Format>) -> Store {
    let file = dir.join(name);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let store = Store::open(dir.join("store")).unwrap();
    let options = Options {
        format,
        ..Options::default()
    };
    let summary = import_paths(&store, &[file], &options, |_, _| {}).unwrap();
    assert_eq!(summary.failed, 0, "{summary:?}");
    store
}

/// A Codex subagent's thread (0.14x) names its parent in `source.subagent.thread_spawn`, not
/// at the top of the meta line's payload: the session was not linked to its parent.
#[test]
fn a_codex_subagent_thread_links_to_its_parent() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-sub.jsonl",
        &[
            r#"{"timestamp":"2026-08-13T08:02:00.000Z","type":"session_meta","payload":{"id":"sub1","timestamp":"2026-08-13T08:02:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.146.0","source":{"subagent":{"thread_spawn":{"parent_thread_id":"main1","depth":1,"agent_path":"/root/review","agent_nickname":"Fermat","agent_role":null}}},"model_provider":"openai"}}"#,
            r#"{"timestamp":"2026-08-13T08:02:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
            r#"{"timestamp":"2026-08-13T08:02:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Review the diff"}]}}"#,
            r#"{"timestamp":"2026-08-13T08:02:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Looks fine."}]}}"#,
            r#"{"timestamp":"2026-08-13T08:02:04.000Z","type":"event_msg","payload":{"type":"task_complete"}}"#,
        ],
        None,
    );
    let info = store.info("codex-sub1").unwrap();
    assert_eq!(info.parent_session.as_deref(), Some("codex-main1"));
}

/// A Codex turn that `task_complete` closed with a call unanswered ended `completed`, where a
/// Claude Code turn ends `interrupted` and docs/import.md says a turn with unanswered calls
/// does.
#[test]
fn a_codex_turn_completed_with_a_call_unanswered_ends_interrupted() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-r02.jsonl",
        &[
            r#"{"timestamp":"2026-03-25T11:31:11.000Z","type":"session_meta","payload":{"id":"r02","cwd":"/p","cli_version":"0.116.0"}}"#,
            r#"{"timestamp":"2026-03-25T11:31:12.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
            r#"{"timestamp":"2026-03-25T11:31:13.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Create a notes file"}]}}"#,
            r#"{"timestamp":"2026-03-25T11:31:14.000Z","type":"response_item","payload":{"type":"custom_tool_call","status":"completed","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"}}"#,
            r#"{"timestamp":"2026-03-25T11:31:15.000Z","type":"event_msg","payload":{"type":"task_complete"}}"#,
        ],
        Some(Format::Codex),
    );
    let reader = store.open_reader("codex-r02").unwrap();
    let lifecycle = reader.lifecycle().unwrap();
    assert_eq!(
        lifecycle
            .last_end()
            .map(|(turn, kind)| (turn, kind.as_str())),
        Some((1, "interrupted"))
    );
}

/// The events of session `id`, in canonical JSONL, one string each.
fn lines_of(store: &Store, id: &str) -> Vec<String> {
    store
        .open_reader(id)
        .unwrap()
        .events()
        .map(|e| {
            agentlog::event::decode_event(e.unwrap())
                .unwrap()
                .to_canonical_string()
        })
        .collect()
}

/// Node's `JSON.stringify` writes a lone surrogate as `\ud83d` (a string cut in the middle of
/// an emoji), and JavaScript's `JSON.parse` takes a repeated member name (the last value wins).
/// The strict parser refused both lines, so a tool's result (and in the second file the call
/// itself) was kept only as an unparsed `import/line`, and the call was answered
/// `TOOL_OUTCOME_UNKNOWN`. Such a line is now read as `JSON.parse` reads it (U+FFFD for the
/// lone surrogate), with a warning; the source line is kept byte for byte.
#[test]
fn lines_json_parse_reads_are_imported_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let surrogate = [
        r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"user","message":{"role":"user","content":"run it"},"uuid":"u1","timestamp":"2026-02-03T00:25:13.595Z"}"#,
        r#"{"parentUuid":"u1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"assistant","message":{"id":"msg_1","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cat log.txt"}}],"usage":{"input_tokens":3,"output_tokens":5}},"uuid":"a1","timestamp":"2026-02-03T00:25:14.000Z"}"#,
        r#"{"parentUuid":"a1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"build ok \ud83d","is_error":false}]},"uuid":"u2","timestamp":"2026-02-03T00:25:15.000Z"}"#,
    ];
    let repeated = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s2","timestamp":"2026-01-03T06:05:00.000Z","version":"2.1.20","message":{"role":"user","content":"edit it"}}"#,
        r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s2","timestamp":"2026-01-03T06:05:04.000Z","version":"2.1.20","message":{"id":"msg_1","role":"assistant","model":"m","content":[{"type":"tool_use","id":"tc_dup1","name":"Edit","input":{"file_path":"/first.py","old_string":"o","new_string":"n","file_path":"/last.py"}}]}}"#,
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","sessionId":"s2","timestamp":"2026-01-03T06:05:05.000Z","version":"2.1.20","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tc_dup1","content":"ok"}]}}"#,
    ];
    for (name, lines, id, warning, wanted) in [
        (
            "s1.jsonl",
            &surrogate,
            "claude-s1",
            ":3: 1 lone surrogate escape(s)",
            r#""content":"build ok �""#,
        ),
        (
            "s2.jsonl",
            &repeated,
            "claude-s2",
            ":2: 1 repeated member name(s)",
            r#"{"file_path":"/last.py","old_string":"o","new_string":"n"}"#,
        ),
    ] {
        let dir = tmp.path().join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(name);
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let store = Store::open(dir.join("store")).unwrap();
        let summary = import_paths(&store, &[file], &Options::default(), |_, _| {}).unwrap();
        assert!(
            summary.warnings.iter().any(|w| w.contains(warning)),
            "{:?}",
            summary.warnings
        );
        let events = lines_of(&store, id);
        let all = events.concat();
        assert!(all.contains(wanted), "{all}");
        assert!(!all.contains("TOOL_OUTCOME_UNKNOWN"), "{all}");
        assert!(!all.contains(r#""type":"import/line""#), "{all}");
        let mut out = Vec::new();
        agentlog::import::export_source(&store.open_reader(id).unwrap(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), lines.join("\n") + "\n");
    }
}
