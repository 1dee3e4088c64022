//! A deterministic generator of realistic agent sessions for the benchmarks: turns of a few
//! steps, many small streamed chunks, assistant messages with tool uses, tool calls and results
//! (mostly small, some tens of kilobytes), unicode text. Included by the benches with `#[path]`.
#![allow(dead_code)]

use agentlog::event::{
    AssistantChunk, AssistantContent, AssistantMessage, Block, Chunk, Event, EventData, Map,
    Number, Opt, ReasonKind, StepEnd, StepStart, SurfaceOp, ToolCall, ToolContent, ToolMessage,
    ToolResult, TurnEnd, TurnEndReason, TurnStart, Usage, UserMessage, Value,
};

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn text(&mut self, words: usize) -> String {
        const WORDS: &[&str] = &[
            "the",
            "parser",
            "retry",
            "loop",
            "fn",
            "main()",
            "{",
            "}",
            "\"quoted\"",
            "path\\to",
            "line\n",
            "tab\t",
            "héllo",
            "wörld",
            "🚀",
            "let",
            "x",
            "=",
            "1;",
            "error:",
            "cargo",
            "test",
            "<script>",
            "&&",
            "ok",
            "return",
            "Result<T,",
            "E>",
        ];
        let mut s = String::new();
        for i in 0..words {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
        }
        s
    }
}

pub fn event(seq: &mut u64, data: EventData, surface: bool, sources: Option<Vec<u64>>) -> Event {
    let e = Event {
        seq: *seq,
        time: 1_755_000_000_000 + *seq as i64 * 37,
        data,
        surface_op: surface.then_some(SurfaceOp::Append),
        source_event_seqs: sources,
        extra: Map::new(),
    };
    *seq += 1;
    e
}

/// A long session: turns of a few steps each, streamed chunks, tool calls and results (one in
/// eight of them a few kilobytes).
pub fn generated_events(turns: u64) -> Vec<Event> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut seq = 0;
    let mut out = Vec::new();
    for turn in 1..=turns {
        let mut push = |e: Event| out.push(e);
        push(event(
            &mut seq,
            EventData::TurnStart(TurnStart {
                turn,
                extra: Map::new(),
            }),
            false,
            None,
        ));
        push(event(
            &mut seq,
            EventData::UserMessage(UserMessage {
                content: vec![Block::text(rng.text(20))],
                envelope: Opt::Absent,
                extra: Map::new(),
            }),
            true,
            None,
        ));
        for step in 1..=rng.below(4) + 1 {
            let mut request = Map::new();
            let _ = request.push("model", Value::from("deepseek-chat"));
            let _ = request.push(
                "temperature",
                Value::Number(Number::parse("0.7").expect("a number")),
            );
            let _ = request.push("maxTokens", Value::from(8192u64));
            push(event(
                &mut seq,
                EventData::StepStart(StepStart {
                    turn,
                    step,
                    request: Opt::Present(request),
                    extra: Map::new(),
                }),
                false,
                None,
            ));
            let first_chunk = seq;
            let chunks = rng.below(8) + 1;
            for _ in 0..chunks {
                push(event(
                    &mut seq,
                    EventData::AssistantChunk(AssistantChunk {
                        turn,
                        step,
                        chunk: Chunk::TextDelta {
                            text: rng.text(3),
                            extra: Map::new(),
                        },
                        extra: Map::new(),
                    }),
                    false,
                    None,
                ));
            }
            let call_id = format!("call_{turn}_{step}");
            let mut input = Map::new();
            let _ = input.push("command", Value::from(rng.text(6)));
            let _ = input.push("timeout", Value::from(30u64));
            push(event(
                &mut seq,
                EventData::AssistantMessage(AssistantMessage {
                    turn,
                    step,
                    message: AssistantContent {
                        content: vec![
                            Block::text(rng.text(60)),
                            Block::ToolUse {
                                id: call_id.clone(),
                                name: "bash".into(),
                                input: Value::Object(input.clone()),
                                extra: Map::new(),
                            },
                        ],
                        provider: Opt::Present("deepseek".into()),
                        model: Opt::Present("deepseek-chat".into()),
                        replay: Opt::Absent,
                        extra: Map::new(),
                    },
                    usage: Opt::Present(Usage {
                        input_tokens: rng.below(100_000),
                        output_tokens: rng.below(5_000),
                        ..Usage::default()
                    }),
                    extra: Map::new(),
                }),
                true,
                Some((first_chunk..first_chunk + chunks).collect()),
            ));
            let call_seq = seq;
            push(event(
                &mut seq,
                EventData::ToolCall(ToolCall {
                    turn,
                    step,
                    call_id: call_id.clone(),
                    name: "bash".into(),
                    arguments: Value::Object(input).to_string(),
                    extra: Map::new(),
                }),
                false,
                None,
            ));
            let size = if rng.below(8) == 0 { 4_000 } else { 40 };
            push(event(
                &mut seq,
                EventData::ToolResult(ToolResult {
                    turn,
                    step,
                    message: ToolMessage {
                        tool_name: "bash".into(),
                        content: ToolContent::Text(rng.text(size)),
                        is_error: rng.below(10) == 0,
                        extra: Map::new(),
                    },
                    call_id: Opt::Present(call_id),
                    error: Opt::Absent,
                    meta: Opt::Absent,
                    extra: Map::new(),
                }),
                true,
                Some(vec![call_seq]),
            ));
            push(event(
                &mut seq,
                EventData::StepEnd(StepEnd {
                    turn,
                    step,
                    extra: Map::new(),
                }),
                false,
                None,
            ));
        }
        push(event(
            &mut seq,
            EventData::TurnEnd(TurnEnd {
                turn,
                reason: TurnEndReason {
                    kind: ReasonKind::Completed,
                    error: Opt::Absent,
                    extra: Map::new(),
                },
                extra: Map::new(),
            }),
            false,
            None,
        ));
    }
    out
}

/// The canonical lines of [`generated_events`].
pub fn generated_lines(turns: u64) -> Vec<String> {
    generated_events(turns)
        .iter()
        .map(Event::to_canonical_string)
        .collect()
}

/// An event whose canonical line is about `bytes` long: a tool result with that much text.
pub fn sized_event(seq: u64, bytes: usize, rng: &mut Rng) -> Event {
    let mut text = String::new();
    while text.len() + 160 < bytes {
        text.push_str(&rng.text(1));
        text.push(' ');
    }
    Event {
        seq,
        time: 1_755_000_000_000 + seq as i64,
        data: EventData::ToolResult(ToolResult {
            turn: 1,
            step: 1,
            message: ToolMessage {
                tool_name: "bash".into(),
                content: ToolContent::Text(text),
                is_error: false,
                extra: Map::new(),
            },
            call_id: Opt::Present(format!("call_{seq}")),
            error: Opt::Absent,
            meta: Opt::Absent,
            extra: Map::new(),
        }),
        surface_op: Some(SurfaceOp::Append),
        source_event_seqs: None,
        extra: Map::new(),
    }
}
