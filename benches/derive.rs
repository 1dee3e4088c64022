//! The projection's cost: "apply one more event + messages()" on a projector that has applied
//! 1,000 and 1,000,000 events (it must be about the same), and a full derive of 1,000,000
//! events. The events are a generated session with a realistic mix: turns and steps, user
//! messages, streamed chunks, assistant messages with tool uses, tool calls and their results
//! (resolved by callId, by sourceEventSeqs and by name).
//!
//! `cargo bench --bench derive`

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentlog::event::{
    AssistantChunk, AssistantContent, AssistantMessage, Block, Chunk, Event, EventData, Map, Opt,
    ReasonKind, StepEnd, StepStart, SurfaceOp, ToolCall, ToolContent, ToolMessage, ToolResult,
    TurnEnd, TurnEndReason, TurnStart, UserMessage, Value,
};
use agentlog::project::{derive, Projector};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

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

    fn text(&mut self, words: u64) -> String {
        const WORDS: &[&str] = &[
            "the",
            "parser",
            "retry",
            "loop",
            "fn",
            "main()",
            "error:",
            "cargo",
            "test",
            "ok",
            "let",
            "x",
            "=",
            "1;",
            "src/lib.rs",
            "héllo",
            "\"quoted\"",
            "line\n",
        ];
        let mut out = String::new();
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
        }
        out
    }
}

/// Generates a session event by event, forever: turns of 1–3 steps, each step streaming
/// chunks, then an assistant message with up to 2 tool uses (none in the last step), the
/// tool calls and their results.
struct Session {
    rng: Rng,
    seq: u64,
    pending: std::collections::VecDeque<Event>,
    turn: u64,
}

impl Session {
    fn new() -> Self {
        Self {
            rng: Rng(0x9E37_79B9_7F4A_7C15),
            seq: 0,
            pending: Default::default(),
            turn: 0,
        }
    }

    fn push(&mut self, data: EventData, surface: bool, sources: Option<Vec<u64>>) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        self.pending.push_back(Event {
            seq,
            time: 1_755_000_000_000 + seq as i64 * 7,
            data,
            surface_op: surface.then_some(SurfaceOp::Append),
            source_event_seqs: sources,
            extra: Map::new(),
        });
        seq
    }

    fn turn(&mut self) {
        self.turn += 1;
        let turn = self.turn;
        self.push(
            EventData::TurnStart(TurnStart {
                turn,
                extra: Map::new(),
            }),
            false,
            None,
        );
        let prompt = self.rng.text(20);
        self.push(
            EventData::UserMessage(UserMessage {
                content: vec![Block::text(prompt)],
                envelope: Opt::Absent,
                extra: Map::new(),
            }),
            true,
            None,
        );
        let steps = 1 + self.rng.below(3);
        for step in 1..=steps {
            self.push(
                EventData::StepStart(StepStart {
                    turn,
                    step,
                    request: Opt::Absent,
                    extra: Map::new(),
                }),
                false,
                None,
            );
            let mut chunks = Vec::new();
            for _ in 0..3 + self.rng.below(6) {
                let text = self.rng.text(3);
                chunks.push(self.push(
                    EventData::AssistantChunk(AssistantChunk {
                        turn,
                        step,
                        chunk: Chunk::TextDelta {
                            text,
                            extra: Map::new(),
                        },
                        extra: Map::new(),
                    }),
                    false,
                    None,
                ));
            }
            let uses = if step == steps {
                0
            } else {
                1 + self.rng.below(2)
            };
            let mut content = vec![Block::text(self.rng.text(30))];
            let mut calls = Vec::new();
            for i in 0..uses {
                let id = format!("call_{turn}_{step}_{i}");
                let name = ["read_file", "bash", "edit"][self.rng.below(3) as usize].to_owned();
                let path = self.rng.text(1);
                let mut input = Map::new();
                let _ = input.push("path", Value::String(path));
                content.push(Block::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: Value::Object(input),
                    extra: Map::new(),
                });
                calls.push((id, name));
            }
            self.push(
                EventData::AssistantMessage(AssistantMessage {
                    turn,
                    step,
                    message: AssistantContent {
                        content,
                        provider: Opt::Absent,
                        model: Opt::Absent,
                        replay: Opt::Absent,
                        extra: Map::new(),
                    },
                    usage: Opt::Absent,
                    extra: Map::new(),
                }),
                true,
                Some(chunks),
            );
            let mut call_seqs = Vec::new();
            for (id, name) in &calls {
                call_seqs.push(self.push(
                    EventData::ToolCall(ToolCall {
                        turn,
                        step,
                        call_id: id.clone(),
                        name: name.clone(),
                        arguments: "{\"path\":\"x\"}".into(),
                        extra: Map::new(),
                    }),
                    false,
                    None,
                ));
            }
            for ((id, name), call_seq) in calls.into_iter().zip(call_seqs) {
                let mode = self.rng.below(10);
                let output = self.rng.text(40);
                self.push(
                    EventData::ToolResult(ToolResult {
                        turn,
                        step,
                        message: ToolMessage {
                            tool_name: name,
                            content: ToolContent::Text(output),
                            is_error: false,
                            extra: Map::new(),
                        },
                        call_id: if mode < 5 {
                            Opt::Present(id)
                        } else {
                            Opt::Absent
                        },
                        error: Opt::Absent,
                        meta: Opt::Absent,
                        extra: Map::new(),
                    }),
                    true,
                    (5..8).contains(&mode).then(|| vec![call_seq]),
                );
            }
            self.push(
                EventData::StepEnd(StepEnd {
                    turn,
                    step,
                    extra: Map::new(),
                }),
                false,
                None,
            );
        }
        self.push(
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
        );
    }
}

impl Iterator for Session {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.pending.is_empty() {
            self.turn();
        }
        self.pending.pop_front()
    }
}

/// A user message appended at `seq`: the event applied in "apply one more event".
fn user_message(seq: u64) -> Event {
    Event {
        seq,
        time: 1_755_000_000_000 + seq as i64 * 7,
        data: EventData::UserMessage(UserMessage {
            content: vec![Block::text("one more question about the parser")],
            envelope: Opt::Absent,
            extra: Map::new(),
        }),
        surface_op: Some(SurfaceOp::Append),
        source_event_seqs: None,
        extra: Map::new(),
    }
}

/// How many events are applied to one copy of the base projector before it is copied again, so
/// the projector measured stays near its nominal size (the copy is not timed).
const CHUNK: u64 = 2_000;

/// Times "apply one event + take `messages()` (and drop it)" for each event of `pool` in turn,
/// on a fresh copy of `base` every [`CHUNK`] events (the copy is not timed).
fn time_appends(base: &Projector, pool: &[Event], iters: u64) -> Duration {
    let mut timed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let k = left.min(pool.len() as u64);
        let mut projector = base.clone();
        let start = Instant::now();
        for event in &pool[..k as usize] {
            black_box(projector.apply(event).is_ok());
            black_box(projector.messages());
        }
        timed += start.elapsed();
        left -= k;
    }
    timed
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("derive");
    for n in [1_000u64, 1_000_000] {
        let mut events: Vec<Event> = Session::new().take((n + CHUNK) as usize).collect();
        let next_events = events.split_off(n as usize);
        let mut base = Projector::new();
        for event in &events {
            base.apply(event).expect("generated events are valid");
        }
        drop(events);
        eprintln!(
            "projector over {n} events: {} messages, {} unanswered calls",
            base.len(),
            base.unanswered_calls().count()
        );
        let user_messages: Vec<Event> = (n..n + CHUNK).map(user_message).collect();
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("append_user_message+messages", n), |b| {
            b.iter_custom(|iters| time_appends(&base, &user_messages, iters));
        });
        group.bench_function(BenchmarkId::new("apply_next_event+messages", n), |b| {
            b.iter_custom(|iters| time_appends(&base, &next_events, iters));
        });
        group.bench_function(BenchmarkId::new("messages", n), |b| {
            b.iter(|| black_box(base.messages()));
        });
    }

    let events: Vec<Event> = Session::new().take(1_000_000).collect();
    group.throughput(Throughput::Elements(events.len() as u64));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("full_derive", events.len()), |b| {
        b.iter(|| derive(black_box(&events)).map(|m| m.len()));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
