//! A `turn/end` whose `reason.error` had no `message` was accepted, though docs/events.md §3 gives that `error` as `{code?, message}` (message required); a `tool/result`'s `error` may still lack it.

mod session_common;

use agentlog::event::{
    parse_draft_line, ErrorInfo, EventData, Map, Opt, ParseErrorKind, ReasonKind, TurnEnd,
    TurnEndReason, TurnStart,
};
use agentlog::store::{ImportOptions, Store};
use session_common::new_session;

const TS: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#;

fn import(lines: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let result = store
        .import(lines.as_bytes(), ImportOptions::default(), |_| {})
        .map(|s| s.id)
        .map_err(|e| e.to_string());
    if result.is_err() {
        assert!(store.list().unwrap().is_empty(), "nothing was written");
    }
    result
}

#[test]
fn a_turn_end_error_without_message_is_refused_with_line_and_member() {
    for error in [r#"{"code":"E"}"#, "{}"] {
        let end = format!(
            r#"{{"type":"turn/end","seq":1,"time":1,"data":{{"turn":1,"reason":{{"kind":"error","error":{error}}}}}}}"#
        );
        let err = import(&format!("{TS}\n{end}\n")).unwrap_err();
        let col = end.find(r#""error":{"#).unwrap() + 9;
        assert!(
            err.contains(&format!(
                "line 2, column {col}: missing member data.reason.error.message"
            )),
            "{err}"
        );
        let e = parse_draft_line(&end).unwrap_err();
        assert_eq!(
            e.kind,
            ParseErrorKind::MissingMember {
                path: "data.reason.error.message".into()
            }
        );
    }
    let mistyped = r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":{"message":7}}}}"#;
    let err = import(&format!("{TS}\n{mistyped}\n")).unwrap_err();
    assert!(err.contains("data.reason.error.message"), "{err}");
}

#[test]
fn what_stays_accepted() {
    for end in [
        // message given, with or without code, unknown members kept.
        r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":{"code":"E","message":"m","x":1}}}}"#,
        r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"m"}}}}"#,
        // error absent or null.
        r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":null}}}"#,
    ] {
        let file = format!("{TS}\n{end}\n");
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store
            .import(file.as_bytes(), ImportOptions::default(), |_| {})
            .unwrap_or_else(|e| panic!("{end}: {e}"))
            .id;
        let mut out = Vec::new();
        store
            .reader(&id)
            .unwrap()
            .export(&mut out, false, |_| {})
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), file);
    }
    // A tool/result's error keeps an optional message.
    let result = r#"{"type":"tool/result","seq":3,"time":3,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"t","content":"","isError":true},"callId":"c","error":{"code":"E"}}}"#;
    let file = format!(
        "{TS}\n{}\n{}\n{result}\n",
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"c","name":"t","arguments":"{}"}}"#
    );
    import(&file).unwrap();
}

#[test]
fn a_session_refuses_one_built_in_code() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    s.append(EventData::TurnStart(TurnStart {
        turn: 1,
        extra: Map::new(),
    }))
    .unwrap();
    let end = |message: Opt<String>| {
        EventData::TurnEnd(TurnEnd {
            turn: 1,
            reason: TurnEndReason {
                kind: ReasonKind::Error,
                error: Opt::Present(ErrorInfo {
                    code: Opt::Present("E".into()),
                    message,
                    extra: Map::new(),
                }),
                extra: Map::new(),
            },
            extra: Map::new(),
        })
    };
    let err = s.append(end(Opt::Absent)).unwrap_err();
    assert!(
        err.to_string().contains("reason.error has no message"),
        "{err}"
    );
    assert_eq!(s.len(), 1);
    s.append(end(Opt::Present("boom".into()))).unwrap();
}
