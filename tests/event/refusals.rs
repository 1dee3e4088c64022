//! Acceptance 4: one test per refusal reason, each checking the line, the column (where the
//! error has a place) and the kind. Plus the spellings import must accept.

use agentlog::event::{parse_event_line, parse_jsonl, ParseError, ParseErrorKind, MAX_DEPTH};

const TURN: &str = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#;

/// Parses `input` as a JSONL file and returns the refusal.
fn refuse(input: impl AsRef<[u8]>) -> ParseError {
    match parse_jsonl(input.as_ref()) {
        Ok(parsed) => panic!("accepted: {parsed:?}"),
        Err(e) => e,
    }
}

/// A one-event file whose only line is `line`: returns the refusal.
fn refuse_line(line: &str) -> ParseError {
    refuse(format!("{line}\n"))
}

/// The 1-based character column of the first `needle` in `line`.
fn col(line: &str, needle: &str) -> u64 {
    let at = line
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in {line:?}"));
    line[..at].chars().count() as u64 + 1
}

#[track_caller]
fn assert_at(e: &ParseError, line: u64, column: Option<u64>) {
    assert_eq!((e.line, e.column), (line, column), "{e}");
}

#[track_caller]
fn assert_mistyped(e: &ParseError, path: &str, expected: &str, found: &str) {
    match &e.kind {
        ParseErrorKind::MistypedMember {
            path: p,
            expected: x,
            found: f,
        } => assert_eq!((p.as_str(), *x, f.as_str()), (path, expected, found), "{e}"),
        other => panic!("expected MistypedMember, got {other:?} ({e})"),
    }
}

#[test]
fn invalid_json_names_the_column_and_what_was_expected() {
    let cases: &[(&str, &str, &str)] = &[
        // (line, marker of the error column, expected)
        (r#"{"type" "x"}"#, r#""x""#, "':'"),
        (r#"{"type":"x",}"#, "}", "a member name in double quotes"),
        (r#"{"type":"x" "seq":1}"#, r#""seq"#, "',' or '}'"),
        (r#"{"a":[1 2]}"#, "2", "',' or ']'"),
        (r#"{"a":tru}"#, "tru", "a JSON value"),
        (r#"{"a":'x'}"#, "'x'", "a JSON value"),
        (r#"{"a":01}"#, "1}", "',' or '}'"),
        (r#"{"a":1.}"#, "}", "a digit"),
        (r#"{"a":-}"#, "}", "a digit"),
        (r#"{"a":1e+}"#, "}", "a digit"),
        (
            r#"{"a":"\x"}"#,
            r#"x""#,
            "an escape ('\"', '\\', '/', 'b', 'f', 'n', 'r', 't' or 'u')",
        ),
        (r#"{"a":"\u12G4"}"#, r#"G"#, "a hex digit"),
    ];
    for &(line, marker, expected) in cases {
        let e = refuse_line(line);
        assert_at(&e, 1, Some(col(line, marker)));
        match &e.kind {
            ParseErrorKind::Syntax { expected: x, .. } => assert_eq!(*x, expected, "{line}: {e}"),
            other => panic!("{line}: expected Syntax, got {other:?}"),
        }
    }
    // An unterminated string or object: the column is the end of the line.
    let line = r#"{"a":"open"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(line.chars().count() as u64 + 1));
    assert!(matches!(&e.kind, ParseErrorKind::Syntax { found, .. } if found == "end of line"));
    let e = refuse_line(r#"{"a":1"#);
    assert_at(&e, 1, Some(7));
    assert_eq!(
        e.to_string(),
        "line 1, column 7: expected ',' or '}', found end of line"
    );
}

#[test]
fn invalid_json_on_a_later_line_names_that_line() {
    let e = refuse(format!("{TURN}\n{{\"type\":}}\n"));
    assert_at(&e, 2, Some(9));
    assert!(matches!(e.kind, ParseErrorKind::Syntax { .. }));
}

#[test]
fn blank_lines_are_refused() {
    let e = refuse(format!("{TURN}\n\n"));
    assert_at(&e, 2, None);
    assert_eq!(e.kind, ParseErrorKind::BlankLine);
    let e = refuse(format!("\n{TURN}\n"));
    assert_at(&e, 1, None);
    assert_eq!(e.kind, ParseErrorKind::BlankLine);
    let e = refuse(format!("{TURN}\n  \t\r\n"));
    assert_at(&e, 2, None);
    assert_eq!(e.kind, ParseErrorKind::BlankLine);
    let e = refuse(format!("{TURN}\r\n\r\n"));
    assert_at(&e, 2, None);
    assert_eq!(e.kind, ParseErrorKind::BlankLine);
}

#[test]
fn trailing_text_after_the_object_is_refused() {
    let line = format!("{TURN} x");
    let e = refuse_line(&line);
    assert_at(&e, 1, Some(col(&line, " x") + 1));
    assert_eq!(e.kind, ParseErrorKind::TrailingCharacters);
    let line = format!("{TURN}{TURN}");
    let e = refuse_line(&line);
    assert_at(&e, 1, Some(TURN.len() as u64 + 1));
    assert_eq!(e.kind, ParseErrorKind::TrailingCharacters);
}

#[test]
fn lines_that_are_not_objects_are_refused() {
    for (line, found) in [
        ("[1,2]", "an array"),
        ("\"text\"", "a string"),
        ("42", "a number"),
        ("null", "null"),
        ("  true", "a boolean"),
    ] {
        let e = refuse_line(line);
        assert_at(&e, 1, Some(col(line, line.trim_start())));
        assert_eq!(e.kind, ParseErrorKind::NotAnObject { found }, "{line}");
    }
}

#[test]
fn duplicate_member_names_are_refused_at_any_depth() {
    let line = r#"{"type":"turn/start","seq":0,"seq":0,"time":1,"data":{"turn":1}}"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(col(line, r#""seq":0,"time"#)));
    assert_eq!(
        e.kind,
        ParseErrorKind::DuplicateMember { name: "seq".into() }
    );
    assert_eq!(e.to_string(), "line 1, column 30: duplicate member \"seq\"");

    let line = r#"{"type":"x/y","seq":0,"time":1,"data":{"a":[{"k":1,"é":2,"é":3}]}}"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(col(line, r#""é":3"#)));
    assert_eq!(e.kind, ParseErrorKind::DuplicateMember { name: "é".into() });

    // Names compare after unescaping.
    let line = r#"{"type":"x/y","seq":0,"time":1,"data":{"a":1,"\u0061":2}}"#;
    let e = refuse_line(line);
    assert_eq!(e.kind, ParseErrorKind::DuplicateMember { name: "a".into() });
    assert_at(&e, 1, Some(col(line, r#""\u0061""#)));

    // A big object (checked by sorting) reports the first repeat in reading order.
    let mut members: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    members.push("\"k30\":0".into());
    members.push("\"k5\":0".into());
    let line = format!(
        r#"{{"type":"x/y","seq":0,"time":1,"data":{{{}}}}}"#,
        members.join(",")
    );
    let e = refuse_line(&line);
    assert_eq!(
        e.kind,
        ParseErrorKind::DuplicateMember { name: "k30".into() }
    );
    assert_at(&e, 1, Some(col(&line, "\"k30\":0")));
}

#[test]
fn nan_and_infinities_are_refused_with_their_own_message() {
    for literal in ["NaN", "Infinity", "-Infinity"] {
        let line = format!(r#"{{"type":"x/y","seq":0,"time":1,"data":{{"v":{literal}}}}}"#);
        let e = refuse_line(&line);
        assert_at(&e, 1, Some(col(&line, literal)));
        assert_eq!(e.kind, ParseErrorKind::NonFiniteNumber { literal });
        assert!(e.to_string().contains("not a JSON number"), "{e}");
    }
}

#[test]
fn lone_surrogates_are_refused() {
    for (escape, unit) in [
        (r#"\uD83D"#, 0xD83D),
        (r#"\uDE80"#, 0xDE80),
        (r#"\uD83Dx"#, 0xD83D),
        (r#"\uD83D\u0041"#, 0xD83D),
        (r#"\uD83D\uD83D"#, 0xD83D),
    ] {
        let line = format!(r#"{{"type":"x/y","seq":0,"time":1,"data":{{"v":"a{escape}"}}}}"#);
        let e = refuse_line(&line);
        assert_at(&e, 1, Some(col(&line, r"\u")));
        assert_eq!(
            e.kind,
            ParseErrorKind::LoneSurrogate { code_unit: unit },
            "{line}"
        );
    }
}

#[test]
fn unescaped_control_characters_in_strings_are_refused() {
    for code in [0x00u8, 0x01, 0x09, 0x1F] {
        let c = char::from(code);
        let line =
            format!("{{\"type\":\"x/y\",\"seq\":0,\"time\":1,\"data\":{{\"v\":\"a{c}b\"}}}}");
        let e = refuse_line(&line);
        assert_at(&e, 1, Some(col(&line, &format!("{c}b"))));
        assert_eq!(e.kind, ParseErrorKind::ControlCharacter { code });
    }
    // Also in a member name, and after an escape.
    let line = "{\"type\":\"x/y\",\"seq\":0,\"time\":1,\"data\":{\"k\u{1}\":1}}";
    assert_eq!(
        refuse_line(line).kind,
        ParseErrorKind::ControlCharacter { code: 1 }
    );
    let line = "{\"type\":\"x/y\",\"seq\":0,\"time\":1,\"data\":{\"v\":\"\\n\t\"}}";
    let e = refuse_line(line);
    assert_eq!(e.kind, ParseErrorKind::ControlCharacter { code: 9 });
    assert_at(&e, 1, Some(col(line, "\t")));
}

/// An unknown event whose data holds `depth - 2` nested arrays, so the line nests `depth` deep.
fn nested_line(depth: usize) -> String {
    let inner = depth - 2;
    format!(
        r#"{{"type":"x/y","seq":0,"time":1,"data":{{"v":{}{}}}}}"#,
        "[".repeat(inner),
        "]".repeat(inner)
    )
}

#[test]
fn nesting_deeper_than_the_limit_is_refused() {
    assert_eq!(MAX_DEPTH, 128);
    parse_event_line(&nested_line(MAX_DEPTH)).unwrap();
    let line = nested_line(MAX_DEPTH + 1);
    let e = refuse_line(&line);
    assert_eq!(e.kind, ParseErrorKind::TooDeep { limit: 128 });
    // the 129th opening bracket: the data object is level 2, arrays start at level 3
    assert_at(&e, 1, Some(col(&line, "[") + 126));
    assert!(e.to_string().contains("deeper than 128"), "{e}");
    // far deeper input fails the same way, without exhausting the stack
    let e = refuse_line(&nested_line(1_000_000));
    assert_eq!(e.kind, ParseErrorKind::TooDeep { limit: 128 });
}

#[test]
fn missing_members_are_named_by_path() {
    let cases: &[(&str, &str, &str)] = &[
        // (line, path, marker of the object that lacks the member)
        (r#"{"seq":0,"time":1,"data":{}}"#, "type", r#"{"seq"#),
        (
            r#"{"type":"turn/start","time":1,"data":{"turn":1}}"#,
            "seq",
            r#"{"type"#,
        ),
        (
            r#"{"type":"turn/start","seq":0,"data":{"turn":1}}"#,
            "time",
            r#"{"type"#,
        ),
        (r#"{"type":"x/y","seq":0,"time":1}"#, "data", r#"{"type"#),
        (
            r#"{"type":"turn/start","seq":0,"time":1,"data":{}}"#,
            "data.turn",
            "{}",
        ),
        (
            r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"x":1}}}"#,
            "data.reason.kind",
            r#"{"x""#,
        ),
        (
            r#"{"type":"user/message","seq":0,"time":1,"data":{"content":[]}}"#,
            "data.role",
            r#"{"content"#,
        ),
        (
            r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":[{"text":"a"}]}}"#,
            "data.content[0].type",
            r#"{"text"#,
        ),
        (
            r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":[{"type":"text"}]}}"#,
            "data.content[0].text",
            r#"{"type":"text"#,
        ),
        (
            r#"{"type":"tool/result","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"t","content":"x"}}}"#,
            "data.message.isError",
            r#"{"role"#,
        ),
    ];
    for &(line, path, marker) in cases {
        let e = refuse_line(line);
        assert_eq!(
            e.kind,
            ParseErrorKind::MissingMember { path: path.into() },
            "{line}"
        );
        assert_at(&e, 1, Some(col(line, marker)));
    }
    let line = cases[5].0;
    assert_eq!(
        refuse_line(line).to_string(),
        format!(
            "line 1, column {}: missing member data.reason.kind",
            col(line, r#"{"x""#)
        )
    );
}

#[test]
fn mistyped_members_say_path_expected_and_found() {
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        // (line, marker of the value, path, expected, found)
        (
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":"1"}}"#,
            r#""1""#,
            "data.turn",
            "an unsigned integer",
            "a string",
        ),
        (
            r#"{"type":"turn/start","seq":-1,"time":1,"data":{"turn":1}}"#,
            "-1",
            "seq",
            "an unsigned integer",
            "the number -1",
        ),
        (
            r#"{"type":"turn/start","seq":18446744073709551616,"time":1,"data":{"turn":1}}"#,
            "18446744073709551616",
            "seq",
            "an unsigned integer",
            "the number 18446744073709551616",
        ),
        (
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1.0}}"#,
            "1.0",
            "data.turn",
            "an unsigned integer",
            "the number 1.0",
        ),
        (
            r#"{"type":"turn/start","seq":0,"time":1e3,"data":{"turn":1}}"#,
            "1e3",
            "time",
            "an integer",
            "the number 1e3",
        ),
        (
            r#"{"type":"turn/start","seq":0,"time":-0.0,"data":{"turn":1}}"#,
            "-0.0",
            "time",
            "an integer",
            "the number -0.0",
        ),
        (
            r#"{"type":"turn/start","seq":0,"time":9223372036854775808,"data":{"turn":1}}"#,
            "9223372036854775808",
            "time",
            "an integer",
            "the number 9223372036854775808",
        ),
        (
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":null}}"#,
            "null",
            "data.turn",
            "an unsigned integer",
            "null",
        ),
        (
            r#"{"type":17,"seq":0,"time":1,"data":{}}"#,
            "17",
            "type",
            "a string",
            "the number 17",
        ),
        (
            r#"{"type":"x/y","seq":0,"time":1,"data":[]}"#,
            "[]",
            "data",
            "an object",
            "an array",
        ),
        (
            r#"{"type":"x/y","seq":0,"time":1,"data":{},"sourceEventSeqs":[0,"1"]}"#,
            r#""1""#,
            "sourceEventSeqs[1]",
            "an unsigned integer",
            "a string",
        ),
        (
            r#"{"type":"x/y","seq":0,"time":1,"data":{},"sourceEventSeqs":null}"#,
            "null",
            "sourceEventSeqs",
            "an array",
            "null",
        ),
        (
            r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":"hi"}}"#,
            r#""hi""#,
            "data.content",
            "an array",
            "a string",
        ),
        (
            r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":[{"type":3}]}}"#,
            "3",
            "data.content[0].type",
            "a string",
            "the number 3",
        ),
        (
            r#"{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":false}}}"#,
            "false",
            "data.chunk.text",
            "a string",
            "a boolean",
        ),
        (
            r#"{"type":"tool/result","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"t","content":5,"isError":false}}}"#,
            "5",
            "data.message.content",
            "a string or an array of blocks",
            "the number 5",
        ),
        (
            r#"{"type":"step/start","seq":0,"time":1,"data":{"turn":1,"step":1,"request":"fast"}}"#,
            r#""fast""#,
            "data.request",
            "an object",
            "a string",
        ),
        (
            r#"{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[]},"usage":{"inputTokens":1,"outputTokens":"2"}}}"#,
            r#""2""#,
            "data.usage.outputTokens",
            "an unsigned integer",
            "a string",
        ),
    ];
    for &(line, marker, path, expected, found) in cases {
        let e = refuse_line(line);
        assert_mistyped(&e, path, expected, found);
        assert_at(&e, 1, Some(col(line, marker)));
    }
    let line = cases[0].0;
    assert_eq!(
        refuse_line(line).to_string(),
        format!(
            "line 1, column {}: data.turn: expected an unsigned integer, found a string",
            col(line, r#""1""#)
        )
    );
}

#[test]
fn wrong_roles_are_refused() {
    let line =
        r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"assistant","content":[]}}"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(col(line, r#""assistant""#)));
    assert_eq!(
        e.kind,
        ParseErrorKind::WrongConstant {
            path: "data.role".into(),
            expected: "user",
            found: "assistant".into()
        }
    );
    assert!(e.to_string().contains("data.role must be \"user\""), "{e}");
    let line = r#"{"type":"tool/result","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"role":"user","toolName":"t","content":"","isError":false}}}"#;
    assert!(matches!(
        refuse_line(line).kind,
        ParseErrorKind::WrongConstant {
            expected: "tool",
            ..
        }
    ));
}

#[test]
fn unknown_enum_values_name_the_value_and_the_allowed_ones() {
    let line =
        r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"exploded"}}}"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(col(line, r#""exploded""#)));
    assert_eq!(
        e.kind,
        ParseErrorKind::UnknownEnumValue {
            path: "data.reason.kind".into(),
            value: "exploded".into(),
            allowed: &[
                "completed",
                "aborted",
                "blocked",
                "error",
                "max-tokens",
                "interrupted"
            ],
        }
    );
    assert!(e
        .to_string()
        .ends_with("data.reason.kind: unknown value \"exploded\", expected one of \"completed\", \"aborted\", \"blocked\", \"error\", \"max-tokens\", \"interrupted\""));

    let line = r#"{"type":"approval/decision","seq":0,"time":1,"data":{"turn":1,"step":1,"callId":"c","decision":"maybe"}}"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(col(line, r#""maybe""#)));
    assert_eq!(
        e.kind,
        ParseErrorKind::UnknownEnumValue {
            path: "data.decision".into(),
            value: "maybe".into(),
            allowed: &["approved", "denied"],
        }
    );
}

const USER: &str = r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":[]}"#;

#[test]
fn invalid_surface_ops_are_refused() {
    let cases: &[(&str, &str)] = &[
        (r#""prepend""#, r#""prepend""#),
        ("null", "null"),
        ("3", "3"),
        ("[]", "[]"),
        (r#"{"op":"delete","startSeq":0,"endSeq":1}"#, r#""delete""#),
        (r#"{"op":1,"startSeq":0,"endSeq":1}"#, "1,"),
        (r#"{"startSeq":0,"endSeq":1}"#, r#"{"startSeq"#),
        (r#"{"op":"replace","endSeq":1}"#, r#"{"op"#),
        (r#"{"op":"replace","startSeq":0,"endSeq":-1}"#, "-1"),
        (r#"{"op":"replace","startSeq":"0","endSeq":1}"#, r#""0""#),
    ];
    for &(op, marker) in cases {
        let line = format!(r#"{USER},"surfaceOp":{op}}}"#);
        let e = refuse_line(&line);
        let at = line.find(r#""surfaceOp":"#).unwrap() + r#""surfaceOp":"#.len();
        let marker_col = line[..at + line[at..].find(marker).unwrap()]
            .chars()
            .count() as u64
            + 1;
        assert_at(&e, 1, Some(marker_col));
        assert!(
            matches!(e.kind, ParseErrorKind::InvalidSurfaceOp { .. }),
            "{op}: {e}"
        );
    }
    let e = refuse_line(&format!(
        r#"{USER},"surfaceOp":{{"op":"replace","endSeq":1}}}}"#
    ));
    assert!(
        e.to_string().contains("missing member surfaceOp.startSeq"),
        "{e}"
    );
}

#[test]
fn surface_op_on_an_unknown_type_is_refused() {
    let line = r#"{"type":"x/y","seq":0,"time":1,"data":{},"surfaceOp":"append"}"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(col(line, r#""append""#)));
    assert_eq!(
        e.kind,
        ParseErrorKind::SurfaceOpOnUnknownType {
            type_name: "x/y".into()
        }
    );
}

#[test]
fn surface_op_on_a_known_non_surface_type_is_refused() {
    let line = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"surfaceOp":"append"}"#;
    let e = refuse_line(line);
    assert_at(&e, 1, Some(col(line, r#""append""#)));
    assert_eq!(
        e.kind,
        ParseErrorKind::SurfaceOpOnNonSurface {
            type_name: "turn/start".into()
        }
    );
}

#[test]
fn seqs_must_count_from_zero_without_gaps() {
    let line =
        |seq: u64| format!(r#"{{"type":"turn/start","seq":{seq},"time":1,"data":{{"turn":1}}}}"#);
    let seq_col = col(&line(5), "5");

    let e = refuse(format!("{}\n", line(1)));
    assert_at(&e, 1, Some(seq_col));
    assert_eq!(
        e.kind,
        ParseErrorKind::UnexpectedSeq {
            expected: 0,
            found: 1
        }
    );

    let e = refuse(format!("{}\n{}\n{}\n", line(0), line(1), line(3)));
    assert_at(&e, 3, Some(seq_col));
    assert_eq!(
        e.kind,
        ParseErrorKind::UnexpectedSeq {
            expected: 2,
            found: 3
        }
    );
    assert_eq!(
        e.to_string(),
        format!("line 3, column {seq_col}: seq 3 out of order: expected seq 2")
    );

    let e = refuse(format!("{}\n{}\n", line(0), line(0)));
    assert_at(&e, 2, Some(seq_col));

    // After a header the first event is still seq 0, on line 2.
    let header = r#"{"type":"session","version":1,"id":"s","createdAt":1}"#;
    let e = refuse(format!("{header}\n{}\n", line(1)));
    assert_at(&e, 2, Some(seq_col));
}

#[test]
fn invalid_utf8_is_refused_with_its_column() {
    let mut input = format!("{TURN}\n").into_bytes();
    input.extend_from_slice(b"{\"type\":\"\xC3\xA9\xFF\"}\n");
    let e = refuse(&input);
    assert_at(&e, 2, Some(11));
    assert_eq!(e.kind, ParseErrorKind::InvalidUtf8);
    // a truncated sequence at the end of the line
    let e = refuse(b"{\"a\":\"\xE2\x82");
    assert_at(&e, 1, Some(7));
    assert_eq!(e.kind, ParseErrorKind::InvalidUtf8);
}

#[test]
fn a_header_is_only_the_first_line() {
    let header = r#"{"type":"session","version":1,"id":"s","createdAt":1}"#;
    // later, a "session" line is an event of an unknown type and needs a seq
    let e = refuse(format!("{TURN}\n{header}\n"));
    assert_at(&e, 2, Some(1));
    assert_eq!(e.kind, ParseErrorKind::MissingMember { path: "seq".into() });
    // a header with a bad member is refused like any object
    let e = refuse(format!(
        "{}\n",
        r#"{"type":"session","version":"1","id":"s","createdAt":1}"#
    ));
    assert_mistyped(&e, "version", "an unsigned integer", "a string");
}

#[test]
fn accepted_spellings() {
    let (_, events) = parse_jsonl(
        format!(
            "\u{feff}{TURN}\r\n{}",
            TURN.replace("\"seq\":0", "\"seq\":1")
        )
        .as_bytes(),
    )
    .unwrap();
    assert_eq!(events.len(), 2);
    let spaced =
        " {\t\"data\" : { \"turn\" : 1 } ,\n \"time\":1,\"seq\":0 , \"type\":\"turn/start\"}\r ";
    assert_eq!(
        parse_event_line(spaced).unwrap().to_canonical_string(),
        TURN
    );
    // BOM on the first line only
    let e = refuse(format!(
        "{TURN}\n\u{feff}{}\n",
        TURN.replace("\"seq\":0", "\"seq\":1")
    ));
    assert_at(&e, 2, Some(1));
    // an empty file is an empty session
    assert_eq!(parse_jsonl(b"").unwrap(), (None, vec![]));
}

/// A line longer than the reader's limit is refused after reading at most the limit (memory stays
/// bounded for a file without line ends), naming its line; a line of exactly the limit, and a
/// last line without `\n` of that length, are read.
#[test]
fn a_line_longer_than_the_limit_is_refused_without_reading_it_whole() {
    use agentlog::event::{JsonlReader, Line};

    let line = format!("{TURN}\n");
    let limit = line.len() as u64;
    let long = format!(
        "{line}{}\n",
        TURN.replace("\"turn\":1", "\"turn\":1,\"x\":\"yy\"")
            .replace("\"seq\":0", "\"seq\":1")
    );
    let mut reader = JsonlReader::new(long.as_bytes()).with_max_line(limit);
    assert!(matches!(reader.next(), Some(Ok(Line::Event(_)))));
    let e = reader.next().expect("an item").expect_err("refused");
    assert_eq!(e.kind, ParseErrorKind::LineTooLong { limit });
    assert_at(&e, 2, None);
    assert!(e.to_string().contains("longer than"), "{e}");
    assert!(reader.next().is_none(), "the reader ends after a refusal");

    // Exactly the limit, with and without the final line end.
    for input in [line.clone(), TURN.to_string()] {
        let mut reader = JsonlReader::new(input.as_bytes()).with_max_line(limit);
        assert!(
            matches!(reader.next(), Some(Ok(Line::Event(_)))),
            "{input:?}"
        );
        assert!(reader.next().is_none());
    }

    // An endless line: refused after the limit, not read to the end.
    let endless = std::io::BufReader::new(std::io::repeat(b'a'));
    let mut reader = JsonlReader::new(endless).with_max_line(1 << 16);
    let e = reader.next().expect("an item").expect_err("refused");
    assert_eq!(e.kind, ParseErrorKind::LineTooLong { limit: 1 << 16 });
}
