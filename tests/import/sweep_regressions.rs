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
pub(crate) fn lines_of(store: &Store, id: &str) -> Vec<String> {
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

/// The events of session `id`, each as its JSON value ([`lines_of`] parsed).
fn values_of(store: &Store, id: &str) -> Vec<serde_json::Value> {
    lines_of(store, id)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The model-visible history of session `id`, each message as its JSON value ([`history`]
/// parsed).
fn history_values(store: &Store, id: &str) -> Vec<serde_json::Value> {
    history(store, id)
        .iter()
        .map(|m| serde_json::from_str(m).unwrap())
        .collect()
}

/// The model-visible history of session `id`, each message as its JSON text.
fn history(store: &Store, id: &str) -> Vec<String> {
    store
        .open_reader(id)
        .unwrap()
        .messages()
        .unwrap()
        .iter()
        .map(|m| m.to_value().to_string())
        .collect()
}

/// The usage of each `assistant/message` of session `id`: (input, output, cache read,
/// reasoning).
fn usages(store: &Store, id: &str) -> Vec<(u64, u64, u64, u64)> {
    use agentlog::event::{EventData, Opt};
    store
        .open_reader(id)
        .unwrap()
        .events()
        .filter_map(
            |e| match agentlog::event::decode_event(e.unwrap()).unwrap().data {
                EventData::AssistantMessage(m) => Some(match m.usage {
                    Opt::Present(u) => (
                        u.input_tokens,
                        u.output_tokens,
                        u.cache_read_tokens.present().copied().unwrap_or(0),
                        u.reasoning_tokens.present().copied().unwrap_or(0),
                    ),
                    _ => (0, 0, 0, 0),
                }),
                _ => None,
            },
        )
        .collect()
}

/// Codex 0.116 writes a response's `token_count` after the outputs of its calls. The response
/// was written at the first output, before its count, so each response got the tokens of the
/// one before it, and the last response's were lost (`stats` said 0 tokens for a session whose
/// file counts 5000). A response with calls now waits for its count while only its outputs
/// come: each message has its own usage, and the sums equal the file's final totals.
#[test]
fn codex_token_counts_after_the_tool_outputs_go_to_their_response() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-r01.jsonl",
        &[
            r#"{"timestamp":"2026-04-30T10:00:00.000Z","type":"session_meta","payload":{"id":"r01","cwd":"/p","cli_version":"0.116.0"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix it"}]}}"#,
            r#"{"timestamp":"2026-04-30T10:00:04.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c1","arguments":"{\"cmd\":\"ls\"}"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:04.500Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c2","arguments":"{\"cmd\":\"pwd\"}"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:05.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"a.txt"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:05.050Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c2","output":"/p"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:05.100Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":5000,"cached_input_tokens":3000,"output_tokens":200,"reasoning_output_tokens":50,"total_tokens":5200}}}}"#,
            r#"{"timestamp":"2026-04-30T10:00:06.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}}"#,
            r#"{"timestamp":"2026-04-30T10:00:06.100Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":6000,"cached_input_tokens":3500,"output_tokens":260,"reasoning_output_tokens":60,"total_tokens":6260}}}}"#,
            r#"{"timestamp":"2026-04-30T10:00:07.000Z","type":"event_msg","payload":{"type":"task_complete","last_agent_message":null}}"#,
        ],
        Some(Format::Codex),
    );
    assert_eq!(
        usages(&store, "codex-r01"),
        [(2000, 200, 3000, 50), (500, 60, 500, 10)]
    );
    // The calls are answered in their step, in the file's order, at their lines' times.
    let types: Vec<String> = lines_of(&store, "codex-r01")
        .iter()
        .filter(|l| !l.contains("import/line"))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!("{} {}", v["type"].as_str().unwrap(), v["time"])
        })
        .collect();
    assert_eq!(
        &types[3..9],
        [
            "assistant/message 1777543204500",
            "tool/call 1777543204500",
            "tool/call 1777543204500",
            "tool/result 1777543205000",
            "tool/result 1777543205050",
            "step/end 1777543206000",
        ],
        "{types:?}"
    );
}

/// A `token_count` written after its turn's end (`task_complete`, `turn_aborted`) went to the
/// next response, and was never counted at the end of a file (a fixture of agent-history whose
/// one count follows its last turn's abort: `stats` said 0 tokens). It is now the count of the
/// ended turn's last response.
#[test]
fn codex_token_counts_after_the_turns_end_go_to_its_last_response() {
    let tmp = tempfile::tempdir().unwrap();
    let count = |time: &str, input: u64, cached: u64, output: u64| {
        format!(
            r#"{{"timestamp":"2026-04-30T10:00:{time}Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"output_tokens":{output},"reasoning_output_tokens":0,"total_tokens":{}}}}}}}}}"#,
            input + output
        )
    };
    let lines = [
        r#"{"timestamp":"2026-04-30T10:00:00.000Z","type":"session_meta","payload":{"id":"late","cwd":"/p","cli_version":"0.60.0"}}"#.to_string(),
        r#"{"timestamp":"2026-04-30T10:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#.to_string(),
        r#"{"timestamp":"2026-04-30T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}}"#.to_string(),
        r#"{"timestamp":"2026-04-30T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello."}]}}"#.to_string(),
        r#"{"timestamp":"2026-04-30T10:00:04.000Z","type":"event_msg","payload":{"type":"task_complete","last_agent_message":"Hello."}}"#.to_string(),
        count("04.500", 1000, 200, 50),
        r#"{"timestamp":"2026-04-30T10:00:05.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t2"}}"#.to_string(),
        r#"{"timestamp":"2026-04-30T10:00:06.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Delete it"}]}}"#.to_string(),
        r#"{"timestamp":"2026-04-30T10:00:07.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","call_id":"c1","arguments":"{\"command\":\"rm x\"}"}}"#.to_string(),
        r#"{"timestamp":"2026-04-30T10:00:08.000Z","type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#.to_string(),
        count("09.000", 2500, 700, 90),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let store = import_lines(
        tmp.path(),
        "rollout-late.jsonl",
        &lines,
        Some(Format::Codex),
    );
    assert_eq!(
        usages(&store, "codex-late"),
        [(800, 50, 200, 0), (1000, 40, 500, 0)]
    );
    let stats = store.open_reader("codex-late").unwrap().stats().unwrap();
    assert_eq!(
        (stats.tokens.input, stats.tokens.output),
        (1800, 90),
        "{stats:?}"
    );
}

/// When a hook blocks a prompt, Claude Code writes "Operation stopped by hook: …" as a user
/// line. It was taken for a typed prompt: a turn of its own, so one prompt typed twice became
/// three turns. It is context now, like Claude Code's other injected texts.
#[test]
fn a_claude_code_hook_block_message_is_not_a_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "s5.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s5","version":"2.1.29","type":"user","message":{"role":"user","content":"fix tests"},"uuid":"u1","timestamp":"2026-02-03T00:25:13.595Z"}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s5","version":"2.1.29","type":"user","message":{"role":"user","content":"Operation stopped by hook: Another session is active\n\nYou can continue here."},"uuid":"u2","timestamp":"2026-02-03T00:25:14.150Z"}"#,
            r#"{"parentUuid":"u2","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s5","version":"2.1.29","type":"user","message":{"role":"user","content":"fix tests"},"uuid":"u3","timestamp":"2026-02-03T00:25:21.762Z"}"#,
            r#"{"parentUuid":"u3","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s5","version":"2.1.29","type":"assistant","message":{"id":"msg_1","role":"assistant","model":"m","content":[{"type":"text","text":"Running the tests."}],"usage":{"input_tokens":3,"output_tokens":5}},"uuid":"a1","timestamp":"2026-02-03T00:25:25.000Z"}"#,
        ],
        Some(Format::ClaudeCode),
    );
    let lines = lines_of(&store, "claude-s5");
    let turns = lines
        .iter()
        .filter(|l| l.contains(r#""type":"turn/start""#))
        .count();
    assert_eq!(turns, 2, "{lines:#?}");
    let hook = lines
        .iter()
        .find(|l| l.contains("Operation stopped by hook"))
        .unwrap();
    assert!(hook.contains(r#""kind":"context""#), "{hook}");
}

/// Lines that only mirror what happened (`exec_command_end`, `patch_apply_end`,
/// `agent_reasoning`, …) between a response's tool outputs and its `token_count` ended the wait
/// for the count: the response got the next one's tokens, and the last one's were lost. They
/// now wait with the outputs, and keep their place in the file's order.
#[test]
fn codex_mirror_lines_between_the_outputs_and_the_count_keep_the_count_with_its_response() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-r02.jsonl",
        &[
            r#"{"timestamp":"2026-04-30T10:00:00.000Z","type":"session_meta","payload":{"id":"r02","cwd":"/p","cli_version":"0.118.0"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix it"}]}}"#,
            r#"{"timestamp":"2026-04-30T10:00:04.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c1","arguments":"{\"cmd\":\"ls\"}"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:05.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"a.txt"}}"#,
            r#"{"timestamp":"2026-04-30T10:00:05.010Z","type":"event_msg","payload":{"type":"exec_command_end","call_id":"c1","exit_code":0}}"#,
            r#"{"timestamp":"2026-04-30T10:00:05.020Z","type":"event_msg","payload":{"type":"patch_apply_end","call_id":"p1","success":true}}"#,
            r#"{"timestamp":"2026-04-30T10:00:05.100Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":5000,"cached_input_tokens":3000,"output_tokens":200,"reasoning_output_tokens":50,"total_tokens":5200}}}}"#,
            r#"{"timestamp":"2026-04-30T10:00:06.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}}"#,
            r#"{"timestamp":"2026-04-30T10:00:06.100Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":6000,"cached_input_tokens":3500,"output_tokens":260,"reasoning_output_tokens":60,"total_tokens":6260}}}}"#,
            r#"{"timestamp":"2026-04-30T10:00:07.000Z","type":"event_msg","payload":{"type":"task_complete","last_agent_message":null}}"#,
        ],
        Some(Format::Codex),
    );
    assert_eq!(
        usages(&store, "codex-r02"),
        [(2000, 200, 3000, 50), (500, 60, 500, 10)]
    );
    // Every line keeps its place: the mirrors after the output, before the count.
    let order: Vec<String> = values_of(&store, "codex-r02")
        .iter()
        .map(|v| match v["type"].as_str().unwrap() {
            "import/line" => format!("line {}", v["data"]["kind"].as_str().unwrap_or("?")),
            t => t.to_owned(),
        })
        .skip_while(|t| t != "tool/call")
        .take(6)
        .collect();
    assert_eq!(
        order,
        [
            "tool/call",
            "tool/result",
            "line event_msg/exec_command_end",
            "line event_msg/patch_apply_end",
            "line event_msg/token_count",
            "step/end",
        ],
    );
}

/// A slash command the user queued while the agent worked (`enqueue "/model"`, then `remove`)
/// became a queued user message in the middle of the turn, as if the model had received the
/// text "/model". Claude Code runs it as a command once the turn ends (the `<command-name>` line
/// after it): it is kept as the queue's lines only.
#[test]
fn a_queued_slash_command_is_not_a_message_to_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "queued-command.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"user","message":{"role":"user","content":"print shadowBranch only if hasShadowBranch"},"uuid":"u1","timestamp":"2026-02-03T03:30:49.829Z"}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"assistant","message":{"id":"msg_A","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"I'll edit it."}],"usage":{"input_tokens":8,"output_tokens":2}},"uuid":"a1","timestamp":"2026-02-03T03:31:20.000Z"}"#,
            r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-02-03T03:31:24.753Z","sessionId":"s1","content":"/model"}"#,
            r#"{"parentUuid":"a1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"assistant","message":{"id":"msg_A","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"tool_use","id":"toolu_E","name":"Edit","input":{"file_path":"/w/a.go","old_string":"a","new_string":"b"}}],"usage":{"input_tokens":8,"output_tokens":90}},"uuid":"a2","timestamp":"2026-02-03T03:31:27.000Z"}"#,
            r#"{"type":"queue-operation","operation":"remove","timestamp":"2026-02-03T03:31:28.161Z","sessionId":"s1"}"#,
            r#"{"parentUuid":"a2","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_E","type":"tool_result","content":"updated"}]},"uuid":"u2","timestamp":"2026-02-03T03:31:28.037Z"}"#,
            r#"{"parentUuid":"u2","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"assistant","message":{"id":"msg_B","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Done."}],"usage":{"input_tokens":3,"output_tokens":2}},"uuid":"a3","timestamp":"2026-02-03T03:31:40.000Z"}"#,
            r#"{"parentUuid":"a3","isSidechain":false,"type":"system","subtype":"turn_duration","durationMs":50000,"timestamp":"2026-02-03T03:31:43.167Z","uuid":"sys1","sessionId":"s1","version":"2.1.29"}"#,
            r#"{"parentUuid":"sys1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"user","message":{"role":"user","content":"<command-name>/model</command-name>\n            <command-message>model</command-message>\n            <command-args></command-args>"},"uuid":"u3","timestamp":"2026-02-03T03:32:07.366Z"}"#,
            r#"{"parentUuid":"u3","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.29","type":"user","message":{"role":"user","content":"<local-command-stdout>Set model to Default (Opus 4.5)</local-command-stdout>"},"uuid":"u4","timestamp":"2026-02-03T03:32:07.367Z"}"#,
        ],
        Some(Format::ClaudeCode),
    );
    let id = store.ids(agentlog::store::Deleted::Skip).unwrap().remove(0);
    let users: Vec<String> = lines_of(&store, &id)
        .iter()
        .filter(|l| l.contains("\"type\":\"user/message\""))
        .cloned()
        .collect();
    assert_eq!(users.len(), 3, "{users:#?}");
    assert!(
        users.iter().all(|l| !l.contains("\"text\":\"/model\"")),
        "{users:#?}"
    );
    // The turn's history holds the prompt, the call and its result, and the answer.
    let view = store
        .open_reader(&id)
        .unwrap()
        .messages()
        .unwrap()
        .to_value();
    let text = view.to_string();
    assert!(
        text.contains("print shadowBranch only if hasShadowBranch"),
        "{text}"
    );
    assert!(!text.contains("\"/model\""), "{text}");
}

/// Claude Code 2.1.2xx writes a message queued mid-turn as a `queue-operation` `remove`, then
/// its `queued_command` attachment, whose prompt holds the images pasted with the text. The
/// `remove` made the message from its text alone and the attachment, the same message, made
/// nothing: the images the model received were not in the log (a real file lost five).
#[test]
fn a_queued_message_removed_before_its_attachment_keeps_the_attachments_images() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "55555555-5555-5555-5555-555555555555.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"55555555-5555-5555-5555-555555555555","version":"2.1.220","gitBranch":"main","type":"user","uuid":"u1","timestamp":"2026-07-30T18:15:00.000Z","message":{"role":"user","content":"check the favourites page"}}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"55555555-5555-5555-5555-555555555555","version":"2.1.220","gitBranch":"main","type":"assistant","uuid":"a1","timestamp":"2026-07-30T18:15:10.000Z","message":{"model":"claude-opus-5","id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/page.tsx"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":20}}}"#,
            r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-07-30T18:15:45.558Z","sessionId":"55555555-5555-5555-5555-555555555555","content":"[Image #2] like this"}"#,
            r#"{"parentUuid":"a1","isSidechain":false,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"55555555-5555-5555-5555-555555555555","version":"2.1.220","gitBranch":"main","type":"user","uuid":"r1","timestamp":"2026-07-30T18:16:00.000Z","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"export default function Page() {}"}]},"toolUseResult":{"type":"text"}}"#,
            r#"{"type":"queue-operation","operation":"remove","timestamp":"2026-07-30T18:16:18.637Z","sessionId":"55555555-5555-5555-5555-555555555555","content":"[Image #2] like this"}"#,
            r#"{"parentUuid":"r1","isSidechain":false,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"55555555-5555-5555-5555-555555555555","version":"2.1.220","gitBranch":"main","type":"attachment","uuid":"q1","timestamp":"2026-07-30T18:15:45.558Z","attachment":{"type":"queued_command","prompt":[{"type":"text","text":"[Image #2] like this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}}],"imagePasteIds":[2],"commandMode":"prompt","origin":{"kind":"human"},"timestamp":"2026-07-30T18:15:45.558Z"}}"#,
            r#"{"parentUuid":"q1","isSidechain":false,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"55555555-5555-5555-5555-555555555555","version":"2.1.220","gitBranch":"main","type":"assistant","uuid":"a2","timestamp":"2026-07-30T18:16:30.000Z","message":{"model":"claude-opus-5","id":"msg_2","type":"message","role":"assistant","content":[{"type":"text","text":"Image received, thanks."}],"stop_reason":"end_turn","usage":{"input_tokens":30,"output_tokens":8}}}"#,
            r#"{"parentUuid":"a2","isSidechain":false,"userType":"external","entrypoint":"cli","cwd":"/w","sessionId":"55555555-5555-5555-5555-555555555555","version":"2.1.220","gitBranch":"main","type":"system","subtype":"turn_duration","uuid":"t1","timestamp":"2026-07-30T18:16:31.000Z","durationMs":91000}"#,
        ],
        Some(Format::ClaudeCode),
    );
    let id = "claude-55555555-5555-5555-5555-555555555555";
    let queued: Vec<serde_json::Value> = values_of(&store, id)
        .into_iter()
        .filter(|v| v["type"] == "user/message" && v["data"]["envelope"]["kind"] == "queued")
        .collect();
    assert_eq!(queued.len(), 1, "{queued:#?}");
    let content = &queued[0]["data"]["content"];
    assert_eq!(content[0]["text"], "[Image #2] like this", "{content}");
    assert_eq!(content[1]["type"], "image", "{content}");
    assert_eq!(
        queued[0]["data"]["envelope"]["commandMode"], "prompt",
        "{queued:#?}"
    );
    // The model saw it after the call's result, before the answer.
    let texts = history(&store, id);
    assert_eq!(texts.len(), 5, "{texts:#?}");
    assert!(texts[2].contains("tool_result"), "{texts:#?}");
    assert!(
        texts[3].contains(r#""type":"image""#) && texts[3].contains("like this"),
        "{texts:#?}"
    );
}

/// A file whose name makes a main id of 118 characters or more: `<main id>-sidechains` was
/// cut at 128 characters, down to the main id itself for a 128-character one. The subagent's
/// lines went into the main session (the model's view held the subagent's conversation), its
/// `session.json` named it its own sidechains session, and a second import failed.
#[test]
fn a_long_main_id_keeps_its_sidechains_session_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("{}.jsonl", "s".repeat(125));
    let store = import_lines(
        tmp.path(),
        &name,
        &[
            r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"44444444-4444-4444-4444-444444444444","version":"1.0.98","type":"user","uuid":"u1","timestamp":"2025-09-01T10:00:00.000Z","message":{"role":"user","content":"main prompt"}}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"44444444-4444-4444-4444-444444444444","version":"1.0.98","type":"assistant","uuid":"a1","timestamp":"2025-09-01T10:00:01.000Z","message":{"id":"msg_m1","type":"message","role":"assistant","model":"claude-sonnet-4","content":[{"type":"text","text":"main answer"}],"usage":{"input_tokens":10,"output_tokens":5}}}"#,
            r#"{"parentUuid":null,"isSidechain":true,"userType":"external","cwd":"/w","sessionId":"44444444-4444-4444-4444-444444444444","version":"1.0.98","type":"user","uuid":"s1","timestamp":"2025-09-01T10:00:02.000Z","message":{"role":"user","content":"sub prompt"}}"#,
            r#"{"parentUuid":"s1","isSidechain":true,"userType":"external","cwd":"/w","sessionId":"44444444-4444-4444-4444-444444444444","version":"1.0.98","type":"assistant","uuid":"s2","timestamp":"2025-09-01T10:00:03.000Z","message":{"id":"msg_s1","type":"message","role":"assistant","model":"claude-haiku","content":[{"type":"text","text":"sub answer"}],"usage":{"input_tokens":3,"output_tokens":1}}}"#,
        ],
        Some(Format::ClaudeCode),
    );
    let main = format!("claude-{}", "s".repeat(121));
    let side = format!("claude-{}-sidechains", "s".repeat(110));
    assert_eq!(side.len(), 128);
    let mut ids = store
        .list()
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect::<Vec<_>>();
    ids.sort();
    assert_eq!(ids, [side.clone(), main.clone()]);
    let texts = history(&store, &main);
    assert_eq!(texts.len(), 2, "{texts:#?}");
    assert!(texts.iter().all(|t| !t.contains("sub ")), "{texts:#?}");
    assert_eq!(
        store.info(&side).unwrap().parent_session.as_deref(),
        Some(main.as_str())
    );
    // A second import changes nothing.
    let options = Options {
        format: Some(Format::ClaudeCode),
        ..Options::default()
    };
    let summary = import_paths(&store, &[tmp.path().join(&name)], &options, |_, _| {}).unwrap();
    assert_eq!(summary.failed, 0, "{summary:?}");
}

/// A `system` `api_error` line whose `error` is an empty object (Claude Code 2.1.x, a retried
/// request) became an `error` event whose message was `{}`, and the retry it announced was
/// dropped. The message is the error's text, "API error" without one, and the retry.
#[test]
fn a_claude_code_api_error_says_what_failed_and_the_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "e1.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"e1","version":"2.1.17","type":"user","message":{"role":"user","content":"go"},"uuid":"u1","timestamp":"2026-01-31T07:34:50.000Z"}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"e1","version":"2.1.17","type":"system","subtype":"api_error","level":"error","error":{},"retryInMs":534.7428297914272,"retryAttempt":1,"maxRetries":10,"timestamp":"2026-01-31T07:34:51.681Z","uuid":"s1"}"#,
            r#"{"parentUuid":"s1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"e1","version":"2.1.17","type":"system","subtype":"api_error","level":"error","error":{"message":"Connection error.","status":0,"formatted":"Connection error: ECONNRESET"},"retryInMs":0,"retryAttempt":0,"maxRetries":0,"timestamp":"2026-01-31T07:34:52.681Z","uuid":"s2"}"#,
            r#"{"parentUuid":"s2","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"e1","version":"2.1.17","type":"system","subtype":"api_error","level":"error","error":"overloaded","timestamp":"2026-01-31T07:34:53.681Z","uuid":"s3"}"#,
        ],
        Some(Format::ClaudeCode),
    );
    let messages: Vec<String> = values_of(&store, "claude-e1")
        .iter()
        .filter(|v| v["type"] == "error")
        .map(|v| v["data"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        messages,
        [
            "API error (retry 1 of 10 in 535 ms)",
            "Connection error: ECONNRESET",
            "overloaded"
        ]
    );
}

/// A Codex file whose `compacted` line comes after base instructions, a developer message and
/// one exchange ([`a_codex_compaction_keeps_the_base_instructions`], and in runs).
pub(crate) const CODEX_COMPACTION: [&str; 8] = [
    r#"{"timestamp":"2026-08-01T10:00:00.000Z","type":"session_meta","payload":{"id":"repro-03","cwd":"/tmp","originator":"codex-tui","cli_version":"0.144.1","base_instructions":{"text":"BASE_INSTRUCTIONS"}}}"#,
    r#"{"timestamp":"2026-08-01T10:00:01.000Z","type":"turn_context","payload":{"turn_id":"t1","model":"gpt-5.2","effort":"low"}}"#,
    r#"{"timestamp":"2026-08-01T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>DEV</permissions instructions>"}]}}"#,
    r#"{"timestamp":"2026-08-01T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"first question"}]}}"#,
    r#"{"timestamp":"2026-08-01T10:00:04.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"first answer"}]}}"#,
    r#"{"timestamp":"2026-08-01T10:00:05.000Z","type":"compacted","payload":{"message":"summary of the first exchange","replacement_history":[]}}"#,
    r#"{"timestamp":"2026-08-01T10:00:06.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"second question"}]}}"#,
    r#"{"timestamp":"2026-08-01T10:00:07.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"second answer"}]}}"#,
];

/// A Codex `compacted` line replaced the whole model-visible history, the `session_meta`
/// base instructions too: the history after a compaction had no system message, while Codex
/// sends its base instructions with every request. A compaction now keeps them.
#[test]
fn a_codex_compaction_keeps_the_base_instructions() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-repro-03.jsonl",
        &CODEX_COMPACTION,
        Some(Format::Codex),
    );
    let history = history(&store, "codex-repro-03");
    assert_eq!(history.len(), 4, "{history:#?}");
    assert!(
        history[0].contains(r#""role":"system""#) && history[0].contains("BASE_INSTRUCTIONS"),
        "{history:#?}"
    );
    assert!(
        history[1].contains("summary of the first exchange"),
        "{history:#?}"
    );
    assert!(!history
        .iter()
        .any(|m| m.contains("first question") || m.contains("DEV")));
    assert!(history[3].contains("second answer"), "{history:#?}");
}

/// A Codex Desktop (0.142) file that writes its `session_meta` again at a turn's start, the
/// same instructions, and later with changed ones ([`a_repeated_codex_session_meta_is_not_a_new_system_prompt`],
/// and in runs).
pub(crate) const CODEX_REPEATED_META: [&str; 14] = [
    r#"{"timestamp":"2026-06-23T07:21:36.800Z","type":"session_meta","payload":{"id":"meta-2","cwd":"/w","originator":"Codex Desktop","cli_version":"0.142.0-alpha.6","base_instructions":{"text":"You are Codex."}}}"#,
    r#"{"timestamp":"2026-06-23T07:21:40.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
    r#"{"timestamp":"2026-06-23T07:21:40.010Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}"#,
    r#"{"timestamp":"2026-06-23T07:21:42.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}}"#,
    r#"{"timestamp":"2026-06-23T07:21:42.200Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1"}}"#,
    r#"{"timestamp":"2026-06-23T17:17:54.327Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t2"}}"#,
    r#"{"timestamp":"2026-06-23T17:17:54.388Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"again"}]}}"#,
    r#"{"timestamp":"2026-06-23T17:17:54.605Z","type":"session_meta","payload":{"id":"meta-2","cwd":"/w","originator":"Codex Desktop","cli_version":"0.142.0-alpha.6","base_instructions":{"text":"You are Codex."}}}"#,
    r#"{"timestamp":"2026-06-23T17:17:56.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi again"}]}}"#,
    r#"{"timestamp":"2026-06-23T17:17:56.200Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t2"}}"#,
    r#"{"timestamp":"2026-06-24T09:00:00.000Z","type":"session_meta","payload":{"id":"meta-2","cwd":"/w","originator":"Codex Desktop","cli_version":"0.143.0","base_instructions":{"text":"You are Codex, updated."}}}"#,
    r#"{"timestamp":"2026-06-24T09:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t3"}}"#,
    r#"{"timestamp":"2026-06-24T09:00:01.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"third"}]}}"#,
    r#"{"timestamp":"2026-06-24T09:00:02.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"third answer"}]}}"#,
];

/// Codex Desktop writes its `session_meta` line again at each turn's start, with the same base
/// instructions: each became a new `system/message` in the middle of a turn, so a real file's
/// history held its 21 KB instructions 29 times. Only instructions that changed are a new
/// system prompt, where they changed.
#[test]
fn a_repeated_codex_session_meta_is_not_a_new_system_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-meta-2.jsonl",
        &CODEX_REPEATED_META,
        Some(Format::Codex),
    );
    let texts: Vec<String> = history_values(&store, "codex-meta-2")
        .iter()
        .map(|v| format!("{} {}", v["role"], v["content"][0]["text"]))
        .collect();
    assert_eq!(
        texts,
        [
            r#""system" "You are Codex.""#,
            r#""user" "hello""#,
            r#""assistant" "hi""#,
            r#""user" "again""#,
            r#""assistant" "hi again""#,
            r#""system" "You are Codex, updated.""#,
            r#""user" "third""#,
            r#""assistant" "third answer""#,
        ]
    );
}

/// A Codex 0.140 turn with a tool search ([`a_codex_tool_search_is_a_call_and_its_output_a_result`],
/// and in runs).
pub(crate) const CODEX_TOOL_SEARCH: [&str; 9] = [
    r#"{"timestamp":"2026-06-19T02:15:23.587Z","type":"session_meta","payload":{"id":"ts-1","cwd":"/w","originator":"Codex Desktop","cli_version":"0.140.0-alpha.19"}}"#,
    r#"{"timestamp":"2026-06-19T02:15:23.588Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
    r#"{"timestamp":"2026-06-19T02:15:23.684Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"spawn 2 subagents"}]}}"#,
    r#"{"timestamp":"2026-06-19T02:15:29.990Z","type":"response_item","payload":{"type":"tool_search_call","call_id":"call_ts","status":"completed","execution":"client","arguments":{"query":"subagent spawn","limit":10}}}"#,
    r#"{"timestamp":"2026-06-19T02:15:30.362Z","type":"response_item","payload":{"type":"tool_search_output","call_id":"call_ts","status":"completed","execution":"client","tools":[{"type":"namespace","name":"multi_agent_v1","tools":[]}]}}"#,
    r#"{"timestamp":"2026-06-19T02:15:30.363Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":23544,"cached_input_tokens":22016,"output_tokens":197,"reasoning_output_tokens":165,"total_tokens":23741}}}}"#,
    r#"{"timestamp":"2026-06-19T02:15:43.022Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"checking"}],"phase":"commentary"}}"#,
    r#"{"timestamp":"2026-06-19T02:15:46.090Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":51341,"cached_input_tokens":44032,"output_tokens":928,"reasoning_output_tokens":681,"total_tokens":52269}}}}"#,
    r#"{"timestamp":"2026-06-19T02:17:54.557Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1","last_agent_message":"checking"}}"#,
];

/// Codex 0.140 writes a tool search (the model asks the client for tools to load) as
/// `tool_search_call` and `tool_search_output` items. Both were kept as `import/line`s, so two
/// model requests, each with its count, became one step and one `assistant/message` holding
/// both requests' tokens. The search is a tool call answered by its output now.
#[test]
fn a_codex_tool_search_is_a_call_and_its_output_a_result() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-ts-1.jsonl",
        &CODEX_TOOL_SEARCH,
        Some(Format::Codex),
    );
    assert_eq!(
        usages(&store, "codex-ts-1"),
        [(1528, 197, 22016, 165), (5781, 731, 22016, 516)]
    );
    let history = history_values(&store, "codex-ts-1");
    assert_eq!(history.len(), 4, "{history:#?}");
    assert_eq!(
        history[1]["content"][0],
        serde_json::json!({"type":"tool_use","id":"call_ts","name":"tool_search","input":{"query":"subagent spawn","limit":10}})
    );
    assert_eq!(
        history[2]["content"][0],
        serde_json::json!({"type":"tool_result","toolUseId":"call_ts","toolName":"tool_search",
            "content":r#"[{"type":"namespace","name":"multi_agent_v1","tools":[]}]"#,"isError":false})
    );
    assert_eq!(history[3]["content"][0]["text"], "checking");
}

/// Found by the fourth sweep: Codex 0.142 sends some prompts (a guardian subagent's request)
/// as several `input_text` items, and mirrors them as one `user_message`, their concatenation.
/// No single item equals the mirror, so every such prompt was taken for context and every turn
/// had no prompt. A message whose texts together equal a mirror is a prompt.
#[test]
fn a_codex_prompt_in_several_text_items_matches_its_mirror() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-multi.jsonl",
        &[
            r#"{"timestamp":"2026-07-06T09:11:55.000Z","type":"session_meta","payload":{"id":"multi","cwd":"/tmp","originator":"Codex Desktop","cli_version":"0.142.5"}}"#,
            r#"{"timestamp":"2026-07-06T09:11:55.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
            r#"{"timestamp":"2026-07-06T09:11:55.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd /tmp</environment_context>"}]}}"#,
            r#"{"timestamp":"2026-07-06T09:11:55.200Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Part one of the request.\n"},{"type":"input_text","text":"Part two.\n"}]}}"#,
            r#"{"timestamp":"2026-07-06T09:11:55.200Z","type":"event_msg","payload":{"type":"user_message","message":"Part one of the request.\nPart two.\n","images":[]}}"#,
            r#"{"timestamp":"2026-07-06T09:11:56.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}"#,
            r#"{"timestamp":"2026-07-06T09:11:56.100Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1"}}"#,
        ],
        Some(Format::Codex),
    );
    let kinds: Vec<String> = values_of(&store, "codex-multi")
        .iter()
        .filter(|v| v["type"] == "user/message")
        .map(|v| v["data"]["envelope"]["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["context", "prompt"]);
}

/// Found by the fourth sweep: in a Codex 0.144 multi-agent thread, a subagent's answer reaches
/// the root agent as a `response_item` `agent_message` (input text the model reads). It was
/// kept as an `import/line`, so the history lacked what the model was answering, and the
/// request after it ran on in the step before. It is a `user/message` now (envelope kind
/// `agent-message`, with its author and recipient), and the next output a new step.
#[test]
fn a_codex_agent_message_is_input_the_model_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-agents.jsonl",
        &[
            r#"{"timestamp":"2026-07-10T10:00:00.000Z","type":"session_meta","payload":{"id":"agents","cwd":"/w","originator":"codex-tui","cli_version":"0.144.0-alpha.4"}}"#,
            r#"{"timestamp":"2026-07-10T10:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#,
            r#"{"timestamp":"2026-07-10T10:00:01.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"review the diff"}]}}"#,
            r#"{"timestamp":"2026-07-10T10:00:01.100Z","type":"event_msg","payload":{"type":"user_message","message":"review the diff"}}"#,
            r#"{"timestamp":"2026-07-10T10:00:02.000Z","type":"response_item","payload":{"type":"function_call","name":"wait_agent","call_id":"w1","arguments":"{}"}}"#,
            r#"{"timestamp":"2026-07-10T10:00:09.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"w1","output":"done"}}"#,
            r#"{"timestamp":"2026-07-10T10:00:09.100Z","type":"inter_agent_communication_metadata","payload":{"author":"/root/a"}}"#,
            r#"{"timestamp":"2026-07-10T10:00:09.200Z","type":"response_item","payload":{"type":"agent_message","author":"/root/a","recipient":"/root","content":[{"type":"input_text","text":"Message Type: FINAL_ANSWER\nNo issue found."}]}}"#,
            r#"{"timestamp":"2026-07-10T10:00:10.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"All clear."}]}}"#,
            r#"{"timestamp":"2026-07-10T10:00:10.100Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1"}}"#,
        ],
        Some(Format::Codex),
    );
    let history = history_values(&store, "codex-agents");
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "user", "assistant"]);
    assert_eq!(
        history[3]["content"][0]["text"],
        "Message Type: FINAL_ANSWER\nNo issue found."
    );
    let lines = values_of(&store, "codex-agents");
    let agent = lines
        .iter()
        .find(|v| v["type"] == "user/message" && v["data"]["envelope"]["kind"] == "agent-message")
        .expect("the agent message");
    assert_eq!(agent["data"]["envelope"]["author"], "/root/a");
    let steps = lines.iter().filter(|v| v["type"] == "step/start").count();
    assert_eq!(steps, 2);
}

/// Found by the fourth sweep: Codex 0.142 and 0.144 inject `<recommended_plugins>` and
/// `<subagent_notification>` messages as user messages. In lines without mirrors (a first run
/// that ends before the first mirror), they were taken for typed prompts: each started a turn
/// of its own. They are context, by their markup.
#[test]
fn codex_plugin_and_subagent_notices_are_context() {
    let tmp = tempfile::tempdir().unwrap();
    let store = import_lines(
        tmp.path(),
        "rollout-notices.jsonl",
        &[
            r#"{"timestamp":"2026-07-10T10:00:00.000Z","type":"session_meta","payload":{"id":"notices","cwd":"/w","originator":"codex-tui","cli_version":"0.144.0"}}"#,
            r#"{"timestamp":"2026-07-10T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<recommended_plugins>\nHere is a list of plugins\n</recommended_plugins>"},{"type":"input_text","text":"<environment_context>\n<cwd>/w</cwd>\n</environment_context>"}]}}"#,
            r#"{"timestamp":"2026-07-10T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"explore the repo"}]}}"#,
            r#"{"timestamp":"2026-07-10T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Spawning a helper."}]}}"#,
            r#"{"timestamp":"2026-07-10T10:00:09.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<subagent_notification>\n{\"status\":{\"completed\":\"PASS\"}}\n</subagent_notification>"}]}}"#,
            r#"{"timestamp":"2026-07-10T10:00:10.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}}"#,
        ],
        Some(Format::Codex),
    );
    let kinds: Vec<String> = values_of(&store, "codex-notices")
        .iter()
        .filter(|v| v["type"] == "user/message" || v["type"] == "turn/start")
        .map(|v| match v["data"]["envelope"]["kind"].as_str() {
            Some(kind) => kind.to_owned(),
            None => v["type"].as_str().unwrap().to_owned(),
        })
        .collect();
    assert_eq!(kinds, ["context", "turn/start", "prompt", "context"]);
}

/// Claude Code 2.1.x writes what the user types at a permission prompt as a text block in the
/// line of that call's result. With calls in parallel, the text was taken for a typed prompt:
/// the turn ended, the other calls were answered `TOOL_OUTCOME_UNKNOWN` (the line's parent,
/// mid-response, also made it a rewind that left the first result out of the history), and
/// their real results, in the lines after it, were kept as `import/line`s.
#[test]
fn claude_code_text_with_a_tool_result_is_feedback_in_the_same_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let line = |rest: &str| {
        format!(
            r#"{{"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"fb","version":"2.1.32",{rest}}}"#
        )
    };
    let use_line = |uuid: &str, parent: &str, id: &str| {
        line(&format!(
            r#""parentUuid":"{parent}","type":"assistant","message":{{"id":"msg_1","role":"assistant","model":"m","content":[{{"type":"tool_use","id":"{id}","name":"Edit","input":{{"file_path":"/w/{id}"}}}}],"usage":{{"input_tokens":3,"output_tokens":5}}}},"uuid":"{uuid}","timestamp":"2026-02-10T10:00:01.000Z""#
        ))
    };
    let lines = [
        line(
            r#""parentUuid":null,"type":"user","message":{"role":"user","content":"edit both files"},"uuid":"u1","timestamp":"2026-02-10T10:00:00.000Z""#,
        ),
        use_line("a1", "u1", "t1"),
        use_line("a2", "a1", "t2"),
        line(
            r#""parentUuid":"a1","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"The file /w/t1 has been updated."},{"type":"text","text":"ok, but keep the old name"}]},"toolUseResult":{},"uuid":"u2","sourceToolAssistantUUID":"a1","timestamp":"2026-02-10T10:00:05.000Z""#,
        ),
        line(
            r#""parentUuid":"a2","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"The file /w/t2 has been updated."}]},"toolUseResult":{},"uuid":"u3","sourceToolAssistantUUID":"a2","timestamp":"2026-02-10T10:00:06.000Z""#,
        ),
        line(
            r#""parentUuid":"u3","type":"assistant","message":{"id":"msg_2","role":"assistant","model":"m","content":[{"type":"text","text":"Done, with the old name kept."}],"usage":{"input_tokens":4,"output_tokens":6}},"uuid":"a3","timestamp":"2026-02-10T10:00:08.000Z""#,
        ),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let store = import_lines(tmp.path(), "fb.jsonl", &refs, Some(Format::ClaudeCode));
    let events = values_of(&store, "claude-fb");
    let of_type =
        |t: &str| -> Vec<&serde_json::Value> { events.iter().filter(|e| e["type"] == t).collect() };
    assert_eq!(of_type("turn/start").len(), 1, "{events:#?}");
    assert_eq!(of_type("import/line").len(), 0, "{events:#?}");
    let results: Vec<&serde_json::Value> = of_type("tool/result");
    let contents: Vec<&str> = results
        .iter()
        .map(|r| r["data"]["message"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "The file /w/t1 has been updated.",
            "The file /w/t2 has been updated."
        ]
    );
    let feedback = of_type("user/message")
        .into_iter()
        .find(|m| m["data"]["content"][0]["text"] == "ok, but keep the old name")
        .unwrap();
    assert_eq!(feedback["data"]["envelope"]["kind"], "feedback");
    // The history holds both results and the feedback, in the file's order.
    let history = history(&store, "claude-fb");
    let at = |needle: &str| history.iter().position(|m| m.contains(needle)).unwrap();
    assert!(at("/w/t1 has been updated") < at("keep the old name"));
    assert!(at("keep the old name") < at("/w/t2 has been updated"));
    assert!(at("/w/t2 has been updated") < at("Done, with the old name kept"));
}

/// A Gemini CLI session (stored by Entire as `full.jsonl`, found by sweep 6) names its
/// `sessionId` on its first line, so `--from auto` takes it for Claude Code: it imported with
/// no warning as a session of `import/line`s and an empty history. A file none of whose lines
/// maps to anything is now reported; a real transcript is not.
#[test]
fn a_file_no_line_of_which_maps_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("full.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"sessionId":"g1","projectHash":"661f","startTime":"2026-06-07T15:50:29.489Z","lastUpdated":"2026-06-07T15:50:29.489Z","kind":"main"}"#,
            "\n",
            r#"{"$set":{"messages":[{"id":"d049","timestamp":"2026-06-07T15:50:29.490Z","type":"user","content":[{"text":"hello"}]}]}}"#,
            "\n"
        ),
    )
    .unwrap();
    let real = crate::import_formats::data_dir().join("claude-code/marot__spotter__short.jsonl");
    let store = Store::open(tmp.path().join("store")).unwrap();
    let summary = import_paths(&store, &[file, real], &Options::default(), |_, _| {}).unwrap();
    let reported: Vec<&String> = summary
        .warnings
        .iter()
        .filter(|w| w.contains("another tool's file?"))
        .collect();
    assert_eq!(reported.len(), 1, "{:#?}", summary.warnings);
    assert!(
        reported[0].contains("full.jsonl: none of its 2 line(s)"),
        "{}",
        reported[0]
    );
}
