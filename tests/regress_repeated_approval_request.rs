//! Two `approval/request`s for one call, then one `approval/decision`: the state stayed `awaitUserConfirm` (the decision settled only the first request, even after the result), and `pendingApprovals` listed the call id once per request.

mod session_common;

use agentlog::session::TurnState;
use session_common::{append, new_session};

const HEAD: [&str; 4] = [
    r#"{"type":"turn/start","data":{"turn":1}}"#,
    r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
    r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{}}]}}}"#,
    r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"a","name":"bash","arguments":"{}"}}"#,
];
const REQUEST: &str =
    r#"{"type":"approval/request","data":{"turn":1,"step":1,"callId":"a","tool":"bash"}}"#;
const RETRY: &str = r#"{"type":"approval/request","data":{"turn":1,"step":1,"callId":"a","tool":"bash","reason":"retry"}}"#;
const DECISION: &str =
    r#"{"type":"approval/decision","data":{"turn":1,"step":1,"callId":"a","decision":"approved"}}"#;
const RESULT: &str = r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","content":"ok","isError":false},"callId":"a"}}"#;

#[test]
fn one_decision_settles_every_request_for_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    for json in HEAD.iter().chain(&[REQUEST, RETRY]) {
        append(&s, json);
    }
    // Audit repro r4b: two requests, no decision.
    assert_eq!(s.state(), TurnState::AwaitUserConfirm);
    assert_eq!(
        s.open_work().pending_approvals,
        ["a"],
        "the id is listed once"
    );
    // Audit repro r4: the decision, then the result.
    append(&s, DECISION);
    assert_eq!(s.state(), TurnState::ToolInvoking);
    assert!(s.open_work().pending_approvals.is_empty());
    append(&s, RESULT);
    assert_eq!(s.state(), TurnState::ToolInvoking);
    // A reader replaying the log agrees, at every point.
    let r = s.reader();
    let states: Vec<TurnState> = (4..=8)
        .map(|n| r.lifecycle_at(n).unwrap().0.state())
        .collect();
    assert_eq!(
        states,
        [
            TurnState::ToolInvoking,
            TurnState::AwaitUserConfirm,
            TurnState::AwaitUserConfirm,
            TurnState::ToolInvoking,
            TurnState::ToolInvoking
        ]
    );
}

#[test]
fn a_request_after_the_decision_waits_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    for json in HEAD.iter().chain(&[REQUEST, DECISION, RETRY]) {
        append(&s, json);
    }
    assert_eq!(s.state(), TurnState::AwaitUserConfirm);
    assert_eq!(s.open_work().pending_approvals, ["a"]);
    append(&s, DECISION);
    assert_eq!(s.state(), TurnState::ToolInvoking);
}
