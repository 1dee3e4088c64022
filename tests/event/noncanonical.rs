//! Acceptance 3: valid but non-canonical input comes out canonical. Each case is compared with an
//! expected string written by hand, checked against the input as JSON values with serde_json
//! (up to member order), and exported a second time to check nothing changes.

use agentlog::event::{parse_event_line, parse_jsonl, JsonlWriter};

/// Imports `input` and exports it (with the header, if any).
fn export(input: &[u8]) -> String {
    let (header, events) = parse_jsonl(input).unwrap_or_else(|e| panic!("{e}"));
    let mut w = JsonlWriter::new(Vec::new());
    if let Some(h) = &header {
        w.write_header(h).unwrap();
    }
    for e in &events {
        w.write_event(e).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

/// Checks `input` → `expected`, value equality line by line, and a stable second export.
#[track_caller]
fn check(input: &str, expected: &str) {
    let out = export(input.as_bytes());
    assert_eq!(out, expected);
    assert_eq!(
        export(out.as_bytes()),
        out,
        "a second export changed the text"
    );
    let input_lines: Vec<&str> = input
        .trim_start_matches('\u{feff}')
        .split('\n')
        .filter(|l| !l.is_empty())
        .collect();
    let output_lines: Vec<&str> = out.lines().collect();
    assert_eq!(input_lines.len(), output_lines.len());
    for (a, b) in input_lines.iter().zip(&output_lines) {
        let a: serde_json::Value = serde_json::from_str(a).unwrap();
        let b: serde_json::Value = serde_json::from_str(b).unwrap();
        assert_eq!(a, b, "not the same JSON value");
    }
}

#[test]
fn envelope_member_order_and_whitespace() {
    check(
        " { \"data\" : {\"turn\":1} ,\t\"time\": 5, \"type\":\"turn/start\", \"seq\":0 } \n",
        "{\"type\":\"turn/start\",\"seq\":0,\"time\":5,\"data\":{\"turn\":1}}\n",
    );
}

#[test]
fn nested_member_order_escapes_and_extras() {
    check(
        concat!(
            r#"{"sourceEventSeqs":[ ],"surfaceOp":"append","data":{"envelope":{"z":1,"a":"\u00e9"},"#,
            r#""content":[{"text":"caf\u00e9 \uD83D\uDE80 a\/b \u0009\u001F\u007f\u2028","type":"text","x":null}],"#,
            r#""role":"user"},"time":2,"seq":0,"type":"user/message","extra":true}"#,
            "\n"
        ),
        concat!(
            r#"{"type":"user/message","seq":0,"time":2,"data":{"role":"user","content":[{"type":"text","#,
            "\"text\":\"café 🚀 a/b \\t\\u001f\u{7f}\u{2028}\",\"x\":null}],",
            r#""envelope":{"z":1,"a":"é"}},"surfaceOp":"append","sourceEventSeqs":[],"extra":true}"#,
            "\n"
        ),
    );
}

#[test]
fn open_values_keep_their_order_and_number_text() {
    check(
        concat!(
            r#"{"type":"assistant/message","data":{"usage":{"outputTokens":2,"cacheReadTokens":null,"inputTokens":1},"#,
            r#""message":{"model":"m","content":[{"input":{"b":[1.0,-0,1e-7,-2.5E10],"a":"\t"},"name":"bash","id":"c1","type":"tool_use"},"#,
            r#"{"url":"x","type":"image"}],"role":"assistant"},"step":1,"turn":1},"seq":0,"time":3}"#,
            "\n"
        ),
        concat!(
            r#"{"type":"assistant/message","seq":0,"time":3,"data":{"turn":1,"step":1,"message":{"role":"assistant","#,
            r#""content":[{"type":"tool_use","id":"c1","name":"bash","input":{"b":[1.0,-0,1e-7,-2.5E10],"a":"\t"}},"#,
            r#"{"url":"x","type":"image"}],"model":"m"},"usage":{"inputTokens":1,"outputTokens":2,"cacheReadTokens":null}}}"#,
            "\n"
        ),
    );
}

#[test]
fn reason_error_and_replace_surface_op() {
    check(
        concat!(
            r#"{"type":"turn/end","seq":0,"time":4,"data":{"reason":{"error":{"message":"m","code":"C"},"kind":"error"},"turn":1}}"#,
            "\r\n",
            r#"{"type":"tool/result","seq":1,"time":5,"surfaceOp":{"endSeq":3,"why":"x","startSeq":1,"op":"replace"},"#,
            r#""data":{"meta":{"k":[]},"callId":"c1","message":{"isError":false,"content":[{"content":"ok","isError":true,"#,
            r#""toolName":"bash","toolUseId":"c1","type":"tool_result"}],"toolName":"bash","role":"tool"},"step":1,"turn":1}}"#,
        ),
        concat!(
            r#"{"type":"turn/end","seq":0,"time":4,"data":{"turn":1,"reason":{"kind":"error","error":{"code":"C","message":"m"}}}}"#,
            "\n",
            r#"{"type":"tool/result","seq":1,"time":5,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","#,
            r#""content":[{"type":"tool_result","toolUseId":"c1","toolName":"bash","content":"ok","isError":true}],"isError":false},"#,
            r#""callId":"c1","meta":{"k":[]}},"surfaceOp":{"op":"replace","startSeq":1,"endSeq":3,"why":"x"}}"#,
            "\n"
        ),
    );
}

#[test]
fn header_with_bom_crlf_and_unknown_types() {
    check(
        concat!(
            "\u{feff}",
            r#"{"createdAt":7,"zz":1,"id":"s\/1","type":"session","version":1,"title":null}"#,
            "\r\n",
            r#"{"data":{"b":1,"a":{"y":[true,false,null],"x":"\u00E9"}},"type":"x/y","time":-6,"seq":0}"#,
            "\r\n",
            r#"{"data":{"chunk":{"arguments":"{\"a\":1}","type":"tool-call-delta"},"step":2,"turn":1},"type":"assistant/chunk","time":6,"seq":1}"#,
        ),
        concat!(
            r#"{"type":"session","version":1,"id":"s/1","createdAt":7,"title":null,"zz":1}"#,
            "\n",
            r#"{"type":"x/y","seq":0,"time":-6,"data":{"b":1,"a":{"y":[true,false,null],"x":"é"}}}"#,
            "\n",
            r#"{"type":"assistant/chunk","seq":1,"time":6,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","arguments":"{\"a\":1}"}}}"#,
            "\n"
        ),
    );
}

#[test]
fn audit_and_compaction_types() {
    check(
        concat!(
            r#"{"type":"approval/decision","seq":0,"time":1,"data":{"note":"ok","decision":"denied","callId":"c","step":1,"turn":1,"by":"me"}}"#,
            "\n",
            r#"{"type":"sandbox/event","seq":1,"time":1,"data":{"detail":{"net":false},"kind":"escalate"}}"#,
            "\n",
            r#"{"type":"error","seq":2,"time":1,"data":{"stack":"at x","step":null,"message":"boom"}}"#,
            "\n",
            r#"{"type":"compact/summary","seq":3,"time":1,"data":{"usage":{"inputTokens":1,"reasoningTokens":3,"outputTokens":2},"summary":"s","endSeq":2,"startSeq":0}}"#,
            "\n",
            r#"{"type":"system/message","seq":4,"time":1,"surfaceOp":"append","data":{"content":[{"text":"r","type":"reasoning"}],"role":"system"}}"#,
            "\n",
        ),
        concat!(
            r#"{"type":"approval/decision","seq":0,"time":1,"data":{"turn":1,"step":1,"callId":"c","decision":"denied","by":"me","note":"ok"}}"#,
            "\n",
            r#"{"type":"sandbox/event","seq":1,"time":1,"data":{"kind":"escalate","detail":{"net":false}}}"#,
            "\n",
            r#"{"type":"error","seq":2,"time":1,"data":{"message":"boom","step":null,"stack":"at x"}}"#,
            "\n",
            r#"{"type":"compact/summary","seq":3,"time":1,"data":{"startSeq":0,"endSeq":2,"summary":"s","usage":{"inputTokens":1,"outputTokens":2,"reasoningTokens":3}}}"#,
            "\n",
            r#"{"type":"system/message","seq":4,"time":1,"data":{"role":"system","content":[{"type":"reasoning","text":"r"}]},"surfaceOp":"append"}"#,
            "\n",
        ),
    );
}

#[test]
fn single_lines_parse_the_same_way() {
    let line = r#" {"seq":0,"type":"step/end","data":{"step":2,"turn":1},"time":9} "#;
    let event: agentlog::event::Event = line.parse().unwrap();
    assert_eq!(event, parse_event_line(line).unwrap());
    assert_eq!(
        event.to_canonical_string(),
        r#"{"type":"step/end","seq":0,"time":9,"data":{"turn":1,"step":2}}"#
    );
}

/// A file holding only a UTF-8 BOM was refused as "line 1: blank line", while an empty file is
/// an empty session and a BOM is accepted on the first line (docs/events.md §4): it is empty now.
#[test]
fn a_file_holding_only_a_bom_is_empty() {
    let (header, events) = parse_jsonl(&b"\xEF\xBB\xBF"[..]).unwrap();
    assert!(header.is_none() && events.is_empty());
    // A BOM and a blank line is still a blank line.
    assert!(parse_jsonl(&b"\xEF\xBB\xBF\n"[..]).is_err());
}
