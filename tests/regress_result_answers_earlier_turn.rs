//! A `tool/result` whose `callId` (or `sourceEventSeqs[0]`) was also used in an earlier turn was resolved by the projection to the earlier turn's call (docs/events.md §6: a result answers a call of the same turn), so `replay` attributed the result to the wrong call.

mod project_common;

use agentlog::event::ToolContent;
use agentlog::session::replay;
use agentlog::store::{ImportOptions, Store};
use project_common::Log;

/// Audit repro r2: turn 1 leaves `call_0` unanswered (aborted), turn 2 reuses the id.
const R2: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}
{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"step/end","seq":3,"time":3,"data":{"turn":1,"step":1}}
{"type":"turn/end","seq":4,"time":4,"data":{"turn":1,"reason":{"kind":"aborted"}}}
{"type":"turn/start","seq":5,"time":5,"data":{"turn":2}}
{"type":"step/start","seq":6,"time":6,"data":{"turn":2,"step":1}}
{"type":"tool/call","seq":7,"time":7,"data":{"turn":2,"step":1,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"tool/result","seq":8,"time":8,"data":{"turn":2,"step":1,"message":{"role":"tool","toolName":"bash","content":"NEW","isError":false},"callId":"call_0"}}
{"type":"step/end","seq":9,"time":9,"data":{"turn":2,"step":1}}
{"type":"turn/end","seq":10,"time":10,"data":{"turn":2,"reason":{"kind":"completed"}}}
"#;

#[test]
fn replay_attributes_the_result_to_the_call_of_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let id = store
        .import(R2.as_bytes(), ImportOptions::default(), |_| {})
        .unwrap()
        .id;
    let report = replay(&store.reader(&id).unwrap(), None).unwrap();
    let calls: Vec<_> = report.steps.iter().flat_map(|s| &s.calls).collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].call.seq, 2);
    assert_eq!(
        calls[0].call.recorded, None,
        "turn 1's call was never answered"
    );
    assert_eq!(calls[0].call.recorded_seq, None);
    assert_eq!(calls[1].call.seq, 7);
    assert_eq!(calls[1].call.recorded_seq, Some(8));
    assert_eq!(
        calls[1].call.recorded.as_ref().map(|o| &o.content),
        Some(&ToolContent::Text("NEW".into()))
    );
}

/// A turn-1 call left open, a turn-2 call with the same id and name.
fn two_turns() -> (Log, u64, u64) {
    let mut log = Log::new();
    log.turn_start(1);
    log.step_start(1, 1);
    let old = log.tool_call(1, 1, "call_0", "bash");
    log.step_end(1, 1);
    log.turn_start(2);
    log.step_start(2, 1);
    let new = log.tool_call(2, 1, "call_0", "bash");
    (log, old, new)
}

fn projector(log: &Log) -> agentlog::project::Projector {
    let mut p = agentlog::project::Projector::new();
    for e in &log.events {
        p.apply(e).unwrap();
    }
    p
}

#[test]
fn the_projector_resolves_a_call_id_within_the_results_turn() {
    let (mut log, old, new) = two_turns();
    let result = log.make_result(2, 1, "bash", Some("call_0"), None);
    let p = projector(&log);
    let answers = p.call_answered_by(&result).unwrap().map(|c| c.seq);
    assert_eq!(answers, Some(new));
    assert_eq!(p.open_call_of_turn(2, "call_0").map(|c| c.seq), Some(new));
    assert_eq!(p.open_call("call_0").map(|c| c.seq), Some(old));
    let r = log.push(result);
    let p = projector(&log);
    assert_eq!(p.tool_call(new).and_then(|c| c.answered_by), Some(r));
    assert_eq!(p.tool_call(old).and_then(|c| c.answered_by), None);
    let open: Vec<u64> = p.unanswered_calls().map(|c| c.seq).collect();
    assert_eq!(open, [old]);
}

#[test]
fn the_projector_answers_by_source_only_a_call_of_the_results_turn() {
    let (log, old, new) = two_turns();
    let p = projector(&log);
    // sourceEventSeqs[0] names the call of turn 1: its id is the toolUseId, but it answers no
    // call (the session refuses such a result; a projection of a stored log shows it as given).
    let stray = log.make_result(2, 1, "bash", None, Some(&[old]));
    assert_eq!(p.call_answered_by(&stray).unwrap(), None);
    let mine = log.make_result(2, 1, "bash", None, Some(&[new]));
    assert_eq!(p.call_answered_by(&mine).unwrap().map(|c| c.seq), Some(new));
}
