//! Importing Codex rollouts and Claude Code transcripts (`agentlog::import`): the real samples
//! in `tests/data/import/` and small files built from the format description
//! (docs/import.md), checked for lossless export, tool counts, lifecycle, incremental import.

use testkit::project::provider_schema;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentlog::event::{Event, EventData, Opt, Usage};
use agentlog::import::{export_source, import_paths, Format, Options, Summary};
use agentlog::session::SessionReader;
use agentlog::store::Store;

pub(crate) fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import")
}

fn samples() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in ["codex", "claude-code"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir().join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        out.extend(files);
    }
    assert_eq!(out.len(), 6, "the six real samples");
    out
}

fn import(store: &Store, paths: &[PathBuf], format: Option<Format>) -> Summary {
    import_paths(
        store,
        paths,
        &Options {
            format,
            workers: None,
            keep_open: false,
        },
        |_, _| {},
    )
    .unwrap()
}

pub(crate) fn reader(store: &Store, id: &str) -> SessionReader {
    store.open_reader(id).unwrap()
}

pub(crate) fn events(r: &SessionReader) -> Vec<Event> {
    (0..r.len()).map(|s| r.get_owned(s).unwrap()).collect()
}

/// The source file an imported session exports (`export_source`).
pub(crate) fn exported(r: &SessionReader) -> Vec<u8> {
    let mut out = Vec::new();
    export_source(r, &mut out).unwrap();
    out
}

/// No lifecycle violation anywhere in the log, and nothing left open at its end.
pub(crate) fn assert_lifecycle_clean(r: &SessionReader) {
    let (lifecycle, violations) = r.lifecycle_at(r.len()).unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    let work = lifecycle.open_work();
    assert!(work.turn.is_none(), "a turn is left open: {work:?}");
    assert!(work.unanswered_calls.is_empty(), "{work:?}");
}

/// Imports one file into a fresh store, returning the store, its session id and the summary.
fn import_one(dir: &Path, file: &Path) -> (Store, String, Summary) {
    let store = Store::open(dir.join("store")).unwrap();
    let summary = import(&store, &[file.to_path_buf()], None);
    assert_eq!(summary.created.len(), 1, "{summary:?}");
    let id = summary.created[0].clone();
    (store, id, summary)
}

/// The acceptance test: every real sample imports (format detected), every event passes the
/// lifecycle rules with nothing left open, and `export --to` gives the file back byte for byte.
#[test]
fn every_sample_imports_and_exports_back_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    for file in samples() {
        let sub = tempfile::tempdir_in(dir.path()).unwrap();
        let (store, id, summary) = import_one(sub.path(), &file);
        let r = reader(&store, &id);
        assert!(summary.total_events() > 0);
        assert_lifecycle_clean(&r);
        let original = std::fs::read(&file).unwrap();
        assert!(
            exported(&r) == original,
            "{} differs after export",
            file.display()
        );
        // Derived histories render for both providers.
        let messages = r.messages().unwrap();
        assert!(!messages.is_empty(), "{}", file.display());
        let openai = agentlog::projection::render_openai(&messages);
        let anthropic = agentlog::projection::render_anthropic(&messages);
        assert!(openai.to_string().contains("\"role\":\"user\""));
        assert!(anthropic.to_string().contains("\"messages\""));
        // Requests the providers accept (their request shapes, every tool call answered).
        provider_schema::check_openai(&openai)
            .unwrap_or_else(|e| panic!("{}: openai: {e}", file.display()));
        provider_schema::check_anthropic(&anthropic)
            .unwrap_or_else(|e| panic!("{}: anthropic: {e}", file.display()));
    }
}

/// Counts tool calls and results per tool name straight from a source file (serde_json), the
/// way a user would check: Codex `function_call` / `custom_tool_call` / `local_shell_call` and
/// their outputs (by call id); Claude Code `tool_use` and `tool_result` blocks of lines that are
/// not sidechains (subagent traffic is not the parent's).
fn direct_counts(file: &Path) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    let mut results: BTreeMap<String, u64> = BTreeMap::new();
    let mut answered = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(p) = v.get("payload").filter(|_| v["type"] == "response_item") {
            let t = p["type"].as_str().unwrap_or("");
            if matches!(t, "function_call" | "custom_tool_call") {
                let name = p["name"].as_str().unwrap().to_owned();
                names.insert(p["call_id"].as_str().unwrap().to_owned(), name.clone());
                *calls.entry(name).or_default() += 1;
            } else if t.ends_with("_output") {
                answered.push(p["call_id"].as_str().unwrap().to_owned());
            }
            continue;
        }
        if v["isSidechain"] == true {
            continue;
        }
        let Some(content) = v["message"]["content"].as_array() else {
            continue;
        };
        for block in content {
            match block["type"].as_str() {
                Some("tool_use") => {
                    let name = block["name"].as_str().unwrap().to_owned();
                    names.insert(block["id"].as_str().unwrap().to_owned(), name.clone());
                    *calls.entry(name).or_default() += 1;
                }
                Some("tool_result") => {
                    answered.push(block["tool_use_id"].as_str().unwrap().to_owned());
                }
                _ => {}
            }
        }
    }
    for id in answered {
        if let Some(name) = names.get(&id) {
            *results.entry(name.clone()).or_default() += 1;
        }
    }
    (calls, results)
}

/// Tool calls and results per tool name in the imported session equal a direct count in the
/// source (synthetic TOOL_OUTCOME_UNKNOWN results the importer adds are not the source's).
#[test]
fn tool_calls_and_results_per_tool_equal_a_direct_count() {
    let dir = tempfile::tempdir().unwrap();
    for file in samples() {
        let sub = tempfile::tempdir_in(dir.path()).unwrap();
        let (store, id, _) = import_one(sub.path(), &file);
        let mut calls: BTreeMap<String, u64> = BTreeMap::new();
        let mut results: BTreeMap<String, u64> = BTreeMap::new();
        for e in events(&reader(&store, &id)) {
            match e.data {
                EventData::ToolCall(c) => *calls.entry(c.name).or_default() += 1,
                EventData::ToolResult(r) => {
                    let synthetic = matches!(&r.error, Opt::Present(e)
                        if e.code == Opt::Present("TOOL_OUTCOME_UNKNOWN".to_string()));
                    if !synthetic {
                        *results.entry(r.message.tool_name).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        let (want_calls, want_results) = direct_counts(&file);
        assert!(!want_calls.is_empty(), "{}", file.display());
        assert_eq!(calls, want_calls, "calls of {}", file.display());
        assert_eq!(results, want_results, "results of {}", file.display());
    }
}

/// Splits a sample after `keep` lines (bytes up to that line's newline).
pub(crate) fn prefix_lines(data: &[u8], keep: usize) -> usize {
    data.iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(keep - 1)
        .map(|(i, _)| i + 1)
        .unwrap()
}

/// A file that grew (an agent still writing it) gets only its new lines on the next import: the
/// events already in the session stay as they were, new ones are appended, the export equals
/// the grown file, and a third import finds nothing new.
#[test]
fn a_file_that_grew_appends_only_the_new_events() {
    let dir = tempfile::tempdir().unwrap();
    for sample in samples() {
        let full = std::fs::read(&sample).unwrap();
        let sub = tempfile::tempdir_in(dir.path()).unwrap();
        let file = sub.path().join(sample.file_name().unwrap());
        let cut = prefix_lines(&full, 9);
        std::fs::write(&file, &full[..cut]).unwrap();
        let (store, id, _) = import_one(sub.path(), &file);
        let before = events(&reader(&store, &id));
        assert!(exported(&reader(&store, &id)) == full[..cut]);

        std::fs::write(&file, &full).unwrap();
        let again = import(&store, std::slice::from_ref(&file), None);
        assert_eq!(again.updated, vec![id.clone()], "{again:?}");
        assert_eq!(
            again.lines,
            full[cut..].iter().filter(|&&b| b == b'\n').count() as u64
        );
        let r = reader(&store, &id);
        let after = events(&r);
        assert!(after.len() > before.len());
        assert_eq!(
            &after[..before.len()],
            &before[..],
            "earlier events changed"
        );
        assert!(exported(&r) == full, "{}", sample.display());
        assert_lifecycle_clean(&r);

        let third = import(&store, std::slice::from_ref(&file), None);
        assert_eq!(third.unchanged, 1);
        assert_eq!(third.total_events(), 0);
        assert_eq!(reader(&store, &id).len(), after.len() as u64);
    }
}

/// A truncated last line (the agents' own crash mode) does not fail the file: the lines before
/// it are imported and the cut is reported; once the line is complete, the next import takes
/// it, and the export is then the whole file.
#[test]
fn a_truncated_last_line_is_imported_up_to_it_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let sample = data_dir().join("claude-code/marot__spotter__short.jsonl");
    let full = std::fs::read(&sample).unwrap();
    let cut = prefix_lines(&full, 6);
    let torn = cut + 40;
    let file = dir
        .path()
        .join("55604662-cf2a-4331-851a-ec234028f8ca.jsonl");
    std::fs::write(&file, &full[..torn]).unwrap();
    let (store, id, summary) = import_one(dir.path(), &file);
    assert_eq!(summary.lines, 6);
    assert!(
        summary.warnings.iter().any(|w| w.contains("incomplete")),
        "{:?}",
        summary.warnings
    );
    assert!(exported(&reader(&store, &id)) == full[..cut]);
    assert_lifecycle_clean(&reader(&store, &id));

    std::fs::write(&file, &full).unwrap();
    let again = import(&store, std::slice::from_ref(&file), None);
    assert_eq!(again.updated, vec![id.clone()]);
    assert!(exported(&reader(&store, &id)) == full);
}

/// A last line without its newline but complete is imported, exported without the newline,
/// and when the file grows its newline is taken and the rest appended.
#[test]
fn a_complete_last_line_without_newline_round_trips_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let sample = data_dir().join("codex/yoavf__ai-sessions__codex-pomodor-timer.jsonl");
    let full = std::fs::read(&sample).unwrap();
    let cut = prefix_lines(&full, 12);
    let file = dir.path().join("rollout.jsonl");
    std::fs::write(&file, &full[..cut - 1]).unwrap();
    let (store, id, summary) = import_one(dir.path(), &file);
    assert_eq!(summary.lines, 12);
    assert!(exported(&reader(&store, &id)) == full[..cut - 1]);
    std::fs::write(&file, &full).unwrap();
    import(&store, std::slice::from_ref(&file), None);
    assert!(exported(&reader(&store, &id)) == full);
}

pub(crate) fn write(dir: &Path, name: &str, lines: &[&str], sep: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let mut text = lines.join(sep);
    text.push_str(sep);
    std::fs::write(&path, text).unwrap();
    path
}

pub(crate) fn types(r: &SessionReader) -> Vec<String> {
    events(r)
        .iter()
        .map(|e| e.data.type_name().to_string())
        .collect()
}

/// A Claude Code tool use without a result at the end of the file breaks the lifecycle rules
/// if kept as is: the importer answers it with TOOL_OUTCOME_UNKNOWN, ends step and turn as
/// docs/events.md §7 does (reason `interrupted`) and reports it.
#[test]
fn an_unanswered_call_is_closed_as_section_7_does_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s1.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"list files"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s1"}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s1"}"#,
        ],
        "\n",
    );
    let (store, id, summary) = import_one(dir.path(), &file);
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    assert!(summary.warnings.iter().any(|w| w.contains("toolu_1")));
    let evs = events(&r);
    let result = evs
        .iter()
        .find_map(|e| match &e.data {
            EventData::ToolResult(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.message.is_error);
    assert!(
        matches!(&result.error, Opt::Present(e) if e.code == Opt::Present("TOOL_OUTCOME_UNKNOWN".into()))
    );
    let end = evs
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnEnd(t) => Some(t.reason.kind),
            _ => None,
        })
        .unwrap();
    assert_eq!(end, agentlog::event::ReasonKind::Interrupted);
}

/// Claude Code: the lines of one API response (one block per line, sharing `message.id`) are
/// one step with one assistant message, its usage counted once; a typed prompt starts a turn;
/// `toolUseResult` is kept as the result's meta.
#[test]
fn claude_code_lines_of_one_response_are_one_step_with_usage_once() {
    let dir = tempfile::tempdir().unwrap();
    let u = r#""usage":{"input_tokens":100,"output_tokens":7,"cache_read_input_tokens":50}"#;
    let lines = [
        r#"{"type":"summary","summary":"Listing","leafUuid":"a3"}"#.to_string(),
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s2"}"#.to_string(),
        format!(r#"{{"parentUuid":"u1","type":"assistant","message":{{"id":"m1","role":"assistant","model":"c","content":[{{"type":"thinking","thinking":"hmm","signature":"sig"}}],{u}}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s2"}}"#),
        format!(r#"{{"parentUuid":"a1","type":"assistant","message":{{"id":"m1","role":"assistant","model":"c","content":[{{"type":"tool_use","id":"t1","name":"Read","input":{{"file_path":"/a"}}}}],{u}}},"uuid":"a2","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"s2"}}"#),
        r#"{"parentUuid":"a2","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"text of a"}]},"toolUseResult":{"type":"text","file":{"filePath":"/a"}},"uuid":"u2","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"s2"}"#.to_string(),
        format!(r#"{{"parentUuid":"u2","type":"assistant","message":{{"id":"m2","role":"assistant","model":"c","content":[{{"type":"text","text":"done"}}],"stop_reason":"end_turn",{u}}},"uuid":"a3","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"s2"}}"#),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "s2.jsonl", &refs, "\n");
    let (store, id, _) = import_one(dir.path(), &file);
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    assert_eq!(
        types(&r),
        [
            "import/line",
            "turn/start",
            "user/message",
            "step/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    let evs = events(&r);
    let usages: Vec<u64> = message_usages(&evs)
        .iter()
        .map(|u| u.input_tokens)
        .collect();
    assert_eq!(usages, [100, 100], "one usage per message.id");
    let meta = evs.iter().find_map(|e| match &e.data {
        EventData::ToolResult(t) => Some(t.meta.clone()),
        _ => None,
    });
    assert!(matches!(meta, Some(Opt::Present(_))));
    assert_eq!(store.info(&id).unwrap().title.as_deref(), Some("Listing"));
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

/// Claude Code compaction: `compact_boundary` then the `isCompactSummary` user line become
/// compact/start, compact/summary, the summary replacing the surface, compact/end; the derived
/// history then starts at the summary.
#[test]
fn claude_code_compaction_becomes_compact_events_with_replace() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s3.jsonl",
        &[
            r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"first"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s3"}"#,
            r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"answer"}],"usage":{"input_tokens":1,"output_tokens":1}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s3"}"#,
            r#"{"parentUuid":null,"logicalParentUuid":"a1","type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"manual","preTokens":9},"uuid":"b1","timestamp":"2025-06-10T12:01:00.000Z","sessionId":"s3"}"#,
            r#"{"parentUuid":"b1","type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued from a previous conversation. Summary: first/answer"},"uuid":"u2","timestamp":"2025-06-10T12:01:01.000Z","sessionId":"s3"}"#,
            r#"{"parentUuid":"u2","type":"user","message":{"role":"user","content":"second"},"uuid":"u3","timestamp":"2025-06-10T12:02:00.000Z","sessionId":"s3"}"#,
        ],
        "\n",
    );
    let (store, id, _) = import_one(dir.path(), &file);
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    let t = types(&r);
    for want in ["compact/start", "compact/summary", "compact/end"] {
        assert_eq!(t.iter().filter(|x| *x == want).count(), 1, "{t:?}");
    }
    let history = r.messages().unwrap().to_value().to_string();
    assert!(!history.contains("\"role\":\"assistant\""), "{history}");
    assert!(history.contains("Summary: first/answer"));
    assert!(history.contains("second"));
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

/// Subagent traffic is never counted in the parent: inline sidechain lines are kept as
/// import/line events of the main session and make a session `<main>-sidechains` of their own
/// (which carries no raw lines: the main session exports them; "Warmup" pairs are noise and
/// make none); a subagent file (`<session>/subagents/agent-*.jsonl`)
/// is a session of its own whose parentSession is the main session.
#[test]
fn subagent_traffic_is_not_the_parents_and_agent_files_link_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("projects/-home-x");
    write(
        &tree,
        "s4.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"go"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s4"}"#,
            r#"{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user","content":"find the config"},"uuid":"w1","timestamp":"2025-06-10T12:00:00.100Z","sessionId":"s4"}"#,
            r#"{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user","content":"Warmup"},"uuid":"v1","timestamp":"2025-06-10T12:00:00.150Z","sessionId":"s4"}"#,
            r#"{"parentUuid":"v1","isSidechain":true,"type":"assistant","message":{"id":"mv","role":"assistant","model":"c","content":[{"type":"tool_use","id":"tv","name":"Read","input":{}}]},"uuid":"v2","timestamp":"2025-06-10T12:00:00.160Z","sessionId":"s4"}"#,
            r#"{"parentUuid":"w1","isSidechain":true,"type":"assistant","message":{"id":"mw","role":"assistant","model":"c","content":[{"type":"tool_use","id":"tw","name":"Glob","input":{}}]},"uuid":"w2","timestamp":"2025-06-10T12:00:00.200Z","sessionId":"s4"}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}]},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s4"}"#,
        ],
        "\n",
    );
    write(
        &tree,
        "s4/subagents/agent-abc.jsonl",
        &[
            r#"{"parentUuid":null,"isSidechain":true,"agentId":"abc","type":"user","message":{"role":"user","content":"find files"},"uuid":"x1","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"s4"}"#,
            r#"{"parentUuid":"x1","isSidechain":true,"agentId":"abc","type":"assistant","message":{"id":"mx","role":"assistant","model":"c","content":[{"type":"tool_use","id":"tx","name":"Grep","input":{"pattern":"a"}}]},"uuid":"x2","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"s4"}"#,
            r#"{"parentUuid":"x2","isSidechain":true,"agentId":"abc","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tx","content":"a.txt"}]},"uuid":"x3","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"s4"}"#,
        ],
        "\n",
    );
    let store = Store::open(dir.path().join("store")).unwrap();
    let summary = import(
        &store,
        &[dir.path().join("projects")],
        Some(Format::ClaudeCode),
    );
    assert_eq!(summary.created.len(), 3, "{summary:?}");
    let main = reader(&store, "claude-s4");
    assert!(!types(&main).iter().any(|t| t == "tool/call"));
    assert_eq!(summary.unmapped.get("sidechain/user"), Some(&1));
    assert_eq!(summary.unmapped.get("sidechain/warmup"), Some(&2));
    // The inline sidechain is a session of its own, linked to the main one.
    let side = store.info("claude-s4-sidechains").unwrap();
    assert_eq!(side.parent_session.as_deref(), Some("claude-s4"));
    let side = reader(&store, "claude-s4-sidechains");
    assert!(types(&side).iter().any(|t| t == "tool/call"));
    assert!(!types(&side).iter().any(|t| t == "import/line"));
    let side_calls: Vec<String> = events(&side)
        .into_iter()
        .filter_map(|e| match e.data {
            EventData::ToolCall(c) => Some(c.name),
            _ => None,
        })
        .collect();
    assert_eq!(side_calls, ["Glob"], "the Warmup pair makes no events");
    let agent = store.info("claude-s4-agent-abc").unwrap();
    assert_eq!(agent.parent_session.as_deref(), Some("claude-s4"));
    let agent = reader(&store, "claude-s4-agent-abc");
    assert_lifecycle_clean(&agent);
    assert!(types(&agent).iter().any(|t| t == "tool/call"));
}

/// The Codex format before rollout items (a meta line, bare response items, `record_type`
/// lines, no timestamps) with CRLF line ends: mapped to a turn with two steps, the function
/// call answered, and exported back byte for byte (the `\r`s too).
#[test]
fn codex_pre_envelope_file_with_crlf_imports_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "rollout-2025-08-01T10-00-00-0198aaaa-0000-7000-8000-000000000001.jsonl",
        &[
            r#"{"id":"0198aaaa-0000-7000-8000-000000000001","timestamp":"2025-08-01T08:00:00.000Z","instructions":null,"git":{"branch":"main"}}"#,
            r#"{"record_type":"state"}"#,
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n<cwd>/tmp</cwd>\n</environment_context>"}]}"#,
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"count lines"}]}"#,
            r#"{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"**Counting**"}],"encrypted_content":"gAAAA"}"#,
            r#"{"type":"function_call","name":"shell","arguments":"{\"command\":[\"wc\",\"-l\",\"a\"]}","call_id":"call_1"}"#,
            r#"{"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"3 a\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"}"#,
            r#"{"record_type":"state"}"#,
            r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"3 lines"}]}"#,
        ],
        "\r\n",
    );
    let (store, id, summary) = import_one(dir.path(), &file);
    assert_eq!(id, "codex-0198aaaa-0000-7000-8000-000000000001");
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    assert_eq!(summary.events.get("step/start"), Some(&2));
    assert_eq!(summary.events.get("turn/start"), Some(&1));
    assert_eq!(summary.events.get("tool/result"), Some(&1));
    let evs = events(&r);
    let call = evs
        .iter()
        .find_map(|e| match &e.data {
            EventData::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(call.arguments, r#"{"command":["wc","-l","a"]}"#);
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

/// A Codex `token_count` line with cumulative totals (`o` also picks its second).
pub(crate) fn codex_token_count(i: u64, c: u64, o: u64) -> String {
    format!(
        r#"{{"timestamp":"2025-10-01T10:00:0{o}.000Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{i},"cached_input_tokens":{c},"output_tokens":{o},"reasoning_output_tokens":0,"total_tokens":{}}},"last_token_usage":null}},"rate_limits":null}}}}"#,
        i + o
    )
}

/// The first lines of a Codex rollout `id`: its `session_meta`, a turn started, the prompt "do it".
pub(crate) fn codex_prelude(id: &str) -> Vec<String> {
    vec![
        format!(r#"{{"timestamp":"2025-10-01T10:00:00.000Z","type":"session_meta","payload":{{"id":"{id}","timestamp":"2025-10-01T10:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.50.0"}}}}"#),
        r#"{"timestamp":"2025-10-01T10:00:00.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"1"}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"do it"}]}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:00.000Z","type":"event_msg","payload":{"type":"user_message","message":"do it"}}"#.to_string(),
    ]
}

/// Codex token counts are cumulative: the usage put on each assistant message is the growth
/// since the last one, so the sums equal the file's final totals (consecutive duplicates add
/// nothing).
#[test]
fn codex_cumulative_token_counts_are_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = codex_prelude("t1");
    lines.extend([
        r#"{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"false\"}","call_id":"c1"}}"#.to_string(),
        codex_token_count(100, 40, 5),
        codex_token_count(100, 40, 5),
        r#"{"timestamp":"2025-10-01T10:00:02.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"\",\"metadata\":{\"exit_code\":1}}"}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"failed"}]}}"#.to_string(),
        codex_token_count(250, 140, 9),
        r#"{"timestamp":"2025-10-01T10:00:04.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"1"}}"#.to_string(),
    ]);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "r.jsonl", &refs, "\n");
    let (store, id, _) = import_one(dir.path(), &file);
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    let evs = events(&r);
    assert_eq!(usage_sums(&evs), (250, 140, 9));
    let failed = evs
        .iter()
        .any(|e| matches!(&e.data, EventData::ToolResult(t) if t.message.is_error));
    assert!(failed, "exit code 1 is a failed tool result");
    let end = evs.iter().rev().find_map(|e| match &e.data {
        EventData::TurnEnd(t) => Some(t.reason.kind),
        _ => None,
    });
    assert_eq!(end, Some(agentlog::event::ReasonKind::Completed));
}

/// The usages of the assistant messages among `evs` that have one, in order.
pub(crate) fn message_usages(evs: &[Event]) -> Vec<&Usage> {
    evs.iter()
        .filter_map(|e| match &e.data {
            EventData::AssistantMessage(m) => match &m.usage {
                Opt::Present(u) => Some(u),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The sums of the usages of a session's assistant messages: (input + cached, cached, output).
fn usage_sums(evs: &[Event]) -> (u64, u64, u64) {
    let (mut input, mut cached, mut output) = (0, 0, 0);
    for u in message_usages(evs) {
        input += u.input_tokens;
        output += u.output_tokens;
        if let Opt::Present(c) = u.cache_read_tokens {
            cached += c;
        }
    }
    (input + cached, cached, output)
}

/// Codex totals that start again from zero (a resumed 0.40 process counts its own): every
/// later message got 0 tokens (the growth past the old, larger totals). The totals before the
/// reset count until then, the new ones from zero, and a reset between two runs of an import
/// (the file growing) counts the same.
#[test]
fn codex_token_totals_that_start_again_from_zero_keep_counting() {
    let dir = tempfile::tempdir().unwrap();
    let answer = |second: u32, text: &str| {
        format!(
            r#"{{"timestamp":"2025-10-01T10:00:0{second}.000Z","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{text}"}}]}}}}"#
        )
    };
    let prompt = |second: u32, text: &str| {
        [
            format!(
                r#"{{"timestamp":"2025-10-01T10:00:0{second}.000Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{text}"}}]}}}}"#
            ),
            format!(
                r#"{{"timestamp":"2025-10-01T10:00:0{second}.000Z","type":"event_msg","payload":{{"type":"user_message","message":"{text}"}}}}"#
            ),
        ]
    };
    let mut lines = codex_prelude("t2");
    lines.extend([
        codex_token_count(1000, 400, 1),
        answer(2, "first"),
        codex_token_count(1500, 600, 3),
    ]);
    let cut = lines.len();
    // The process was restarted: its totals count from zero.
    lines.extend(prompt(4, "again"));
    lines.extend([
        answer(5, "second"),
        codex_token_count(300, 100, 5),
        answer(6, "third"),
        codex_token_count(700, 200, 7),
    ]);
    let want = (1500 + 700, 600 + 200, 3 + 7);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "one/r.jsonl", &refs, "\n");
    let (store, id, _) = import_one(&dir.path().join("one"), &file);
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    assert_eq!(usage_sums(&events(&r)), want);

    // In two runs, cut after the last count before the reset.
    let file = write(dir.path(), "two/r.jsonl", &refs[..cut], "\n");
    let store = Store::open(dir.path().join("two/store")).unwrap();
    import_keep_open(&store, &file, true);
    write(dir.path(), "two/r.jsonl", &refs, "\n");
    let summary = import_keep_open(&store, &file, false);
    let id = summary
        .updated
        .first()
        .cloned()
        .unwrap_or_else(|| summary.created[0].clone());
    assert_eq!(usage_sums(&events(&reader(&store, &id))), want);
}

/// The command line: `import --from auto DIR` prints the ids and a summary, `export --to`
/// writes the source back (compared with the original bytes).
#[test]
fn cli_imports_a_tree_and_exports_the_source_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let bin = env!("CARGO_BIN_EXE_agentlog");
    let out = std::process::Command::new(bin)
        .arg("--store")
        .arg(&store)
        .args(["import", "--from", "auto"])
        .arg(data_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids = String::from_utf8(out.stdout).unwrap();
    assert_eq!(ids.lines().count(), 6);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("6 sessions created"), "{err}");
    assert!(err.contains("events by type"));
    let sample = data_dir().join("claude-code/marot__spotter__short.jsonl");
    let out = std::process::Command::new(bin)
        .arg("--store")
        .arg(&store)
        .args([
            "export",
            "claude-marot__spotter__short",
            "--to",
            "claude-code",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout == std::fs::read(&sample).unwrap());
    let wrong = std::process::Command::new(bin)
        .arg("--store")
        .arg(&store)
        .args(["export", "claude-marot__spotter__short", "--to", "codex"])
        .output()
        .unwrap();
    assert!(!wrong.status.success());
}

/// `import --from` exited 0 when a file could not be imported, and its summary counted what it
/// had not written. A file that fails now counts in `failed` (nothing else of it is counted)
/// and the command exits 1 once the others are imported; a file of a walked directory in
/// neither format is only a warning (a tree may hold other JSONL files).
#[test]
fn files_not_imported_are_counted_and_fail_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("tree/notes.jsonl");
    std::fs::create_dir_all(junk.parent().unwrap()).unwrap();
    std::fs::write(&junk, "{\"note\":1}\n").unwrap();
    let sample = data_dir().join("claude-code/marot__spotter__short.jsonl");
    std::fs::copy(&sample, dir.path().join("tree/short.jsonl")).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentlog"))
            .arg("--store")
            .arg(dir.path().join("store"))
            .args(["import", "--from", "auto", "--json"])
            .args(args)
            .output()
            .unwrap()
    };
    let json = |out: &std::process::Output| {
        agentlog::event::parse_json(std::str::from_utf8(&out.stdout).unwrap().trim()).unwrap()
    };
    // The tree: the junk file is a warning, the transcript is imported.
    let out = run(&[dir.path().join("tree").as_os_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v.get("failed").unwrap().as_u64(), Some(0));
    assert_eq!(v.get("created").unwrap().as_array().unwrap().len(), 1);
    assert!(v
        .get("warnings")
        .unwrap()
        .to_string()
        .contains("notes.jsonl"));
    // Named on the command line, the same file is a failure: exit 1, and nothing of it counted.
    let out = run(&[junk.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v.get("failed").unwrap().as_u64(), Some(1));
    assert_eq!(v.get("events").unwrap().to_string(), "{}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 file not imported"));
    // A session of the file's id that was not imported from it: refused, a failure.
    let other = dir.path().join("elsewhere/short.jsonl");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::copy(&sample, &other).unwrap();
    let out = run(&[other.as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out).get("failed").unwrap().as_u64(), Some(1));
}

/// `--from codex` on a Claude Code transcript (or the other way round) made a session of
/// `import/line` events only: an empty history, exit 0, no word of why. A file whose first line
/// is the other format's is now refused, naming both.
#[test]
fn a_forced_format_that_the_file_is_not_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    for (file, asked) in [
        ("claude-code/marot__spotter__short.jsonl", Format::Codex),
        (
            "codex/yoavf__ai-sessions__codex-pomodor-timer.jsonl",
            Format::ClaudeCode,
        ),
    ] {
        let summary = import(&store, &[data_dir().join(file)], Some(asked));
        assert_eq!(summary.failed, 1, "{summary:?}");
        assert!(summary.created.is_empty());
        let said = summary.warnings.join("\n");
        assert!(
            said.contains(&format!("--from {} given", asked.as_str())),
            "{said}"
        );
    }
    assert!(store.list().unwrap().is_empty());
}

/// `import --from auto --follow`: lines appended to a watched file after the first import are
/// imported by the running command (polled for up to 20 s), and the session then exports as the
/// whole file. The child is killed by its own handle.
#[test]
fn follow_imports_lines_appended_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let watched = dir.path().join("watched");
    std::fs::create_dir_all(&watched).unwrap();
    let sample = data_dir().join("claude-code/marot__spotter__short.jsonl");
    let full = std::fs::read(&sample).unwrap();
    let cut = prefix_lines(&full, 5);
    let file = watched.join("s5.jsonl");
    std::fs::write(&file, &full[..cut]).unwrap();
    let store_dir = dir.path().join("store");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentlog"))
        .arg("--store")
        .arg(&store_dir)
        .args(["import", "--from", "auto", "--follow"])
        .arg(&watched)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let export = || -> Option<Vec<u8>> {
        let store = Store::open(&store_dir).ok()?;
        let r = store.open_reader("claude-s5").ok()?;
        let mut out = Vec::new();
        export_source(&r, &mut out).ok()?;
        Some(out)
    };
    while export().as_deref() != Some(&full[..cut]) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::fs::write(&file, &full).unwrap();
    while export().as_deref() != Some(&full[..]) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        export().as_deref() == Some(&full[..]),
        "the appended lines were not imported"
    );
}

/// Nothing is dropped: a line that is not JSON in the middle of a file and line types of newer
/// versions are kept (as import/line events, counted by kind in the summary, the broken line
/// reported) and exported back; the events around them are mapped as usual.
#[test]
fn lines_not_understood_are_kept_counted_and_exported() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s6.jsonl",
        &[
            r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s6"}"#,
            r#"{"type":"ai-title","title":"Greeting","sessionId":"s6"}"#,
            r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"hello"}]},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s6"}"#,
            r#"{"parentUuid":"a1","type":"user","mess"#,
            r#"{"parentUuid":"a1","type":"attachment","attachment":{"type":"file"},"uuid":"x1","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"s6"}"#,
        ],
        "\n",
    );
    let (store, id, summary) = import_one(dir.path(), &file);
    assert_eq!(summary.unmapped.get("ai-title"), Some(&1));
    assert_eq!(summary.unmapped.get("attachment/file"), Some(&1));
    assert_eq!(summary.unmapped.get("unparsed"), Some(&1));
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains(":4: not a JSON line")),
        "{:?}",
        summary.warnings
    );
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    assert_eq!(summary.events.get("assistant/message"), Some(&1));
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

/// A session that holds events its import state does not account for (a run killed between
/// writing events and recording them, or appends by hand) is not continued: continuing would
/// import the same lines twice. The file that grew is reported, the session left as it was.
#[test]
fn a_session_with_events_past_its_recorded_import_is_not_continued() {
    let dir = tempfile::tempdir().unwrap();
    let sample = data_dir().join("claude-code/marot__spotter__short.jsonl");
    let full = std::fs::read(&sample).unwrap();
    let cut = prefix_lines(&full, 6);
    let file = dir.path().join("s7.jsonl");
    std::fs::write(&file, &full[..cut]).unwrap();
    let (store, id, _) = import_one(dir.path(), &file);
    {
        let session = store.open_session(&id).unwrap();
        session
            .append_draft(
                agentlog::event::parse_draft_line(
                    r#"{"type":"user/message","data":{"role":"user","content":[]}}"#,
                )
                .unwrap(),
            )
            .unwrap();
        session.close().unwrap();
    }
    let len = reader(&store, &id).len();
    std::fs::write(&file, &full).unwrap();
    let again = import(&store, std::slice::from_ref(&file), None);
    assert!(
        again.warnings.iter().any(|w| w.contains("not continued")),
        "{:?}",
        again.warnings
    );
    assert_eq!(reader(&store, &id).len(), len);
}

/// A Claude Code transcript with a rewind, built from the format description: the user went
/// back and edited the second prompt, so the new prompt's `parentUuid` names the first answer,
/// not the last line. Before the fix the abandoned branch (the old prompt, its parallel tool
/// uses and their answer) stayed in the derived history; now the new prompt replaces it on the
/// surface while its events stay in the log, the export is still byte-identical (every line,
/// in file order), and parallel tool uses (two children of one assistant message) are not
/// taken for a rewind. A second rewind, to before the first prompt (`parentUuid: null`),
/// leaves only the last branch.
#[test]
fn claude_code_rewind_leaves_the_abandoned_branch_out_of_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let line = |uuid: &str, parent: Option<&str>, ty: &str, rest: &str| {
        let parent = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
        format!(
            r#"{{"parentUuid":{parent},"isSidechain":false,"type":"{ty}",{rest},"uuid":"{uuid}","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"rw"}}"#
        )
    };
    let prompt = |text: &str| format!(r#""message":{{"role":"user","content":"{text}"}}"#);
    let said = |id: &str, block: &str| {
        format!(
            r#""message":{{"id":"{id}","type":"message","role":"assistant","model":"c","content":[{block}],"usage":{{"input_tokens":3,"output_tokens":2}}}}"#
        )
    };
    let result = |id: &str, text: &str| {
        format!(
            r#""message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":"{text}"}}]}}"#
        )
    };
    let bash = |id: &str| {
        format!(r#"{{"type":"tool_use","id":"{id}","name":"Bash","input":{{"command":"ls"}}}}"#)
    };
    let text = |t: &str| format!(r#"{{"type":"text","text":"{t}"}}"#);
    let lines = [
        line("u1", None, "user", &prompt("first question")),
        line(
            "a1",
            Some("u1"),
            "assistant",
            &said("m1", &text("answer one")),
        ),
        line("u2", Some("a1"), "user", &prompt("old second question")),
        line("a2", Some("u2"), "assistant", &said("m2", &bash("t1"))),
        line("a3", Some("a2"), "assistant", &said("m2", &bash("t2"))),
        // Parallel tool uses: both results are children of the assistant message's lines.
        line("r1", Some("a2"), "user", &result("t1", "old result one")),
        line("r2", Some("a3"), "user", &result("t2", "old result two")),
        line(
            "a4",
            Some("r2"),
            "assistant",
            &said("m3", &text("old branch answer")),
        ),
        line(
            "d1",
            Some("a4"),
            "system",
            r#""subtype":"turn_duration","durationMs":5"#,
        ),
        // The rewind: the edited second prompt continues from the first answer.
        line("u3", Some("a1"), "user", &prompt("edited second question")),
        line(
            "a5",
            Some("u3"),
            "assistant",
            &said("m4", &text("new answer")),
        ),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = write(dir.path(), "rw.jsonl", &refs, "\n");
    let (store, id, _) = import_one(dir.path(), &file);
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    let history = r.messages().unwrap().to_value().to_string();
    for kept in [
        "first question",
        "answer one",
        "edited second question",
        "new answer",
    ] {
        assert!(history.contains(kept), "{kept} missing: {history}");
    }
    for gone in [
        "old second question",
        "old result one",
        "old result two",
        "old branch answer",
    ] {
        assert!(!history.contains(gone), "{gone} kept: {history}");
    }
    // The abandoned branch's calls and results are still in the log (and in the statistics).
    let t = types(&r);
    assert_eq!(t.iter().filter(|x| *x == "tool/result").count(), 2, "{t:?}");
    assert!(exported(&r) == std::fs::read(&file).unwrap());

    // Without the rewind, the parallel tool uses are no rewind: everything is in the history.
    let prefix = write(dir.path(), "pre/rw.jsonl", &refs[..9], "\n");
    let (store2, id2, _) = import_one(&dir.path().join("pre"), &prefix);
    let history = reader(&store2, &id2)
        .messages()
        .unwrap()
        .to_value()
        .to_string();
    for kept in [
        "old second question",
        "old result one",
        "old result two",
        "old branch answer",
    ] {
        assert!(history.contains(kept), "{kept} missing: {history}");
    }

    // A second rewind, to before the first prompt: only the newest branch is left.
    let mut more = lines.to_vec();
    more.push(line("u4", None, "user", &prompt("a new first question")));
    more.push(line(
        "a6",
        Some("u4"),
        "assistant",
        &said("m5", &text("newest answer")),
    ));
    let refs: Vec<&str> = more.iter().map(String::as_str).collect();
    let file = write(dir.path(), "root/rw.jsonl", &refs, "\n");
    let (store3, id3, _) = import_one(&dir.path().join("root"), &file);
    let r = reader(&store3, &id3);
    assert_lifecycle_clean(&r);
    let history = r.messages().unwrap().to_value().to_string();
    assert!(history.contains("a new first question") && history.contains("newest answer"));
    for gone in [
        "\"first question",
        "answer one",
        "edited second question",
        "new answer\"",
    ] {
        assert!(!history.contains(gone), "{gone} kept: {history}");
    }
    assert!(exported(&r) == std::fs::read(&file).unwrap());
}

pub(crate) fn import_keep_open(store: &Store, file: &Path, keep_open: bool) -> Summary {
    import_paths(
        store,
        &[file.to_path_buf()],
        &Options {
            format: None,
            workers: None,
            keep_open,
        },
        |_, _| {},
    )
    .unwrap()
}

fn count(t: &[String], ty: &str) -> usize {
    t.iter().filter(|x| *x == ty).count()
}

/// A Claude Code turn split across runs (the file was imported while the agent was writing it,
/// mid-response and with a call waiting for its result). Before, every run closed what was open
/// at its end: the call got TOOL_OUTCOME_UNKNOWN, the real result of the next run became an
/// `import/line` with a warning, the rest a second turn, the response's second line a second
/// step with its usage counted again. With `keep_open` the first run leaves the turn open and
/// the next one continues it: one turn, one step per response, the call answered by its
/// result; the run without `keep_open` closes the turn at the end, and the export is the file.
/// The response a file just written ends inside is held back (its next line may come); once
/// the file has been quiet for a while (an agent waiting for its tool), it is imported.
#[test]
fn claude_code_turn_split_across_runs_is_continued() {
    let dir = tempfile::tempdir().unwrap();
    let u = r#""usage":{"input_tokens":100,"output_tokens":7}"#;
    let lines = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"read a"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"sp"}"#.to_string(),
        format!(r#"{{"parentUuid":"u1","type":"assistant","message":{{"id":"m1","role":"assistant","model":"c","content":[{{"type":"thinking","thinking":"hmm","signature":"s"}}],{u}}},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"sp"}}"#),
        // The first run ends here, inside response m1.
        format!(r#"{{"parentUuid":"a1","type":"assistant","message":{{"id":"m1","role":"assistant","model":"c","content":[{{"type":"tool_use","id":"t1","name":"Read","input":{{"file_path":"/a"}}}}],{u}}},"uuid":"a2","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"sp"}}"#),
        // The second run ends here: the call waits for its result.
        r#"{"parentUuid":"a2","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"text of a"}]},"uuid":"r1","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"sp"}"#.to_string(),
        format!(r#"{{"parentUuid":"r1","type":"assistant","message":{{"id":"m2","role":"assistant","model":"c","content":[{{"type":"text","text":"done"}}],{u}}},"uuid":"a3","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"sp"}}"#),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let full = format!("{}\n", refs.join("\n"));
    let file = dir.path().join("sp.jsonl");
    let store = Store::open(dir.path().join("store")).unwrap();
    let cut = |n: usize| prefix_lines(full.as_bytes(), n);
    std::fs::write(&file, &full.as_bytes()[..cut(2)]).unwrap();
    let first = import_keep_open(&store, &file, true);
    let id = first.created[0].clone();
    assert_eq!(
        types(&reader(&store, &id)),
        ["turn/start", "user/message"],
        "the response's first line is held back"
    );
    std::fs::write(&file, &full.as_bytes()[..cut(3)]).unwrap();
    let quiet = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(quiet)
        .unwrap();
    let second = import_keep_open(&store, &file, true);
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
    let open = reader(&store, &id).lifecycle().unwrap().open_work();
    assert_eq!(open.unanswered_calls.len(), 1, "the call waits: {open:?}");
    std::fs::write(&file, &full).unwrap();
    let third = import_keep_open(&store, &file, false);
    assert!(third.warnings.is_empty(), "{:?}", third.warnings);
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    let t = types(&r);
    assert_eq!(count(&t, "turn/start"), 1, "{t:?}");
    assert_eq!(count(&t, "step/start"), 2, "one step per response: {t:?}");
    assert_eq!(count(&t, "tool/result"), 1, "{t:?}");
    let evs = events(&r);
    let input: u64 = message_usages(&evs).iter().map(|u| u.input_tokens).sum();
    assert_eq!(input, 200, "usage once per response");
    let failed = evs
        .iter()
        .any(|e| matches!(&e.data, EventData::ToolResult(t) if t.message.is_error));
    assert!(!failed, "the call got its real result");
    assert!(exported(&r) == full.as_bytes());
}

/// A Codex turn split across runs: with `keep_open` it stays one turn, ended `completed` by its
/// `task_complete`; and whether or not the runs close at their end, the cumulative token totals
/// go on from the last run's (before, each run started from zero, so the growth since the
/// previous run's total was counted again and the sums exceeded the file's totals).
#[test]
fn codex_turn_split_across_runs_is_continued_and_totals_go_on() {
    let mut lines = codex_prelude("t2");
    lines.extend([
        r#"{"timestamp":"2025-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"}}"#.to_string(),
        codex_token_count(100, 40, 5),
        // The first run ends here.
        r#"{"timestamp":"2025-10-01T10:00:02.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"a b"}}"#.to_string(),
        r#"{"timestamp":"2025-10-01T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"two files"}]}}"#.to_string(),
        codex_token_count(250, 140, 9),
        r#"{"timestamp":"2025-10-01T10:00:04.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"1"}}"#.to_string(),
    ]);
    let full = format!("{}\n", lines.join("\n"));
    for keep_open in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.jsonl");
        let store = Store::open(dir.path().join("store")).unwrap();
        std::fs::write(&file, &full.as_bytes()[..prefix_lines(full.as_bytes(), 6)]).unwrap();
        let first = import_keep_open(&store, &file, keep_open);
        let id = first.created[0].clone();
        std::fs::write(&file, &full).unwrap();
        let second = import_keep_open(&store, &file, false);
        let r = reader(&store, &id);
        assert_lifecycle_clean(&r);
        let (mut input, mut cached, mut output) = (0, 0, 0);
        for e in events(&r) {
            if let EventData::AssistantMessage(m) = &e.data {
                if let Opt::Present(u) = &m.usage {
                    input += u.input_tokens;
                    output += u.output_tokens;
                    if let Opt::Present(c) = u.cache_read_tokens {
                        cached += c;
                    }
                }
            }
        }
        assert_eq!(
            (input + cached, cached, output),
            (250, 140, 9),
            "keep_open {keep_open}"
        );
        assert!(exported(&r) == full.as_bytes());
        if keep_open {
            assert!(second.warnings.is_empty(), "{:?}", second.warnings);
            let t = types(&r);
            assert_eq!(count(&t, "turn/start"), 1, "{t:?}");
            let ends: Vec<_> = events(&r)
                .iter()
                .filter_map(|e| match &e.data {
                    EventData::TurnEnd(t) => Some(t.reason.kind),
                    _ => None,
                })
                .collect();
            assert_eq!(ends, [agentlog::event::ReasonKind::Completed]);
        }
    }
    // A turn left open is closed by a later run without keep_open, also when the file did not
    // grow (before, an unchanged file was skipped and the turn stayed open).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.jsonl");
    let store = Store::open(dir.path().join("store")).unwrap();
    std::fs::write(&file, &full.as_bytes()[..prefix_lines(full.as_bytes(), 6)]).unwrap();
    let id = import_keep_open(&store, &file, true).created[0].clone();
    assert!(reader(&store, &id)
        .lifecycle()
        .unwrap()
        .open_work()
        .turn
        .is_some());
    let again = import_keep_open(&store, &file, true);
    assert_eq!(again.unchanged, 1, "kept open, nothing new: {again:?}");
    let closing = import_keep_open(&store, &file, false);
    assert_eq!(closing.updated, std::slice::from_ref(&id), "{closing:?}");
    let r = reader(&store, &id);
    assert_lifecycle_clean(&r);
    assert!(exported(&r) == full.as_bytes()[..prefix_lines(full.as_bytes(), 6)]);
}

/// Tokens of a source file counted straight from it (serde_json): a Claude Code file's
/// `usage` once per `message.id` (its last line's; sidechain lines are not the parent's), a
/// Codex rollout's last cumulative `total_token_usage`. Returns (input, output).
fn direct_tokens(file: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut by_id: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut codex = None;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let total = &v["payload"]["info"]["total_token_usage"];
        if v["payload"]["type"] == "token_count" && total.is_object() {
            let n = |k: &str| total[k].as_u64().unwrap_or(0);
            codex = Some((
                n("input_tokens") - n("cached_input_tokens"),
                n("output_tokens"),
            ));
            continue;
        }
        if v["type"] != "assistant" || v["isSidechain"] == true {
            continue;
        }
        let usage = &v["message"]["usage"];
        if let (Some(id), Some(input)) =
            (v["message"]["id"].as_str(), usage["input_tokens"].as_u64())
        {
            let output = usage["output_tokens"].as_u64().unwrap_or(0);
            by_id.insert(id.to_owned(), (input, output));
        }
    }
    codex.unwrap_or_else(|| by_id.values().fold((0, 0), |(i, o), (a, b)| (i + a, o + b)))
}

/// What users of these agents ask `stats` for, on imported sessions: per tool, the calls equal
/// a direct count in the source and the errors equal the source's failed results (Claude Code
/// `is_error`) plus the calls the importer answered with TOOL_OUTCOME_UNKNOWN; the tokens equal
/// the source's (Claude Code usage once per response, Codex's final cumulative totals); and
/// `Store::stats` (`stats --all`) sums the sessions.
#[test]
fn stats_of_imported_sessions_give_tools_failures_and_tokens_of_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut ids = Vec::new();
    for file in samples() {
        let summary = import(&store, std::slice::from_ref(&file), None);
        let main = summary
            .created
            .iter()
            .find(|id| !id.ends_with("-sidechains"))
            .unwrap()
            .clone();
        let r = reader(&store, &main);
        let stats = r.stats().unwrap();
        let (want_calls, _) = direct_counts(&file);
        let calls: BTreeMap<String, u64> = stats
            .tools
            .iter()
            .map(|(k, t)| (k.clone(), t.calls))
            .collect();
        assert_eq!(calls, want_calls, "calls of {}", file.display());
        // Errors per tool: the source's failed results and the importer's synthetic ones.
        let mut want_errors: BTreeMap<String, u64> = BTreeMap::new();
        for e in events(&r) {
            if let EventData::ToolResult(res) = e.data {
                let synthetic = matches!(&res.error, Opt::Present(e)
                    if e.code == Opt::Present("TOOL_OUTCOME_UNKNOWN".to_string()));
                if synthetic {
                    *want_errors.entry(res.message.tool_name).or_default() += 1;
                }
            }
        }
        if file.to_string_lossy().contains("claude-code") {
            let text = std::fs::read_to_string(&file).unwrap();
            let mut names = BTreeMap::new();
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                if v["isSidechain"] == true {
                    continue;
                }
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_use" {
                        names.insert(
                            block["id"].as_str().unwrap().to_owned(),
                            block["name"].as_str().unwrap().to_owned(),
                        );
                    } else if block["type"] == "tool_result" && block["is_error"] == true {
                        let name = &names[block["tool_use_id"].as_str().unwrap()];
                        *want_errors.entry(name.clone()).or_default() += 1;
                    }
                }
            }
            let errors: BTreeMap<String, u64> = stats
                .tools
                .iter()
                .filter(|(_, t)| t.errors > 0)
                .map(|(k, t)| (k.clone(), t.errors))
                .collect();
            assert_eq!(errors, want_errors, "errors of {}", file.display());
        }
        let (input, output) = direct_tokens(&file);
        assert_eq!(
            stats.tokens.output,
            output,
            "output tokens of {}",
            file.display()
        );
        assert_eq!(
            stats.tokens.input,
            input,
            "input tokens of {}",
            file.display()
        );
        ids.extend(summary.created);
    }
    let all = store.stats().unwrap();
    assert_eq!(all.sessions, ids.len() as u64);
    let mut calls = 0;
    for id in &ids {
        calls += reader(&store, id)
            .stats()
            .unwrap()
            .tools
            .values()
            .map(|t| t.calls)
            .sum::<u64>();
    }
    assert_eq!(
        all.total.tools.values().map(|t| t.calls).sum::<u64>(),
        calls
    );
}

/// A new session is built in a hidden folder of the store and renamed into place whole: after
/// an import no hidden folder is left, the session's `session.json` already holds the import
/// state counting every event (one write, no second one after the events), and a hidden folder
/// a killed import left behind (its process gone) is removed by the next import.
#[test]
fn a_new_session_is_renamed_into_place_whole_with_its_import_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let sessions = dir.path().join("sessions");
    // What a killed import leaves: a hidden folder named after a process that is gone.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let leftover = sessions.join(format!(".import~{gone}~x"));
    std::fs::create_dir_all(&leftover).unwrap();
    let file = data_dir().join("claude-code/marot__spotter__short.jsonl");
    let summary = import(&store, std::slice::from_ref(&file), None);
    assert_eq!(summary.created.len(), 1);
    let hidden: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
    let id = &summary.created[0];
    let r = reader(&store, id);
    let meta = std::fs::read_to_string(sessions.join(id).join("session.json")).unwrap();
    assert!(meta.contains(&format!("\"events\":{}", r.len())), "{meta}");
    let lines = std::fs::read(&file)
        .unwrap()
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    assert!(meta.contains(&format!("\"lines\":{lines}")), "{meta}");
    assert_eq!(exported(&r), std::fs::read(&file).unwrap());
}
