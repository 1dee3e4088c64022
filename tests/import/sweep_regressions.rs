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
