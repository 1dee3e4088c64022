//! Regressions of the event layer: one module per bug that was fixed (each was a
//! `tests/regress_*.rs` file of its own); every test's doc comment says what went wrong.

mod tool_result_error_verbatim {
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

    /// A `tool/result`'s `error` (no member list in docs/events.md) was forced into `{code?: string, message?: string}`: its members were reordered on export (not byte-identical) and any other shape (a string, a numeric code) was refused.
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
            let reader = store.open_reader(&id).unwrap();
            let mut out = Vec::new();
            reader
                .export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
                .unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), file, "{error}");
            // Owned (decoded from the archive) and written again: the same line.
            assert_eq!(
                reader.get_owned(3).unwrap().to_canonical_string(),
                result(error),
                "{error}"
            );
            // The projection does not show the error, whatever its shape.
            assert_eq!(reader.messages().unwrap().len(), 1);
        }
    }

    /// A `tool/result`'s `error` (no member list in docs/events.md) was forced into `{code?: string, message?: string}`: its members were reordered on export (not byte-identical) and any other shape (a string, a numeric code) was refused.
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
}

mod turn_end_error_message {
    use testkit::session as session_common;

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

    /// A `turn/end` whose `reason.error` had no `message` was accepted, though docs/events.md §3 gives that `error` as `{code?, message}` (message required); a `tool/result`'s `error` may still lack it.
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

    /// A `turn/end` whose `reason.error` had no `message` was accepted, though docs/events.md §3 gives that `error` as `{code?, message}` (message required); a `tool/result`'s `error` may still lack it.
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
                .open_reader(&id)
                .unwrap()
                .export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
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

    /// A `turn/end` whose `reason.error` had no `message` was accepted, though docs/events.md §3 gives that `error` as `{code?, message}` (message required); a `tool/result`'s `error` may still lack it.
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
}
