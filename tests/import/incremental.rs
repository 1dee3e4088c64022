//! A file imported while its agent writes it (`keep_open`, `--follow`) gives the session the
//! finished file gives; inline subagents (the `-sidechains` session) keep each subagent's
//! history and follow `keep_open` like their main session.

use std::path::Path;

use agentlog::event::EventData;
use agentlog::session::SessionReader;
use agentlog::store::Store;

use crate::import_formats::{
    codex_prelude, codex_token_count, data_dir, events, exported, import_keep_open, message_usages,
    prefix_lines, reader, types, write,
};

/// What a comparison of two imports of one file looks at: the derived history, what each user
/// message was taken for (its envelope: a typed prompt, context, …), and the statistics a user
/// reads (events by type, turns, steps, tokens, end reasons, open calls).
/// The messages' seqs are left out when `seqs` is false (a run that does not keep the turn open
/// writes a response when it ends, before lines of it a later run reads).
fn fingerprint(r: &SessionReader, seqs: bool) -> (String, String) {
    let mut messages = r.messages().unwrap().to_vec();
    if !seqs {
        for m in &mut messages {
            m.source_seq = 0;
        }
    }
    let s = r.stats().unwrap();
    let stats = format!(
        "{:?} turns {} steps {} {:?} {:?} unanswered {}",
        s.by_type, s.turns, s.steps, s.tokens, s.end_reasons, s.unanswered_calls
    );
    let envelopes: Vec<String> = events(r)
        .iter()
        .filter_map(|e| match &e.data {
            EventData::UserMessage(m) => Some(format!("{:?}", m.envelope)),
            _ => None,
        })
        .collect();
    (format!("{messages:?} {envelopes:?}"), stats)
}

/// Sets a file's modification time a minute back: a file its agent stopped writing.
fn make_quiet(file: &Path) {
    let quiet = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(quiet)
        .unwrap();
}

/// Imports the first `k` lines of `full` with `keep_open` (a file just written), then the whole
/// file without: the sessions (every one the file makes, its `-sidechains` one too) against a
/// one-shot import of the whole file.
fn assert_split_equals_one_shot(dir: &Path, name: &str, full: &[u8], k: usize) {
    assert_runs_equal_one_shot(dir, name, full, k, true);
}

/// [`assert_split_equals_one_shot`] at every cut of the file of `lines` named `name`.
fn assert_every_cut_equals_one_shot<S: AsRef<str>>(dir: &Path, name: &str, lines: &[S]) {
    let full: String = lines.iter().map(|l| format!("{}\n", l.as_ref())).collect();
    for k in 1..lines.len() {
        assert_split_equals_one_shot(dir, name, full.as_bytes(), k);
    }
}

/// [`assert_split_equals_one_shot`], the first run keeping the turn open or not (a run that does
/// not is compared only where it ends between turns: within one it writes what it has).
fn assert_runs_equal_one_shot(dir: &Path, name: &str, full: &[u8], k: usize, keep_open: bool) {
    let one = dir.join(format!("one-{k}-{keep_open}"));
    let split = dir.join(format!("split-{k}-{keep_open}"));
    std::fs::create_dir_all(&one).unwrap();
    std::fs::create_dir_all(&split).unwrap();
    let whole = one.join(name);
    std::fs::write(&whole, full).unwrap();
    let one_store = Store::open(one.join("store")).unwrap();
    let once = import_keep_open(&one_store, &whole, false);
    let file = split.join(name);
    std::fs::write(&file, &full[..prefix_lines(full, k)]).unwrap();
    let store = Store::open(split.join("store")).unwrap();
    import_keep_open(&store, &file, keep_open);
    std::fs::write(&file, full).unwrap();
    let last = import_keep_open(&store, &file, false);
    // The same warnings as the one-shot import (a sample that ends inside a turn has some).
    let unplaced = |w: &[String]| -> Vec<String> {
        w.iter()
            .map(|w| w.rsplit(name).next().unwrap_or(w).to_owned())
            .collect()
    };
    assert_eq!(
        unplaced(&last.warnings),
        unplaced(&once.warnings),
        "{name} cut after {k} lines"
    );
    for id in &once.created {
        assert_eq!(
            fingerprint(&reader(&store, id), keep_open),
            fingerprint(&reader(&one_store, id), keep_open),
            "{name} cut after {k} lines: session {id} differs from a one-shot import"
        );
    }
}

/// Every real sample, cut at several lines: imported with `keep_open` up to the cut, then whole,
/// it gives the one-shot import's history (as rendered) and statistics, tokens included.
/// Before, a response cut by a run became two assistant messages with the usage of its first
/// lines only, and a Codex `token_count` after the cut was never counted.
#[test]
fn a_file_imported_while_written_gives_the_finished_files_session() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["codex", "claude-code"] {
        for entry in std::fs::read_dir(data_dir().join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let full = std::fs::read(&path).unwrap();
            let text = String::from_utf8_lossy(&full);
            let lines = text.lines().count();
            // A Codex user message is told from injected context by its `user_message` mirror
            // when the file has mirrors, else by its markup; a run that ends before the first
            // mirror has only the markup, which the redacted sample (madshn) lacks. Cuts start
            // after the first mirror.
            let first = text
                .lines()
                .position(|l| l.contains(r#""type":"user_message""#))
                .map_or(1, |i| i + 1);
            let cuts: std::collections::BTreeSet<usize> = (1..=6)
                .map(|i| (lines * i / 7).max(first))
                .filter(|&k| k < lines)
                .collect();
            let sub_dir = tempfile::tempdir_in(dir.path()).unwrap();
            for k in cuts {
                assert_split_equals_one_shot(sub_dir.path(), &name, &full, k);
            }
        }
    }
}

/// A Claude Code response cut after its first line, and a Codex answer cut before its token
/// count, at every line of small files: the runs that keep the turn open hold the unfinished
/// response back, so it is one message with its whole usage.
#[test]
fn a_response_cut_by_a_run_is_one_message_with_its_whole_usage() {
    let dir = tempfile::tempdir().unwrap();
    let claude = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"write three files"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"c1"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"I'll create them."}],"usage":{"input_tokens":3,"output_tokens":4}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"c1"}"#,
        r#"{"parentUuid":"a1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/a"}}],"usage":{"input_tokens":3,"output_tokens":395}},"uuid":"a2","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"c1"}"#,
        r#"{"parentUuid":"a2","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},"uuid":"r1","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"c1"}"#,
        r#"{"parentUuid":"r1","type":"assistant","message":{"id":"m2","role":"assistant","model":"c","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":9,"output_tokens":2}},"uuid":"a3","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"c1"}"#,
    ];
    let mut codex = codex_prelude("x1");
    codex.extend([
        r#"{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"reasoning","summary":[],"content":null,"encrypted_content":"e"}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}"#.to_string(),
        codex_token_count(22539, 20864, 10),
        r#"{"timestamp":"2025-10-01T10:00:04.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"1"}}"#.to_string(),
    ]);
    let codex: Vec<&str> = codex.iter().map(String::as_str).collect();
    for (name, lines) in [("c1.jsonl", &claude[..]), ("x1.jsonl", &codex[..])] {
        assert_every_cut_equals_one_shot(dir.path(), name, lines);
    }
    // And the one-shot import itself: one message for m1, with its last line's usage.
    let store = Store::open(dir.path().join("one-1-true/store")).unwrap();
    let r = reader(&store, "claude-c1");
    let usage: Vec<(u64, u64)> = message_usages(&events(&r))
        .iter()
        .map(|u| (u.input_tokens, u.output_tokens))
        .collect();
    assert_eq!(usage, [(3, 395), (9, 2)]);
}

/// A response held back is imported once the file has been quiet for a while (an agent that
/// finished, or waits for a long tool), and a later line of it then continues its step.
#[test]
fn a_held_back_response_is_imported_once_the_file_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "q1.jsonl",
        &[
            r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"q1"}"#,
            r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"output_tokens":4}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"q1"}"#,
        ],
        "\n",
    );
    let store = Store::open(dir.path().join("store")).unwrap();
    let first = import_keep_open(&store, &file, true);
    assert_eq!(
        types(&reader(&store, "claude-q1")),
        ["turn/start", "user/message"]
    );
    assert_eq!(first.created, ["claude-q1"]);
    // Nothing new while the file is being written: the held lines wait.
    let again = import_keep_open(&store, &file, true);
    assert_eq!(again.unchanged, 1, "{again:?}");
    make_quiet(&file);
    import_keep_open(&store, &file, true);
    let t = types(&reader(&store, "claude-q1"));
    assert_eq!(
        t.last().map(String::as_str),
        Some("assistant/message"),
        "{t:?}"
    );
    // A run that does not keep the turn open closes it; the export is the file.
    let last = import_keep_open(&store, &file, false);
    assert!(last.warnings.is_empty(), "{:?}", last.warnings);
    let r = reader(&store, "claude-q1");
    assert_eq!(types(&r).last().map(String::as_str), Some("turn/end"));
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

/// A response whose last line so far is a thinking block (Codex: reasoning) surely goes on (no
/// response ends with one): a run that keeps the turn open holds it back however long the file
/// has been quiet (the model may think, or write a long tool input, for more than 5 seconds),
/// so it is never cut into a reasoning-only message and the rest; a run that closes imports it.
#[test]
fn a_response_ending_in_thinking_is_held_however_quiet_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let claude = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"write it"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"h1"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"a long file","signature":"s"}],"usage":{"input_tokens":3,"output_tokens":4}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"h1"}"#,
    ];
    let mut codex = codex_prelude("h2");
    codex.push(r#"{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"reasoning","summary":[],"content":null,"encrypted_content":"e"}}"#.to_string());
    let codex: Vec<&str> = codex.iter().map(String::as_str).collect();
    let store = Store::open(dir.path().join("store")).unwrap();
    for (name, id, lines) in [
        ("h1.jsonl", "claude-h1", &claude[..]),
        ("h2.jsonl", "codex-h2", &codex[..]),
    ] {
        let file = write(dir.path(), name, lines, "\n");
        make_quiet(&file);
        import_keep_open(&store, &file, true);
        let t = types(&reader(&store, id));
        assert!(!t.iter().any(|x| x == "assistant/message"), "{name}: {t:?}");
        let last = import_keep_open(&store, &file, false);
        let t = types(&reader(&store, id));
        assert_eq!(
            t.iter().filter(|x| *x == "assistant/message").count(),
            1,
            "{name}: {t:?} {:?}",
            last.warnings
        );
    }
}

/// A 1.0.x main file holds its subagents' traffic inline, one subagent after another, each
/// prompt a new root (`parentUuid: null`). Each is a turn of the `-sidechains` session, and the
/// derived history keeps every one (before, each new prompt was taken for an edited first
/// prompt, a rewind, and the history kept only the last subagent).
#[test]
fn inline_subagents_run_one_after_another_each_keep_their_history() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s7.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"build it"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s7"}"#,
            r#"{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user","content":"first subagent task"},"uuid":"f1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s7"}"#,
            r#"{"parentUuid":"f1","isSidechain":true,"type":"assistant","message":{"id":"mf","role":"assistant","model":"c","content":[{"type":"text","text":"first done"}]},"uuid":"f2","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"s7"}"#,
            r#"{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user","content":"second subagent task"},"uuid":"g1","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"s7"}"#,
            r#"{"parentUuid":"g1","isSidechain":true,"type":"assistant","message":{"id":"mg","role":"assistant","model":"c","content":[{"type":"text","text":"second done"}]},"uuid":"g2","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"s7"}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"built"}]},"uuid":"a1","timestamp":"2025-06-10T12:00:05.000Z","sessionId":"s7"}"#,
        ],
        "\n",
    );
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let side = reader(&store, "claude-s7-sidechains");
    let history = format!("{:?}", side.messages().unwrap().to_vec());
    for text in [
        "first subagent task",
        "first done",
        "second subagent task",
        "second done",
    ] {
        assert!(history.contains(text), "{text} lost: {history}");
    }
    let t = types(&side);
    assert_eq!(t.iter().filter(|x| *x == "turn/start").count(), 2, "{t:?}");
    let replaced = events(&side).iter().any(|e| e.surface_op.is_some());
    assert!(!replaced, "no subagent replaces another");
}

/// `keep_open` holds for the `-sidechains` session too: a subagent still running at the end of
/// a run stays open (its call waits for its result), and a later run that does not keep turns
/// open closes it, also when the file did not grow.
#[test]
fn a_sidechain_turn_left_open_is_closed_by_a_run_that_does_not_keep_it_open() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s8.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"look around"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s8"}"#,
            r#"{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user","content":"list the files"},"uuid":"f1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s8"}"#,
            r#"{"parentUuid":"f1","isSidechain":true,"type":"assistant","message":{"id":"mf","role":"assistant","model":"c","content":[{"type":"tool_use","id":"tf","name":"Glob","input":{}}]},"uuid":"f2","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"s8"}"#,
        ],
        "\n",
    );
    make_quiet(&file);
    let store = Store::open(dir.path().join("store")).unwrap();
    let first = import_keep_open(&store, &file, true);
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    let open = reader(&store, "claude-s8-sidechains")
        .lifecycle()
        .unwrap()
        .open_work();
    assert_eq!(
        open.unanswered_calls.len(),
        1,
        "the subagent's call waits: {open:?}"
    );
    let closing = import_keep_open(&store, &file, false);
    assert_eq!(closing.warnings.len(), 2, "{:?}", closing.warnings);
    let side = reader(&store, "claude-s8-sidechains");
    let open = side.lifecycle().unwrap().open_work();
    assert!(
        open.turn.is_none() && open.unanswered_calls.is_empty(),
        "{open:?}"
    );
    let failed = events(&side)
        .iter()
        .any(|e| matches!(&e.data, EventData::ToolResult(t) if t.message.is_error));
    assert!(failed, "the call is answered TOOL_OUTCOME_UNKNOWN");
    // Nothing is left open now: a further run finds the file unchanged.
    let after = import_keep_open(&store, &file, false);
    assert_eq!(after.unchanged, 1, "{after:?}");
}

/// A "Warmup" sidechain (2.0.2x) is noise, never a session, also when its answer comes in the
/// run after its prompt (the import state keeps the last Warmup lines' `uuid`s). Before, the
/// answer alone made a `-sidechains` session holding a turn without a prompt.
#[test]
fn a_warmup_answer_in_the_run_after_its_prompt_is_still_noise() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"go"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s9"}"#,
        r#"{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user","content":"Warmup"},"uuid":"v1","timestamp":"2025-06-10T12:00:00.150Z","sessionId":"s9"}"#,
        r#"{"parentUuid":"v1","isSidechain":true,"type":"assistant","message":{"id":"mv","role":"assistant","model":"c","content":[{"type":"text","text":"ready"}]},"uuid":"v2","timestamp":"2025-06-10T12:00:00.160Z","sessionId":"s9"}"#,
        r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}]},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s9"}"#,
    ];
    let full = format!("{}\n", lines.join("\n"));
    let file = dir.path().join("s9.jsonl");
    std::fs::write(&file, &full.as_bytes()[..prefix_lines(full.as_bytes(), 2)]).unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, true);
    std::fs::write(&file, &full).unwrap();
    let last = import_keep_open(&store, &file, false);
    assert!(last.warnings.is_empty(), "{:?}", last.warnings);
    assert_eq!(last.unmapped.get("sidechain/warmup"), Some(&1), "{last:?}");
    assert!(
        store.info("claude-s9-sidechains").is_err(),
        "a Warmup makes no session"
    );
}

/// A compaction in a later run replaces the surface the earlier runs built, as in one run of the
/// whole file (before, it replaced only the nodes of its own run, and the derived history kept
/// everything before the cut); a run that ends between a `compact_boundary` and its summary line
/// holds the compaction back instead of ending it `ok: false`. Checked at every line.
#[test]
fn a_compaction_in_a_later_run_replaces_the_earlier_runs_history() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"first question"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"k1"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"first answer"}],"usage":{"input_tokens":5,"output_tokens":2}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"k1"}"#,
        r#"{"parentUuid":"a1","type":"system","subtype":"turn_duration","durationMs":1000,"uuid":"d1","timestamp":"2025-06-10T12:00:01.500Z","sessionId":"k1"}"#,
        r#"{"parentUuid":null,"logicalParentUuid":"d1","type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":100},"uuid":"c1","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"k1"}"#,
        r#"{"parentUuid":"c1","type":"user","message":{"role":"user","content":"This session is being continued from a previous conversation. Summary: first question answered."},"isCompactSummary":true,"uuid":"s1","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"k1"}"#,
        r#"{"parentUuid":"s1","type":"user","message":{"role":"user","content":"second question"},"uuid":"u2","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"k1"}"#,
        r#"{"parentUuid":"u2","type":"assistant","message":{"id":"m2","role":"assistant","model":"c","content":[{"type":"text","text":"second answer"}],"usage":{"input_tokens":7,"output_tokens":3}},"uuid":"a2","timestamp":"2025-06-10T12:00:05.000Z","sessionId":"k1"}"#,
    ];
    assert_every_cut_equals_one_shot(dir.path(), "k1.jsonl", &lines);
    let store = Store::open(dir.path().join("one-1-true/store")).unwrap();
    let history = format!(
        "{:?}",
        reader(&store, "claude-k1").messages().unwrap().to_vec()
    );
    assert!(!history.contains("first answer"), "{history}");
    assert!(history.contains("Summary: first question answered"));
}

/// A compaction that keeps the last messages (`preservedSegment`), in the middle of a turn: the
/// kept messages end with a call whose result comes after the summary. Cut at every line, the
/// import gives the one-shot import's history: the summary, then the kept messages.
#[test]
fn a_compaction_keeping_the_last_messages_is_the_same_at_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"start the task"},"uuid":"u1","timestamp":"2026-06-08T05:00:01.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"noted"}],"usage":{"input_tokens":10,"output_tokens":5}},"uuid":"a1","timestamp":"2026-06-08T05:00:02.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"a1","type":"user","message":{"role":"user","content":"now list the files"},"uuid":"u2","timestamp":"2026-06-08T05:00:03.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"u2","type":"assistant","message":{"id":"m2","role":"assistant","model":"c","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":10,"output_tokens":5}},"uuid":"a2","timestamp":"2026-06-08T05:00:04.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"a2","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"}]},"uuid":"r2","timestamp":"2026-06-08T05:00:05.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"r2","type":"assistant","message":{"id":"m3","role":"assistant","model":"c","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"cat a.txt"}}],"usage":{"input_tokens":10,"output_tokens":5}},"uuid":"a3","timestamp":"2026-06-08T05:00:06.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":null,"logicalParentUuid":"a3","type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":5000,"preservedSegment":{"headUuid":"u2","anchorUuid":"s1","tailUuid":"a3"}},"uuid":"b1","timestamp":"2026-06-08T05:00:07.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"b1","type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued from a previous conversation. Summary: the task began."},"uuid":"s1","timestamp":"2026-06-08T05:00:08.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"a3","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"hello"}]},"uuid":"r3","timestamp":"2026-06-08T05:00:09.000Z","sessionId":"k2"}"#,
        r#"{"parentUuid":"r3","type":"assistant","message":{"id":"m4","role":"assistant","model":"c","content":[{"type":"text","text":"it says hello"}],"usage":{"input_tokens":10,"output_tokens":5}},"uuid":"a4","timestamp":"2026-06-08T05:00:10.000Z","sessionId":"k2"}"#,
    ];
    assert_every_cut_equals_one_shot(dir.path(), "k2.jsonl", &lines);
    let store = Store::open(dir.path().join("one-1-true/store")).unwrap();
    let history = format!(
        "{:?}",
        reader(&store, "claude-k2").messages().unwrap().to_vec()
    );
    let at = |text: &str| {
        history
            .find(text)
            .unwrap_or_else(|| panic!("{text}: {history}"))
    };
    assert!(!history.contains("noted"), "{history}");
    assert!(at("the task began") < at("now list the files"), "{history}");
    assert!(at("cat a.txt") < at("hello"), "{history}");
}

/// A rewind in a later run (a typed prompt whose `parentUuid` names a line an earlier run
/// imported, with more after it) leaves the abandoned branch out of the history, as in one run
/// of the whole file. Before, the branch points were known within one run only, and the
/// history of a file imported while written kept the abandoned branch. Checked at every line.
#[test]
fn a_rewind_to_a_line_of_an_earlier_run_leaves_the_branch_out() {
    let dir = tempfile::tempdir().unwrap();
    let line = |uuid: &str, parent: &str, ty: &str, second: u32, rest: &str| {
        format!(
            r#"{{"parentUuid":"{parent}","isSidechain":false,"type":"{ty}",{rest},"uuid":"{uuid}","timestamp":"2025-06-10T12:00:{second:02}.000Z","sessionId":"rw2"}}"#
        )
    };
    let prompt = |text: &str| format!(r#""message":{{"role":"user","content":"{text}"}}"#);
    let said = |id: &str, block: &str| {
        format!(
            r#""message":{{"id":"{id}","type":"message","role":"assistant","model":"c","content":[{block}],"usage":{{"input_tokens":3,"output_tokens":2}}}}"#
        )
    };
    let text = |t: &str| format!(r#"{{"type":"text","text":"{t}"}}"#);
    let call = r#"{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}"#;
    let result = r#""message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"old result"}]}"#;
    let duration = r#""subtype":"turn_duration","durationMs":5"#;
    let first = r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"first question"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"rw2"}"#;
    let lines = [
        first.to_owned(),
        line("a1", "u1", "assistant", 1, &said("m1", &text("answer one"))),
        line("d1", "a1", "system", 2, duration),
        line("u2", "d1", "user", 3, &prompt("old second question")),
        line("a2", "u2", "assistant", 4, &said("m2", call)),
        line("r1", "a2", "user", 5, result),
        line("a3", "r1", "assistant", 6, &said("m3", &text("old answer"))),
        line("d2", "a3", "system", 7, duration),
        // The rewind: the edited second prompt continues from the first turn's end.
        line("u3", "d1", "user", 8, &prompt("edited second question")),
        line("a4", "u3", "assistant", 9, &said("m4", &text("new answer"))),
        line("d3", "a4", "system", 10, duration),
    ];
    assert_every_cut_equals_one_shot(dir.path(), "rw2.jsonl", &lines);
    for k in [1, 4, 8] {
        let store = Store::open(dir.path().join(format!("split-{k}-true/store"))).unwrap();
        let history = format!(
            "{:?}",
            reader(&store, "claude-rw2").messages().unwrap().to_vec()
        );
        for gone in ["old second question", "old result", "old answer"] {
            assert!(
                !history.contains(gone),
                "cut at {k}: {gone} kept: {history}"
            );
        }
        for kept in ["answer one", "edited second question", "new answer"] {
            assert!(
                history.contains(kept),
                "cut at {k}: {kept} missing: {history}"
            );
        }
    }
}

/// Each line of a Claude Code response carries the response's usage so far. A response whose
/// lines a tool result splits is two `assistant/message`s in its step: the second has the usage
/// its lines add, so the sums are the response's last usage (before, the second had none, and
/// the output tokens of its lines were lost).
#[test]
fn a_response_split_by_a_result_counts_its_whole_usage() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "w1.jsonl",
        &[
            r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"look"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"w1"}"#,
            r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"tool_use","id":"ta","name":"Read","input":{}}],"usage":{"input_tokens":5,"output_tokens":10,"cache_read_input_tokens":100}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"w1"}"#,
            r#"{"parentUuid":"a1","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"ta","content":"a"}]},"uuid":"r1","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"w1"}"#,
            r#"{"parentUuid":"r1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"tool_use","id":"tb","name":"Read","input":{}}],"usage":{"input_tokens":5,"output_tokens":30,"cache_read_input_tokens":100}},"uuid":"a2","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"w1"}"#,
            r#"{"parentUuid":"a2","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tb","content":"b"}]},"uuid":"r2","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"w1"}"#,
        ],
        "\n",
    );
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let r = reader(&store, "claude-w1");
    let t = types(&r);
    assert_eq!(t.iter().filter(|x| *x == "step/start").count(), 1, "{t:?}");
    let tokens = r.stats().unwrap().tokens;
    assert_eq!(
        (tokens.input, tokens.output, tokens.cache_read),
        (5, 30, 100),
        "{tokens:?}"
    );
}

/// A `--keep-open` run that saw only lines without a time (a Claude Code file's first lines:
/// `summary`, `file-history-snapshot`) created the session with events at time 0 (1970). The
/// new session now waits for a line with a time; a run that does not keep it open gives lines
/// without any time the file's modification time.
#[test]
fn a_new_session_does_not_start_at_time_zero() {
    let dir = tempfile::tempdir().unwrap();
    let untimed = [
        r#"{"type":"summary","summary":"Fixing the build","leafUuid":"a1"}"#,
        r#"{"type":"file-history-snapshot","messageId":"m0","snapshot":{"trackedFileBackups":{}},"isSnapshotUpdate":false}"#,
    ];
    let timed = [
        r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"fix the build"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"tz"}"#,
        r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":5,"output_tokens":1}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"tz"}"#,
    ];
    let june_10 = 1_749_556_800_000;
    let file = write(dir.path(), "tz.jsonl", &untimed, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    let summary = import_keep_open(&store, &file, true);
    assert!(summary.created.is_empty(), "{summary:?}");
    let all: Vec<&str> = untimed.iter().chain(&timed).copied().collect();
    write(dir.path(), "tz.jsonl", &all, "\n");
    import_keep_open(&store, &file, true);
    let times: Vec<i64> = events(&reader(&store, "claude-tz"))
        .iter()
        .map(|e| e.time)
        .collect();
    assert!(times.iter().all(|&t| t >= june_10), "{times:?}");

    // No time in any line: the file's.
    let file = write(dir.path(), "nt.jsonl", &untimed, "\n");
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let ms = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    import_keep_open(&store, &file, false);
    let times: Vec<i64> = events(&reader(&store, "claude-nt"))
        .iter()
        .map(|e| e.time)
        .collect();
    assert!(
        !times.is_empty() && times.iter().all(|&t| t == ms),
        "{times:?} {ms}"
    );
}

/// Claude Code with Stop hooks writes a `stop_hook_summary` line after each response, while the
/// importer still assembles that response, and the next prompt continues from that line. A run
/// that ended there (without `keep_open`) kept the line before the response's message; the
/// next run took the prompt for a rewind to before the response, and the first answer was gone
/// from the history. Seen on a real Claude Code 2.1.7 file imported before and after its second
/// prompt.
#[test]
fn a_prompt_after_a_stop_hook_line_of_an_earlier_run_is_no_rewind() {
    let dir = tempfile::tempdir().unwrap();
    let line = |uuid: &str, parent: &str, ty: &str, second: u32, rest: &str| {
        format!(
            r#"{{"parentUuid":"{parent}","isSidechain":false,"type":"{ty}",{rest},"uuid":"{uuid}","timestamp":"2026-01-10T12:00:{second:02}.000Z","sessionId":"sh1"}}"#
        )
    };
    let said = |id: &str, block: &str| {
        format!(
            r#""message":{{"id":"{id}","type":"message","role":"assistant","model":"c","content":[{block}],"usage":{{"input_tokens":3,"output_tokens":2}}}}"#
        )
    };
    let hook = r#""subtype":"stop_hook_summary","hookCount":1,"hookInfos":[{"command":"true"}],"hookErrors":[],"preventedContinuation":false,"stopReason":"","hasOutput":false,"level":"suggestion""#;
    let first = r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"show tools"},"uuid":"u1","timestamp":"2026-01-10T12:00:00.000Z","sessionId":"sh1"}"#;
    let lines = [
        first.to_owned(),
        line(
            "a1",
            "u1",
            "assistant",
            1,
            &said(
                "m1",
                r#"{"type":"thinking","thinking":"hm","signature":"s"}"#,
            ),
        ),
        line(
            "a2",
            "a1",
            "assistant",
            2,
            &said("m1", r#"{"type":"text","text":"the tools are"}"#),
        ),
        line("h1", "a2", "system", 3, hook),
        line(
            "u2",
            "h1",
            "user",
            4,
            r#""message":{"role":"user","content":"hi"}"#,
        ),
        line(
            "a3",
            "u2",
            "assistant",
            5,
            &said("m2", r#"{"type":"text","text":"hello"}"#),
        ),
        line("h2", "a3", "system", 6, hook),
    ];
    let full = format!("{}\n", lines.join("\n"));
    // Cut after the first turn's hook line, and after its answer (before the hook line).
    for k in [3, 4] {
        assert_runs_equal_one_shot(dir.path(), "sh1.jsonl", full.as_bytes(), k, false);
        assert_runs_equal_one_shot(dir.path(), "sh1.jsonl", full.as_bytes(), k, true);
    }
    let store = Store::open(dir.path().join("split-4-false/store")).unwrap();
    let history = format!(
        "{:?}",
        reader(&store, "claude-sh1").messages().unwrap().to_vec()
    );
    for kept in ["show tools", "the tools are", "hi", "hello"] {
        assert!(history.contains(kept), "{kept} missing: {history}");
    }
}

/// A Claude Code response cut by a run that did not keep the turn open: the next run writes
/// its later lines as a step of their own, and gave them the response's whole usage again, so
/// `stats` counted the first part twice (cacheWrite 174,623 instead of 147,267 on a real
/// Claude Code 2.1.4 file). The later part now has the usage its lines add, as within a run.
#[test]
fn a_response_cut_by_a_closing_run_counts_its_usage_once() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"write a file"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"c2"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"I'll create it."}],"usage":{"input_tokens":3,"output_tokens":4,"cache_creation_input_tokens":1000}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"c2"}"#,
        r#"{"parentUuid":"a1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/a"}}],"usage":{"input_tokens":3,"output_tokens":395,"cache_creation_input_tokens":1000}},"uuid":"a2","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"c2"}"#,
        r#"{"parentUuid":"a2","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},"uuid":"r1","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"c2"}"#,
        r#"{"parentUuid":"r1","type":"assistant","message":{"id":"m2","role":"assistant","model":"c","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":9,"output_tokens":2}},"uuid":"a3","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"c2"}"#,
    ];
    let full = format!("{}\n", lines.join("\n"));
    let tokens = |store: &Store| {
        let t = reader(store, "claude-c2").stats().unwrap().tokens;
        (t.input, t.output, t.cache_write)
    };
    let one = dir.path().join("one");
    std::fs::create_dir_all(&one).unwrap();
    std::fs::write(one.join("c2.jsonl"), &full).unwrap();
    let one_store = Store::open(one.join("store")).unwrap();
    import_keep_open(&one_store, &one.join("c2.jsonl"), false);
    assert_eq!(tokens(&one_store), (12, 397, 1000));
    let split = dir.path().join("split");
    std::fs::create_dir_all(&split).unwrap();
    let file = split.join("c2.jsonl");
    std::fs::write(&file, &full.as_bytes()[..prefix_lines(full.as_bytes(), 2)]).unwrap();
    let store = Store::open(split.join("store")).unwrap();
    import_keep_open(&store, &file, false);
    std::fs::write(&file, &full).unwrap();
    import_keep_open(&store, &file, false);
    assert_eq!(tokens(&store), (12, 397, 1000));
}

/// Codex's `thread_rolled_back` (the user went back and edited an earlier prompt) drops the
/// last `num_turns` user turns from the history Codex sends. It was an `import/line`, and the
/// turns rolled back stayed in `derive`. The next typed prompt now replaces them (their events
/// and lines stay in the log), in one run and across runs cut at every line.
#[test]
fn a_codex_rollback_leaves_the_turns_it_dropped_out_of_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let at = |s: u32| format!("2025-10-01T10:00:{s:02}.000Z");
    let prompt = |s: u32, text: &str| {
        [
            format!(
                r#"{{"timestamp":"{}","type":"event_msg","payload":{{"type":"task_started","turn_id":"{s}"}}}}"#,
                at(s)
            ),
            format!(
                r#"{{"timestamp":"{}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{text}"}}]}}}}"#,
                at(s)
            ),
            format!(
                r#"{{"timestamp":"{}","type":"event_msg","payload":{{"type":"user_message","message":"{text}"}}}}"#,
                at(s)
            ),
        ]
    };
    let answer = |s: u32, text: &str| {
        [
            format!(
                r#"{{"timestamp":"{}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{text}"}}]}}}}"#,
                at(s)
            ),
            format!(
                r#"{{"timestamp":"{}","type":"event_msg","payload":{{"type":"task_complete","turn_id":"{s}"}}}}"#,
                at(s)
            ),
        ]
    };
    let mut lines = vec![format!(
        r#"{{"timestamp":"{}","type":"session_meta","payload":{{"id":"rb1","timestamp":"{}","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.125.0"}}}}"#,
        at(0),
        at(0)
    )];
    lines.extend(prompt(1, "first question"));
    lines.extend(answer(2, "first answer"));
    lines.extend(prompt(3, "old second question"));
    lines.extend(answer(4, "old second answer"));
    lines.extend(prompt(5, "old third question"));
    lines.extend(answer(6, "old third answer"));
    lines.push(format!(
        r#"{{"timestamp":"{}","type":"event_msg","payload":{{"type":"thread_rolled_back","num_turns":2}}}}"#,
        at(7)
    ));
    lines.extend(prompt(8, "edited second question"));
    lines.extend(answer(9, "new answer"));
    let full = format!("{}\n", lines.join("\n"));
    assert_every_cut_equals_one_shot(dir.path(), "rb1.jsonl", &lines);
    let store = Store::open(dir.path().join("one-1-true/store")).unwrap();
    let r = reader(&store, "codex-rb1");
    let history = format!("{:?}", r.messages().unwrap().to_vec());
    for gone in ["old second", "old third"] {
        assert!(!history.contains(gone), "{gone} kept: {history}");
    }
    for kept in [
        "first question",
        "first answer",
        "edited second question",
        "new answer",
    ] {
        assert!(history.contains(kept), "{kept} missing: {history}");
    }
    // Every line is still exported, byte for byte.
    assert!(
        exported(&r) == full.as_bytes(),
        "the export differs from the file"
    );
}

/// A subagent's response whose blocks a result of its own splits (Claude Code 2.x writes the
/// result of its first call before its next block), at the end of a run that keeps the turn
/// open: the main file's lines were held back, the inline sidechain lines were not, so the
/// `-sidechains` session got two assistant messages where the finished file gives one. The
/// sidechain lines' hold point now holds the file back too.
#[test]
fn a_subagent_response_cut_by_a_run_is_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"look around"},"uuid":"u1","timestamp":"2026-01-10T12:00:00.000Z","sessionId":"s10","version":"2.1.38"}"#,
        r#"{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user","content":"list the files"},"uuid":"f1","timestamp":"2026-01-10T12:00:01.000Z","sessionId":"s10","version":"2.1.38"}"#,
        r#"{"parentUuid":"f1","isSidechain":true,"type":"assistant","message":{"id":"mf","role":"assistant","model":"c","content":[{"type":"tool_use","id":"tx","name":"Glob","input":{"pattern":"*"}}],"usage":{"input_tokens":5,"output_tokens":1}},"uuid":"f2","timestamp":"2026-01-10T12:00:02.000Z","sessionId":"s10","version":"2.1.38"}"#,
        r#"{"parentUuid":"f2","isSidechain":true,"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tx","content":"a.rs"}]},"uuid":"f3","timestamp":"2026-01-10T12:00:03.000Z","sessionId":"s10","version":"2.1.38"}"#,
        r#"{"parentUuid":"f3","isSidechain":true,"type":"assistant","message":{"id":"mf","role":"assistant","model":"c","content":[{"type":"tool_use","id":"ty","name":"Read","input":{"file":"a.rs"}}],"usage":{"input_tokens":5,"output_tokens":9}},"uuid":"f4","timestamp":"2026-01-10T12:00:04.000Z","sessionId":"s10","version":"2.1.38"}"#,
        r#"{"parentUuid":"f4","isSidechain":true,"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"ty","content":"fn main() {}"}]},"uuid":"f5","timestamp":"2026-01-10T12:00:05.000Z","sessionId":"s10","version":"2.1.38"}"#,
        r#"{"parentUuid":"f5","isSidechain":true,"type":"assistant","message":{"id":"mg","role":"assistant","model":"c","content":[{"type":"text","text":"One file, a.rs."}],"usage":{"input_tokens":9,"output_tokens":4}},"uuid":"f6","timestamp":"2026-01-10T12:00:06.000Z","sessionId":"s10","version":"2.1.38"}"#,
        r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"There is a.rs."}],"usage":{"input_tokens":7,"output_tokens":3}},"uuid":"a1","timestamp":"2026-01-10T12:00:07.000Z","sessionId":"s10","version":"2.1.38"}"#,
    ];
    assert_every_cut_equals_one_shot(dir.path(), "s10.jsonl", &lines);
}

/// A Codex file with `user_message` mirrors but no task events (0.3x to 0.10x): a user message
/// without a mirror is injected context. A run after one that had seen the mirrors had none in
/// its own lines, fell back to the markup, and took such a message for a typed prompt (a new
/// turn); a run cut between a mirror and its message lost the mirror. The resume state now
/// says that mirrors were seen, and carries the mirrors after the last user message.
#[test]
fn a_codex_run_after_the_mirrors_tells_prompts_from_context_as_one_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"timestamp":"2025-12-18T10:00:00.000Z","type":"session_meta","payload":{"id":"r1","timestamp":"2025-12-18T10:00:00.000Z","cwd":"/tmp/x","originator":"codex_cli_rs","cli_version":"0.106.0","source":"cli"}}"#,
        r#"{"timestamp":"2025-12-18T10:00:00.200Z","type":"event_msg","payload":{"type":"user_message","message":"Start","images":[]}}"#,
        r#"{"timestamp":"2025-12-18T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Start"}]}}"#,
        r#"{"timestamp":"2025-12-18T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Acknowledged."}]}}"#,
        r#"{"timestamp":"2025-12-18T10:00:07.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Step 1"}]}}"#,
        r#"{"timestamp":"2025-12-18T10:00:08.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Ok"}]}}"#,
    ];
    assert_every_cut_equals_one_shot(dir.path(), "rollout-r1.jsonl", &lines);
}

/// Inline sidechain lines (1.0.x) met while a main response was being assembled are kept
/// before that response's message. A run that held back from a sidechain line inside such a
/// response wrote the response at the end of its lines, so the next run put the sidechain line
/// after it: the export differed from a one-shot import's. A hold point inside a main response
/// now holds the response back too.
#[test]
fn a_sidechain_line_inside_a_main_response_keeps_its_place_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":"2f078d9e-3e13-46cc-b57c-31424beb4b10","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"66666666-6666-6666-6666-666666666666","version":"1.0.108","gitBranch":"main","message":{"id":"msg_01XU4B1nvSytVjiR8jEYREvX","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"tool_use","id":"toolu_018t5jce2ZNoGr2ADsHGQife","name":"Task","input":{"description":"task","prompt":"do it","subagent_type":"general-purpose"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"cache_creation_input_tokens":422,"cache_read_input_tokens":19019,"cache_creation":{"ephemeral_5m_input_tokens":422,"ephemeral_1h_input_tokens":0},"output_tokens":31,"service_tier":"standard"}},"requestId":"req_011CStqPRADRX9fx9ReRNWHf","type":"assistant","uuid":"f9927492-8f1b-4880-942b-bde314da74f4","timestamp":"2025-09-07T09:52:22.326Z"}"#,
        r#"{"parentUuid":"03a41dbb-096e-40ab-adc3-3b6cb65a9cb4","isSidechain":true,"userType":"external","cwd":"/w","sessionId":"66666666-6666-6666-6666-666666666666","version":"1.0.108","gitBranch":"main","message":{"id":"msg_01CHVXQb6qDihpHcDpuqvJzD","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"Sub-agent report."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"cache_creation_input_tokens":501,"cache_read_input_tokens":12935,"cache_creation":{"ephemeral_5m_input_tokens":501,"ephemeral_1h_input_tokens":0},"output_tokens":308,"service_tier":"standard"}},"requestId":"req_011CStqQqGKVgwYCrqdJ33Kt","type":"assistant","uuid":"b766c46a-c115-4516-950f-9e6a6f55a904","timestamp":"2025-09-07T09:52:48.176Z"}"#,
        r#"{"parentUuid":"5953952f-ce81-4d30-bdae-8d81e2847864","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"66666666-6666-6666-6666-666666666666","version":"1.0.108","gitBranch":"main","message":{"id":"msg_01RZsKn6PMeWzcGuQ2Ufwtgs","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"tool_use","id":"toolu_01LKfUwrsnof18CpWZQcJH44","name":"Task","input":{"description":"task","prompt":"do it","subagent_type":"general-purpose"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"cache_creation_input_tokens":901,"cache_read_input_tokens":19441,"cache_creation":{"ephemeral_5m_input_tokens":901,"ephemeral_1h_input_tokens":0},"output_tokens":207,"service_tier":"standard"}},"requestId":"req_011CStqRpsHcviKXAspYQjZY","type":"assistant","uuid":"cfca867b-e0bb-4682-a5ff-2dd1b228a44f","timestamp":"2025-09-07T09:52:53.235Z"}"#,
        r#"{"parentUuid":null,"isSidechain":true,"userType":"external","cwd":"/w","sessionId":"66666666-6666-6666-6666-666666666666","version":"1.0.108","gitBranch":"main","type":"user","message":{"role":"user","content":"Analyze the project."},"uuid":"83e2917c-8940-4df6-a5a5-f2514f0d08c5","timestamp":"2025-09-07T09:52:53.270Z"}"#,
    ];
    assert_every_cut_equals_one_shot(
        dir.path(),
        "66666666-6666-6666-6666-666666666666.jsonl",
        &lines,
    );
}

/// A Codex compaction keeps the base instructions also in a run after the one that read the
/// `session_meta` line (the import state names the node it keeps).
#[test]
fn a_codex_compaction_in_a_later_run_keeps_the_base_instructions() {
    let dir = tempfile::tempdir().unwrap();
    assert_every_cut_equals_one_shot(
        dir.path(),
        "rollout-repro-03.jsonl",
        &crate::sweep_regressions::CODEX_COMPACTION,
    );
}

/// A run after the one that read a `session_meta` knows its instructions (the import state
/// keeps their hash): the same ones written again are no new system prompt in it either.
#[test]
fn a_repeated_codex_session_meta_in_a_later_run_is_not_a_new_system_prompt() {
    let dir = tempfile::tempdir().unwrap();
    assert_every_cut_equals_one_shot(
        dir.path(),
        "rollout-meta-2.jsonl",
        &crate::sweep_regressions::CODEX_REPEATED_META,
    );
}

/// A tool search and its output, cut anywhere, import as in one run.
#[test]
fn a_codex_tool_search_in_runs_imports_as_in_one() {
    let dir = tempfile::tempdir().unwrap();
    assert_every_cut_equals_one_shot(
        dir.path(),
        "rollout-ts-1.jsonl",
        &crate::sweep_regressions::CODEX_TOOL_SEARCH,
    );
}

/// Found by the fourth sweep: newer Codex (0.142) writes a prompt's `user_message` mirror right
/// after the message. A `--keep-open` run that ended between the two took the prompt for
/// context (its mirror was not among the run's lines), so the turn had no prompt; a one-shot
/// import takes it for the prompt. The message now waits for the next run while the file is
/// being written.
#[test]
fn a_codex_prompt_whose_mirror_comes_after_it_in_the_next_run_is_a_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"timestamp":"2026-06-30T07:38:36.385Z","type":"session_meta","payload":{"id":"m-after","cwd":"/w","originator":"Codex Desktop","cli_version":"0.142.3"}}"#,
        r#"{"timestamp":"2026-06-30T07:38:38.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
        r#"{"timestamp":"2026-06-30T07:38:38.500Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd /w</environment_context>"}]}}"#,
        r#"{"timestamp":"2026-06-30T07:38:38.612Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"what next?\n"}]}}"#,
        r#"{"timestamp":"2026-06-30T07:38:38.612Z","type":"event_msg","payload":{"type":"user_message","message":"what next?\n","images":[]}}"#,
        r#"{"timestamp":"2026-06-30T07:38:40.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Step one."}]}}"#,
        r#"{"timestamp":"2026-06-30T07:38:40.100Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1"}}"#,
        r#"{"timestamp":"2026-06-30T07:41:04.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t2"}}"#,
        r#"{"timestamp":"2026-06-30T07:41:04.302Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"which functions?\n"}]}}"#,
        r#"{"timestamp":"2026-06-30T07:41:04.302Z","type":"event_msg","payload":{"type":"user_message","message":"which functions?\n","images":[]}}"#,
        r#"{"timestamp":"2026-06-30T07:41:06.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"map and fold."}]}}"#,
        r#"{"timestamp":"2026-06-30T07:41:06.100Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t2"}}"#,
    ];
    assert_every_cut_equals_one_shot(dir.path(), "rollout-m-after.jsonl", &lines);
}
