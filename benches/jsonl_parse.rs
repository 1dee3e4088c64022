//! Parse + validate JSONL lines into typed `Event`s, against `serde_json::from_str::<Value>` on
//! the same lines: the example sessions, and a larger generated session (many lines, a realistic
//! mix of types, some big tool results).
//!
//! `cargo bench --bench jsonl_parse`

use std::hint::black_box;
use std::path::PathBuf;

use agentlog::event::{
    parse_event_line, AssistantChunk, AssistantContent, AssistantMessage, Block, Chunk, Event,
    EventData, Map, Number, Opt, ReasonKind, StepEnd, StepStart, SurfaceOp, ToolCall, ToolContent,
    ToolMessage, ToolResult, TurnEnd, TurnEndReason, TurnStart, Usage, UserMessage, Value,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// The event lines of the example sessions (the one header line left out).
fn example_lines() -> Vec<String> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/examples"));
    let mut lines = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("example file");
        lines.extend(
            text.lines()
                .filter(|l| !l.starts_with(r#"{"type":"session""#))
                .map(str::to_owned),
        );
    }
    lines
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn text(&mut self, words: usize) -> String {
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

fn event(seq: &mut u64, data: EventData, surface: bool, sources: Option<Vec<u64>>) -> Event {
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
/// eight of them tens of kilobytes), as canonical lines.
fn generated_lines(turns: u64) -> Vec<String> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut seq = 0;
    let mut out = Vec::new();
    for turn in 1..=turns {
        let mut push = |e: Event| out.push(e.to_canonical_string());
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

fn bench(c: &mut Criterion) {
    let sets = [
        ("examples", example_lines()),
        ("generated", generated_lines(600)),
    ];
    let mut group = c.benchmark_group("jsonl_parse");
    for (name, lines) in &sets {
        for line in lines {
            // every line must be valid for the comparison to mean anything
            if let Err(e) = parse_event_line(line) {
                panic!("{name}: {e}\n{line}");
            }
        }
        let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
        eprintln!("{name}: {} lines, {} bytes", lines.len(), bytes);
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(format!("agentlog_event/{name}"), |b| {
            b.iter(|| {
                for line in lines {
                    black_box(parse_event_line(black_box(line)).ok());
                }
            })
        });
        group.bench_function(format!("serde_json_value/{name}"), |b| {
            b.iter(|| {
                for line in lines {
                    black_box(serde_json::from_str::<serde_json::Value>(black_box(line)).ok());
                }
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
