//! Lines of newer Codex (0.144 to 0.159) and Claude Code (2.1.2xx) versions that the importer
//! lost or misread, found by the survey of public fixtures of 2026-12-07 (stop 44), one test
//! each, on files cut down to the lines that matter.

use std::path::Path;

use agentlog::import::{export_source, import_paths, Options, Summary};
use agentlog::store::Store;

use crate::sweep_regressions::lines_of;

/// Writes `lines` as the file `name` under `dir` (directories made); its path.
fn write(dir: &Path, name: &str, lines: &[&str]) -> std::path::PathBuf {
    let file = dir.join(name);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    file
}

/// Imports `paths` into the store `dir/store`, asserting that no file failed; the store and
/// the run's summary.
fn import_summary(dir: &Path, paths: &[std::path::PathBuf]) -> (Store, Summary) {
    let store = Store::open(dir.join("store")).unwrap();
    let summary = import_paths(&store, paths, &Options::default(), |_, _| {}).unwrap();
    assert_eq!(summary.failed, 0, "{summary:?}");
    (store, summary)
}

/// [`import_summary`]'s store.
fn import(dir: &Path, paths: &[std::path::PathBuf]) -> Store {
    import_summary(dir, paths).0
}

/// `derive` of the session, as JSON text.
fn derived(store: &Store, id: &str) -> String {
    let messages = store.open_reader(id).unwrap().messages().unwrap();
    messages.to_value().to_string()
}

/// The file's bytes come back from the session.
fn assert_exports(store: &Store, id: &str, file: &Path) {
    let mut out = Vec::new();
    export_source(&store.open_reader(id).unwrap(), &mut out).unwrap();
    assert!(out == std::fs::read(file).unwrap(), "{id}: export differs");
}

const THREAD: &str = "01a0f1a2-0000-7000-8000-0000000000e5";

/// A Codex turn: its start, the prompt and its mirror, an answer, its end.
fn codex_turn(turn: &str, time: &str, prompt: &str, answer: &str) -> Vec<String> {
    vec![
        format!(
            r#"{{"timestamp":"{time}","type":"event_msg","payload":{{"type":"task_started","turn_id":"{turn}"}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{time}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{prompt}"}}]}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{time}","type":"event_msg","payload":{{"type":"user_message","message":"{prompt}"}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{time}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{answer}"}}]}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{time}","type":"event_msg","payload":{{"type":"task_complete","turn_id":"{turn}"}}}}"#
        ),
    ]
}

/// A Codex revert (`thread/revert`, 0.146 on) writes the thread's new history to a second file,
/// `rollout-<time>-<thread id>_<rollout id>.jsonl`, whose `session_meta` names the same thread
/// (and the prefix it continues in `history_base`). Both files claimed the session
/// `codex-<thread id>`: one was refused (the run exited 1 every time), and with several workers
/// which one depended on which finished first. The revert is now its own session,
/// `codex-<thread id>_<rollout id>`, descending from the thread's.
#[test]
fn a_reverted_codex_thread_is_a_session_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let meta = |time: &str, base: &str| {
        format!(
            r#"{{"timestamp":"{time}","ordinal":0,"type":"session_meta","payload":{{"id":"{THREAD}","timestamp":"2026-09-29T00:00:00Z","cwd":"/w","originator":"codex-tui","cli_version":"0.157.1","source":"cli","model_provider":"openai","history_mode":"paginated","history_base":{base}}}}}"#
        )
    };
    let mut first = vec![meta("2026-09-29T00:00:00.000Z", "null")];
    first.extend(codex_turn(
        "t1",
        "2026-09-29T00:00:10.000Z",
        "first prompt",
        "first answer",
    ));
    first.extend(codex_turn(
        "t2",
        "2026-09-29T00:01:00.000Z",
        "second prompt",
        "second answer",
    ));
    let mut revert = vec![meta(
        "2026-09-29T00:02:00.000Z",
        &format!(r#"{{"thread_id":"{THREAD}","end_ordinal_exclusive":6,"end_byte_offset":900}}"#),
    )];
    revert.extend(codex_turn(
        "t3",
        "2026-09-29T00:02:10.000Z",
        "second prompt, edited",
        "edited answer",
    ));
    let day = tmp.path().join("sessions/2026/09/29");
    let rollout = "3f5e2c10-0000-4000-8000-000000000001";
    let a = write(
        &day,
        &format!("rollout-2026-09-29T00-00-00-{THREAD}.jsonl"),
        &first.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let b = write(
        &day,
        &format!("rollout-2026-09-29T00-02-00-{THREAD}_{rollout}.jsonl"),
        &revert.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let store = import(tmp.path(), &[tmp.path().join("sessions")]);
    let (id, reverted) = (
        format!("codex-{THREAD}"),
        format!("codex-{THREAD}_{rollout}"),
    );
    let info = store.info(&reverted).unwrap();
    assert_eq!(info.parent_session.as_deref(), Some(id.as_str()));
    assert_eq!(store.info(&id).unwrap().parent_session, None);
    assert!(derived(&store, &id).contains("second answer"));
    let edited = derived(&store, &reverted);
    assert!(
        edited.contains("edited answer") && !edited.contains("second answer"),
        "{edited}"
    );
    assert_exports(&store, &id, &a);
    assert_exports(&store, &reverted, &b);
    assert!(lines_of(&store, &reverted).len() > 3);
}

/// The usage of each `assistant/message` of the session, as JSON text.
fn usages(store: &Store, id: &str) -> Vec<String> {
    lines_of(store, id)
        .iter()
        .filter(|l| l.contains(r#""type":"assistant/message""#))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["data"]["usage"].to_string()
        })
        .collect()
}

/// Codex 0.153 counts the input tokens written to the cache (`cache_write_input_tokens`) inside
/// `input_tokens`, beside the cached ones: they were counted as plain input and
/// `cacheWriteTokens` was never set (real `codex exec` figures: 51,599 = 36,339 cached + 15,248
/// written + 12).
#[test]
fn codex_cache_writes_are_counted_apart_from_plain_input() {
    let tmp = tempfile::tempdir().unwrap();
    let count = |input: u64, cached: u64, written: u64, output: u64| {
        format!(
            r#"{{"timestamp":"2026-09-23T08:00:03.000Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"cache_write_input_tokens":{written},"output_tokens":{output},"reasoning_output_tokens":0,"total_tokens":{}}},"model_context_window":258400}}}}}}"#,
            input + output
        )
    };
    let answer = |text: &str| {
        format!(
            r#"{{"timestamp":"2026-09-23T08:00:02.000Z","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{text}"}}]}}}}"#
        )
    };
    let prompt = |text: &str| {
        format!(
            r#"{{"timestamp":"2026-09-23T08:00:01.000Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{text}"}}]}}}}"#
        )
    };
    let lines = [
        r#"{"timestamp":"2026-09-23T08:00:00.000Z","type":"session_meta","payload":{"id":"cw1","cwd":"/w","originator":"codex_exec","cli_version":"0.153.4","source":"exec","model_provider":"openai"}}"#.to_owned(),
        prompt("say ok"),
        answer("ok"),
        count(51_599, 36_339, 15_248, 267),
        prompt("again"),
        answer("ok again"),
        count(51_599 + 52_000, 36_339 + 51_500, 15_248 + 400, 267 + 5),
    ];
    let file = write(
        tmp.path(),
        "rollout-cw1.jsonl",
        &lines.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let store = import(tmp.path(), std::slice::from_ref(&file));
    assert_eq!(
        usages(&store, "codex-cw1"),
        [
            r#"{"cacheReadTokens":36339,"cacheWriteTokens":15248,"inputTokens":12,"outputTokens":267,"reasoningTokens":0}"#,
            r#"{"cacheReadTokens":51500,"cacheWriteTokens":400,"inputTokens":100,"outputTokens":5,"reasoningTokens":0}"#,
        ]
    );
    assert_exports(&store, "codex-cw1", &file);
}

/// The `envelope.kind` of each `user/message` of the session, and its number of turns.
fn user_kinds_and_turns(store: &Store, id: &str) -> (Vec<String>, usize) {
    let lines = lines_of(store, id);
    let kinds = lines
        .iter()
        .filter(|l| l.contains(r#""type":"user/message""#))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["data"]["envelope"]["kind"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    let turns = lines
        .iter()
        .filter(|l| l.contains(r#""type":"turn/start""#))
        .count();
    (kinds, turns)
}

/// Paginated Codex files (`history_mode: "paginated"`, 0.145 on) write no `user_message`
/// mirrors: their mirror of a typed prompt is an `item_completed` whose item is a
/// `UserMessage`, and their user messages name what they hold in `content_item_kinds`. Told
/// apart by markup alone, a Stop hook's `<hook_prompt …>` and the user's answer to the agent's
/// question (`<send_user_message_question_reply>`), which Codex sends in the turn, were typed
/// prompts: each ended the turn and opened another one inside one Codex task.
#[test]
fn codex_messages_injected_in_a_turn_of_a_paginated_file_stay_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let user = |text: &str, kinds: &str| {
        format!(
            r#"{{"timestamp":"2026-10-01T19:20:00.400Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{text}"}}],"internal_chat_message_metadata_passthrough":{{"turn_id":"t1","content_item_kinds":[{kinds}]}}}}}}"#
        )
    };
    let mirror = |text: &str| {
        format!(
            r#"{{"timestamp":"2026-10-01T19:20:00.401Z","type":"event_msg","payload":{{"type":"item_completed","thread_id":"pg","turn_id":"t1","item":{{"type":"UserMessage","id":"u","content":[{{"type":"text","text":"{text}","text_elements":[]}}]}}}}}}"#
        )
    };
    let answer = |text: &str| {
        format!(
            r#"{{"timestamp":"2026-10-01T19:21:00.000Z","type":"response_item","payload":{{"type":"message","role":"assistant","phase":"final_answer","content":[{{"type":"output_text","text":"{text}"}}]}}}}"#
        )
    };
    let task = |what: &str, turn: &str| {
        format!(
            r#"{{"timestamp":"2026-10-01T19:20:00.100Z","type":"event_msg","payload":{{"type":"{what}","turn_id":"{turn}"}}}}"#
        )
    };
    let injected = [
        (
            r#"<hook_prompt hook_run_id=\"stop:2:/w/.codex/hooks.json\">Run the tests before finishing.</hook_prompt>"#,
            r#""unknown""#,
        ),
        (
            r#"<send_user_message_question_reply>\n[{\"answer\":\"eu-west-1\",\"question\":\"Which region?\"}]"#,
            r#""user.text""#,
        ),
        // No markup this importer knows: the mirror (or, without mirrors, the kinds) tells.
        ("Keep going until the build is green.", r#""unknown""#),
    ];
    for mirrored in [true, false] {
        for (k, (text, kinds)) in injected.iter().enumerate() {
            let mut lines = vec![
                r#"{"timestamp":"2026-10-01T19:20:00.000Z","type":"session_meta","payload":{"id":"pg","cwd":"/w","originator":"codex-tui","cli_version":"0.159.3","source":"cli","model_provider":"openai","history_mode":"paginated"}}"#.to_owned(),
                task("task_started", "t1"),
                user(r#"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"#, r#""environments.environment_context""#),
                user("fix the flaky test", r#""user.text""#),
            ];
            if mirrored {
                lines.push(mirror("fix the flaky test"));
            }
            lines.extend([
                answer("Fixed."),
                user(text, kinds),
                answer("Done."),
                task("task_complete", "t1"),
            ]);
            lines.extend([
                task("task_started", "t2"),
                user("now the docs", r#""user.text""#),
            ]);
            if mirrored {
                lines.push(mirror("now the docs"));
            }
            lines.extend([answer("Docs updated."), task("task_complete", "t2")]);
            let dir = tmp.path().join(format!("{mirrored}-{k}"));
            let file = write(
                &dir,
                "rollout-pg.jsonl",
                &lines.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            let store = import(&dir, std::slice::from_ref(&file));
            let (kinds, turns) = user_kinds_and_turns(&store, "codex-pg");
            assert_eq!(
                (kinds, turns),
                (
                    ["context", "prompt", "context", "prompt"]
                        .map(String::from)
                        .to_vec(),
                    2
                ),
                "mirrored {mirrored}, case {k}"
            );
            assert_exports(&store, "codex-pg", &file);
        }
    }
}

/// Codex 0.144 on (multi-agent v2) writes a message between the agents of a thread as a
/// top-level `inter_agent_communication` line only: in a subagent's rollout the task the root
/// gives it, in the root's a subagent's final answer. Both were `import/line`s: the subagent's
/// session had no prompt in `derive`, and the root's lacked the answer its next reply is based
/// on.
#[test]
fn codex_messages_between_agents_reach_the_history() {
    let tmp = tempfile::tempdir().unwrap();
    let child = [
        r#"{"timestamp":"2026-09-20T10:00:00.000Z","type":"session_meta","payload":{"id":"child1","timestamp":"2026-09-20T10:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.153.0","source":{"subagent":{"thread_spawn":{"parent_thread_id":"root1","depth":1,"agent_path":"/root/tester"}}},"model_provider":"openai"}}"#,
        r#"{"timestamp":"2026-09-20T10:00:00.200Z","type":"inter_agent_communication","payload":{"id":"trigger","author":"/root","recipient":"/root/tester","other_recipients":[],"content":"rerun only the failing test","trigger_turn":true}}"#,
        r#"{"timestamp":"2026-09-20T10:00:00.300Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t-c1"}}"#,
        r#"{"timestamp":"2026-09-20T10:00:10.000Z","type":"response_item","payload":{"type":"message","role":"assistant","phase":"final_answer","content":[{"type":"output_text","text":"It passes on rerun."}]}}"#,
        r#"{"timestamp":"2026-09-20T10:00:10.200Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t-c1"}}"#,
    ];
    let root = [
        r#"{"timestamp":"2026-09-20T09:59:00.000Z","type":"session_meta","payload":{"id":"root1","timestamp":"2026-09-20T09:59:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.153.0","source":"cli","model_provider":"openai"}}"#,
        r#"{"timestamp":"2026-09-20T09:59:00.100Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t-r1"}}"#,
        r#"{"timestamp":"2026-09-20T09:59:00.300Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"is a.test.ts flaky? ask the tester"}]}}"#,
        r#"{"timestamp":"2026-09-20T10:00:01.000Z","type":"response_item","payload":{"type":"function_call","name":"wait_agent","arguments":"{}","call_id":"call_r2"}}"#,
        r#"{"timestamp":"2026-09-20T10:00:11.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_r2","output":"{\"status\":\"completed\"}"}}"#,
        r#"{"timestamp":"2026-09-20T10:00:11.100Z","type":"inter_agent_communication","payload":{"author":"/root/tester","recipient":"/root","other_recipients":[],"content":"Message Type: FINAL_ANSWER\nTask name: /root\nSender: /root/tester\nPayload:\nIt passes on rerun.","trigger_turn":false}}"#,
        r#"{"timestamp":"2026-09-20T10:00:15.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Yes: it is flaky."}]}}"#,
        r#"{"timestamp":"2026-09-20T10:00:15.200Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t-r1"}}"#,
    ];
    let files = [
        write(tmp.path(), "rollout-child1.jsonl", &child),
        write(tmp.path(), "rollout-root1.jsonl", &root),
    ];
    let store = import(tmp.path(), &files);
    for (id, file, text, author) in [
        (
            "codex-child1",
            &files[0],
            "rerun only the failing test",
            "/root",
        ),
        ("codex-root1", &files[1], "FINAL_ANSWER", "/root/tester"),
    ] {
        let lines = lines_of(&store, id);
        let message = lines
            .iter()
            .find(|l| l.contains(r#""type":"user/message""#) && l.contains(text))
            .unwrap_or_else(|| panic!("{id}: {lines:#?}"));
        let v: serde_json::Value = serde_json::from_str(message).unwrap();
        assert_eq!(v["data"]["envelope"]["kind"], "agent-message", "{message}");
        assert_eq!(v["data"]["envelope"]["author"], author, "{message}");
        assert!(derived(&store, id).contains(text), "{id}");
        assert!(!lines
            .iter()
            .any(|l| l.contains(r#""kind":"inter_agent_communication""#)));
        assert_exports(&store, id, file);
    }
    // The root's answer after the subagent's message is a request of its own.
    let root_lines = lines_of(&store, "codex-root1");
    assert_eq!(
        root_lines
            .iter()
            .filter(|l| l.contains(r#""type":"step/start""#))
            .count(),
        2
    );
}

/// Claude Code 2.1.2xx writes the context a hook returns (`additionalContext`) as an
/// `attachment` of type `hook_additional_context` only, where older versions wrote a user line
/// of context: it was an `import/line`, missing from `derive`. So was the text of a CLAUDE.md
/// below the project's root (`nested_memory`, as Claude Code gives it to the model). Other
/// attachments stay `import/line`s, now counted by their type (`attachment/<type>`).
#[test]
fn claude_code_hook_context_attachments_reach_the_history() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"attachment":{"type":"hook_additional_context","content":["<project-memory-context>\nquartzlantern rules apply\n</project-memory-context>","second block harborlight note"],"hookName":"SessionStart","hookEvent":"SessionStart"},"type":"attachment","uuid":"att1","timestamp":"2026-06-07T05:00:01.000Z","sessionId":"h1","version":"2.1.207"}"#,
        r#"{"parentUuid":"att1","type":"user","message":{"role":"user","content":"list the files"},"uuid":"u1","timestamp":"2026-06-07T05:00:02.000Z","sessionId":"h1","version":"2.1.207"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":10,"output_tokens":5}},"uuid":"a1","timestamp":"2026-06-07T05:00:03.000Z","sessionId":"h1","version":"2.1.207"}"#,
        r#"{"parentUuid":"a1","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"}]},"uuid":"u2","timestamp":"2026-06-07T05:00:04.000Z","sessionId":"h1","version":"2.1.207"}"#,
        // Written while the response's next block may still come: it waits for the response.
        r#"{"parentUuid":"u2","attachment":{"type":"hook_additional_context","content":"lint is clean","hookName":"PostToolUse","hookEvent":"PostToolUse"},"type":"attachment","uuid":"att2","timestamp":"2026-06-07T05:00:04.500Z","sessionId":"h1","version":"2.1.207"}"#,
        r#"{"parentUuid":"att2","type":"attachment","attachment":{"type":"directory","path":"/repo/subdir","displayPath":"subdir/","content":"inner.txt"},"uuid":"att3","timestamp":"2026-06-07T05:00:04.600Z","sessionId":"h1","version":"2.1.207"}"#,
        r#"{"parentUuid":"att3","type":"assistant","message":{"id":"m2","role":"assistant","model":"claude-x","content":[{"type":"text","text":"One file: a.txt"}],"usage":{"input_tokens":20,"output_tokens":6}},"uuid":"a2","timestamp":"2026-06-07T05:00:05.000Z","sessionId":"h1","version":"2.1.207"}"#,
        // A CLAUDE.md below the root, loaded when the agent went there: its text is context.
        r#"{"parentUuid":"a2","type":"attachment","attachment":{"type":"nested_memory","path":"/repo/sub/CLAUDE.md","content":{"type":"Project","path":"/repo/sub/CLAUDE.md","content":"use tabs in sub, velvetgrove"}},"uuid":"att4","timestamp":"2026-06-07T05:00:06.000Z","sessionId":"h1","version":"2.1.207"}"#,
        // One that names the file only: nothing to show.
        r#"{"parentUuid":"att4","type":"attachment","attachment":{"type":"nested_memory","path":"/repo/other/CLAUDE.md","displayPath":"other/CLAUDE.md"},"uuid":"att5","timestamp":"2026-06-07T05:00:06.500Z","sessionId":"h1","version":"2.1.207"}"#,
    ];
    let file = write(tmp.path(), "h1.jsonl", &lines);
    let (store, summary) = import_summary(tmp.path(), std::slice::from_ref(&file));
    assert_eq!(summary.unmapped.get("attachment/directory"), Some(&1));
    assert_eq!(summary.unmapped.get("attachment/nested_memory"), Some(&1));
    assert_eq!(
        summary.unmapped.get("attachment/hook_additional_context"),
        None
    );
    let (kinds, turns) = user_kinds_and_turns(&store, "claude-h1");
    assert_eq!(kinds, ["context", "prompt", "context", "context"]);
    assert_eq!(turns, 1);
    let history = derived(&store, "claude-h1");
    for text in [
        "quartzlantern rules apply",
        "harborlight note",
        "lint is clean",
        "Contents of /repo/sub/CLAUDE.md:\\n\\nuse tabs in sub, velvetgrove",
    ] {
        assert!(history.contains(text), "{text}: {history}");
    }
    assert!(!history.contains("inner.txt"), "{history}");
    assert_exports(&store, "claude-h1", &file);
}

/// The positions of `texts` in `history`, each asserted present and after the one before.
fn assert_in_order(history: &str, texts: &[&str]) {
    let mut from = 0;
    for text in texts {
        let at = history[from..]
            .find(text)
            .unwrap_or_else(|| panic!("{text} missing after byte {from}: {history}"));
        from += at + text.len();
    }
}

/// A Claude Code compaction that keeps the last messages (2.1.x: `compactMetadata.
/// preservedSegment`, written by the compactions that summarize all but the last messages):
/// the kept messages stay in the file before the `compact_boundary` line, and the model goes
/// on seeing them after the summary. The summary replaced the whole history, so `derive` lost
/// them (and the next prompt, which continues from the last kept message, followed the summary
/// alone). Now the summary replaces the messages before the first kept one, also when that one
/// was imported by an earlier run.
#[test]
fn claude_code_compaction_keeps_the_messages_it_preserves() {
    let line = |parent: &str, uuid: &str, second: u32, rest: &str| {
        let parent = if parent.is_empty() {
            "null".to_owned()
        } else {
            format!("\"{parent}\"")
        };
        format!(
            r#"{{"parentUuid":{parent},{rest},"uuid":"{uuid}","timestamp":"2026-06-08T05:00:{second:02}.000Z","sessionId":"pk","version":"2.1.210"}}"#
        )
    };
    let prompt =
        |text: &str| format!(r#""type":"user","message":{{"role":"user","content":"{text}"}}"#);
    let answer = |id: &str, content: &str| {
        format!(
            r#""type":"assistant","message":{{"id":"{id}","role":"assistant","model":"claude-x","content":[{content}],"usage":{{"input_tokens":10,"output_tokens":5}}}}"#
        )
    };
    let lines = [
        line("", "u1", 1, &prompt("start the quartzlantern task")),
        line(
            "u1",
            "a1",
            2,
            &answer("m1", r#"{"type":"text","text":"quartzlantern noted"}"#),
        ),
        line("a1", "u2", 3, &prompt("now list the harborlight files")),
        line(
            "u2",
            "a2",
            4,
            &answer(
                "m2",
                r#"{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}"#,
            ),
        ),
        line(
            "a2",
            "r2",
            5,
            r#""type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"harborlight.txt"}]}"#,
        ),
        line(
            "r2",
            "a3",
            6,
            &answer("m3", r#"{"type":"text","text":"one harborlight file"}"#),
        ),
        line(
            "",
            "b1",
            7,
            r#""logicalParentUuid":"a3","type":"system","subtype":"compact_boundary","content":"Conversation compacted","isMeta":false,"level":"info","compactMetadata":{"trigger":"auto","preTokens":5000,"preservedSegment":{"headUuid":"u2","anchorUuid":"s1","tailUuid":"a3"}}"#,
        ),
        line(
            "b1",
            "s1",
            8,
            r#""type":"user","isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"role":"user","content":"This session is being continued from a previous conversation. Summary: the amberfield task began."}"#,
        ),
        line("a3", "u3", 9, &prompt("thanks, go on")),
        line(
            "u3",
            "a4",
            10,
            &answer("m4", r#"{"type":"text","text":"going on"}"#),
        ),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let expected = [
        "amberfield task began",
        "now list the harborlight files",
        "\"ls\"",
        "harborlight.txt",
        "one harborlight file",
        "thanks, go on",
        "going on",
    ];
    // One run of the whole file, and two: the kept messages imported by the first.
    for cut in [refs.len(), 6] {
        let tmp = tempfile::tempdir().unwrap();
        let file = write(tmp.path(), "pk.jsonl", &refs[..cut]);
        import(tmp.path(), std::slice::from_ref(&file));
        let whole = write(tmp.path(), "pk.jsonl", &refs);
        let (store, summary) = import_summary(tmp.path(), &[whole]);
        assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
        let history = derived(&store, "claude-pk");
        assert_in_order(&history, &expected);
        assert!(!history.contains("quartzlantern"), "compacted: {history}");
        assert_exports(&store, "claude-pk", &file);
    }
}

/// A compaction whose first kept message is not in the file (a copy cut short at its start):
/// the summary replaces the whole history, and the summary says why.
#[test]
fn claude_code_compaction_keeping_an_unknown_message_replaces_everything_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"first question"},"uuid":"u1","timestamp":"2026-06-08T06:00:01.000Z","sessionId":"pu"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"first answer"}],"usage":{"input_tokens":5,"output_tokens":2}},"uuid":"a1","timestamp":"2026-06-08T06:00:02.000Z","sessionId":"pu"}"#,
        r#"{"parentUuid":null,"logicalParentUuid":"a1","type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":100,"preservedSegment":{"headUuid":"gone","anchorUuid":"s1","tailUuid":"a1"}},"uuid":"b1","timestamp":"2026-06-08T06:00:03.000Z","sessionId":"pu"}"#,
        r#"{"parentUuid":"b1","type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued from a previous conversation. Summary: one question answered."},"uuid":"s1","timestamp":"2026-06-08T06:00:04.000Z","sessionId":"pu"}"#,
    ];
    let file = write(tmp.path(), "pu.jsonl", &lines);
    let (store, summary) = import_summary(tmp.path(), std::slice::from_ref(&file));
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("pu.jsonl:3:") && w.contains("(gone) is not in the file")),
        "{:?}",
        summary.warnings
    );
    let history = derived(&store, "claude-pu");
    assert!(history.contains("one question answered"), "{history}");
    assert!(!history.contains("first"), "{history}");
}

/// Codex 0.150 on writes each model response's usage as a `token_usage_record` line. Where a
/// file has no cumulative `token_count`s, the records were its only usage, and the session had
/// none. Now they add up (a record written twice counts once); in a file with counts, the
/// counts give the usage and the records are not added again, also when a record comes before
/// the first count.
#[test]
fn codex_usage_records_count_where_a_file_has_no_token_counts() {
    let time = "2026-10-02T08:00:00.000Z";
    let record = |id: &str, input: u64, cached: u64, output: u64| {
        format!(
            r#"{{"timestamp":"{time}","type":"token_usage_record","payload":{{"response_id":"{id}","usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"output_tokens":{output},"reasoning_output_tokens":0,"total_tokens":{}}}}}}}"#,
            input + output
        )
    };
    let count = |input: u64, cached: u64, output: u64| {
        format!(
            r#"{{"timestamp":"{time}","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"output_tokens":{output},"reasoning_output_tokens":0,"total_tokens":{}}}}}}}}}"#,
            input + output
        )
    };
    let item = |payload: &str| {
        format!(r#"{{"timestamp":"{time}","type":"response_item","payload":{payload}}}"#)
    };
    let meta = |id: &str| {
        format!(
            r#"{{"timestamp":"{time}","type":"session_meta","payload":{{"id":"{id}","cwd":"/w","originator":"codex_exec","cli_version":"0.155.0","source":"exec","model_provider":"openai"}}}}"#
        )
    };
    let prompt =
        item(r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"list"}]}"#);
    let call = item(
        r#"{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"}"#,
    );
    let output = item(r#"{"type":"function_call_output","call_id":"c1","output":"a b"}"#);
    let answer = item(
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"two"}]}"#,
    );
    let first = r#"{"cacheReadTokens":60,"inputTokens":40,"outputTokens":7,"reasoningTokens":0}"#;
    let second = r#"{"cacheReadTokens":90,"inputTokens":30,"outputTokens":4,"reasoningTokens":0}"#;

    // Records only; the call's output before its response's record, a record written twice.
    let records_only = [
        meta("ur1"),
        prompt.clone(),
        call.clone(),
        output.clone(),
        record("resp_1", 100, 60, 7),
        answer.clone(),
        record("resp_2", 120, 90, 4),
        record("resp_2", 120, 90, 4),
    ];
    // Records and counts, each record before its count.
    let both = [
        meta("ur2"),
        prompt.clone(),
        call.clone(),
        output.clone(),
        record("resp_1", 100, 60, 7),
        count(100, 60, 7),
        answer.clone(),
        record("resp_2", 120, 90, 4),
        count(220, 150, 11),
    ];
    for (id, lines, cut) in [
        ("ur1", &records_only[..], records_only.len()),
        ("ur1", &records_only[..], 5),
        ("ur2", &both[..], both.len()),
        ("ur2", &both[..], 6),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let name = format!("rollout-{id}.jsonl");
        let file = write(tmp.path(), &name, &refs[..cut]);
        let store = import(tmp.path(), std::slice::from_ref(&file));
        let file = write(tmp.path(), &name, &refs);
        import(tmp.path(), std::slice::from_ref(&file));
        let session = format!("codex-{id}");
        assert_eq!(
            usages(&store, &session),
            [first, second],
            "{id} cut at {cut}"
        );
        assert_exports(&store, &session, &file);
    }
}
