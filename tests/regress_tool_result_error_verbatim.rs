//! A `tool/result`'s `error` (no member list in docs/events.md) was forced into `{code?: string, message?: string}`: its members were reordered on export (not byte-identical) and any other shape (a string, a numeric code) was refused.

use agentlog::event::{parse_draft_line, EventData, Opt, Value};
use agentlog::store::{ImportOptions, Store};

const HEAD: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}
{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"a","name":"bash","arguments":"{}"}}
"#;

fn result(error: &str) -> String {
    format!(
        r#"{{"type":"tool/result","seq":3,"time":3,"data":{{"turn":1,"step":1,"message":{{"role":"tool","toolName":"bash","content":"x","isError":true}},"callId":"a","error":{error},"meta":{{"ms":1}},"z":0}}}}"#
    )
}

#[test]
fn any_error_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for error in [
        // Audit repros r6 and r6b.
        r#"{"message":"exit 1","code":"EXIT"}"#,
        r#""timeout""#,
        r#"{"code":127,"message":"not found"}"#,
        r#"{"x":1,"code":"E"}"#,
        r#"[1,{"b":2,"a":1}]"#,
        "7",
        "true",
        // The shape ErrorInfo stores.
        r#"{"code":"E","message":"m","x":[1.0]}"#,
        r#"{"code":null}"#,
        "{}",
        "null",
    ] {
        let file = format!("{HEAD}{}\n", result(error));
        let id = store
            .import(file.as_bytes(), ImportOptions::default(), |_| {})
            .unwrap_or_else(|e| panic!("{error}: {e}"))
            .id;
        let reader = store.reader(&id).unwrap();
        let mut out = Vec::new();
        reader.export(&mut out, false, |_| {}).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), file, "{error}");
        // Owned (decoded from the archive) and written again: the same line.
        assert_eq!(
            reader.get_owned(3).unwrap().to_canonical_string(),
            result(error),
            "{error}"
        );
        // The projection does not show the error, whatever its shape.
        assert_eq!(reader.derive_messages().unwrap().len(), 1);
    }
}

#[test]
fn a_non_canonical_line_is_written_canonically_with_the_error_in_its_place() {
    let line = r#"{"seq":3,"type":"tool/result","time":3,"data":{"z":0,"error":"timeout","meta":{"ms":1},"callId":"a","step":1,"turn":1,"message":{"role":"tool","toolName":"bash","content":"x","isError":true}}}"#;
    let draft = parse_draft_line(line).unwrap();
    assert_eq!(draft.event.to_canonical_string(), result(r#""timeout""#));
    // In the type: an error ErrorInfo cannot hold is the member "error" of `extra`.
    let EventData::ToolResult(r) = &draft.event.data else {
        panic!("not a tool result")
    };
    assert_eq!(r.error, Opt::Absent);
    assert_eq!(r.extra.get("error"), Some(&Value::String("timeout".into())));
}
