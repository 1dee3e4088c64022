//! A Codex rollout imported before its first line was written (an empty file, or the meta line
//! half-written: a one-shot run from cron, say) made a session named after the whole file name,
//! and the run after it, which read the meta line's thread id, a second session for the same
//! file (QA pass of 2026-12-08). The thread id in the file's name names the session now.

use agentlog::import::{import_paths, Format, Options};
use agentlog::store::Store;

#[test]
fn a_rollout_imported_before_its_meta_line_is_one_session() {
    let thread = "019a085e-04c1-7f81-a09e-9555f6a1fb40";
    let meta = format!(
        r#"{{"timestamp":"2025-10-21T20:02:50.000Z","type":"session_meta","payload":{{"id":"{thread}","timestamp":"2025-10-21T20:02:50.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.46.0"}}}}"#
    );
    let prompt = r#"{"timestamp":"2025-10-21T20:02:51.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}"#;
    let full = format!("{meta}\n{prompt}\n");
    for early in [&b""[..], &full.as_bytes()[..40]] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("sessions");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("rollout-2025-10-21T20-02-50-{thread}.jsonl"));
        let store = Store::open(tmp.path().join("store")).unwrap();
        let options = Options {
            format: Some(Format::Codex),
            ..Options::default()
        };
        std::fs::write(&file, early).unwrap();
        import_paths(&store, std::slice::from_ref(&dir), &options, |_, _| {}).unwrap();
        std::fs::write(&file, &full).unwrap();
        let summary =
            import_paths(&store, std::slice::from_ref(&dir), &options, |_, _| {}).unwrap();
        assert_eq!(summary.failed, 0, "{summary:?}");
        let ids: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(
            ids,
            [format!("codex-{thread}")],
            "{} early bytes",
            early.len()
        );
    }
}
