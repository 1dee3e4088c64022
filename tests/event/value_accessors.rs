//! The accessors of an owned `Value` and of its archived form (`ArchivedValue`, read in place)
//! give the same answers, for every kind of value (they are generated once for both).

use agentlog::event::archived::ArchivedEventData;
use agentlog::event::{access_event, encode_event, parse_event_line, AlignedVec, EventData, Value};

/// What every accessor says about one value, as owned data.
#[derive(Debug, PartialEq)]
struct Answers {
    kind: &'static str,
    null: bool,
    bool: Option<bool>,
    number: Option<String>,
    u64: Option<u64>,
    i64: Option<i64>,
    f64: Option<f64>,
    str: Option<String>,
    array: Option<usize>,
    object: Option<usize>,
    member_k: Option<&'static str>,
}

macro_rules! answers {
    ($v:expr) => {{
        let v = $v;
        Answers {
            kind: v.kind(),
            null: v.is_null(),
            bool: v.as_bool(),
            number: v.as_number().map(|n| n.as_str().to_owned()),
            u64: v.as_u64(),
            i64: v.as_i64(),
            f64: v.as_f64(),
            str: v.as_str().map(str::to_owned),
            array: v.as_array().map(|a| a.len()),
            object: v.as_object().map(|m| m.len()),
            member_k: v.get("k").map(|m| m.kind()),
        }
    }};
}

#[test]
fn owned_and_archived_value_accessors_agree() {
    let members = [
        ("null", "null"),
        ("true", "true"),
        ("small", "7"),
        ("negative", "-3"),
        ("fraction", "1.5"),
        ("huge", "1E+400"),
        ("past_u64", "18446744073709551616"),
        ("string", r#""s""#),
        ("array", r#"[1,"a"]"#),
        ("object", r#"{"k":2,"j":null}"#),
    ];
    let extra: Vec<String> = members
        .iter()
        .map(|(k, v)| format!(r#""{k}":{v}"#))
        .collect();
    let line = format!(
        r#"{{"seq":0,"time":0,"type":"tool/call","data":{{"turn":1,"step":1,"callId":"c","name":"n","arguments":"{{}}",{}}}}}"#,
        extra.join(",")
    );
    let event = parse_event_line(&line).unwrap();
    let EventData::ToolCall(owned) = &event.data else {
        panic!("{:?}", event.data)
    };
    let mut buf = AlignedVec::new();
    let start = encode_event(&event, &mut buf).unwrap();
    let archived = access_event(&buf[start..]).unwrap();
    let ArchivedEventData::ToolCall(stored) = &archived.data else {
        panic!("not a tool/call")
    };
    for (key, _) in members {
        let a: &Value = owned.extra.get(key).unwrap();
        let b = stored.extra.get(key).unwrap();
        assert_eq!(answers!(a), answers!(b), "{key}");
    }
    // The answers themselves, for a few (so agreeing on nothing would fail).
    let get = |k| answers!(owned.extra.get(k).unwrap());
    assert_eq!((get("small").u64, get("small").i64), (Some(7), Some(7)));
    assert_eq!((get("negative").u64, get("negative").i64), (None, Some(-3)));
    assert_eq!(get("fraction").f64, Some(1.5));
    assert_eq!(get("huge").f64, None);
    assert_eq!(get("huge").number.as_deref(), Some("1E+400"));
    assert_eq!(get("past_u64").u64, None);
    assert_eq!(get("string").str.as_deref(), Some("s"));
    assert_eq!(get("array").array, Some(2));
    assert_eq!(
        (get("object").object, get("object").member_k),
        (Some(2), Some("a number"))
    );
    assert!(get("null").null && get("true").bool == Some(true));
}
