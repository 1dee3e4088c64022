//! Two `tool/call`s with the same `callId` in one turn were refused (a rule "call ids are unique within a turn" that docs/events.md §6 does not have), and a result giving that id resolved to the first call even when it was answered already.

mod session_common;

mod project_common;

use agentlog::event::ReasonKind;
use agentlog::project::Projector;
use agentlog::session::{replay, Rule, SessionStats};
use agentlog::store::{ImportOptions, Store};
use project_common::Log;
use session_common::{d, new_session};

/// Audit repro r7: `call_0` in step 1 and again in step 2 of turn 1, each answered by source.
const R7: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}
{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"tool/result","seq":3,"time":3,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","content":"x","isError":false}},"sourceEventSeqs":[2]}
{"type":"step/end","seq":4,"time":4,"data":{"turn":1,"step":1}}
{"type":"step/start","seq":5,"time":5,"data":{"turn":1,"step":2}}
{"type":"tool/call","seq":6,"time":6,"data":{"turn":1,"step":2,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"tool/result","seq":7,"time":7,"data":{"turn":1,"step":2,"message":{"role":"tool","toolName":"bash","content":"y","isError":false}},"sourceEventSeqs":[6]}
"#;

#[test]
fn import_accepts_a_repeated_call_id_and_projects_both_results() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let id = store
        .import(R7.as_bytes(), ImportOptions::default(), |_| {})
        .unwrap()
        .id;
    let reader = store.reader(&id).unwrap();
    let history = reader.derive_messages().unwrap().to_canonical_string();
    assert_eq!(
        history.matches(r#""toolUseId":"call_0""#).count(),
        2,
        "{history}"
    );
    let report = replay(&reader, None).unwrap();
    let recorded: Vec<_> = report
        .steps
        .iter()
        .flat_map(|s| &s.calls)
        .map(|c| (c.call.seq, c.call.recorded_seq))
        .collect();
    assert_eq!(recorded, [(2, Some(3)), (6, Some(7))]);
}

fn call(id: &str, step: u64) -> String {
    format!(
        r#"{{"type":"tool/call","data":{{"turn":1,"step":{step},"callId":"{id}","name":"bash","arguments":"{{}}"}}}}"#
    )
}

fn result_by_id(id: &str, step: u64, out: &str) -> String {
    format!(
        r#"{{"type":"tool/result","data":{{"turn":1,"step":{step},"message":{{"role":"tool","toolName":"bash","content":"{out}","isError":false}},"callId":"{id}"}}}}"#
    )
}

#[test]
fn a_call_id_answers_the_earliest_unanswered_call_with_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    for json in [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        &call("x", 1),
        &call("x", 1),
        &call("y", 1),
    ] {
        s.append_draft(d(json)).unwrap();
    }
    assert_eq!(
        s.append_draft(d(&result_by_id("x", 1, "one"))).unwrap(),
        Some(5)
    );
    let open: Vec<u64> = s
        .open_work()
        .unanswered_calls
        .iter()
        .map(|c| c.seq)
        .collect();
    assert_eq!(open, [3, 4], "the first x (seq 2) is answered");
    assert_eq!(
        s.append_draft(d(&result_by_id("x", 1, "two"))).unwrap(),
        Some(6)
    );
    let calls = s.lifecycle().calls().to_vec();
    assert_eq!(calls[0].answered_by, Some(5));
    assert_eq!(calls[1].answered_by, Some(6));
    // Both x calls are answered: a third x result would answer one twice.
    let err = s
        .append_draft(d(&result_by_id("x", 1, "three")))
        .unwrap_err();
    assert_eq!(
        err.lifecycle().map(|l| l.rule),
        Some(Rule::AnsweredOnce),
        "{err}"
    );
    assert_eq!(s.len(), 7);
    // The projection agrees, call for call.
    let mut p = Projector::new();
    let r = s.reader();
    for seq in 0..r.len() {
        p.apply(&r.get_owned(seq).unwrap()).unwrap();
    }
    let answered: Vec<Option<u64>> = [2, 3, 4]
        .iter()
        .map(|&seq| p.tool_call(seq).and_then(|c| c.answered_by))
        .collect();
    assert_eq!(answered, [Some(5), Some(6), None]);
    // Statistics find each result's call (two answered bash calls, two latencies).
    let stats: SessionStats = s.reader().stats().unwrap();
    let bash = &stats.tools["bash"];
    assert_eq!((bash.calls, bash.latency.len()), (3, 2));
}

#[test]
fn close_answers_every_unanswered_call_once_even_with_repeated_ids() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    for json in [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        &call("x", 1),
        &call("x", 1),
        &result_by_id("x", 1, "one"),
        &call("x", 1),
        r#"{"type":"step/end","data":{"turn":1,"step":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":2}}"#,
        &call("x", 2),
    ] {
        s.append_draft(d(json)).unwrap();
    }
    let open: Vec<u64> = s
        .open_work()
        .unanswered_calls
        .iter()
        .map(|c| c.seq)
        .collect();
    assert_eq!(open, [3, 5, 8]);
    let appended = s.close_open_work(ReasonKind::Interrupted).unwrap();
    assert_eq!(appended.len(), 5, "three results, step/end, turn/end");
    assert!(s.open_work().is_empty());
    let r = s.reader();
    let calls = r.lifecycle_at(appended[2] + 1).unwrap().0.calls().to_vec();
    let by: Vec<(u64, Option<u64>)> = calls.iter().map(|c| (c.seq, c.answered_by)).collect();
    assert_eq!(
        by,
        [
            (2, Some(4)),
            (3, Some(appended[0])),
            (5, Some(appended[1])),
            (8, Some(appended[2]))
        ]
    );
    let history = s.messages().to_canonical_string();
    assert_eq!(
        history.matches(r#""toolUseId":"x""#).count(),
        4,
        "{history}"
    );
    let (_, violations) = r.lifecycle_at(r.len()).unwrap();
    assert!(violations.is_empty(), "{violations:?}");
}

#[test]
fn the_projector_answers_repeated_ids_in_order_within_a_turn() {
    let mut log = Log::new();
    log.turn_start(1);
    log.step_start(1, 1);
    let a = log.tool_call(1, 1, "x", "bash");
    let b = log.tool_call(1, 1, "x", "bash");
    let r1 = log.result(1, 1, "bash", Some("x"), None);
    let r2 = log.result(1, 1, "bash", Some("x"), None);
    let mut p = Projector::new();
    for e in &log.events {
        p.apply(e).unwrap();
    }
    assert_eq!(p.tool_call(a).and_then(|c| c.answered_by), Some(r1));
    assert_eq!(p.tool_call(b).and_then(|c| c.answered_by), Some(r2));
    assert!(p
        .apply(&log.make_result(1, 1, "bash", Some("x"), None))
        .is_err());
}
