//! A million mixed events of every type, stored by the engine as rkyv archives across many
//! segments: every `get(seq)` gives back, zero-copy, exactly the event that was appended.

use agentlog::event::{access_event, decode_event, encode_event, parse_event_line, Event};
use agentlog::log::{Log, LogReader, Options};
use rkyv::util::AlignedVec;

/// One line per event type (and an unknown type), with optional members, nulls, unknown members,
/// odd strings and numbers; `{seq}` and `{n}` are filled in per event.
const TEMPLATES: &[&str] = &[
    r#"{"type":"turn/start","seq":{seq},"time":{t},"data":{"turn":{n}}}"#,
    r#"{"type":"step/start","seq":{seq},"time":{t},"data":{"turn":{n},"step":1,"request":{"model":"m","temperature":0.7,"maxTokens":8192}}}"#,
    r#"{"type":"user/message","seq":{seq},"time":{t},"data":{"role":"user","content":[{"type":"text","text":"fix it {n} \u0001 🚀 \"q\" \\"}],"envelope":{"source":"inbox"}},"surfaceOp":"append","sourceEventSeqs":[]}"#,
    r#"{"type":"assistant/chunk","seq":{seq},"time":{t},"data":{"turn":{n},"step":1,"chunk":{"type":"tool-call-delta","id":null,"arguments":"{\"x\":{n}}"}}}"#,
    r#"{"type":"assistant/message","seq":{seq},"time":{t},"data":{"turn":{n},"step":1,"message":{"role":"assistant","content":[{"type":"reasoning","text":"hm"},{"type":"tool_use","id":"c{n}","name":"bash","input":{"cmd":"ls","big":18446744073709551616,"f":1E+400}}],"provider":"deepseek"},"usage":{"inputTokens":{n},"outputTokens":3,"cacheReadTokens":null}},"surfaceOp":"append","sourceEventSeqs":[1,2]}"#,
    r#"{"type":"tool/call","seq":{seq},"time":{t},"data":{"turn":{n},"step":1,"callId":"c{n}","name":"bash","arguments":"{\"cmd\":\"ls\"}"}}"#,
    r#"{"type":"tool/result","seq":{seq},"time":{t},"data":{"turn":{n},"step":1,"message":{"role":"tool","toolName":"bash","content":[{"type":"text","text":"out {n}"},{"type":"image","url":"x"}],"isError":true},"callId":"c{n}","error":{"code":"EXIT_1","message":"failed"},"meta":{"durationMs":12}},"surfaceOp":{"op":"replace","startSeq":1,"endSeq":2,"note":true},"x-extra":[1.0]}"#,
    r#"{"type":"system/message","seq":{seq},"time":{t},"data":{"role":"system","content":[{"type":"text","text":"be careful"}]}}"#,
    r#"{"type":"approval/request","seq":{seq},"time":{t},"data":{"turn":{n},"step":1,"callId":"c{n}","tool":"bash","reason":"writes"}}"#,
    r#"{"type":"approval/decision","seq":{seq},"time":{t},"data":{"turn":{n},"step":1,"callId":"c{n}","decision":"denied","by":"user","note":null}}"#,
    r#"{"type":"sandbox/event","seq":{seq},"time":{t},"data":{"kind":"start","turn":{n},"detail":{"image":"debian"}}}"#,
    r#"{"type":"error","seq":{seq},"time":{t},"data":{"message":"transient","turn":{n},"step":1,"stack":"at x"}}"#,
    r#"{"type":"compact/start","seq":{seq},"time":{t},"data":{"startSeq":0,"endSeq":{n}}}"#,
    r#"{"type":"compact/summary","seq":{seq},"time":{t},"data":{"startSeq":0,"endSeq":{n},"summary":"s","usage":{"inputTokens":1,"outputTokens":2}}}"#,
    r#"{"type":"compact/end","seq":{seq},"time":{t},"data":{"ok":false}}"#,
    r#"{"type":"step/end","seq":{seq},"time":{t},"data":{"turn":{n},"step":1}}"#,
    r#"{"type":"turn/end","seq":{seq},"time":{t},"data":{"turn":{n},"reason":{"kind":"error","error":{"code":"E","message":"m"}}}}"#,
    r#"{"type":"hook/invoked","seq":{seq},"time":{t},"data":{"hook":"pre-step","ms":3},"ignorable":true}"#,
];

fn line(seq: u64) -> String {
    TEMPLATES[(seq % TEMPLATES.len() as u64) as usize]
        .replace("{seq}", &seq.to_string())
        .replace("{t}", &(1_755_000_000_000 + seq as i64 * 7).to_string())
        .replace("{n}", &(seq / 7).to_string())
}

fn event(seq: u64) -> Event {
    parse_event_line(&line(seq)).unwrap_or_else(|e| panic!("seq {seq}: {e}"))
}

#[test]
fn a_million_mixed_events_round_trip_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1_000_000u64;
    let opts = Options::default().segment_size(8 << 20);
    let log = Log::open(dir.path(), opts.clone()).unwrap();
    let mut buf = AlignedVec::new();
    for seq in 0..n {
        buf.clear();
        let start = encode_event(&event(seq), &mut buf).unwrap();
        assert_eq!(log.append(&buf[start..]).unwrap(), seq);
    }
    log.close().unwrap();
    let reader = LogReader::open(dir.path()).unwrap();
    assert_eq!(reader.len(), n);
    assert!(reader.segment_files().len() > 10, "many segments");
    // Every get gives the same event back, as an archived view and as an owned copy.
    let mut text = Vec::new();
    for seq in 0..n {
        let rec = reader.get(seq).unwrap();
        let archived = access_event(rec.payload).unwrap();
        assert_eq!(archived.seq(), seq);
        text.clear();
        archived.write_canonical(&mut text);
        assert_eq!(std::str::from_utf8(&text).unwrap(), line(seq), "seq {seq}");
        if seq % 1009 == 0 {
            assert_eq!(decode_event(archived).unwrap(), event(seq));
        }
    }
}
