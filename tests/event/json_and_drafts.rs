//! `parse_json` (any JSON value, multi-line errors) and `parse_draft_line` (seq/time optional).

use agentlog::event::{parse_draft_line, parse_json, ParseErrorKind, Value};

#[test]
fn parse_json_keeps_order_and_number_text_for_any_value() {
    let v = parse_json("{\n  \"b\": 1.0,\n  \"a\": [1E+400, \"x\"]\n}\n").unwrap();
    assert_eq!(v.to_string(), r#"{"b":1.0,"a":[1E+400,"x"]}"#);
    assert_eq!(parse_json("[]").unwrap(), Value::Array(vec![]));
    assert_eq!(parse_json(" \"s\" ").unwrap(), Value::String("s".into()));
    assert_eq!(parse_json("\u{feff}null").unwrap(), Value::Null);
}

#[test]
fn parse_json_errors_name_the_line_and_column() {
    let err = parse_json("{\n  \"a\": 1,\n  \"a\": 2\n}").unwrap_err();
    assert_eq!(err.line, 3);
    assert_eq!(err.column, Some(3));
    assert!(
        matches!(err.kind, ParseErrorKind::DuplicateMember { .. }),
        "{err}"
    );
    let err = parse_json("[1, 2] x").unwrap_err();
    assert_eq!((err.line, err.column), (1, Some(8)));
    let err = parse_json("{\"a\": NaN}").unwrap_err();
    assert_eq!(err.line, 1);
}

#[test]
fn draft_lines_may_leave_out_seq_and_time() {
    let d = parse_draft_line(r#"{"type":"turn/start","data":{"turn":1}}"#).unwrap();
    assert_eq!((d.seq, d.time), (None, None));
    assert_eq!(d.event.data.type_name(), "turn/start");
    let d = parse_draft_line(r#"{"type":"turn/start","time":5,"data":{"turn":1}}"#).unwrap();
    assert_eq!((d.seq, d.time), (None, Some(5)));
    let d = parse_draft_line(r#"{"type":"turn/start","seq":7,"data":{"turn":1}}"#).unwrap();
    assert_eq!((d.seq, d.time), (Some(7), None));
    // Everything else is checked as for complete lines.
    let err = parse_draft_line(r#"{"type":"turn/start","data":{"turn":"1"}}"#).unwrap_err();
    assert!(err.to_string().contains("data.turn"), "{err}");
    let err = parse_draft_line(r#"{"type":"turn/start","seq":-1,"data":{"turn":1}}"#).unwrap_err();
    assert!(err.to_string().contains("seq"), "{err}");
}

/// `Event::to_value` (and the archived event's) gives the event as a JSON value: the canonical
/// object, members in order, numbers as written.
#[test]
fn an_event_converts_to_its_json_value() {
    let line = r#"{"type":"tool/call","seq":3,"time":1755000000000,"data":{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"},"x-extra":[1.50,null]}"#;
    let event = agentlog::event::parse_event_line(line).unwrap();
    let v = event.to_value();
    assert_eq!(v.to_string(), event.to_canonical_string());
    let Value::Object(m) = &v else {
        panic!("not an object: {v}")
    };
    assert_eq!(m.get("seq").map(|s| s.to_string()).as_deref(), Some("3"));
    assert_eq!(
        m.get("x-extra").map(|s| s.to_string()).as_deref(),
        Some("[1.50,null]")
    );
}
