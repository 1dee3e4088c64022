//! Property: for random valid sessions (turns, steps, chunks, tool calls answered by callId, by
//! sourceEventSeqs and by name, empty assistant messages, noise events, replaces anywhere on the
//! surface), the incremental projector after each event equals a simple reference model, every
//! snapshot it handed out is unchanged at the end and equals a from-scratch derive of that
//! prefix, the open calls are the model's, and at every step start both provider renderings
//! are valid requests.

use testkit::project as project_common;

use agentlog::event::{Block, Event, EventData, Map};
use agentlog::projection::{
    self, render_anthropic, render_openai, Message, Messages, Projector, Role,
};
use project_common::provider_schema::{check_anthropic, check_openai};
use project_common::{assistant_data, q, replace_op, user_data, Log};
use proptest::collection::vec;
use proptest::prelude::*;

const TOOLS: [&str; 2] = ["ls", "cat"];

#[derive(Clone, Debug)]
enum Action {
    User,
    System,
    /// An event never projected: `error`, `sandbox/event` or an unknown type.
    Noise(u8),
    Turn(Vec<StepSpec>),
    /// A replace of the nodes at model positions `a % len` and `b % len` (ordered), carried by
    /// a user, system or assistant message (`kind` 0, 1, 2).
    Replace {
        a: usize,
        b: usize,
        kind: u8,
    },
}

#[derive(Clone, Debug)]
struct StepSpec {
    chunks: u8,
    /// The assistant message is empty (skipped by the projection).
    empty: bool,
    /// The tool of each call.
    calls: Vec<usize>,
    /// For each call: how its result names it (0 callId, 1 sourceEventSeqs, 2 by name, 3 not
    /// answered).
    modes: Vec<u8>,
    /// Answer the calls in reverse order.
    reverse: bool,
}

fn step_spec() -> impl Strategy<Value = StepSpec> {
    (
        0u8..3,
        prop::bool::weighted(0.15),
        vec(0..TOOLS.len(), 0..4),
    )
        .prop_flat_map(|(chunks, empty, calls)| {
            let n = calls.len();
            (
                Just(chunks),
                Just(empty),
                Just(calls),
                vec(0u8..4, n),
                any::<bool>(),
            )
        })
        .prop_map(|(chunks, empty, calls, modes, reverse)| StepSpec {
            chunks,
            empty,
            calls,
            modes,
            reverse,
        })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => Just(Action::User),
        1 => Just(Action::System),
        1 => (0u8..3).prop_map(Action::Noise),
        4 => vec(step_spec(), 0..3).prop_map(Action::Turn),
        2 => (any::<usize>(), any::<usize>(), 0u8..3)
            .prop_map(|(a, b, kind)| Action::Replace { a, b, kind }),
    ]
}

/// A tracked call in the model.
struct Call {
    seq: u64,
    id: String,
    name: &'static str,
    turn: u64,
    step: u64,
    answered: bool,
}

/// The generated log and, after each event, the history the reference model expects.
struct Session {
    log: Log,
    expected: Vec<Vec<Message>>,
    surface: Vec<Message>,
    calls: Vec<Call>,
    turn: u64,
}

impl Session {
    fn new() -> Self {
        Self {
            log: Log::new(),
            expected: Vec::new(),
            surface: Vec::new(),
            calls: Vec::new(),
            turn: 0,
        }
    }

    /// Adds an event; `node` is the message it projects to in the model (`None`: nothing) and
    /// `replace` the model positions it replaces.
    fn add(&mut self, event: Event, node: Option<Message>, replace: Option<(usize, usize)>) {
        self.log.push(event);
        match (node, replace) {
            (Some(message), None) => self.surface.push(message),
            (Some(message), Some((i, j))) => {
                self.surface.splice(i..=j, [message]);
            }
            (None, _) => {}
        }
        self.expected.push(self.surface.clone());
    }

    fn blocks_node(event: &Event) -> Option<Message> {
        let (role, content) = match &event.data {
            EventData::UserMessage(m) => (Role::User, &m.content),
            EventData::SystemMessage(m) => (Role::System, &m.content),
            EventData::AssistantMessage(m) if !m.message.content.is_empty() => {
                (Role::Assistant, &m.message.content)
            }
            _ => return None,
        };
        Some(Message {
            role,
            content: content.clone(),
            source_seq: event.seq,
        })
    }

    fn simple(&mut self, ty: &str, data: &str, envelope: &str) {
        let event = self.log.make(ty, data, envelope);
        let node = Self::blocks_node(&event);
        self.add(event, node, None);
    }

    fn run(&mut self, action: &Action) {
        match action {
            Action::User => {
                let text = format!("user {}", self.log.next());
                self.simple("user/message", &user_data(&text), "");
            }
            Action::System => {
                let text = format!("system {}", self.log.next());
                self.simple(
                    "system/message",
                    &format!(
                        r#"{{"role":"system","content":[{{"type":"text","text":{}}}]}}"#,
                        q(&text)
                    ),
                    r#","surfaceOp":"append""#,
                );
            }
            Action::Noise(0) => self.simple("error", r#"{"message":"boom"}"#, ""),
            Action::Noise(1) => self.simple("sandbox/event", r#"{"kind":"start"}"#, ""),
            Action::Noise(_) => self.simple("hook/invoked", r#"{"hook":"x"}"#, ""),
            Action::Turn(steps) => self.turn(steps),
            Action::Replace { a, b, kind } => self.replace(*a, *b, *kind),
        }
    }

    fn turn(&mut self, steps: &[StepSpec]) {
        self.turn += 1;
        let turn = self.turn;
        self.simple("turn/start", &format!(r#"{{"turn":{turn}}}"#), "");
        for (s, spec) in steps.iter().enumerate() {
            let step = s as u64 + 1;
            self.simple(
                "step/start",
                &format!(r#"{{"turn":{turn},"step":{step}}}"#),
                "",
            );
            for _ in 0..spec.chunks {
                self.simple(
                    "assistant/chunk",
                    &format!(r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","text":"x"}}}}"#),
                    "",
                );
            }
            let ids: Vec<String> = (0..spec.calls.len())
                .map(|i| format!("call_{turn}_{step}_{i}"))
                .collect();
            let mut content = Vec::new();
            if !spec.empty {
                content.push(format!(r#"{{"type":"text","text":"step {turn}.{step}"}}"#));
                for (i, &tool) in spec.calls.iter().enumerate() {
                    content.push(format!(
                        r#"{{"type":"tool_use","id":{},"name":"{}","input":{{"i":{i}}}}}"#,
                        q(&ids[i]),
                        TOOLS[tool]
                    ));
                }
            }
            self.simple(
                "assistant/message",
                &assistant_data(turn, step, &format!("[{}]", content.join(","))),
                r#","surfaceOp":"append","sourceEventSeqs":[]"#,
            );
            let mut call_seqs = Vec::new();
            for (i, &tool) in spec.calls.iter().enumerate() {
                call_seqs.push(self.log.next());
                self.calls.push(Call {
                    seq: self.log.next(),
                    id: ids[i].clone(),
                    name: TOOLS[tool],
                    turn,
                    step,
                    answered: false,
                });
                self.simple(
                    "tool/call",
                    &format!(
                        r#"{{"turn":{turn},"step":{step},"callId":{},"name":"{}","arguments":"{{}}"}}"#,
                        q(&ids[i]),
                        TOOLS[tool]
                    ),
                    "",
                );
            }
            let mut order: Vec<usize> = (0..spec.calls.len()).collect();
            if spec.reverse {
                order.reverse();
            }
            for i in order {
                self.result(turn, step, call_seqs[i], spec.modes[i]);
            }
            self.simple(
                "step/end",
                &format!(r#"{{"turn":{turn},"step":{step}}}"#),
                "",
            );
        }
        self.simple(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            "",
        );
    }

    /// A result for the call at `call_seq`, named by `mode`; skipped when that would not be a
    /// valid event (the call was already taken by a result resolved by name).
    fn result(&mut self, turn: u64, step: u64, call_seq: u64, mode: u8) {
        let Some(intended) = self.calls.iter().position(|c| c.seq == call_seq) else {
            return;
        };
        if mode == 3 || self.calls[intended].answered {
            return;
        }
        let name = self.calls[intended].name;
        let answered = if mode == 2 {
            // The reference rule: earliest unanswered call of this turn and step with this name.
            self.calls
                .iter()
                .position(|c| !c.answered && c.turn == turn && c.step == step && c.name == name)
        } else {
            Some(intended)
        };
        let Some(answered) = answered else { return };
        let call_id = (mode == 0).then(|| self.calls[intended].id.clone());
        let sources = (mode == 1).then(|| vec![call_seq]);
        let event = self
            .log
            .make_result(turn, step, name, call_id.as_deref(), sources.as_deref());
        let EventData::ToolResult(result) = &event.data else {
            unreachable!()
        };
        let node = Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: self.calls[answered].id.clone(),
                tool_name: name.to_owned(),
                content: result.message.content.clone(),
                is_error: false,
                extra: Map::new(),
            }],
            source_seq: event.seq,
        };
        self.calls[answered].answered = true;
        self.add(event, Some(node), None);
    }

    fn replace(&mut self, a: usize, b: usize, kind: u8) {
        if self.surface.is_empty() {
            return self.run(&Action::User);
        }
        let (i, j) = (a % self.surface.len(), b % self.surface.len());
        let (i, j) = (i.min(j), i.max(j));
        let (start, end) = (self.surface[i].source_seq, self.surface[j].source_seq);
        let op = replace_op(start, end);
        let text = format!("summary {}", self.log.next());
        let event = match kind {
            0 => self.log.make("user/message", &user_data(&text), &op),
            1 => self.log.make(
                "system/message",
                &format!(
                    r#"{{"role":"system","content":[{{"type":"text","text":{}}}]}}"#,
                    q(&text)
                ),
                &op,
            ),
            _ => self.log.make(
                "assistant/message",
                &assistant_data(0, 0, &format!(r#"[{{"type":"text","text":{}}}]"#, q(&text))),
                &op,
            ),
        };
        let node = Self::blocks_node(&event);
        self.add(event, node, Some((i, j)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn incremental_projection_equals_derive_and_the_model(actions in vec(action(), 0..32)) {
        let mut session = Session::new();
        for action in &actions {
            session.run(action);
        }
        let events = &session.log.events;

        let mut projector = Projector::new();
        let mut snapshots = Vec::with_capacity(events.len());
        for (event, expected) in events.iter().zip(&session.expected) {
            prop_assert_eq!(projector.check(event), Ok(()), "check seq {}", event.seq);
            prop_assert_eq!(projector.apply(event), Ok(()), "apply seq {}", event.seq);
            let snapshot = projector.messages();
            prop_assert_eq!(&snapshot, &Messages::from(expected.clone()), "after seq {}", event.seq);
            prop_assert_eq!(projector.len(), expected.len());
            snapshots.push(snapshot);
        }
        prop_assert_eq!(projector.events_seen(), events.len() as u64);

        // Later events changed no snapshot; each equals a fresh derive of its prefix.
        for (n, snapshot) in snapshots.iter().enumerate() {
            let fresh = projection::messages(&events[..=n]).unwrap();
            prop_assert_eq!(snapshot, &fresh, "prefix {}", n + 1);
            prop_assert_eq!(snapshot, &Messages::from(session.expected[n].clone()));
            prop_assert_eq!(&projection::messages_at(events, n as u64 + 1).unwrap(), &fresh);
        }

        // At every point a model is called (a step starts) both renderings are requests the
        // providers accept (typed request shapes and tool-call pairing, issue 15).
        for (n, event) in events.iter().enumerate() {
            if matches!(event.data, EventData::StepStart(_)) {
                let at = &snapshots[n];
                let openai = render_openai(at);
                let anthropic = render_anthropic(at);
                prop_assert!(check_openai(&openai).is_ok(), "{:?}", check_openai(&openai));
                prop_assert!(check_anthropic(&anthropic).is_ok(), "{:?} {}", check_anthropic(&anthropic), at);
            }
        }

        let open: Vec<u64> = projector.unanswered_calls().map(|c| c.seq).collect();
        let model_open: Vec<u64> = session.calls.iter().filter(|c| !c.answered).map(|c| c.seq).collect();
        prop_assert_eq!(open, model_open);
        for call in &session.calls {
            prop_assert_eq!(projector.is_answered(&call.id), call.answered);
        }
    }
}
