//! The one generator of realistic agent sessions every benchmark measures, deterministic (a fixed
//! seed: every run measures the same data).
//!
//! A session is a sequence of turns: `turn/start`, a `user/message`, one to four steps, `turn/end`.
//! A step is `step/start` (with a request), 3 to 12 streamed `assistant/chunk` events of a few
//! words, an `assistant/message` (text, and one or two tool uses in every step but the last, with
//! provider, model and usage), then a `tool/call` and a `tool/result` per tool use, then
//! `step/end`. Results are resolved by `callId`, by `sourceEventSeqs` or by tool name only (all
//! three ways the projection knows). Tool output sizes follow a long tail: half of them a few
//! hundred bytes, a third 1 to 8 KB, one in eight 8 to 64 KB, one in fifty 100 to 400 KB. Text is
//! code and prose with unicode (accents, CJK, emoji), quotes, backslashes, tabs and newlines, so
//! JSON escaping costs what it costs on real transcripts. The mean canonical JSON line is about
//! 1 KB; `assistant/chunk` is over half of the events, `tool/result` one in fifteen.
//!
//! [`Mix::Small`] is the small-event session of issue 14 (a mean canonical line of about 221 B):
//! the same shape with shorter texts, steps without a `request`, one tool call per step but the
//! last, and tool results of 100 to 1,200 bytes (one in forty up to 4 KB).
#![allow(dead_code)]

use agentlog::event::{
    AssistantChunk, AssistantContent, AssistantMessage, Block, Chunk, Event, EventData, Map,
    Number, Opt, ReasonKind, StepEnd, StepStart, SurfaceOp, ToolCall, ToolContent, ToolMessage,
    ToolResult, TurnEnd, TurnEndReason, TurnStart, Usage, UserMessage, Value,
};

/// The seed of every generated session.
pub const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

pub use crate::Rng;

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
    "naïve",
    "日本語",
    "测试",
    "🚀",
    "✅",
    "let",
    "x",
    "=",
    "1;",
    "error:",
    "cargo",
    "test",
    "src/lib.rs",
    "<script>",
    "&&",
    "ok",
    "return",
    "Result<T,",
    "E>",
    "self.items.iter().map(|x|",
    "x.len()).sum()",
    "warning:",
    "unused",
    "variable",
    "`config`",
    "--> src/main.rs:42:9\n",
];

/// The benchmarks' vocabulary on the shared generator.
impl Rng {
    /// `words` words of the vocabulary, separated by spaces.
    pub fn text(&mut self, words: usize) -> String {
        let mut s = String::new();
        for i in 0..words {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
        }
        s
    }

    /// Text of about `bytes` bytes (UTF-8), at least one word.
    pub fn text_bytes(&mut self, bytes: usize) -> String {
        let mut s = self.text(1);
        while s.len() < bytes {
            s.push(' ');
            s.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
        }
        s
    }

    /// The size of a tool's output: a long tail from a few hundred bytes to hundreds of KB.
    pub fn tool_output_size(&mut self) -> usize {
        let r = self.below(100);
        let size = if r < 50 {
            self.between(200, 1_000)
        } else if r < 85 {
            self.between(1_000, 8_000)
        } else if r < 98 {
            self.between(8_000, 64_000)
        } else {
            self.between(100_000, 400_000)
        };
        size as usize
    }
}

/// Which kind of session a [`SessionGen`] generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// The module documentation's session: a mean canonical line of about 1 KB.
    Current,
    /// Mostly small events, like the sessions of issue 14's harness (a mean canonical line of
    /// about 221 B): streamed two-to-five-word chunks, step and turn markers, steps without a
    /// `request`, short tool calls and results of 100 to 1,200 bytes (one in forty up to 4 KB).
    Small,
}

/// Generates a session event by event, forever (see the module documentation).
pub struct SessionGen {
    rng: Rng,
    seq: u64,
    turn: u64,
    mix: Mix,
    pending: std::collections::VecDeque<Event>,
}

impl Default for SessionGen {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionGen {
    pub fn new() -> Self {
        Self::with_mix(Mix::Current)
    }

    /// A generator of the given mix (the same seed).
    pub fn with_mix(mix: Mix) -> Self {
        SessionGen {
            rng: Rng(SEED),
            seq: 0,
            turn: 0,
            mix,
            pending: Default::default(),
        }
    }

    /// Turns completed so far (events of the current turn may still be pending).
    pub fn turns(&self) -> u64 {
        self.turn
    }

    fn push(&mut self, data: EventData, surface: bool, sources: Option<Vec<u64>>) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        self.pending.push_back(Event {
            seq,
            time: 1_755_000_000_000 + seq as i64 * 37,
            data,
            surface_op: surface.then_some(SurfaceOp::Append),
            source_event_seqs: sources,
            extra: Map::new(),
        });
        seq
    }

    fn turn(&mut self) {
        if self.mix == Mix::Small {
            return self.small_turn();
        }
        let turn = self.open_turn();
        let steps = self.rng.between(1, 4);
        for step in 1..=steps {
            let mut request = Map::new();
            let _ = request.push("model", Value::from("deepseek-chat"));
            let _ = request.push(
                "temperature",
                Value::Number(Number::parse("0.7").expect("a number")),
            );
            let _ = request.push("maxTokens", Value::from(8192u64));
            self.push(
                EventData::StepStart(StepStart {
                    turn,
                    step,
                    request: Opt::Present(request),
                    extra: Map::new(),
                }),
                false,
                None,
            );
            let mut chunks = Vec::new();
            for _ in 0..self.rng.between(3, 12) {
                let words = self.rng.between(2, 4) as usize;
                let text = self.rng.text(words);
                chunks.push(self.chunk(turn, step, text));
            }
            let uses = if step == steps {
                0
            } else {
                self.rng.between(1, 2)
            };
            let words = self.rng.between(20, 80) as usize;
            let mut content = vec![Block::text(self.rng.text(words))];
            let mut calls = Vec::new();
            for i in 0..uses {
                let id = format!("call_{turn}_{step}_{i}");
                let name = ["read_file", "bash", "edit"][self.rng.below(3) as usize].to_owned();
                let mut input = Map::new();
                let _ = input.push("path", Value::from(self.rng.text(1)));
                let _ = input.push("command", Value::from(self.rng.text(6)));
                let _ = input.push("timeout", Value::from(30u64));
                content.push(Block::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: Value::Object(input.clone()),
                    extra: Map::new(),
                });
                calls.push((id, name, Value::Object(input).to_string()));
            }
            let usage = Usage {
                input_tokens: self.rng.below(100_000),
                output_tokens: self.rng.below(5_000),
                ..Usage::default()
            };
            self.push(
                EventData::AssistantMessage(AssistantMessage {
                    turn,
                    step,
                    message: AssistantContent {
                        content,
                        provider: Opt::Present("deepseek".into()),
                        model: Opt::Present("deepseek-chat".into()),
                        replay: Opt::Absent,
                        extra: Map::new(),
                    },
                    usage: Opt::Present(usage),
                    extra: Map::new(),
                }),
                true,
                Some(chunks),
            );
            let mut call_seqs = Vec::new();
            for (id, name, arguments) in &calls {
                call_seqs.push(self.push(
                    EventData::ToolCall(ToolCall {
                        turn,
                        step,
                        call_id: id.clone(),
                        name: name.clone(),
                        arguments: arguments.clone(),
                        extra: Map::new(),
                    }),
                    false,
                    None,
                ));
            }
            for ((id, name, _), call_seq) in calls.into_iter().zip(call_seqs) {
                // Half resolved by callId, three in ten by sourceEventSeqs, the rest by name.
                let mode = self.rng.below(10);
                let size = self.rng.tool_output_size();
                let output = self.rng.text_bytes(size);
                let is_error = self.rng.below(10) == 0;
                self.push(
                    EventData::ToolResult(ToolResult {
                        turn,
                        step,
                        message: ToolMessage {
                            tool_name: name,
                            content: ToolContent::Text(output),
                            is_error,
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
            self.end_step(turn, step);
        }
        self.end_turn(turn);
    }
}

impl SessionGen {
    /// Starts the next turn: its `turn/start` and the user's prompt (10 to 60 words).
    fn open_turn(&mut self) -> u64 {
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
        let words = self.rng.between(10, 60) as usize;
        let prompt = self.rng.text(words);
        self.push(
            EventData::UserMessage(UserMessage {
                content: vec![Block::text(prompt)],
                envelope: Opt::Absent,
                extra: Map::new(),
            }),
            true,
            None,
        );
        turn
    }

    /// One streamed text chunk of the assistant; its seq.
    fn chunk(&mut self, turn: u64, step: u64, text: String) -> u64 {
        self.push(
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
        )
    }

    fn end_step(&mut self, turn: u64, step: u64) {
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

    /// Ends turn `turn` as `completed`.
    fn end_turn(&mut self, turn: u64) {
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

    /// One turn of [`Mix::Small`].
    fn small_turn(&mut self) {
        let turn = self.open_turn();
        let steps = self.rng.between(1, 6);
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
            for _ in 0..self.rng.between(2, 14) {
                let words = self.rng.between(2, 5) as usize;
                let text = self.rng.text(words);
                self.chunk(turn, step, text);
            }
            let uses = if step == steps { 0 } else { 1 };
            let words = self.rng.between(10, 40) as usize;
            let mut content = vec![Block::text(self.rng.text(words))];
            let mut calls = Vec::new();
            for i in 0..uses {
                let id = format!("call_{turn}_{step}_{i}");
                let name = ["read_file", "bash", "edit"][self.rng.below(3) as usize].to_owned();
                let mut input = Map::new();
                let _ = input.push("command", Value::from(self.rng.text(3)));
                content.push(Block::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: Value::Object(input.clone()),
                    extra: Map::new(),
                });
                calls.push((id, name, Value::Object(input).to_string()));
            }
            let usage = Usage {
                input_tokens: self.rng.below(100_000),
                output_tokens: self.rng.below(5_000),
                ..Usage::default()
            };
            self.push(
                EventData::AssistantMessage(AssistantMessage {
                    turn,
                    step,
                    message: AssistantContent {
                        content,
                        provider: Opt::Absent,
                        model: Opt::Present("deepseek-chat".into()),
                        replay: Opt::Absent,
                        extra: Map::new(),
                    },
                    usage: Opt::Present(usage),
                    extra: Map::new(),
                }),
                true,
                None,
            );
            for (id, name, arguments) in calls {
                self.push(
                    EventData::ToolCall(ToolCall {
                        turn,
                        step,
                        call_id: id.clone(),
                        name: name.clone(),
                        arguments,
                        extra: Map::new(),
                    }),
                    false,
                    None,
                );
                let size = if self.rng.below(40) == 0 {
                    self.rng.between(600, 4_000)
                } else {
                    self.rng.between(100, 1_200)
                };
                let output = self.rng.text_bytes(size as usize);
                let is_error = self.rng.below(10) == 0;
                self.push(
                    EventData::ToolResult(ToolResult {
                        turn,
                        step,
                        message: ToolMessage {
                            tool_name: name,
                            content: ToolContent::Text(output),
                            is_error,
                            extra: Map::new(),
                        },
                        call_id: Opt::Present(id),
                        error: Opt::Absent,
                        meta: Opt::Absent,
                        extra: Map::new(),
                    }),
                    true,
                    None,
                );
            }
            self.end_step(turn, step);
        }
        self.end_turn(turn);
    }
}

impl Iterator for SessionGen {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.pending.is_empty() {
            self.turn();
        }
        self.pending.pop_front()
    }
}

/// The first `n` events of the generated session of `mix` (it may end inside a turn).
pub fn mix_events(mix: Mix, n: usize) -> Vec<Event> {
    SessionGen::with_mix(mix).take(n).collect()
}

/// The first `n` events of the generated session (it may end inside a turn).
pub fn events(n: usize) -> Vec<Event> {
    SessionGen::new().take(n).collect()
}

/// The generated session's first `turns` complete turns.
pub fn generated_events(turns: u64) -> Vec<Event> {
    let mut gen = SessionGen::new();
    let mut out = Vec::new();
    loop {
        if gen.turns() == turns && gen.pending.is_empty() {
            return out;
        }
        out.extend(gen.next());
    }
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
    let text = rng.text_bytes(bytes.saturating_sub(160).max(1));
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
