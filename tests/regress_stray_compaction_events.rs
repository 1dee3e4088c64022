//! A `compact/summary` or `compact/end` with no compaction open was refused (a rule "only inside a compaction" that docs/events.md lacks: §6 lets `compact/*` appear anywhere, §3 refuses only a new `compact/start` while one is open).

mod session_common;

use agentlog::event::{parse_draft_line, ReasonKind};
use agentlog::session::{Rule, TurnState};
use agentlog::store::{ImportOptions, Store};
use session_common::{append, new_session};

const R3: &str = "{\"type\":\"compact/end\",\"seq\":0,\"time\":0,\"data\":{\"ok\":false}}\n";
const R3B: &str = "{\"type\":\"user/message\",\"seq\":0,\"time\":0,\"data\":{\"role\":\"user\",\"content\":[]}}\n{\"type\":\"compact/summary\",\"seq\":1,\"time\":1,\"data\":{\"startSeq\":0,\"endSeq\":0,\"summary\":\"s\"}}\n";

#[test]
fn import_accepts_stray_compaction_events_and_exports_them_verbatim() {
    for file in [R3, R3B] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store
            .import(file.as_bytes(), ImportOptions::default(), |_| {})
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .id;
        let reader = store.reader(&id).unwrap();
        let mut out = Vec::new();
        reader.export(&mut out, false, |_| {}).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), file);
        let (lifecycle, violations) = reader.lifecycle_at(reader.len()).unwrap();
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(lifecycle.open_work().compaction, None);
    }
}

const STRAY_END: &str = r#"{"type":"compact/end","data":{"ok":true}}"#;

#[test]
fn a_stray_compact_end_closes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    append(&s, r#"{"type":"turn/start","data":{"turn":1}}"#);
    append(&s, r#"{"type":"step/start","data":{"turn":1,"step":1}}"#);
    append(
        &s,
        r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[]}}}"#,
    );
    append(
        &s,
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}"}}"#,
    );
    append(
        &s,
        r#"{"type":"approval/request","data":{"turn":1,"step":1,"callId":"c","tool":"bash"}}"#,
    );
    let (state, work) = (s.state(), s.open_work());
    assert_eq!(state, TurnState::AwaitUserConfirm);
    // Inside an open step, with a call and an approval waiting: the turn's work is untouched.
    append(&s, STRAY_END);
    append(
        &s,
        r#"{"type":"compact/summary","data":{"startSeq":0,"endSeq":0,"summary":"s"}}"#,
    );
    assert_eq!(s.state(), state);
    assert_eq!(s.open_work(), work);
    // A real compaction, closed twice: the second end closes nothing, and a new one may start.
    let start = append(
        &s,
        r#"{"type":"compact/start","data":{"startSeq":0,"endSeq":0}}"#,
    );
    assert_eq!(s.open_work().compaction, start);
    assert!(start.is_some());
    let err = s
        .append_draft(
            parse_draft_line(r#"{"type":"compact/start","data":{"startSeq":0,"endSeq":0}}"#)
                .unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        err.lifecycle().map(|l| l.rule),
        Some(Rule::OneCompactionAtATime)
    );
    append(&s, STRAY_END);
    append(&s, STRAY_END);
    assert_eq!(s.open_work(), work);
    append(
        &s,
        r#"{"type":"compact/start","data":{"startSeq":0,"endSeq":0}}"#,
    );
    append(&s, STRAY_END);
    // close closes the turn only: no compaction is open, so no compact/end is added.
    let closers = s.close_open_work(ReasonKind::Interrupted).unwrap();
    let r = s.reader();
    let types: Vec<String> = closers
        .iter()
        .map(|&seq| r.get(seq).unwrap().type_name().to_string())
        .collect();
    assert_eq!(types, ["tool/result", "step/end", "turn/end"]);
    assert!(s.open_work().is_empty());
}
