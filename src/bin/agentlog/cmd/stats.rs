//! `agentlog stats SESSION [--json]`: counts over a session's events.
//!
//! The computation ([`Stats`]) depends on the event types only (no CLI, no storage), so it can
//! move into the library as it grows.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Result;

use agentlog::event::{decode_event, Event, EventData, Value};

use crate::cmd::{object, print_json};
use crate::target::Ctx;

/// Print statistics of a session
///
/// Events per type, turns and how they ended, steps, tokens, tool calls and failed results per
/// tool. --json prints {"events","eventsByType":{type:n},"turns","turnsByEndReason":{reason:n},"steps",
/// "tokens":{"input","output","cacheRead","cacheWrite","reasoning"},"tools":{name:{"calls",
/// "errors"}}}.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    let mut stats = Stats::default();
    for event in reader.events() {
        let event = event.map_err(|e| target.error(e))?;
        let owned = decode_event(event).map_err(|source| {
            target.error(agentlog::Error::Archive {
                seq: Some(event.seq()),
                source,
            })
        })?;
        stats.add(&owned);
    }
    if args.json {
        print_json(&stats.to_json())?;
    } else {
        out!("{}", stats.to_text())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Tool use of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolStats {
    /// `tool/call` events naming it.
    pub calls: u64,
    /// `tool/result` events of it with `isError: true`.
    pub errors: u64,
}

/// Token counts summed over `assistant/message` and `compact/summary` usage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

/// Counts over a session's events, fed one event at a time in seq order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub events: u64,
    pub by_type: BTreeMap<String, u64>,
    /// `turn/start` events.
    pub turns: u64,
    /// `turn/end` events by `reason.kind`.
    pub end_reasons: BTreeMap<String, u64>,
    /// `step/start` events.
    pub steps: u64,
    pub tokens: Tokens,
    /// By tool name (the call's `name`, the result's `toolName`).
    pub tools: BTreeMap<String, ToolStats>,
}

impl Stats {
    /// Counts one event.
    pub fn add(&mut self, e: &Event) {
        self.events += 1;
        *self.by_type.entry(e.type_name().to_string()).or_default() += 1;
        let mut usage = None;
        match &e.data {
            EventData::TurnStart(_) => self.turns += 1,
            EventData::TurnEnd(d) => {
                *self
                    .end_reasons
                    .entry(d.reason.kind.as_str().to_string())
                    .or_default() += 1;
            }
            EventData::StepStart(_) => self.steps += 1,
            EventData::AssistantMessage(d) => usage = d.usage.present(),
            EventData::CompactSummary(d) => usage = d.usage.present(),
            EventData::ToolCall(d) => self.tools.entry(d.name.clone()).or_default().calls += 1,
            EventData::ToolResult(d) if d.message.is_error => {
                self.tools
                    .entry(d.message.tool_name.clone())
                    .or_default()
                    .errors += 1;
            }
            _ => {}
        }
        if let Some(u) = usage {
            let t = &mut self.tokens;
            t.input += u.input_tokens;
            t.output += u.output_tokens;
            t.cache_read += u.cache_read_tokens.present().copied().unwrap_or(0);
            t.cache_write += u.cache_write_tokens.present().copied().unwrap_or(0);
            t.reasoning += u.reasoning_tokens.present().copied().unwrap_or(0);
        }
    }

    /// The JSON form documented on `agentlog stats --help`.
    pub fn to_json(&self) -> Value {
        let counts = |m: &BTreeMap<String, u64>| {
            object(m.iter().map(|(k, &v)| (k.as_str(), v.into())).collect())
        };
        let t = &self.tokens;
        object(vec![
            ("events", self.events.into()),
            ("eventsByType", counts(&self.by_type)),
            ("turns", self.turns.into()),
            ("turnsByEndReason", counts(&self.end_reasons)),
            ("steps", self.steps.into()),
            (
                "tokens",
                object(vec![
                    ("input", t.input.into()),
                    ("output", t.output.into()),
                    ("cacheRead", t.cache_read.into()),
                    ("cacheWrite", t.cache_write.into()),
                    ("reasoning", t.reasoning.into()),
                ]),
            ),
            (
                "tools",
                object(
                    self.tools
                        .iter()
                        .map(|(k, s)| {
                            (
                                k.as_str(),
                                object(vec![
                                    ("calls", s.calls.into()),
                                    ("errors", s.errors.into()),
                                ]),
                            )
                        })
                        .collect(),
                ),
            ),
        ])
    }

    /// A plain-text report.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("events   {}\n", self.events));
        for (t, n) in &self.by_type {
            s.push_str(&format!("  {t:<20} {n:>8}\n"));
        }
        s.push_str(&format!("turns    {}\n", self.turns));
        for (r, n) in &self.end_reasons {
            s.push_str(&format!("  {r:<20} {n:>8}\n"));
        }
        s.push_str(&format!("steps    {}\n", self.steps));
        let t = &self.tokens;
        s.push_str(&format!(
            "tokens   {} in, {} out, {} cache read, {} cache write, {} reasoning\n",
            t.input, t.output, t.cache_read, t.cache_write, t.reasoning
        ));
        if !self.tools.is_empty() {
            s.push_str("tools    calls  errors  error rate\n");
            for (name, st) in &self.tools {
                let rate = if st.calls == 0 {
                    "-".to_string()
                } else {
                    format!("{:.0}%", 100.0 * st.errors as f64 / st.calls as f64)
                };
                s.push_str(&format!(
                    "  {name:<20} {:>5} {:>7} {rate:>11}\n",
                    st.calls, st.errors
                ));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentlog::event::parse_jsonl;

    #[test]
    fn counts_the_fix_typo_example() {
        let text = include_str!("../../../../examples/sessions/fix-typo.jsonl");
        let (_, events) = parse_jsonl(text.as_bytes()).unwrap();
        let mut s = Stats::default();
        for e in &events {
            s.add(e);
        }
        assert_eq!(s.events, 10);
        assert_eq!(s.turns, 1);
        assert_eq!(s.steps, 1);
        assert_eq!(s.end_reasons.get("completed"), Some(&1));
        assert_eq!(s.by_type.get("assistant/chunk"), Some(&2));
        assert_eq!(s.tokens.input, 12);
        assert_eq!(s.tokens.output, 4);
        assert_eq!(
            s.tools.get("bash"),
            Some(&ToolStats {
                calls: 1,
                errors: 0
            })
        );
        assert_eq!(
            s.to_json().to_string(),
            r#"{"events":10,"eventsByType":{"assistant/chunk":2,"assistant/message":1,"step/end":1,"step/start":1,"tool/call":1,"tool/result":1,"turn/end":1,"turn/start":1,"user/message":1},"turns":1,"turnsByEndReason":{"completed":1},"steps":1,"tokens":{"input":12,"output":4,"cacheRead":0,"cacheWrite":0,"reasoning":0},"tools":{"bash":{"calls":1,"errors":0}}}"#
        );
    }
}
