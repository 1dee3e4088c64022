//! Acceptance 2: generated events of every type (and unknown types), with unknown members at
//! every level, odd strings and odd numbers, optional members absent, null and present:
//! - the canonical text parses back to an equal event,
//! - writing that again gives identical bytes,
//! - the archive round trip gives an equal event and identical text.
//!
//! Session headers likewise, and through `session.json` (absent, null and present members, unknown
//! members named like session.json's own).

use agentlog::event::*;
use agentlog::session::{SessionMeta, SessionState};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use rkyv::util::AlignedVec;

fn odd_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range('a', 'z'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('/'),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => Just('\u{7f}'),
        1 => Just('\u{2028}'),
        1 => Just('é'),
        1 => Just('🚀'),
        1 => any::<char>(),
    ]
}

fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just(String::new()),
        6 => vec(odd_char(), 0..10).prop_map(String::from_iter),
    ]
}

fn odd_number() -> impl Strategy<Value = Number> {
    let text = prop_oneof![
        prop::sample::select(vec![
            "1.0",
            "-0",
            "1E+400",
            "1e-7",
            "18446744073709551616",
            "-2.5e10",
            "0",
            "0.5E-3",
            "123456789012345678901234567890",
        ])
        .prop_map(str::to_owned),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
    ];
    text.prop_map(|t| Number::parse(&t).unwrap_or_else(|| panic!("bad number {t}")))
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        odd_number().prop_map(Value::Number),
        odd_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((odd_string(), inner), 0..4)
                .prop_map(|members| Value::Object(unique(members, &[]))),
        ]
    })
}

/// A map of the given members, dropping repeated names and names in `known`.
fn unique(members: Vec<(String, Value)>, known: &[&str]) -> Map {
    let mut map = Map::new();
    for (key, value) in members {
        if !known.contains(&key.as_str()) {
            let _ = map.push(key, value);
        }
    }
    map
}

/// Unknown members for an object whose known members are `known`.
fn extra(known: &'static [&'static str]) -> impl Strategy<Value = Map> {
    prop_oneof![
        2 => Just(Map::new()),
        1 => vec((odd_string(), value()), 1..3).prop_map(move |m| unique(m, known)),
    ]
}

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Opt<T>> {
    prop_oneof![Just(Opt::Absent), Just(Opt::Null), s.prop_map(Opt::Present)]
}

/// An optional open value. `Opt::Present(Value::Null)` is written as `null`, which reads back as
/// `Opt::Null`, so the generator leaves it out (it is the one spelling with two models).
fn opt_value() -> impl Strategy<Value = Opt<Value>> {
    opt(value()).prop_map(|v| match v {
        Opt::Present(Value::Null) => Opt::Null,
        v => v,
    })
}

/// An object whose `type` is an odd string none of `known_types`, at a random place.
fn other_object(known_types: &'static [&'static str]) -> impl Strategy<Value = Map> {
    (
        odd_string().prop_filter("unknown type", move |t| !known_types.contains(&t.as_str())),
        vec((odd_string(), value()), 0..3),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(ty, members, at)| {
            let mut members = unique(members, &["type"]).into_members();
            let at = at.index(members.len() + 1);
            members.insert(
                at,
                Member {
                    key: "type".into(),
                    value: Value::String(ty),
                },
            );
            Map::try_from(members).unwrap()
        })
}

const BLOCK_TYPES: &[&str] = &["text", "reasoning", "tool_use", "tool_result"];

fn block() -> impl Strategy<Value = Block> {
    let leaf = prop_oneof![
        (odd_string(), extra(&["type", "text"]))
            .prop_map(|(text, extra)| Block::Text { text, extra }),
        (odd_string(), extra(&["type", "text"]))
            .prop_map(|(text, extra)| Block::Reasoning { text, extra }),
        (
            odd_string(),
            odd_string(),
            value(),
            extra(&["type", "id", "name", "input"])
        )
            .prop_map(|(id, name, input, extra)| Block::ToolUse {
                id,
                name,
                input,
                extra
            }),
        other_object(BLOCK_TYPES).prop_map(Block::Other),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        (
            odd_string(),
            odd_string(),
            tool_content(vec(inner, 0..3)),
            any::<bool>(),
            extra(&["type", "toolUseId", "toolName", "content", "isError"]),
        )
            .prop_map(|(tool_use_id, tool_name, content, is_error, extra)| {
                Block::ToolResult {
                    tool_use_id,
                    tool_name,
                    content,
                    is_error,
                    extra,
                }
            })
    })
}

fn tool_content(
    blocks: impl Strategy<Value = Vec<Block>> + 'static,
) -> impl Strategy<Value = ToolContent> {
    prop_oneof![
        odd_string().prop_map(ToolContent::Text),
        blocks.prop_map(ToolContent::Blocks),
    ]
}

fn blocks() -> impl Strategy<Value = Vec<Block>> {
    vec(block(), 0..3)
}

const CHUNK_TYPES: &[&str] = &["text-delta", "reasoning-delta", "tool-call-delta"];

fn chunk() -> impl Strategy<Value = Chunk> {
    prop_oneof![
        (odd_string(), extra(&["type", "text"]))
            .prop_map(|(text, extra)| Chunk::TextDelta { text, extra }),
        (odd_string(), extra(&["type", "text"]))
            .prop_map(|(text, extra)| Chunk::ReasoningDelta { text, extra }),
        (
            opt(odd_string()),
            opt(odd_string()),
            opt(odd_string()),
            extra(&["type", "id", "name", "arguments"])
        )
            .prop_map(|(id, name, arguments, extra)| Chunk::ToolCallDelta {
                id,
                name,
                arguments,
                extra
            }),
        other_object(CHUNK_TYPES).prop_map(Chunk::Other),
    ]
}

fn error_info() -> impl Strategy<Value = ErrorInfo> {
    (
        opt(odd_string()),
        opt(odd_string()),
        extra(&["code", "message"]),
    )
        .prop_map(|(code, message, extra)| ErrorInfo {
            code,
            message,
            extra,
        })
}

/// A `turn/end`'s `reason.error`: `{code?, message}`, `message` required (docs/events.md §3).
fn turn_end_error() -> impl Strategy<Value = ErrorInfo> {
    (error_info(), odd_string()).prop_map(|(mut e, message)| {
        e.message = Opt::Present(message);
        e
    })
}

fn usage() -> impl Strategy<Value = Usage> {
    (
        any::<u64>(),
        any::<u64>(),
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        extra(&[
            "inputTokens",
            "outputTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
            "reasoningTokens",
        ]),
    )
        .prop_map(|(i, o, r, w, t, extra)| Usage {
            input_tokens: i,
            output_tokens: o,
            cache_read_tokens: r,
            cache_write_tokens: w,
            reasoning_tokens: t,
            extra,
        })
}

fn object_map() -> impl Strategy<Value = Map> {
    vec((odd_string(), value()), 0..4).prop_map(|m| unique(m, &[]))
}

fn data() -> impl Strategy<Value = EventData> {
    let n = any::<u64>;
    prop_oneof![
        (n(), extra(&["turn"]))
            .prop_map(|(turn, extra)| EventData::TurnStart(TurnStart { turn, extra })),
        (
            n(),
            prop::sample::select(ReasonKind::ALL.to_vec()),
            opt(turn_end_error()),
            extra(&["kind", "error"]),
            extra(&["turn", "reason"])
        )
            .prop_map(
                |(turn, kind, error, rextra, extra)| EventData::TurnEnd(TurnEnd {
                    turn,
                    reason: TurnEndReason {
                        kind,
                        error,
                        extra: rextra
                    },
                    extra
                })
            ),
        (
            n(),
            n(),
            opt(object_map()),
            extra(&["turn", "step", "request"])
        )
            .prop_map(
                |(turn, step, request, extra)| EventData::StepStart(StepStart {
                    turn,
                    step,
                    request,
                    extra
                })
            ),
        (n(), n(), extra(&["turn", "step"]))
            .prop_map(|(turn, step, extra)| EventData::StepEnd(StepEnd { turn, step, extra })),
        (
            blocks(),
            opt_value(),
            extra(&["role", "content", "envelope"])
        )
            .prop_map(
                |(content, envelope, extra)| EventData::UserMessage(UserMessage {
                    content,
                    envelope,
                    extra
                })
            ),
        (n(), n(), chunk(), extra(&["turn", "step", "chunk"])).prop_map(
            |(turn, step, chunk, extra)| {
                EventData::AssistantChunk(AssistantChunk {
                    turn,
                    step,
                    chunk,
                    extra,
                })
            }
        ),
        (
            n(),
            n(),
            (
                blocks(),
                opt(odd_string()),
                opt(odd_string()),
                opt_value(),
                extra(&["role", "content", "provider", "model", "replay"])
            ),
            opt(usage()),
            extra(&["turn", "step", "message", "usage"])
        )
            .prop_map(
                |(turn, step, (content, provider, model, replay, mextra), usage, extra)| {
                    EventData::AssistantMessage(AssistantMessage {
                        turn,
                        step,
                        message: AssistantContent {
                            content,
                            provider,
                            model,
                            replay,
                            extra: mextra,
                        },
                        usage,
                        extra,
                    })
                }
            ),
        (
            n(),
            n(),
            odd_string(),
            odd_string(),
            odd_string(),
            extra(&["turn", "step", "callId", "name", "arguments"])
        )
            .prop_map(|(turn, step, call_id, name, arguments, extra)| {
                EventData::ToolCall(ToolCall {
                    turn,
                    step,
                    call_id,
                    name,
                    arguments,
                    extra,
                })
            }),
        (
            n(),
            n(),
            (
                odd_string(),
                tool_content(blocks()),
                any::<bool>(),
                extra(&["role", "toolName", "content", "isError"])
            ),
            opt(odd_string()),
            opt(error_info()),
            opt_value(),
            extra(&["turn", "step", "message", "callId", "error", "meta"])
        )
            .prop_map(
                |(
                    turn,
                    step,
                    (tool_name, content, is_error, mextra),
                    call_id,
                    error,
                    meta,
                    extra,
                )| {
                    EventData::ToolResult(ToolResult {
                        turn,
                        step,
                        message: ToolMessage {
                            tool_name,
                            content,
                            is_error,
                            extra: mextra,
                        },
                        call_id,
                        error,
                        meta,
                        extra,
                    })
                }
            ),
        (blocks(), extra(&["role", "content"])).prop_map(|(content, extra)| {
            EventData::SystemMessage(SystemMessage { content, extra })
        }),
        (
            n(),
            n(),
            odd_string(),
            odd_string(),
            opt(odd_string()),
            extra(&["turn", "step", "callId", "tool", "reason"])
        )
            .prop_map(|(turn, step, call_id, tool, reason, extra)| {
                EventData::ApprovalRequest(ApprovalRequest {
                    turn,
                    step,
                    call_id,
                    tool,
                    reason,
                    extra,
                })
            }),
        (
            n(),
            n(),
            odd_string(),
            prop::sample::select(Decision::ALL.to_vec()),
            opt(odd_string()),
            opt(odd_string()),
            extra(&["turn", "step", "callId", "decision", "by", "note"])
        )
            .prop_map(|(turn, step, call_id, decision, by, note, extra)| {
                EventData::ApprovalDecision(ApprovalDecision {
                    turn,
                    step,
                    call_id,
                    decision,
                    by,
                    note,
                    extra,
                })
            }),
        (
            odd_string(),
            opt(n()),
            opt_value(),
            extra(&["kind", "turn", "detail"])
        )
            .prop_map(|(kind, turn, detail, extra)| EventData::SandboxEvent(
                SandboxEvent {
                    kind,
                    turn,
                    detail,
                    extra
                }
            )),
        (
            odd_string(),
            opt(n()),
            opt(n()),
            opt(odd_string()),
            extra(&["message", "turn", "step", "stack"])
        )
            .prop_map(|(message, turn, step, stack, extra)| {
                EventData::Error(ErrorEvent {
                    message,
                    turn,
                    step,
                    stack,
                    extra,
                })
            }),
        (n(), n(), extra(&["startSeq", "endSeq"])).prop_map(|(start_seq, end_seq, extra)| {
            EventData::CompactStart(CompactStart {
                start_seq,
                end_seq,
                extra,
            })
        }),
        (
            n(),
            n(),
            odd_string(),
            opt(usage()),
            extra(&["startSeq", "endSeq", "summary", "usage"])
        )
            .prop_map(|(start_seq, end_seq, summary, usage, extra)| {
                EventData::CompactSummary(CompactSummary {
                    start_seq,
                    end_seq,
                    summary,
                    usage,
                    extra,
                })
            }),
        (any::<bool>(), extra(&["ok"]))
            .prop_map(|(ok, extra)| EventData::CompactEnd(CompactEnd { ok, extra })),
        (
            odd_string().prop_filter("unknown type", |t| EventType::from_name(t).is_none()),
            object_map()
        )
            .prop_map(|(type_name, data)| EventData::Unknown(UnknownEvent { type_name, data })),
    ]
}

fn surface_op() -> impl Strategy<Value = SurfaceOp> {
    prop_oneof![
        Just(SurfaceOp::Append),
        (
            any::<u64>(),
            any::<u64>(),
            extra(&["op", "startSeq", "endSeq"])
        )
            .prop_map(|(start_seq, end_seq, extra)| SurfaceOp::Replace {
                start_seq,
                end_seq,
                extra
            }),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    (
        any::<u64>(),
        any::<i64>(),
        data(),
        option::of(surface_op()),
        option::of(vec(any::<u64>(), 0..4)),
        extra(&[
            "type",
            "seq",
            "time",
            "data",
            "surfaceOp",
            "sourceEventSeqs",
        ]),
    )
        .prop_map(|(seq, time, data, surface_op, source_event_seqs, extra)| {
            let surface_op = surface_op.filter(|_| data.is_surface());
            Event {
                seq,
                time,
                data,
                surface_op,
                source_event_seqs,
                extra,
            }
        })
}

/// Unknown header members, often named like the members `session.json` keeps beside the header
/// (`state`, `config`, …): they must not be confused with them.
fn header_extra() -> impl Strategy<Value = Map> {
    let name = prop_oneof![
        2 => odd_string(),
        3 => prop::sample::select(vec!["state", "config", "header", "headerExtra", "events"])
            .prop_map(str::to_owned),
    ];
    prop_oneof![
        1 => Just(Map::new()),
        2 => vec((name, value()), 1..5).prop_map(|m| {
            unique(
                m,
                &[
                    "type",
                    "version",
                    "id",
                    "createdAt",
                    "title",
                    "cwd",
                    "parentSession",
                    "seedLength",
                ],
            )
        }),
    ]
}

fn header() -> impl Strategy<Value = SessionHeader> {
    (
        any::<u64>(),
        odd_string(),
        any::<i64>(),
        (
            opt(odd_string()),
            opt(odd_string()),
            opt(odd_string()),
            opt(any::<u64>()),
        ),
        header_extra(),
    )
        .prop_map(
            |(version, id, created_at, (title, cwd, parent_session, seed_length), extra)| {
                SessionHeader {
                    version,
                    id,
                    created_at,
                    title,
                    cwd,
                    parent_session,
                    seed_length,
                    extra,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn events_round_trip_through_text_and_archive(event in event()) {
        let text = event.to_canonical_string();
        let parsed = parse_event_line(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&parsed, &event);
        prop_assert_eq!(parsed.to_canonical_string(), text.clone());

        let mut buf = AlignedVec::<16>::new();
        let start = encode_event(&parsed, &mut buf).unwrap();
        let archived = access_event(&buf[start..]).unwrap();
        prop_assert_eq!(archived.to_canonical_string(), text.clone());
        prop_assert_eq!(archived.seq(), event.seq);
        prop_assert_eq!(archived.type_name(), event.type_name());
        prop_assert_eq!(decode_event(archived).unwrap(), event);

        // serde_json reads the same text (numbers beyond f64 aside, it agrees it is JSON)
        if !text.contains("E+400") && !text.contains("e+400") {
            prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{}", text);
        }
    }

    #[test]
    fn headers_round_trip(header in header()) {
        let text = header.to_canonical_string();
        let parsed = parse_header_line(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&parsed, &header);
        prop_assert_eq!(parsed.to_canonical_string(), text.clone());
        let (read, events) = parse_jsonl(format!("{text}\n").as_bytes()).unwrap();
        prop_assert_eq!(read, Some(header));
        prop_assert!(events.is_empty());
    }

    #[test]
    fn headers_survive_session_json(
        header in header(),
        state in prop::sample::select(vec![
            SessionState::Active,
            SessionState::Archived,
            SessionState::Deleted,
        ]),
        config in option::of(value()),
    ) {
        // What import keeps of a header, session.json keeps apart from the store's own members,
        // and `export --header` writes back unchanged.
        let header = SessionHeader { version: 1, ..header };
        let mut meta = SessionMeta::from_header(&header);
        meta.state = state;
        meta.config = config;
        let text = meta.to_json();
        let read = SessionMeta::from_json(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&read, &meta);
        prop_assert_eq!(read.to_json(), text.clone());
        prop_assert_eq!(read.to_header().to_canonical_string(), header.to_canonical_string());
        prop_assert_eq!(read.to_header(), header);
    }

    #[test]
    fn values_display_as_json_that_reads_back(v in value()) {
        let text = v.to_string();
        let line = format!(r#"{{"type":"x/y","seq":0,"time":0,"data":{{"v":{text}}}}}"#);
        let event = parse_event_line(&line).unwrap();
        match &event.data {
            EventData::Unknown(u) => prop_assert_eq!(u.data.get("v"), Some(&v)),
            other => prop_assert!(false, "{:?}", other),
        }
    }
}

#[test]
fn every_type_is_generated() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = data();
    let mut seen = std::collections::BTreeSet::new();
    let mut unknown = false;
    for _ in 0..2000 {
        let data = strategy.new_tree(&mut runner).unwrap().current();
        match data.event_type() {
            Some(t) => {
                seen.insert(t);
            }
            None => unknown = true,
        }
    }
    assert_eq!(seen.len(), EventType::ALL.len());
    assert!(unknown);
}
