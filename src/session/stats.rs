//! Statistics of a session, derived from its events read in place: events per type, turns and
//! how they ended, steps, tokens, tool calls, failures and latencies, turn durations, bytes.
//!
//! [`StatsCollector`] is fed archived events in seq order; [`SessionReader::stats`] feeds it a
//! whole session; [`SessionStats::merge`] sums sessions (what `agentlog stats --all` prints).

use std::collections::BTreeMap;

use crate::error::Result;
use crate::event::archived::{ArchivedEvent, ArchivedEventData, ArchivedUsage};
use crate::event::{Map, Number, Value};

use super::checkpoint::{Bad, Dec, Enc};
use super::facts::Facts;
use super::lifecycle::Lifecycle;
use super::reader::SessionReader;

/// Millisecond samples (latencies, durations), in the order seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durations(Vec<i64>);

impl Durations {
    /// No samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a sample.
    pub fn push(&mut self, ms: i64) {
        self.0.push(ms);
    }

    /// Adds every sample of `other`.
    pub fn extend(&mut self, other: &Durations) {
        self.0.extend_from_slice(&other.0);
    }

    /// The samples, in the order seen.
    pub fn as_slice(&self) -> &[i64] {
        &self.0
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there is no sample.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The median: the middle value, or of an even number of values the mean of the two middle
    /// ones. `None` without samples.
    pub fn median(&self) -> Option<f64> {
        let mut v = self.0.clone();
        v.sort_unstable();
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2] as f64),
            _ => Some((v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0),
        }
    }

    /// The largest sample.
    pub fn max(&self) -> Option<i64> {
        self.0.iter().copied().max()
    }
}

/// Token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// `inputTokens`.
    pub input: u64,
    /// `outputTokens`.
    pub output: u64,
    /// `cacheReadTokens`.
    pub cache_read: u64,
    /// `cacheWriteTokens`.
    pub cache_write: u64,
    /// `reasoningTokens`.
    pub reasoning: u64,
}

impl Tokens {
    fn add(&mut self, o: &Tokens) {
        self.input = self.input.saturating_add(o.input);
        self.output = self.output.saturating_add(o.output);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
        self.cache_write = self.cache_write.saturating_add(o.cache_write);
        self.reasoning = self.reasoning.saturating_add(o.reasoning);
    }

    fn of(u: &ArchivedUsage) -> Tokens {
        let opt =
            |o: &crate::event::archived::ArchivedOpt<u64>| o.present().map_or(0, |v| v.to_native());
        Tokens {
            input: u.input_tokens.to_native(),
            output: u.output_tokens.to_native(),
            cache_read: opt(&u.cache_read_tokens),
            cache_write: opt(&u.cache_write_tokens),
            reasoning: opt(&u.reasoning_tokens),
        }
    }
}

/// The use of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolStats {
    /// Its `tool/call`s.
    pub calls: u64,
    /// Its `tool/result`s with `isError: true`.
    pub errors: u64,
    /// Call-to-result latencies of its calls, milliseconds.
    pub latency: Durations,
}

impl ToolStats {
    /// `errors / calls`, 0 when there are no calls.
    pub fn failure_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.errors as f64 / self.calls as f64
        }
    }

    fn merge(&mut self, o: &ToolStats) {
        self.calls += o.calls;
        self.errors += o.errors;
        self.latency.extend(&o.latency);
    }
}

/// Statistics of a session (or, merged, of several).
///
/// [`SessionReader::stats`] computes them for a session, with a [`StatsCollector`] fed its
/// archived events in seq order; [`merge`](Self::merge) sums sessions
/// ([`Store::stats`](crate::store::Store::stats), `agentlog stats --all`).
///
/// # Definitions
///
/// - `turns`: `turn/start` events; `endReasons`: `turn/end` events by `reason.kind`; `steps`:
///   `step/start` events.
/// - `tokens`: the sum of every `usage` of `assistant/message` **and** `compact/summary` (a
///   compaction's summary is a model call whose tokens were spent like any other; leaving it out
///   would under-count what a session cost). Absent optional counts add 0.
/// - `tools`: every tool named by a `tool/call` (`name`) or a `tool/result`
///   (`message.toolName`). `calls` counts its `tool/call`s; `errors` counts the `tool/result`s
///   with `isError: true` whose `toolName` it is; `failureRate` is errors ÷ calls (0 when there
///   are no calls).
/// - Tool latency: a `tool/result`'s `time` minus the `time` of the call it answers, found the
///   way the lifecycle rules find it (docs/events.md §5: `callId`; else `sourceEventSeqs[0]`; else
///   the earliest unanswered call of the same turn and step with that name), and counted for the
///   tool of that call. A result whose call is not found has no latency (it still counts as an
///   error when `isError`).
/// - Turn durations: a `turn/end`'s `time` minus its `turn/start`'s (a turn still open has
///   none).
/// - `unansweredCalls`: the `tool/call`s whose step (or turn) ended without a result, and got
///   none after.
/// - Medians: of an even number of values, the mean of the two middle ones (so it may end in
///   `.5`).
/// - `bytes`: the session's files on disk ([`SessionReader::bytes_on_disk`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Events.
    pub events: u64,
    /// Events by type name (unknown types by their own name).
    pub by_type: BTreeMap<String, u64>,
    /// `turn/start` events.
    pub turns: u64,
    /// `turn/end` events by `reason.kind`.
    pub end_reasons: BTreeMap<String, u64>,
    /// `step/start` events.
    pub steps: u64,
    /// Tokens of assistant messages and compaction summaries.
    pub tokens: Tokens,
    /// By tool name.
    pub tools: BTreeMap<String, ToolStats>,
    /// Durations of the turns that ended (`turn/end` time minus `turn/start` time).
    pub turn_durations: Durations,
    /// Tool calls whose step (or turn) ended without a result (none came after): the provider
    /// renderings answer them with `TOOL_OUTCOME_UNKNOWN` (docs/events.md §7).
    pub unanswered_calls: u64,
    /// Bytes of the session's files on disk.
    pub bytes: u64,
}

impl SessionStats {
    /// Adds `other` to these statistics: counts and bytes are summed, samples (latencies, turn
    /// durations) pooled, so medians are of every sample, not of the medians.
    pub fn merge(&mut self, other: &SessionStats) {
        self.events += other.events;
        for (k, n) in &other.by_type {
            *self.by_type.entry(k.clone()).or_default() += n;
        }
        self.turns += other.turns;
        for (k, n) in &other.end_reasons {
            *self.end_reasons.entry(k.clone()).or_default() += n;
        }
        self.steps += other.steps;
        self.tokens.add(&other.tokens);
        for (k, t) in &other.tools {
            self.tools.entry(k.clone()).or_default().merge(t);
        }
        self.turn_durations.extend(&other.turn_durations);
        self.unanswered_calls += other.unanswered_calls;
        self.bytes += other.bytes;
    }

    /// The JSON form `agentlog stats --json` prints, members in this order:
    /// `{"events","byType":{TYPE:n},"turns","endReasons":{KIND:n},"turnDurationMs":{"median",
    /// "max"},"steps","tokens":{"input","output","cacheRead","cacheWrite","reasoning"},
    /// "tools":{NAME:{"calls","errors","failureRate","latencyMs":{"median","max"}}},
    /// "unansweredCalls","bytes"}` (types, kinds and tools sorted by name; `median` and `max`
    /// are `null` for a tool without a measured latency, and for turn durations when no turn
    /// ended).
    pub fn to_json(&self) -> Value {
        let counts = |m: &BTreeMap<String, u64>| {
            object(
                m.iter()
                    .map(|(k, &v)| (k.as_str(), Value::from(v)))
                    .collect(),
            )
        };
        let t = &self.tokens;
        let tools = self
            .tools
            .iter()
            .map(|(name, s)| {
                let latency = object(vec![
                    ("median", s.latency.median().map_or(Value::Null, float)),
                    ("max", s.latency.max().map_or(Value::Null, Value::from)),
                ]);
                let tool = object(vec![
                    ("calls", s.calls.into()),
                    ("errors", s.errors.into()),
                    ("failureRate", float(s.failure_rate())),
                    ("latencyMs", latency),
                ]);
                (name.as_str(), tool)
            })
            .collect();
        object(vec![
            ("events", self.events.into()),
            ("byType", counts(&self.by_type)),
            ("turns", self.turns.into()),
            ("endReasons", counts(&self.end_reasons)),
            (
                "turnDurationMs",
                object(vec![
                    (
                        "median",
                        self.turn_durations.median().map_or(Value::Null, float),
                    ),
                    (
                        "max",
                        self.turn_durations.max().map_or(Value::Null, Value::from),
                    ),
                ]),
            ),
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
            ("tools", object(tools)),
            ("unansweredCalls", self.unanswered_calls.into()),
            ("bytes", self.bytes.into()),
        ])
    }
}

/// A JSON object from members in order (the names are distinct at every call site).
fn object(members: Vec<(&str, Value)>) -> Value {
    let mut map = Map::new();
    for (k, v) in members {
        // A repeated name would be a bug here; the first one wins.
        let _ = map.push(k, v);
    }
    Value::Object(map)
}

/// A finite `f64` as a JSON number (`2`, `0.5`, `0.3333333333333333`).
fn float(x: f64) -> Value {
    Number::parse(&format!("{x}")).map_or(Value::Null, Value::Number)
}

/// Computes [`SessionStats`] from archived events fed in seq order, without decoding them.
#[derive(Debug, Clone, Default)]
pub struct StatsCollector {
    stats: SessionStats,
    /// The lifecycle bookkeeping, for its resolution of results to calls.
    lifecycle: Lifecycle,
    /// `(seq, time)` of the `tool/call`s of the open turn (results answer calls of their turn).
    call_times: Vec<(u64, i64)>,
    /// The time of the open turn's `turn/start`.
    turn_start: Option<i64>,
}

impl StatsCollector {
    /// No event seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts the next event.
    pub fn add(&mut self, e: &ArchivedEvent) {
        use ArchivedEventData as D;
        let s = &mut self.stats;
        s.events += 1;
        bump(&mut s.by_type, e.type_name());
        let facts = Facts::of_archived(e);
        match &e.data {
            D::TurnStart(_) => {
                s.turns += 1;
                self.turn_start = Some(e.time());
                self.call_times.clear();
            }
            D::TurnEnd(d) => {
                bump(&mut s.end_reasons, d.reason.kind.as_str());
                if let Some(start) = self.turn_start.take() {
                    s.turn_durations.push(e.time().saturating_sub(start));
                }
            }
            D::StepStart(_) => s.steps += 1,
            D::AssistantMessage(d) => {
                if let Some(u) = d.usage.present() {
                    s.tokens.add(&Tokens::of(u));
                }
            }
            D::CompactSummary(d) => {
                if let Some(u) = d.usage.present() {
                    s.tokens.add(&Tokens::of(u));
                }
            }
            D::ToolCall(d) => {
                with_tool(&mut s.tools, &d.name, |t| t.calls += 1);
                self.call_times.push((e.seq(), e.time()));
            }
            D::ToolResult(d) => {
                let is_error = d.message.is_error;
                with_tool(&mut s.tools, &d.message.tool_name, |t| {
                    t.errors += u64::from(is_error);
                });
                if let Some(call) = self.lifecycle.call_answered(&facts) {
                    let at = self
                        .call_times
                        .binary_search_by_key(&call.seq, |&(seq, _)| seq)
                        .ok()
                        .map(|i| self.call_times[i].1);
                    if let Some(at) = at {
                        let ms = e.time().saturating_sub(at);
                        with_tool(&mut s.tools, &call.name, |t| t.latency.push(ms));
                    }
                }
            }
            _ => {}
        }
        self.lifecycle.apply(&facts);
    }

    /// The statistics of the events counted (`bytes` is left 0: it is not in the events).
    pub fn finish(self) -> SessionStats {
        let mut stats = self.stats;
        stats.unanswered_calls = self.lifecycle.closed_unanswered().len() as u64;
        stats
    }
}

impl StatsCollector {
    /// The lifecycle bookkeeping it keeps (every event counted is applied to it).
    pub(crate) fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    pub(crate) fn lifecycle_mut(&mut self) -> &mut Lifecycle {
        &mut self.lifecycle
    }

    /// The counters as checkpoint bytes (the lifecycle is written apart).
    pub(crate) fn encode_counters(&self, e: &mut Enc) {
        let s = &self.stats;
        let counts = |e: &mut Enc, m: &BTreeMap<String, u64>| {
            e.u64(m.len() as u64);
            for (k, n) in m {
                e.str(k);
                e.u64(*n);
            }
        };
        let samples = |e: &mut Enc, d: &Durations| {
            e.u64(d.0.len() as u64);
            for v in &d.0 {
                e.i64(*v);
            }
        };
        e.u64(s.events);
        counts(e, &s.by_type);
        e.u64(s.turns);
        counts(e, &s.end_reasons);
        e.u64(s.steps);
        let t = &s.tokens;
        for v in [t.input, t.output, t.cache_read, t.cache_write, t.reasoning] {
            e.u64(v);
        }
        e.u64(s.tools.len() as u64);
        for (name, t) in &s.tools {
            e.str(name);
            e.u64(t.calls);
            e.u64(t.errors);
            samples(e, &t.latency);
        }
        samples(e, &s.turn_durations);
        e.u64(self.call_times.len() as u64);
        for (seq, time) in &self.call_times {
            e.u64(*seq);
            e.i64(*time);
        }
        match self.turn_start {
            None => e.u8(0),
            Some(t) => {
                e.u8(1);
                e.i64(t);
            }
        }
    }

    /// The counters [`encode_counters`](Self::encode_counters) wrote, with `lifecycle`.
    pub(crate) fn decode_counters(
        d: &mut Dec<'_>,
        lifecycle: Lifecycle,
    ) -> std::result::Result<StatsCollector, Bad> {
        fn counts(d: &mut Dec<'_>) -> std::result::Result<BTreeMap<String, u64>, Bad> {
            let n = d.count(16)?;
            let mut m = BTreeMap::new();
            for _ in 0..n {
                let k = d.string()?;
                m.insert(k, d.u64()?);
            }
            Ok(m)
        }
        fn samples(d: &mut Dec<'_>) -> std::result::Result<Durations, Bad> {
            let n = d.count(8)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(d.i64()?);
            }
            Ok(Durations(v))
        }
        let mut s = SessionStats {
            events: d.u64()?,
            by_type: counts(d)?,
            turns: d.u64()?,
            end_reasons: counts(d)?,
            steps: d.u64()?,
            ..SessionStats::default()
        };
        s.tokens = Tokens {
            input: d.u64()?,
            output: d.u64()?,
            cache_read: d.u64()?,
            cache_write: d.u64()?,
            reasoning: d.u64()?,
        };
        let n = d.count(32)?;
        for _ in 0..n {
            let name = d.string()?;
            let t = ToolStats {
                calls: d.u64()?,
                errors: d.u64()?,
                latency: samples(d)?,
            };
            s.tools.insert(name, t);
        }
        s.turn_durations = samples(d)?;
        let n = d.count(16)?;
        let mut call_times = Vec::with_capacity(n);
        for _ in 0..n {
            call_times.push((d.u64()?, d.i64()?));
        }
        let turn_start = match d.u8()? {
            0 => None,
            1 => Some(d.i64()?),
            t => return Err(format!("a turn start tag of {t}")),
        };
        Ok(StatsCollector {
            stats: s,
            lifecycle,
            call_times,
            turn_start,
        })
    }
}

/// Adds one to `map[key]`, allocating the key only the first time.
fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_string(), 1);
        }
    }
}

/// Applies `f` to the entry of tool `name`, allocating its name only the first time.
fn with_tool(tools: &mut BTreeMap<String, ToolStats>, name: &str, f: impl FnOnce(&mut ToolStats)) {
    match tools.get_mut(name) {
        Some(t) => f(t),
        None => f(tools.entry(name.to_string()).or_default()),
    }
}

impl SessionReader {
    /// The statistics of every event this reader sees, and the session's bytes on disk.
    ///
    /// From the newest valid checkpoint (its counters), counting only the events after it. The
    /// records the checkpoint covers are still read and their checksums checked, without
    /// decoding them: a damaged session is found and named (store-wide statistics skip it), at
    /// a fraction of a full replay's cost.
    pub fn stats(&self) -> Result<SessionStats> {
        let len = self.len();
        let mut d = super::checkpoint::load_or_empty(self.dir(), self.log(), len, false);
        for rec in self.log().range(0..d.len) {
            rec?;
        }
        d.advance(self.log(), len)?;
        let mut stats = d.stats.finish();
        stats.bytes = self.bytes_on_disk();
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let d = |v: &[i64]| {
            let mut d = Durations::new();
            for &x in v {
                d.push(x);
            }
            d
        };
        assert_eq!(d(&[]).median(), None);
        assert_eq!(d(&[]).max(), None);
        assert_eq!(d(&[5]).median(), Some(5.0));
        assert_eq!(d(&[4, 1]).median(), Some(2.5));
        assert_eq!(d(&[3, 1, 2]).median(), Some(2.0));
        assert_eq!(d(&[-3, 0]).median(), Some(-1.5));
        assert_eq!(d(&[1, 9, 3, 7]).max(), Some(9));
        assert_eq!(float(2.5).to_string(), "2.5");
        assert_eq!(float(2.0).to_string(), "2");
        assert_eq!(float(1.0 / 3.0).to_string(), "0.3333333333333333");
    }
}
