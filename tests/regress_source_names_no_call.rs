//! A `tool/result` whose `sourceEventSeqs[0]` names an event that is not a `tool/call` was refused by the session's lifecycle, while the projection fell through to the name rule (docs/events.md §5: "otherwise the earliest unanswered tool/call of the same turn and step with name == toolName"); the two layers disagreed.

mod session_common;

use agentlog::project::Projector;
use agentlog::session::Rule;
use session_common::{d, session, T};

/// The session's projection and a fresh projector over the stored events agree on which call
/// each result answered, and with the session's lifecycle.
fn answered(t: &T) -> Vec<(u64, Option<u64>)> {
    let r = t.s.reader();
    let mut p = Projector::new();
    for seq in 0..r.len() {
        p.apply(&r.get_owned(seq).unwrap()).unwrap();
    }
    let lifecycle: Vec<(u64, Option<u64>)> =
        t.s.lifecycle()
            .calls()
            .iter()
            .map(|c| (c.seq, c.answered_by))
            .collect();
    let projected: Vec<(u64, Option<u64>)> = lifecycle
        .iter()
        .map(|&(seq, _)| (seq, p.tool_call(seq).and_then(|c| c.answered_by)))
        .collect();
    assert_eq!(lifecycle, projected);
    lifecycle
}

fn last_tool_use_id(t: &T) -> String {
    let m = t.s.messages();
    let text = m.get(m.len() - 1).unwrap().to_canonical_string();
    let start = text.find(r#""toolUseId":""#).unwrap() + 13;
    text[start..].split('"').next().unwrap().to_string()
}

fn call(id: &str, name: &str, turn: u64) -> String {
    format!(
        r#"{{"type":"tool/call","data":{{"turn":{turn},"step":1,"callId":"{id}","name":"{name}","arguments":"{{}}"}}}}"#
    )
}

fn result_from(name: &str, turn: u64, src: u64) -> String {
    format!(
        r#"{{"type":"tool/result","data":{{"turn":{turn},"step":1,"message":{{"role":"tool","toolName":"{name}","content":"out","isError":false}}}},"sourceEventSeqs":[{src}]}}"#
    )
}

#[test]
fn a_source_that_is_not_a_call_falls_through_to_the_name_rule() {
    let t = session();
    let turn_start = t.ok(r#"{"type":"turn/start","data":{"turn":1}}"#);
    t.ok(r#"{"type":"step/start","data":{"turn":1,"step":1}}"#);
    let message = t.ok(r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"x"}]}},"sourceEventSeqs":[]}"#);
    let a = t.ok(&call("a", "bash", 1));
    let b = t.ok(&call("b", "bash", 1));
    let c = t.ok(&call("c", "read", 1));
    // Audit repro: sourceEventSeqs[0] names the assistant message: the earliest bash call, a.
    let r1 = t.ok(&result_from("bash", 1, message));
    assert_eq!(last_tool_use_id(&t), "a");
    // Naming the turn/start: on to the name rule again, b.
    let r2 = t.ok(&result_from("bash", 1, turn_start));
    assert_eq!(last_tool_use_id(&t), "b");
    assert_eq!(answered(&t), [(a, Some(r1)), (b, Some(r2)), (c, None)]);
    // No bash call left: refused, and the message says why.
    let msg = t.refused(&result_from("bash", 1, message), Rule::ResultAnswersCall);
    assert!(
        msg.contains(&format!(
            "sourceEventSeqs[0] = {message} names no tool/call"
        )),
        "{msg}"
    );
    // A source naming a call answers that call; an answered one is refused, not passed on to
    // the name rule.
    t.refused(&result_from("read", 1, a), Rule::AnsweredOnce);
    let r3 = t.ok(&result_from("read", 1, c));
    assert_eq!(last_tool_use_id(&t), "c");
    assert_eq!(answered(&t), [(a, Some(r1)), (b, Some(r2)), (c, Some(r3))]);
}

#[test]
fn a_source_naming_a_call_of_another_turn_is_refused_not_passed_on() {
    let t = session();
    t.ok(r#"{"type":"turn/start","data":{"turn":1}}"#);
    t.ok(r#"{"type":"step/start","data":{"turn":1,"step":1}}"#);
    let old = t.ok(&call("old", "bash", 1));
    t.ok(r#"{"type":"step/end","data":{"turn":1,"step":1}}"#);
    t.ok(r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted"}}}"#);
    t.ok(r#"{"type":"turn/start","data":{"turn":2}}"#);
    t.ok(r#"{"type":"step/start","data":{"turn":2,"step":1}}"#);
    let new = t.ok(&call("new", "bash", 2));
    // The call named is of turn 1: §6 refuses it, even though a bash call of turn 2 is open.
    let msg = t.refused(&result_from("bash", 2, old), Rule::ResultAnswersCall);
    assert!(msg.contains("turn 1"), "{msg}");
    // The projection does not answer the turn-1 call with it either.
    let r = t.s.reader();
    let mut p = Projector::new();
    for seq in 0..r.len() {
        p.apply(&r.get_owned(seq).unwrap()).unwrap();
    }
    let stray = agentlog::event::Event {
        seq: r.len(),
        ..d(&result_from("bash", 2, old)).event
    };
    assert_eq!(p.call_answered_by(&stray).unwrap(), None);
    let rn = t.ok(&result_from("bash", 2, new));
    assert_eq!(answered(&t), [(new, Some(rn))]);
}
