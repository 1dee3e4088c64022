//! Real files that are not quite what the format description says: outputs whose error shows
//! only in their text, prompts written only as mirrors.

use agentlog::event::{EventData, Opt};
use agentlog::store::Store;

use crate::import_formats::{
    codex_prelude, events, exported, import_keep_open, message_usages, reader, types, write,
};

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

/// Claude Code 2.1 runs a tool as soon as its `tool_use` block has come and writes the result
/// at once, before the same response's later blocks (lines sharing `message.id`): the response
/// is still one assistant message with every tool use, its results after it. Split into two
/// messages at the first result, the calls of the first part answered after the second were
/// replaced by TOOL_OUTCOME_UNKNOWN in the renderings and their real results became orphans.
#[test]
fn claude_code_results_written_between_a_responses_lines_follow_the_whole_response() {
    let dir = tempfile::tempdir().unwrap();
    let head = r#""isSidechain":false,"sessionId":"s21","version":"2.1.39""#;
    let assistant = |uuid: &str, parent: &str, second: u32, block: &str, out: u32| {
        format!(
            r#"{{"parentUuid":"{parent}",{head},"type":"assistant","message":{{"id":"msg_M","role":"assistant","model":"c","content":[{block}],"usage":{{"input_tokens":10,"output_tokens":{out}}}}},"uuid":"{uuid}","timestamp":"2026-02-11T21:19:{second:02}.000Z"}}"#
        )
    };
    let tool_use = |id: &str| {
        format!(r#"{{"type":"tool_use","id":"{id}","name":"Bash","input":{{"command":"{id}"}}}}"#)
    };
    let result = |uuid: &str, parent: &str, second: u32, id: &str| {
        format!(
            r#"{{"parentUuid":"{parent}",{head},"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":"out of {id}"}}]}},"toolUseResult":{{"stdout":"out of {id}"}},"uuid":"{uuid}","timestamp":"2026-02-11T21:19:{second:02}.000Z"}}"#
        )
    };
    let progress = |uuid: &str, parent: &str, second: u32| {
        format!(
            r#"{{"parentUuid":"{parent}",{head},"type":"progress","data":{{"type":"hook_progress"}},"uuid":"{uuid}","timestamp":"2026-02-11T21:19:{second:02}.500Z"}}"#
        )
    };
    let lines = [
        format!(
            r#"{{"parentUuid":null,{head},"type":"user","message":{{"role":"user","content":"close, commit, push"}},"uuid":"u1","timestamp":"2026-02-11T21:19:50.000Z"}}"#
        ),
        assistant(
            "a1",
            "u1",
            51,
            r#"{"type":"text","text":"Now close and push."}"#,
            3,
        ),
        assistant("a2", "a1", 52, &tool_use("t1"), 5),
        progress("p1", "a2", 52),
        assistant("a3", "p1", 53, &tool_use("t2"), 7),
        assistant("a4", "a3", 54, &tool_use("t3"), 9),
        result("r1", "a2", 55, "t1"),
        progress("p2", "r1", 55),
        assistant("a5", "p2", 56, &tool_use("t4"), 11),
        result("r2", "a3", 57, "t2"),
        result("r3", "a4", 58, "t3"),
        result("r4", "a5", 59, "t4"),
        format!(
            r#"{{"parentUuid":"r4",{head},"type":"assistant","message":{{"id":"msg_N","role":"assistant","model":"c","content":[{{"type":"text","text":"Pushed."}}],"usage":{{"input_tokens":40,"output_tokens":2}}}},"uuid":"a6","timestamp":"2026-02-11T21:20:00.000Z"}}"#
        ),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "s21.jsonl", &refs, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let r = reader(&store, "claude-s21");
    let evs = events(&r);
    let shape: Vec<String> = evs
        .iter()
        .filter(|e| e.data.type_name() != "import/line")
        .map(|e| match &e.data {
            EventData::ToolCall(c) => format!("call {}", c.call_id),
            EventData::ToolResult(t) => match &t.call_id {
                Opt::Present(id) => format!("result {id}"),
                _ => "result ?".to_owned(),
            },
            other => other.type_name().to_string(),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "turn/start",
            "user/message",
            "step/start",
            "assistant/message",
            "call t1",
            "call t2",
            "call t3",
            "call t4",
            "result t1",
            "result t2",
            "result t3",
            "result t4",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end"
        ],
        "one message for the response, its results after it"
    );
    // The response's usage is its last line's, once.
    let usage: Vec<u64> = message_usages(&evs)
        .iter()
        .map(|u| u.output_tokens)
        .collect();
    assert_eq!(usage, [11, 2]);
    // Each result keeps its own line's time, the message its first line's.
    let time_of = |want: &str| {
        evs.iter()
            .find(|e| match &e.data {
                EventData::ToolResult(t) => t.call_id == Opt::Present(want.to_owned()),
                _ => false,
            })
            .map(|e| e.time)
            .unwrap()
    };
    assert_eq!(time_of("t3") - time_of("t1"), 3000);
    let rendered = agentlog::projection::render_openai(&r.messages().unwrap()).to_string();
    assert!(!rendered.contains("TOOL_OUTCOME_UNKNOWN"), "{rendered}");
    for id in ["t1", "t2", "t3", "t4"] {
        assert!(rendered.contains(&format!("out of {id}")), "{rendered}");
    }
    let anthropic = agentlog::projection::render_anthropic(&r.messages().unwrap()).to_string();
    assert!(!anthropic.contains("TOOL_OUTCOME_UNKNOWN"), "{anthropic}");
    assert!(!anthropic.contains("[result of tool call"), "{anthropic}");
    // Every line is still there, in its order.
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

/// A Codex compaction done by the API (0.104 on): `compacted` has an empty `message`, and its
/// `replacement_history` keeps the user messages and an encrypted `compaction` item. The
/// derived history was one empty text block (providers refuse those) and the kept messages
/// were gone; it is now their text (a local compaction's `message` stays the summary), and a
/// placeholder saying the summary is encrypted when nothing readable is kept.
#[test]
fn codex_compaction_with_an_empty_message_keeps_the_replacement_history_text() {
    let dir = tempfile::tempdir().unwrap();
    let compacted = |history: &str| {
        format!(
            r#"{{"timestamp":"2026-03-25T11:31:11.756Z","type":"compacted","payload":{{"message":"","replacement_history":[{history}]}}}}"#
        )
    };
    let kept = r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the parser"}]},{"type":"reasoning","summary":[{"type":"summary_text","text":"nested"}],"encrypted_content":"gAAA"},{"type":"message","role":"user","content":[{"type":"input_text","text":"and add a test"}]},{"type":"compaction","encrypted_content":"gAAB"}"#;
    for (name, history, want) in [
        ("kept", kept, "fix the parser\n\nand add a test"),
        (
            "none",
            r#"{"type":"compaction","encrypted_content":"gAAB"}"#,
            "(the conversation was compacted; its summary is encrypted and not in the rollout)",
        ),
    ] {
        let mut lines = codex_prelude(name);
        lines.extend([
            r#"{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"working on it"}]}}"#.to_string(),
            r#"{"timestamp":"2025-10-01T10:00:02.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"1"}}"#.to_string(),
            compacted(history),
            r#"{"timestamp":"2025-10-01T10:00:04.000Z","type":"event_msg","payload":{"type":"context_compacted"}}"#.to_string(),
        ]);
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let file = write(dir.path(), &format!("{name}.jsonl"), &refs, "\n");
        let store = Store::open(dir.path().join(name)).unwrap();
        import_keep_open(&store, &file, false);
        let r = reader(&store, &format!("codex-{name}"));
        let history: serde_json::Value =
            serde_json::from_str(&r.messages().unwrap().to_value().to_string()).unwrap();
        let texts: Vec<&str> = history
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().unwrap())
            .map(|b| b["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, [want], "{name}: {history}");
    }
}

/// A Codex model output is written when the line that ends it comes (a tool's output, say):
/// its message and calls took that line's time, so every tool took 0 ms. They now take the
/// time of the output's last item; the result keeps its own line's.
#[test]
fn codex_calls_keep_their_own_time_and_tools_their_duration() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = codex_prelude("lat");
    lines.extend([
        r#"{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"run it"}],"encrypted_content":"gA"}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:02.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"make\"]}","call_id":"c1"}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:09.500Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"ok\",\"metadata\":{\"exit_code\":0}}"}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:10.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"built"}]}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:11.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"1"}}"#.to_string(),
    ]);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "lat.jsonl", &refs, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let evs = events(&reader(&store, "codex-lat"));
    let time_of = |ty: &str| evs.iter().find(|e| e.data.type_name() == ty).unwrap().time;
    let base = time_of("turn/start");
    assert_eq!(
        time_of("step/start") - base,
        1000,
        "the step starts with its first item"
    );
    assert_eq!(
        time_of("tool/call") - base,
        2000,
        "the call at its own line's time"
    );
    assert_eq!(time_of("tool/result") - base, 9500);
    let stats = reader(&store, "codex-lat").stats().unwrap();
    assert_eq!(stats.tools["shell"].latency.as_slice(), [7500]);
}

/// A bare string among a Claude Code user line's blocks (or a tool result's) is text: it was
/// refused as a block (an internal warning) and the prompt was lost.
#[test]
fn claude_code_bare_strings_among_blocks_are_text() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":["fix the build",{"type":"text","text":"please"}]},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"bs"}"#,
        r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make"}}],"usage":{"input_tokens":5,"output_tokens":1}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"bs"}"#,
        r#"{"parentUuid":"a1","isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":["built",{"type":"text","text":"ok"}]}]},"uuid":"r1","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"bs"}"#,
    ];
    let file = write(dir.path(), "bs.jsonl", &lines, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    let summary = import_keep_open(&store, &file, false);
    assert!(
        !summary.warnings.iter().any(|w| w.contains("internal")),
        "{:?}",
        summary.warnings
    );
    let history = reader(&store, "claude-bs")
        .messages()
        .unwrap()
        .to_value()
        .to_string();
    assert!(
        history.starts_with(
            r#"[{"role":"user","content":[{"type":"text","text":"fix the build"},{"type":"text","text":"please"}]}"#
        ),
        "{history}"
    );
    assert!(
        history
            .contains(r#""content":[{"type":"text","text":"built"},{"type":"text","text":"ok"}]"#),
        "{history}"
    );
}

/// The derived history as JSON, and each of its blocks as `"<role> <show(block)>"`.
fn block_shapes(
    r: &agentlog::session::SessionReader,
    show: impl Fn(&serde_json::Value) -> String,
) -> (serde_json::Value, Vec<String>) {
    let history: serde_json::Value =
        serde_json::from_str(&r.messages().unwrap().to_value().to_string()).unwrap();
    let shape = history
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let role = m["role"].as_str().unwrap();
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| format!("{role} {}", show(b)))
                .collect::<Vec<_>>()
        })
        .collect();
    (history, shape)
}

/// Older Claude Code versions (2.1.3x) record a message the user typed while the agent worked,
/// and which the running turn took in, only as the queue's `enqueue` (with the text) and a
/// `remove` without it; a background task's notification waits in the same queue but comes as
/// a user line of its own, and `popAll` withdraws what waits. The message taken in was an
/// `import/line`, missing from the history though the model saw it (the public
/// `marot/spotter` fixture's compaction summary lists two). It is now a `user/message`
/// (`kind: "queued"`) after the results of the response it came during; the notification and
/// the withdrawn message are not.
#[test]
fn claude_code_queue_removes_of_older_versions_reach_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let head = r#""isSidechain":false,"sessionId":"qo","version":"2.1.39""#;
    let q = |op: &str, content: Option<&str>, s: u32| match content {
        Some(c) => format!(
            r#"{{"type":"queue-operation","operation":"{op}","timestamp":"2026-02-11T20:51:{s:02}.000Z","sessionId":"qo","content":{c:?}}}"#
        ),
        None => format!(
            r#"{{"type":"queue-operation","operation":"{op}","timestamp":"2026-02-11T20:51:{s:02}.000Z","sessionId":"qo"}}"#
        ),
    };
    let lines = [
        format!(
            r#"{{"parentUuid":null,{head},"type":"user","message":{{"role":"user","content":"run the tests"}},"uuid":"u1","timestamp":"2026-02-11T20:51:00.000Z"}}"#
        ),
        q(
            "enqueue",
            Some("<task-notification>\n<task-id>b1</task-id>\n</task-notification>"),
            1,
        ),
        format!(
            r#"{{"parentUuid":"u1",{head},"type":"assistant","message":{{"id":"m1","role":"assistant","model":"c","content":[{{"type":"tool_use","id":"t1","name":"Bash","input":{{"command":"mix test"}}}}],"usage":{{"input_tokens":5,"output_tokens":1}}}},"uuid":"a1","timestamp":"2026-02-11T20:51:02.000Z"}}"#
        ),
        q("enqueue", Some("check again"), 3),
        q("remove", None, 4),
        format!(
            r#"{{"parentUuid":"a1",{head},"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"2 tests, 0 failures"}}]}},"uuid":"r1","timestamp":"2026-02-11T20:51:05.000Z"}}"#
        ),
        format!(
            r#"{{"parentUuid":"r1",{head},"type":"assistant","message":{{"id":"m2","role":"assistant","model":"c","content":[{{"type":"tool_use","id":"t2","name":"Bash","input":{{"command":"mix test"}}}}],"usage":{{"input_tokens":7,"output_tokens":1}}}},"uuid":"a2","timestamp":"2026-02-11T20:51:06.000Z"}}"#
        ),
        q("enqueue", Some("never mind"), 7),
        q("popAll", None, 8),
        format!(
            r#"{{"parentUuid":"a2",{head},"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t2","content":"2 tests, 0 failures"}}]}},"uuid":"r2","timestamp":"2026-02-11T20:51:09.000Z"}}"#
        ),
        format!(
            r#"{{"parentUuid":"r2",{head},"type":"assistant","message":{{"id":"m3","role":"assistant","model":"c","content":[{{"type":"text","text":"All pass."}}],"usage":{{"input_tokens":9,"output_tokens":2}}}},"uuid":"a3","timestamp":"2026-02-11T20:51:10.000Z"}}"#
        ),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "qo.jsonl", &refs, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let r = reader(&store, "claude-qo");
    let (history, shape) = block_shapes(&r, |b| {
        b["text"]
            .as_str()
            .unwrap_or(b["type"].as_str().unwrap())
            .to_owned()
    });
    assert_eq!(
        shape,
        [
            "user run the tests",
            "assistant tool_use",
            "user tool_result",
            "user check again",
            "assistant tool_use",
            "user tool_result",
            "assistant All pass."
        ],
        "{history}"
    );
    let openai = agentlog::projection::render_openai(&r.messages().unwrap()).to_string();
    assert!(!openai.contains("TOOL_OUTCOME_UNKNOWN"), "{openai}");
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

/// A message the user typed while Claude Code worked reaches the model during the turn; newer
/// versions record it as a `queued_command` attachment (after the `queue-operation` lines).
/// It was an `import/line`, missing from the derived history though the model saw it. It is a
/// `user/message` (`kind: "queued"`) after the results of the response it came during, so both
/// renderings stay valid; a prompt given as blocks keeps them.
#[test]
fn claude_code_queued_messages_reach_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let head = r#""isSidechain":false,"sessionId":"qc","version":"2.1.240""#;
    let lines = [
        format!(r#"{{"parentUuid":null,{head},"type":"user","message":{{"role":"user","content":"add a forecast screen"}},"uuid":"u1","timestamp":"2026-09-29T10:00:00.000Z"}}"#),
        format!(r#"{{"parentUuid":"u1",{head},"type":"assistant","message":{{"id":"m1","role":"assistant","model":"c","content":[{{"type":"tool_use","id":"t1","name":"Bash","input":{{"command":"npm test"}}}}],"usage":{{"input_tokens":5,"output_tokens":1}}}},"uuid":"a1","timestamp":"2026-09-29T10:00:05.000Z"}}"#),
        r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-09-29T10:00:06.000Z","sessionId":"qc","content":"also add tests"}"#.to_string(),
        format!(r#"{{"parentUuid":"a1",{head},"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"ok"}}]}},"uuid":"r1","timestamp":"2026-09-29T10:00:09.000Z"}}"#),
        r#"{"type":"queue-operation","operation":"remove","timestamp":"2026-09-29T10:00:09.500Z","sessionId":"qc","content":"also add tests","reason":"absorbed_mid_turn"}"#.to_string(),
        format!(r#"{{"parentUuid":"r1",{head},"type":"attachment","attachment":{{"type":"queued_command","prompt":"also add tests","commandMode":"prompt","origin":{{"kind":"human"}}}},"uuid":"q1","timestamp":"2026-09-29T10:00:06.000Z"}}"#),
        format!(r#"{{"parentUuid":"q1",{head},"type":"attachment","attachment":{{"type":"queued_command","prompt":[{{"type":"text","text":"match this"}},{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"AAAA"}}}}],"commandMode":"prompt"}},"uuid":"q2","timestamp":"2026-09-29T10:00:07.000Z"}}"#),
        format!(r#"{{"parentUuid":"q2",{head},"type":"attachment","attachment":{{"type":"edited_text_file","filename":"a.go"}},"uuid":"e1","timestamp":"2026-09-29T10:00:09.700Z"}}"#),
        format!(r#"{{"parentUuid":"e1",{head},"type":"assistant","message":{{"id":"m2","role":"assistant","model":"c","content":[{{"type":"text","text":"Adding tests."}}],"usage":{{"input_tokens":9,"output_tokens":2}}}},"uuid":"a2","timestamp":"2026-09-29T10:00:10.000Z"}}"#),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "qc.jsonl", &refs, "\n");
    let store = Store::open(dir.path().join("store")).unwrap();
    import_keep_open(&store, &file, false);
    let r = reader(&store, "claude-qc");
    let (history, shape) = block_shapes(&r, |b| b["type"].as_str().unwrap().to_owned());
    assert_eq!(
        shape,
        [
            "user text",
            "assistant tool_use",
            "user tool_result",
            "user text",
            "user text",
            "user image",
            "assistant text"
        ],
        "{history}"
    );
    assert!(history.to_string().contains("also add tests"));
    let queued = events(&r)
        .into_iter()
        .filter(|e| match &e.data {
            EventData::UserMessage(m) => {
                matches!(&m.envelope, Opt::Present(env) if env.to_string().contains("\"kind\":\"queued\""))
            }
            _ => false,
        })
        .count();
    assert_eq!(queued, 2);
    let openai = agentlog::projection::render_openai(&r.messages().unwrap()).to_string();
    assert!(!openai.contains("TOOL_OUTCOME_UNKNOWN"), "{openai}");
    let anthropic = agentlog::projection::render_anthropic(&r.messages().unwrap()).to_string();
    assert!(!anthropic.contains("[result of tool call"), "{anthropic}");
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}
