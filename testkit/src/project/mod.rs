//! Helpers for the projection tests: a log builder, the example files, and JSON equality up to
//! member order (written here, independent of the library's request check).
#![allow(dead_code)]

use std::path::PathBuf;

use agentlog::event::{parse_event_line, parse_json, parse_jsonl, Event, Map, Member, Value};

/// The example sessions: (name, events, expected neutral projection).
pub fn examples() -> Vec<(String, Vec<Event>, Value)> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/sessions"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_suffix(".jsonl").map(str::to_owned))
        .collect();
    names.sort();
    assert!(names.len() >= 3, "examples missing in {}", dir.display());
    names
        .into_iter()
        .map(|name| {
            let log = std::fs::read(dir.join(format!("{name}.jsonl"))).unwrap();
            let (_, events) = parse_jsonl(&log).unwrap_or_else(|e| panic!("{name}: {e}"));
            let expected = std::fs::read_to_string(dir.join(format!("{name}.messages.json")))
                .unwrap_or_else(|e| panic!("{name}.messages.json: {e}"));
            let expected = parse_json(&expected).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, events, expected)
        })
        .collect()
}

/// `value` with the members of every object sorted by name (stable, so equal names — which a
/// `Map` never has — would keep their order).
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        Value::Object(map) => {
            let mut members: Vec<Member> = map
                .iter()
                .map(|(key, value)| Member {
                    key: key.to_owned(),
                    value: sorted(value),
                })
                .collect();
            members.sort_by(|a, b| a.key.cmp(&b.key));
            Value::Object(Map::try_from(members).unwrap())
        }
        other => other.clone(),
    }
}

/// Equal as JSON values up to object member order (number text compared exactly).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    sorted(a) == sorted(b)
}

/// A JSON string literal.
pub fn q(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// Builds a log event by event, seqs from 0.
#[derive(Default)]
pub struct Log {
    pub events: Vec<Event>,
}

impl Log {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next seq.
    pub fn next(&self) -> u64 {
        self.events.len() as u64
    }

    /// The event the next push would add: `{"type":ty,"seq":…,"time":…,"data":data<envelope>}`,
    /// `envelope` being more envelope members, starting with a comma (or empty).
    pub fn make(&self, ty: &str, data: &str, envelope: &str) -> Event {
        let seq = self.next();
        let line = format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}{envelope}}}"#,
            1_700_000_000_000u64 + seq
        );
        parse_event_line(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    pub fn push(&mut self, event: Event) -> u64 {
        assert_eq!(event.seq, self.next());
        self.events.push(event);
        self.next() - 1
    }

    pub fn add(&mut self, ty: &str, data: &str, envelope: &str) -> u64 {
        let event = self.make(ty, data, envelope);
        self.push(event)
    }

    pub fn user(&mut self, text: &str) -> u64 {
        self.add("user/message", &user_data(text), "")
    }

    pub fn system(&mut self, text: &str) -> u64 {
        self.add(
            "system/message",
            &format!(
                r#"{{"role":"system","content":[{{"type":"text","text":{}}}]}}"#,
                q(text)
            ),
            r#","surfaceOp":"append""#,
        )
    }

    /// An assistant message with these content blocks (JSON array text).
    pub fn assistant(&mut self, turn: u64, step: u64, content: &str) -> u64 {
        self.add(
            "assistant/message",
            &assistant_data(turn, step, content),
            "",
        )
    }

    pub fn turn_start(&mut self, turn: u64) -> u64 {
        self.add("turn/start", &format!(r#"{{"turn":{turn}}}"#), "")
    }

    pub fn step_start(&mut self, turn: u64, step: u64) -> u64 {
        self.add(
            "step/start",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            "",
        )
    }

    pub fn step_end(&mut self, turn: u64, step: u64) -> u64 {
        self.add(
            "step/end",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            "",
        )
    }

    pub fn tool_call(&mut self, turn: u64, step: u64, id: &str, name: &str) -> u64 {
        self.add(
            "tool/call",
            &format!(
                r#"{{"turn":{turn},"step":{step},"callId":{},"name":{},"arguments":"{{}}"}}"#,
                q(id),
                q(name)
            ),
            "",
        )
    }

    /// Turn 1 opened by the prompt "go", and its step 1 calling `ls` (call id `c1`): an
    /// assistant message with the `tool_use` and its `tool/call`, whose seq is returned.
    pub fn ls_call(&mut self) -> u64 {
        self.turn_start(1);
        self.user("go");
        self.step_start(1, 1);
        self.assistant(
            1,
            1,
            r#"[{"type":"tool_use","id":"c1","name":"ls","input":{}}]"#,
        );
        self.tool_call(1, 1, "c1", "ls")
    }

    /// A tool/result of `name`, with `callId` when given and `sourceEventSeqs` when given.
    pub fn make_result(
        &self,
        turn: u64,
        step: u64,
        name: &str,
        call_id: Option<&str>,
        sources: Option<&[u64]>,
    ) -> Event {
        let call_id = call_id.map_or(String::new(), |id| format!(r#","callId":{}"#, q(id)));
        let sources = sources.map_or(String::new(), |s| {
            let items: Vec<String> = s.iter().map(u64::to_string).collect();
            format!(r#","sourceEventSeqs":[{}]"#, items.join(","))
        });
        self.make(
            "tool/result",
            &format!(
                r#"{{"turn":{turn},"step":{step},"message":{{"role":"tool","toolName":{},"content":"out of {}","isError":false}}{call_id}}}"#,
                q(name),
                self.next()
            ),
            &format!(r#","surfaceOp":"append"{sources}"#),
        )
    }

    pub fn result(
        &mut self,
        turn: u64,
        step: u64,
        name: &str,
        call_id: Option<&str>,
        sources: Option<&[u64]>,
    ) -> u64 {
        let event = self.make_result(turn, step, name, call_id, sources);
        self.push(event)
    }

    /// A user message replacing the nodes `start..=end`.
    pub fn make_replace(&self, text: &str, start: u64, end: u64) -> Event {
        self.make("user/message", &user_data(text), &replace_op(start, end))
    }

    pub fn replace(&mut self, text: &str, start: u64, end: u64) -> u64 {
        let event = self.make_replace(text, start, end);
        self.push(event)
    }
}

pub fn user_data(text: &str) -> String {
    format!(
        r#"{{"role":"user","content":[{{"type":"text","text":{}}}]}}"#,
        q(text)
    )
}

pub fn assistant_data(turn: u64, step: u64, content: &str) -> String {
    format!(
        r#"{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":{content}}}}}"#
    )
}

pub fn replace_op(start: u64, end: u64) -> String {
    format!(r#","surfaceOp":{{"op":"replace","startSeq":{start},"endSeq":{end}}}"#)
}
pub mod provider_schema;
