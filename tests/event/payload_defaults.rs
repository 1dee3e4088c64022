//! Building payloads in Rust: `Default` and the constructors give exactly the event that the
//! minimal JSON line (required members only) parses to: optional members absent, `extra` empty.

use agentlog::event::{
    parse_event_line, ApprovalDecision, Block, Decision, EventData, ReasonKind, StepStart,
    ToolContent, ToolMessage, ToolResult, TurnEnd, TurnStart, UserMessage,
};

fn data(line: &str) -> EventData {
    parse_event_line(line).unwrap().data
}

#[test]
fn defaults_equal_the_minimal_lines() {
    assert_eq!(
        EventData::TurnStart(TurnStart {
            turn: 1,
            ..Default::default()
        }),
        data(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#)
    );
    assert_eq!(
        EventData::StepStart(StepStart {
            turn: 1,
            step: 2,
            ..Default::default()
        }),
        data(r#"{"type":"step/start","seq":0,"time":1,"data":{"turn":1,"step":2}}"#)
    );
    assert_eq!(
        EventData::UserMessage(UserMessage {
            content: vec![Block::text("Hi")],
            ..Default::default()
        }),
        data(
            r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":[{"type":"text","text":"Hi"}]}}"#
        )
    );
}

#[test]
fn constructors_equal_the_minimal_lines() {
    assert_eq!(
        EventData::TurnEnd(TurnEnd::new(3, ReasonKind::Interrupted)),
        data(
            r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":3,"reason":{"kind":"interrupted"}}}"#
        )
    );
    assert_eq!(
        EventData::ToolResult(ToolResult::new(
            1,
            1,
            ToolMessage::new("sh", ToolContent::Text("ok".into()))
        )),
        data(
            r#"{"type":"tool/result","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"sh","content":"ok","isError":false}}}"#
        )
    );
    assert_eq!(
        EventData::ApprovalDecision(ApprovalDecision::new(1, 1, "c1", Decision::Denied)),
        data(
            r#"{"type":"approval/decision","seq":0,"time":1,"data":{"turn":1,"step":1,"callId":"c1","decision":"denied"}}"#
        )
    );
}
