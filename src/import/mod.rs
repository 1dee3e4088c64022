//! Importing other agents' session files: OpenAI Codex CLI rollouts and Claude Code transcripts
//! (`docs/import.md` has the mapping, table by table).
//!
//! One source file becomes one session. Every source line is kept byte for byte: in the
//! envelope member `x-source` (`[{"line":N,"raw":TEXT}]`, `rawHex` instead of `raw` for a line
//! that is not UTF-8) of the first event it produced, or, for a line that produced none, on an
//! event of its own, the unknown type `import/line` (`data.kind` names the line's kind). So
//! [`export_source`] writes the original file back, byte-identical.
//!
//! The events are built by a [`Builder`] that keeps the lifecycle rules of docs/events.md §6: it
//! opens a turn and a step where the source implies one, and closes what the source leaves open
//! as docs/events.md §7 does (a `TOOL_OUTCOME_UNKNOWN` result for each unanswered call, `step/end`,
//! `turn/end` with reason `interrupted`), counting each such repair in the [`Summary`].
//!
//! Re-importing a file appends only what was added since: the store-owned member `import` of
//! `session.json` remembers the source path, its format, the bytes and lines imported and
//! whether the last line had its newline. A last line that is not complete (no newline and not
//! valid JSON: the agents' own crash mode) is left out and reported; it is imported once it is
//! complete.
//!
//! This layer uses `event`, `session` and `store` through their public API only.

pub mod claude_code;
pub mod codex;
mod deferred;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::{
    parse_json, parse_tool_content, AssistantContent, AssistantMessage, Block, CompactEnd,
    CompactStart, CompactSummary, Draft, ErrorEvent, ErrorInfo, Event, EventData, Map, Opt,
    ReasonKind, StepEnd, StepStart, SurfaceOp, SystemMessage, ToolCall, ToolContent, ToolMessage,
    ToolResult, TurnEnd, TurnEndReason, TurnStart, UnknownEvent, UserMessage, Value,
};
use crate::session::{Session, SessionMeta};
use crate::store::Store;
use crate::util::now_ms;

/// The envelope member holding the source lines an event was built from.
pub const SOURCE_MEMBER: &str = "x-source";
/// The event type of a source line that produced no typed event.
pub const LINE_EVENT: &str = "import/line";
/// The store-owned member of `session.json` that remembers the source.
pub const META_MEMBER: &str = "import";

/// A source format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI Codex CLI rollout files (`rollout-*.jsonl`), every generation.
    Codex,
    /// Claude Code transcripts (`~/.claude/projects/*/*.jsonl`, subagent files too).
    ClaudeCode,
}

impl Format {
    /// The name used on the command line and in `session.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Codex => "codex",
            Format::ClaudeCode => "claude-code",
        }
    }

    /// The format of that name.
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "codex" => Some(Format::Codex),
            "claude-code" | "claude" => Some(Format::ClaudeCode),
            _ => None,
        }
    }
}

/// Detects the format of a file from its first non-empty line: `None` when it is neither.
pub fn detect(first_line: &[u8]) -> Option<Format> {
    let text = std::str::from_utf8(first_line).ok()?;
    let text = text.trim_start_matches('\u{feff}').trim();
    let Ok(Value::Object(map)) = crate::event::parse_json(text) else {
        return None;
    };
    let ty = map.get("type").and_then(Value::as_str);
    if map.contains_key("payload") {
        return Some(Format::Codex);
    }
    // Codex before rollout items: a meta line `{id, timestamp, instructions, …}`, then bare
    // response items and `{"record_type":"state"}`.
    if ty.is_none() && map.contains_key("id") && map.contains_key("instructions") {
        return Some(Format::Codex);
    }
    if map.contains_key("record_type") {
        return Some(Format::Codex);
    }
    if map.contains_key("sessionId")
        || map.contains_key("parentUuid")
        || map.contains_key("leafUuid")
        || matches!(
            ty,
            Some("file-history-snapshot" | "summary" | "queue-operation")
        )
    {
        return Some(Format::ClaudeCode);
    }
    None
}

/// What an import did, over all files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files read.
    pub files: u64,
    /// Bytes read (of new lines).
    pub bytes: u64,
    /// Sessions created.
    pub created: Vec<String>,
    /// Sessions that got new events from a file that grew.
    pub updated: Vec<String>,
    /// Files with nothing new since the last import.
    pub unchanged: u64,
    /// Source lines read.
    pub lines: u64,
    /// Events written, by type.
    pub events: BTreeMap<String, u64>,
    /// Source lines kept as `import/line` events (no typed event of their own), by kind.
    pub unmapped: BTreeMap<String, u64>,
    /// Things the source left inconsistent and the importer repaired or skipped, with the file
    /// and line.
    pub warnings: Vec<String>,
}

impl Summary {
    /// Adds another summary's counts to this one.
    pub fn merge(&mut self, other: Summary) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.created.extend(other.created);
        self.updated.extend(other.updated);
        self.unchanged += other.unchanged;
        self.lines += other.lines;
        for (k, v) in other.events {
            *self.events.entry(k).or_default() += v;
        }
        for (k, v) in other.unmapped {
            *self.unmapped.entry(k).or_default() += v;
        }
        self.warnings.extend(other.warnings);
    }

    /// Total events written.
    pub fn total_events(&self) -> u64 {
        self.events.values().sum()
    }
}

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The format; `None` detects it per file.
    pub format: Option<Format>,
    /// Files imported side by side; `None`: four per processor (4 to 16). A small file's import
    /// mostly waits for the syncs of its new session, so more workers than processors pay.
    pub workers: Option<usize>,
    /// Leave what the source has open at its end (a turn, its step and unanswered calls) open,
    /// for a file still being written (`--follow`, `--keep-open`): the next run continues that
    /// turn. A later run without it closes what was left open (docs/events.md §7). Default: closed
    /// at the end of every run.
    pub keep_open: bool,
}

/// One source line, as read.
pub(crate) struct SrcLine<'a> {
    /// Its 0-based index in the file.
    pub n: u64,
    /// Its bytes without the `\n` (a `\r` before it is kept).
    pub bytes: &'a [u8],
    /// Its JSON value, when it parses as JSON.
    pub value: Option<Value>,
}

/// The member `name` of an object value, if any.
pub(crate) fn get<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => m.get(name),
        _ => None,
    }
}

/// The string member `name` of an object value.
pub(crate) fn get_str<'v>(v: &'v Value, name: &str) -> Option<&'v str> {
    get(v, name).and_then(Value::as_str)
}

/// A JSON string literal.
pub(crate) fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_js(&mut out, s);
    out
}

/// Appends `s` as a JSON string literal (`"`, `\`, and control characters escaped).
pub(crate) fn push_js(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Parses an ISO-8601 UTC time (`2025-09-25T01:22:20.083Z`, also with an offset) to epoch
/// milliseconds.
pub(crate) fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || (b[10] != b'T' && b[10] != b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse::<i64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = s.get(start..i)?;
        let digits: String = frac.chars().chain("000".chars()).take(3).collect();
        ms = digits.parse().ok()?;
    }
    let mut offset = 0i64;
    match b.get(i) {
        Some(b'+') | Some(b'-') => {
            let sign = if b[i] == b'-' { -1 } else { 1 };
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6).unwrap_or(0);
            offset = sign * (oh * 60 + om) * 60_000;
        }
        _ => {}
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + se * 1000 + ms - offset)
}

/// A tool call left open, waiting for its result.
struct OpenCall {
    id: String,
    name: String,
}

/// Builds the events of one session from source lines, keeping the lifecycle rules.
pub(crate) struct Builder<'s> {
    summary: &'s mut Summary,
    file: String,
    /// Drafts built, not appended yet.
    pub out: Vec<Draft>,
    /// The seq the next draft will get.
    next_seq: u64,
    /// Raw source lines to attach to the next event.
    carry: Vec<(u64, Value)>,
    /// The current line (for warnings).
    pub line: u64,
    /// Time of the current line (ms), never earlier than the last.
    pub time: i64,
    last_turn: Option<u64>,
    turn_open: bool,
    step: u64,
    step_open: bool,
    calls: Vec<OpenCall>,
    /// The current surface nodes this run produced (seqs, in surface order): a compaction
    /// replaces them all, a Claude Code rewind those after its branch point.
    nodes: Vec<u64>,
    compaction_open: Option<(u64, u64)>,
    /// False for a session built from lines another session keeps (inline sidechains).
    pub keep_raw: bool,
    /// Indices (in the lines given) of inline sidechain lines met, for their own session.
    pub sidechain_lines: Vec<usize>,
    /// Leave the open turn open at the end ([`Options::keep_open`]).
    pub keep_open: bool,
    /// The format builder's own state saved by the previous run (`resume` of the import state).
    pub resume_in: Option<Value>,
    /// The format builder's state to save for the next run.
    pub resume_out: Option<Value>,
}

impl<'s> Builder<'s> {
    /// A builder continuing `session` (its turn numbers go on from the log's).
    pub fn new(summary: &'s mut Summary, file: String, session: &Session) -> Builder<'s> {
        let lifecycle = session.lifecycle();
        let last_turn = lifecycle.last_turn();
        // What an earlier run left open (kept open for a file still being written) goes on.
        let work = lifecycle.open_work();
        let calls = work
            .unanswered_calls
            .iter()
            .map(|c| OpenCall {
                id: c.call_id.clone(),
                name: c.name.clone(),
            })
            .collect();
        let step = lifecycle.next_step().map_or(0, |n| n.saturating_sub(1));
        Builder {
            summary,
            file,
            out: Vec::new(),
            next_seq: session.len(),
            carry: Vec::new(),
            line: 0,
            time: session.last_event_time().unwrap_or(0),
            last_turn,
            turn_open: work.turn.is_some(),
            step,
            step_open: work.step.is_some(),
            calls,
            nodes: Vec::new(),
            compaction_open: None,
            keep_raw: true,
            sidechain_lines: Vec::new(),
            keep_open: false,
            resume_in: None,
            resume_out: None,
        }
    }

    /// A builder of a new session (no events yet).
    pub fn fresh(summary: &'s mut Summary, file: String) -> Builder<'s> {
        Builder {
            summary,
            file,
            out: Vec::new(),
            next_seq: 0,
            carry: Vec::new(),
            line: 0,
            time: 0,
            last_turn: None,
            turn_open: false,
            step: 0,
            step_open: false,
            calls: Vec::new(),
            nodes: Vec::new(),
            compaction_open: None,
            keep_raw: true,
            sidechain_lines: Vec::new(),
            keep_open: false,
            resume_in: None,
            resume_out: None,
        }
    }

    /// Records a warning about the current line.
    pub fn warn(&mut self, what: impl std::fmt::Display) {
        let w = format!("{}:{}: {what}", self.file, self.line + 1);
        self.summary.warnings.push(w);
    }

    /// Starts a source line: its raw text goes onto the next event.
    pub fn begin_line(&mut self, line: &SrcLine<'_>, time: Option<i64>) {
        self.line = line.n;
        if let Some(t) = time {
            self.time = self.time.max(t);
        }
        if !self.keep_raw {
            return;
        }
        self.summary.lines += 1;
        let mut entry = Map::new();
        let _ = entry.push("line", line.n.into());
        let _ = match std::str::from_utf8(line.bytes) {
            Ok(text) => entry.push("raw", text.into()),
            Err(_) => {
                let mut hex = String::with_capacity(line.bytes.len() * 2);
                for b in line.bytes {
                    hex.push(char::from(HEX[usize::from(b >> 4)]));
                    hex.push(char::from(HEX[usize::from(b & 15)]));
                }
                entry.push("rawHex", hex.into())
            }
        };
        self.carry.push((line.n, Value::Object(entry)));
    }

    /// Keeps a line that is not JSON as an `import/line` event of its own, with a warning.
    pub fn unparsed_line(&mut self, line: &SrcLine<'_>) {
        self.begin_line(line, None);
        self.warn("not a JSON line: kept as an import/line");
        self.end_line("unparsed");
    }

    /// Ends a source line: when it produced no event, it becomes an `import/line` event of
    /// `kind`.
    pub fn end_line(&mut self, kind: &str) {
        if self.carry.is_empty() {
            return;
        }
        match self.summary.unmapped.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.summary.unmapped.insert(kind.to_owned(), 1);
            }
        }
        // Built as the event it is: the JSON of `{"kind":…}` need not be written and parsed.
        let mut data = Map::new();
        let _ = data.push("kind", kind.into());
        let event = Event {
            seq: 0,
            time: 0,
            data: EventData::Unknown(UnknownEvent {
                type_name: LINE_EVENT.to_owned(),
                data,
            }),
            surface_op: None,
            source_event_seqs: None,
            extra: Map::new(),
        };
        self.push_event(LINE_EVENT, event);
    }

    /// Appends a built event with the raw lines waiting; returns its seq.
    fn push_event(&mut self, ty: &str, mut event: Event) -> u64 {
        let seq = self.next_seq;
        if !self.carry.is_empty() {
            let lines = self.carry.drain(..).map(|(_, v)| v).collect();
            let _ = event.extra.push(SOURCE_MEMBER, Value::Array(lines));
        }
        event.seq = seq;
        event.time = self.time;
        self.out.push(Draft {
            event,
            seq: Some(seq),
            time: Some(self.time),
        });
        self.next_seq += 1;
        match self.summary.events.get_mut(ty) {
            Some(n) => *n += 1,
            None => {
                self.summary.events.insert(ty.to_owned(), 1);
            }
        }
        seq
    }

    /// Takes the raw lines waiting (to hold them for an event built later).
    pub fn take_carry(&mut self) -> Vec<(u64, Value)> {
        std::mem::take(&mut self.carry)
    }

    /// Puts held raw lines back, to go onto the next event.
    pub fn give_carry(&mut self, mut held: Vec<(u64, Value)>) {
        held.append(&mut self.carry);
        self.carry = held;
    }

    /// Appends one event built as the typed payload it is (no JSON written and parsed again),
    /// with the raw lines waiting; returns its seq.
    fn emit(&mut self, data: EventData, surface: Option<SurfaceOp>) -> u64 {
        let ty = data
            .event_type()
            .map_or(LINE_EVENT, crate::event::EventType::as_str);
        let event = Event {
            seq: 0,
            time: 0,
            data,
            surface_op: surface,
            source_event_seqs: None,
            extra: Map::new(),
        };
        self.push_event(ty, event)
    }

    /// The content blocks of a message, each given as its JSON (the format mappings write them
    /// from the source's parsed line): decoded once, with the checks of any event's blocks.
    /// `None` (and a warning) when this crate refuses them: a bug of a mapping, never a panic.
    fn blocks(&mut self, ty: &str, blocks: &[String]) -> Option<Vec<Block>> {
        if blocks.is_empty() {
            return Some(Vec::new());
        }
        let mut text = String::with_capacity(2 + blocks.iter().map(|b| b.len() + 1).sum::<usize>());
        text.push('[');
        for (i, b) in blocks.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(b);
        }
        text.push(']');
        match parse_tool_content(&text) {
            Ok(ToolContent::Blocks(blocks)) => Some(blocks),
            Ok(ToolContent::Text(_)) => {
                self.internal(ty, &"its content is not a block array");
                None
            }
            Err(e) => {
                self.internal(ty, &e);
                None
            }
        }
    }

    /// A JSON text a mapping wrote (an envelope, a request, a tool result's meta), as its value.
    fn value(&mut self, ty: &str, text: &str) -> Option<Value> {
        match parse_json(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.internal(ty, &e);
                None
            }
        }
    }

    /// An optional member from a JSON text: `null` is [`Opt::Null`], as the JSONL codec reads it.
    fn opt_value(&mut self, ty: &str, text: Option<&str>) -> Option<Opt<Value>> {
        match text {
            None => Some(Opt::Absent),
            Some(t) => match self.value(ty, t)? {
                Value::Null => Some(Opt::Null),
                v => Some(Opt::Present(v)),
            },
        }
    }

    /// Reports an event this crate refused to build.
    fn internal(&mut self, ty: &str, e: &dyn std::fmt::Display) {
        self.warn(format!(
            "internal: an event of type {ty} could not be built: {e}"
        ));
    }

    /// Emits a surface event and tracks the surface (for compactions).
    fn emit_surface(&mut self, data: EventData, surface: Option<SurfaceOp>) -> u64 {
        let seq = self.emit(data, surface);
        self.nodes.push(seq);
        seq
    }

    /// The last current surface node (of this run), if any: where a later line that branches
    /// from the current line goes back to.
    pub fn surface_mark(&self) -> Option<u64> {
        self.nodes.last().copied()
    }

    /// True when surface nodes were added after `mark` (a [`Builder::surface_mark`]; `None`:
    /// before the first node of this run) and are still current, so a message continuing from
    /// `mark` leaves a branch behind.
    pub fn has_nodes_after(&self, mark: Option<u64>) -> bool {
        self.nodes
            .last()
            .is_some_and(|&last| mark.is_none_or(|m| last > m))
    }

    /// A user message that continues the thread from `mark` (a rewind: the source went back to
    /// an earlier message): the surface nodes after `mark` (the abandoned branch) are replaced
    /// by this message, so they leave the model-visible history while their events (and source
    /// lines) stay in the log. A plain user message when nothing is after `mark`, or while a
    /// compaction is open (its range must stay current). Returns the number of nodes replaced.
    pub fn user_after(&mut self, blocks: &[String], envelope: &str, mark: Option<u64>) -> usize {
        let from = self
            .nodes
            .iter()
            .position(|&n| mark.is_none_or(|m| n > m))
            .unwrap_or(self.nodes.len());
        let (Some(&a), Some(&b), None) = (
            self.nodes.get(from),
            self.nodes.last(),
            self.compaction_open,
        ) else {
            self.user(blocks, envelope);
            return 0;
        };
        let Some(data) = self.user_data(blocks, envelope) else {
            return 0;
        };
        let seq = self.emit(data, Some(replace(a, b)));
        let replaced = self.nodes.len() - from;
        self.nodes.truncate(from);
        self.nodes.push(seq);
        replaced
    }

    /// The turn open, if any.
    pub fn turn(&self) -> Option<u64> {
        self.turn_open.then_some(self.last_turn.unwrap_or(1))
    }

    /// True while a step is open.
    pub fn step_is_open(&self) -> bool {
        self.step_open
    }

    /// Starts a turn (ending the open one as interrupted first).
    pub fn start_turn(&mut self) {
        if self.turn_open {
            self.end_turn("interrupted", None);
        }
        let turn = self.last_turn.map_or(1, |t| t + 1);
        self.last_turn = Some(turn);
        self.turn_open = true;
        self.step = 0;
        self.emit(
            EventData::TurnStart(TurnStart {
                turn,
                extra: Map::new(),
            }),
            None,
        );
    }

    /// Opens a turn unless one is open.
    pub fn ensure_turn(&mut self) {
        if !self.turn_open {
            self.start_turn();
        }
    }

    /// Starts a step (ending the open one first); `request` is the model call's settings.
    pub fn start_step(&mut self, request: Option<&str>) {
        self.ensure_turn();
        self.end_step();
        self.step += 1;
        self.step_open = true;
        let turn = self.last_turn.unwrap_or(1);
        let step = self.step;
        let request = match request.map(|r| self.value("step/start", r)) {
            None => Opt::Absent,
            Some(Some(Value::Object(m))) => Opt::Present(m),
            Some(Some(Value::Null)) => Opt::Null,
            // Never written by the mappings (their requests are objects); not lost either.
            Some(Some(_)) | Some(None) => Opt::Absent,
        };
        self.emit(
            EventData::StepStart(StepStart {
                turn,
                step,
                request,
                extra: Map::new(),
            }),
            None,
        );
    }

    /// Opens a step unless one is open.
    pub fn ensure_step(&mut self) {
        if !self.step_open {
            self.start_step(None);
        }
    }

    /// Ends the open step, if any.
    pub fn end_step(&mut self) {
        if self.step_open {
            self.step_open = false;
            let (turn, step) = (self.last_turn.unwrap_or(1), self.step);
            self.emit(
                EventData::StepEnd(StepEnd {
                    turn,
                    step,
                    extra: Map::new(),
                }),
                None,
            );
        }
    }

    /// Ends the open turn with reason `kind` (and an error message), answering its unanswered
    /// calls with `TOOL_OUTCOME_UNKNOWN` first (reported).
    pub fn end_turn(&mut self, kind: &str, error: Option<&str>) {
        if !self.turn_open {
            return;
        }
        if !self.calls.is_empty() {
            self.ensure_step();
            let calls = std::mem::take(&mut self.calls);
            for call in calls {
                self.warn(format!(
                    "tool call {} ({}) has no result: answered with TOOL_OUTCOME_UNKNOWN",
                    call.id, call.name
                ));
                let (turn, step) = (self.last_turn.unwrap_or(1), self.step);
                let data = ToolResult {
                    turn,
                    step,
                    message: ToolMessage {
                        tool_name: call.name,
                        content: ToolContent::Text(
                            "The source ended this turn before the tool reported a result; \
                             its outcome is unknown."
                                .to_owned(),
                        ),
                        is_error: true,
                        extra: Map::new(),
                    },
                    call_id: Opt::Present(call.id),
                    error: Opt::Present(ErrorInfo {
                        code: Opt::Present("TOOL_OUTCOME_UNKNOWN".to_owned()),
                        message: Opt::Present(
                            "the source recorded no result for this call".to_owned(),
                        ),
                        extra: Map::new(),
                    }),
                    meta: Opt::Absent,
                    extra: Map::new(),
                };
                self.emit_surface(EventData::ToolResult(data), None);
            }
        }
        self.end_step();
        let turn = self.last_turn.unwrap_or(1);
        self.turn_open = false;
        let Some(kind) = ReasonKind::from_name(kind) else {
            self.internal("turn/end", &format!("no turn end reason {kind:?}"));
            return;
        };
        let error = match error {
            Some(e) => Opt::Present(ErrorInfo {
                code: Opt::Absent,
                message: Opt::Present(e.to_owned()),
                extra: Map::new(),
            }),
            None => Opt::Absent,
        };
        self.emit(
            EventData::TurnEnd(TurnEnd {
                turn,
                reason: TurnEndReason {
                    kind,
                    error,
                    extra: Map::new(),
                },
                extra: Map::new(),
            }),
            None,
        );
    }

    /// How a new prompt ends the open turn: `completed`, or `interrupted` when calls are
    /// unanswered (the user typed while tools ran).
    pub fn next_prompt_ends_as(&self) -> &'static str {
        if self.calls.is_empty() {
            "completed"
        } else {
            "interrupted"
        }
    }

    /// Unanswered calls of the open turn.
    pub fn open_calls(&self) -> usize {
        self.calls.len()
    }

    /// An assistant message (its content blocks, JSON) and the tool calls it makes (id, name,
    /// raw arguments), in the open step (one is opened when none is).
    pub fn assistant(
        &mut self,
        blocks: &[String],
        model: Option<&str>,
        provider: &str,
        usage: Option<&str>,
        calls: &[(String, String, String)],
    ) {
        self.ensure_step();
        let (turn, step) = (self.last_turn.unwrap_or(1), self.step);
        let content = self.blocks("assistant/message", blocks);
        let usage = match usage {
            None => Some(Opt::Absent),
            Some(u) => self
                .value("assistant/message", u)
                .and_then(|v| usage_of(&v))
                .map(Opt::Present),
        };
        match (content, usage) {
            (Some(content), Some(usage)) => {
                let surface = !content.is_empty();
                let data = EventData::AssistantMessage(AssistantMessage {
                    turn,
                    step,
                    message: AssistantContent {
                        content,
                        provider: Opt::Present(provider.to_owned()),
                        model: model.map_or(Opt::Absent, |m| Opt::Present(m.to_owned())),
                        replay: Opt::Absent,
                        extra: Map::new(),
                    },
                    usage,
                    extra: Map::new(),
                });
                if surface {
                    self.emit_surface(data, None);
                } else {
                    self.emit(data, None);
                }
            }
            (_, None) => self.internal("assistant/message", &"its usage is not an object"),
            (None, _) => {}
        }
        for (id, name, args) in calls {
            self.emit(
                EventData::ToolCall(ToolCall {
                    turn,
                    step,
                    call_id: id.clone(),
                    name: name.clone(),
                    arguments: args.clone(),
                    extra: Map::new(),
                }),
                None,
            );
            self.calls.push(OpenCall {
                id: id.clone(),
                name: name.clone(),
            });
        }
    }

    /// A tool result for call `id` (content: JSON string or block array); false (and a warning)
    /// when the open turn has no unanswered call of that id.
    pub fn result(&mut self, id: &str, content: &str, is_error: bool, meta: Option<&str>) -> bool {
        let Some(i) = self.calls.iter().position(|c| c.id == id) else {
            self.warn(format!(
                "tool result for call {id} answers no open call of this turn: kept as an import/line"
            ));
            return false;
        };
        let call = self.calls.remove(i);
        self.ensure_step();
        let (turn, step) = (self.last_turn.unwrap_or(1), self.step);
        let content = match parse_tool_content(content) {
            Ok(c) => c,
            Err(e) => {
                self.internal("tool/result", &e);
                return true;
            }
        };
        let Some(meta) = self.opt_value("tool/result", meta) else {
            return true;
        };
        let data = ToolResult {
            turn,
            step,
            message: ToolMessage {
                tool_name: call.name,
                content,
                is_error,
                extra: Map::new(),
            },
            call_id: Opt::Present(id.to_owned()),
            error: Opt::Absent,
            meta,
            extra: Map::new(),
        };
        self.emit_surface(EventData::ToolResult(data), None);
        true
    }

    /// The payload of a user message (content blocks JSON, display envelope JSON).
    fn user_data(&mut self, blocks: &[String], envelope: &str) -> Option<EventData> {
        let content = self.blocks("user/message", blocks)?;
        let envelope = self.opt_value("user/message", Some(envelope))?;
        Some(EventData::UserMessage(UserMessage {
            content,
            envelope,
            extra: Map::new(),
        }))
    }

    /// A user message (content blocks JSON) with its display envelope.
    pub fn user(&mut self, blocks: &[String], envelope: &str) {
        if let Some(data) = self.user_data(blocks, envelope) {
            self.emit_surface(data, None);
        }
    }

    /// A system message (content blocks JSON); `origin` names where it came from.
    pub fn system(&mut self, blocks: &[String], origin: &str) {
        let Some(content) = self.blocks("system/message", blocks) else {
            return;
        };
        let mut extra = Map::new();
        let _ = extra.push("origin", origin.into());
        self.emit_surface(
            EventData::SystemMessage(SystemMessage { content, extra }),
            None,
        );
    }

    /// An `error` event in the open turn and step.
    pub fn error(&mut self, message: &str) {
        let (turn, step) = match (self.turn_open, self.step_open) {
            (false, _) => (Opt::Absent, Opt::Absent),
            (true, false) => (Opt::Present(self.last_turn.unwrap_or(1)), Opt::Absent),
            (true, true) => (
                Opt::Present(self.last_turn.unwrap_or(1)),
                Opt::Present(self.step),
            ),
        };
        self.emit(
            EventData::Error(ErrorEvent {
                message: message.to_owned(),
                turn,
                step,
                stack: Opt::Absent,
                extra: Map::new(),
            }),
            None,
        );
    }

    /// Opens a compaction of the whole current surface (none when the surface is empty).
    pub fn compact_start(&mut self) {
        if self.compaction_open.is_some() {
            return;
        }
        if let (Some(&a), Some(&b)) = (self.nodes.first(), self.nodes.last()) {
            self.compaction_open = Some((a, b));
            self.emit(
                EventData::CompactStart(CompactStart {
                    start_seq: a,
                    end_seq: b,
                    extra: Map::new(),
                }),
                None,
            );
        }
    }

    /// Completes a compaction with `summary`: `compact/summary`, the summary as a user message
    /// replacing the compacted surface, `compact/end`. Without a surface to replace, the summary
    /// is a plain user message.
    pub fn compact_summary(&mut self, summary: &str, envelope: &str) {
        if self.compaction_open.is_none() {
            self.compact_start();
        }
        let Some((a, b)) = self.compaction_open.take() else {
            self.user(&[text_block(summary)], envelope);
            return;
        };
        self.emit(
            EventData::CompactSummary(CompactSummary {
                start_seq: a,
                end_seq: b,
                summary: summary.to_owned(),
                usage: Opt::Absent,
                extra: Map::new(),
            }),
            None,
        );
        if let Some(data) = self.user_data(&[text_block(summary)], envelope) {
            let seq = self.emit(data, Some(replace(a, b)));
            self.nodes.clear();
            self.nodes.push(seq);
        }
        self.compact_end(true);
    }

    /// `compact/end` with `ok`.
    fn compact_end(&mut self, ok: bool) {
        self.emit(
            EventData::CompactEnd(CompactEnd {
                ok,
                extra: Map::new(),
            }),
            None,
        );
    }

    /// True while a turn is open (after [`Builder::finish`]: one left open for the next run).
    pub fn turn_is_open(&self) -> bool {
        self.turn_open
    }

    /// Ends the source: the open turn is closed (`completed` when nothing is left unanswered and
    /// `clean`, else `interrupted`, reported), an open compaction ended with `ok:false`.
    /// With [`Builder::keep_open`] the open turn stays open (a later run continues it).
    pub fn finish(&mut self, clean: bool) {
        if self.turn_open && !self.keep_open {
            if clean && self.calls.is_empty() {
                self.end_turn("completed", None);
            } else {
                self.warn("the source ends inside a turn: closed as interrupted");
                self.end_turn("interrupted", None);
            }
        }
        if self.compaction_open.take().is_some() {
            self.compact_end(false);
        }
        if !self.carry.is_empty() {
            self.end_line("held");
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A `replace` surface op of the nodes of events `a` through `b`.
fn replace(a: u64, b: u64) -> SurfaceOp {
    SurfaceOp::Replace {
        start_seq: a,
        end_seq: b,
        extra: Map::new(),
    }
}

/// The typed usage of a usage object the mappings wrote (`inputTokens`, `outputTokens`,
/// `cacheReadTokens`, `cacheWriteTokens`, `reasoningTokens`; any other member kept in `extra`).
fn usage_of(v: &Value) -> Option<crate::event::Usage> {
    let Value::Object(m) = v else { return None };
    let mut usage = crate::event::Usage {
        input_tokens: m.get("inputTokens")?.as_u64()?,
        output_tokens: m.get("outputTokens")?.as_u64()?,
        ..Default::default()
    };
    for (k, v) in m.iter() {
        let slot = match k {
            "inputTokens" | "outputTokens" => continue,
            "cacheReadTokens" => &mut usage.cache_read_tokens,
            "cacheWriteTokens" => &mut usage.cache_write_tokens,
            "reasoningTokens" => &mut usage.reasoning_tokens,
            _ => {
                let _ = usage.extra.push(k, v.clone());
                continue;
            }
        };
        *slot = Opt::Present(v.as_u64()?);
    }
    Some(usage)
}

/// A text content block.
pub(crate) fn text_block(text: &str) -> String {
    format!("{{\"type\":\"text\",\"text\":{}}}", js(text))
}

/// The remembered source of an imported session.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SourceState {
    format: Format,
    path: String,
    bytes: u64,
    lines: u64,
    final_newline: bool,
    /// The session's events when this state was written: a session holding more was extended
    /// by a run killed before it wrote its state.
    events: Option<u64>,
    /// The last run left the source's open turn open (the file was still being written).
    open: bool,
    /// The format builder's state for the next run (Codex token totals and model, the last
    /// Claude Code response id).
    resume: Option<Value>,
}

impl SourceState {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        let _ = m.push("format", self.format.as_str().into());
        let _ = m.push("source", self.path.as_str().into());
        let _ = m.push("bytes", self.bytes.into());
        let _ = m.push("lines", self.lines.into());
        let _ = m.push("finalNewline", self.final_newline.into());
        if let Some(n) = self.events {
            let _ = m.push("events", n.into());
        }
        if self.open {
            let _ = m.push("open", true.into());
        }
        if let Some(r) = &self.resume {
            let _ = m.push("resume", r.clone());
        }
        Value::Object(m)
    }

    fn from_value(v: &Value) -> Option<SourceState> {
        Some(SourceState {
            format: Format::from_name(get_str(v, "format")?)?,
            path: get_str(v, "source")?.to_owned(),
            bytes: get(v, "bytes")?.as_u64()?,
            lines: get(v, "lines")?.as_u64()?,
            final_newline: get(v, "finalNewline")?.as_bool()?,
            events: get(v, "events").and_then(Value::as_u64),
            open: get(v, "open").and_then(Value::as_bool) == Some(true),
            resume: get(v, "resume").cloned(),
        })
    }
}

/// Splits `data` into lines (without their `\n`). The last piece, when the data does not end
/// with `\n`, is returned apart.
fn split_lines(data: &[u8]) -> (Vec<&[u8]>, Option<&[u8]>) {
    let mut lines = Vec::new();
    let mut start = 0;
    for i in memchr::memchr_iter(b'\n', data) {
        lines.push(&data[start..i]);
        start = i + 1;
    }
    let tail = (start < data.len()).then(|| &data[start..]);
    (lines, tail)
}

/// The session id for a source file: a prefix by format and the source's own id.
fn session_id(format: Format, path: &Path, first: Option<&Value>) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let raw = match format {
        Format::Codex => {
            let from_meta = first.and_then(|v| {
                get(v, "payload")
                    .and_then(|p| get_str(p, "id"))
                    .or_else(|| get_str(v, "id"))
                    .map(str::to_owned)
            });
            format!("codex-{}", from_meta.unwrap_or(stem))
        }
        Format::ClaudeCode => match claude_code::parent_session_of(path, first) {
            Some(parent) if stem.starts_with("agent-") => format!("claude-{parent}-{stem}"),
            _ => format!("claude-{stem}"),
        },
    };
    let mut id: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    id.truncate(128);
    id
}

/// The session a source file's session descends from: a Claude Code subagent file's main
/// session, a forked or subagent Codex thread's parent thread.
fn parent_of(format: Format, path: &Path, first: Option<&Value>) -> Option<String> {
    match format {
        Format::ClaudeCode => claude_code::parent_session_of(path, first)
            .map(|p| session_id(Format::ClaudeCode, Path::new(&format!("{p}.jsonl")), None)),
        Format::Codex => {
            let p = first.and_then(|v| get(v, "payload"))?;
            let parent = get_str(p, "parent_thread_id").or_else(|| get_str(p, "forked_from_id"))?;
            Some(session_id(
                Format::Codex,
                Path::new(&format!("{parent}.jsonl")),
                None,
            ))
        }
    }
}

/// Imports `paths` (files, or directory trees walked for `*.jsonl`) into `store`. `progress`
/// is called with (bytes done, bytes total). A file that cannot be read or whose format is not
/// recognized is a warning, never the end of the whole import.
pub fn import_paths(
    store: &Store,
    paths: &[PathBuf],
    options: &Options,
    mut progress: impl FnMut(u64, u64),
) -> Result<Summary> {
    let mut files = Vec::new();
    for p in paths {
        collect_files(p, &mut files)?;
    }
    // What killed imports left behind, once for the whole run (new sessions are built in
    // hidden folders of the store and renamed into place).
    store.remove_import_leftovers();
    let total: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    // Files are independent sessions: a few workers import them side by side (most of a small
    // file's time is the syncs of its new session, not the processor).
    let workers = options
        .workers
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get() * 4)
                .clamp(4, 16)
        })
        .clamp(1, files.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, u64, Summary)>();
    let mut results: Vec<Option<Summary>> = vec![None; files.len()];
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (files, next) = (&files, &next);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(file) = files.get(i) else {
                    break;
                };
                let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
                let mut one = Summary::default();
                if let Err(e) =
                    import_source(store, file, options.format, options.keep_open, &mut one)
                {
                    one.warnings
                        .push(format!("{}: not imported: {e}", file.display()));
                }
                if tx.send((i, size, one)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut done = 0u64;
        for (i, size, one) in rx {
            done += size;
            progress(done, total);
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(one);
            }
        }
    });
    let mut summary = Summary::default();
    for one in results.into_iter().flatten() {
        summary.merge(one);
    }
    // The renames of the new sessions, made durable together.
    if !summary.created.is_empty() {
        store.sync_sessions_dir()?;
    }
    Ok(summary)
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("read", path, e))?;
    if meta.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::io("read directory", path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for e in entries {
        if e.is_dir() {
            collect_files(&e, out)?;
        } else if e.extension().is_some_and(|x| x == "jsonl") {
            out.push(e);
        }
    }
    Ok(())
}

/// Builds (or extends) the session `<id>-sidechains` from the inline sidechain lines of a Claude
/// Code main file (subagent traffic of 1.0.x files): its own session, `parentSession` the main
/// one. The lines' raw text stays in the main session (exported from there), so these events
/// carry none.
fn import_sidechains(
    store: &Store,
    main: &str,
    lines: &[SrcLine<'_>],
    path: &Path,
    shown: &str,
    summary: &mut Summary,
) -> Result<()> {
    let mut id = format!("{main}-sidechains");
    if id.len() > 128 {
        id.truncate(128);
    }
    let dir = store.session_dir(&id)?;
    let (session, created) = if dir.join(crate::session::META_FILE).is_file() {
        (store.open_session(&id)?, false)
    } else {
        let mut meta = SessionMeta::new(id.clone(), now_ms());
        meta.parent_session = Opt::Present(main.to_owned());
        let mut mark = Map::new();
        let _ = mark.push("sidechainsOf", main.into());
        let _ = meta.store_extra.push(META_MEMBER, Value::Object(mark));
        (
            Session::create(&dir, meta, store.config().session_options())?,
            true,
        )
    };
    let mut builder = Builder::new(summary, shown.to_owned(), &session);
    builder.keep_raw = false;
    if session.is_empty() {
        if let Some(t) = lines.iter().find_map(|l| {
            l.value
                .as_ref()
                .and_then(|v| get_str(v, "timestamp"))
                .and_then(parse_time)
        }) {
            builder.time = t;
        }
    }
    let outcome = claude_code::build(&mut builder, lines, path, true).and_then(|()| {
        let drafts = std::mem::take(&mut builder.out);
        session.append_drafts(drafts).map(|_| ())
    });
    drop(builder);
    session.close()?;
    match outcome {
        Ok(()) => {
            if created {
                summary.created.push(id);
            } else {
                summary.updated.push(id);
            }
            Ok(())
        }
        Err(e) => {
            if created {
                let _ = std::fs::remove_dir_all(&dir);
            }
            summary.warnings.push(format!(
                "{shown}: the inline sidechains were not imported: {e}"
            ));
            Ok(())
        }
    }
}

/// The first non-blank line of a file (at most 16 lines looked at) and the file's size.
fn read_head(path: &Path) -> Result<(Vec<u8>, u64)> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| Error::io("read", path, e))?;
    let size = file
        .metadata()
        .map_err(|e| Error::io("read", path, e))?
        .len();
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    for _ in 0..16 {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io("read", path, e))?;
        if n == 0 || !line.iter().all(u8::is_ascii_whitespace) {
            break;
        }
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok((line, size))
}

/// Imports one file: a new session, or the lines added since the last import of it. What the
/// source leaves open at its end is closed (see [`Options::keep_open`] for the other way).
/// A new session is on stable storage when this returns.
pub fn import_file(
    store: &Store,
    path: &Path,
    format: Option<Format>,
    summary: &mut Summary,
) -> Result<()> {
    let created = summary.created.len();
    import_source(store, path, format, false, summary)?;
    if summary.created.len() > created {
        store.sync_sessions_dir()?;
    }
    Ok(())
}

/// The lines of a file past what an earlier import took, parsed once each.
struct NewLines<'d> {
    /// Where the new bytes start in the file.
    start: usize,
    /// The bytes after `start` (an incomplete last line included).
    new_data: &'d [u8],
    /// The new lines.
    src: Vec<SrcLine<'d>>,
    /// The last line has no newline (and is complete JSON).
    tail: bool,
}

impl NewLines<'_> {
    /// Records in `state` what these lines took.
    fn done(&self, state: &mut SourceState) {
        state.lines += self.src.len() as u64;
        let consumed = if self.tail {
            state.final_newline = false;
            self.new_data.len()
        } else {
            memchr::memrchr(b'\n', self.new_data).map_or(0, |i| i + 1)
        };
        state.bytes = (self.start + consumed) as u64;
    }
}

/// The lines of `data` after what `state` says was imported: `None` (with a warning) when the
/// file cannot be continued (shorter than what was imported, or its last line, imported
/// without a newline, was changed).
fn new_lines<'d>(
    data: &'d [u8],
    state: &mut SourceState,
    shown: &str,
    summary: &mut Summary,
) -> Option<NewLines<'d>> {
    if (data.len() as u64) < state.bytes {
        summary.warnings.push(format!(
            "{shown}: the file is shorter ({} bytes) than what was imported ({} bytes): skipped",
            data.len(),
            state.bytes
        ));
        return None;
    }
    let mut start = state.bytes as usize;
    if !state.final_newline && start < data.len() {
        // The last line imported had no newline; the file grew: its newline comes first.
        if data[start] == b'\n' {
            start += 1;
            state.final_newline = true;
        } else {
            summary.warnings.push(format!(
                "{shown}: the last line imported (without a newline) was continued; the new \
                 bytes are not imported"
            ));
            return None;
        }
    }
    let new_data = &data[start..];
    let (lines, tail) = split_lines(new_data);
    let mut src: Vec<SrcLine<'d>> = Vec::with_capacity(lines.len() + 1);
    let mut n = state.lines;
    // Each line is parsed once; its value serves the format's mapping.
    let parse = |l: &[u8], n: u64| -> Option<Value> {
        let text = std::str::from_utf8(l).ok()?.trim_end_matches('\r');
        let text = if n == 0 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        crate::event::parse_json(text).ok()
    };
    for l in lines {
        let value = parse(l, n);
        src.push(SrcLine { n, bytes: l, value });
        n += 1;
    }
    // A tail without a newline is imported when it is complete JSON, else left for later.
    let mut has_tail = false;
    if let Some(t) = tail {
        let value = parse(t, n);
        if value.is_some() {
            src.push(SrcLine { n, bytes: t, value });
            has_tail = true;
        } else {
            summary.warnings.push(format!(
                "{shown}:{}: the last line is incomplete ({} bytes, no newline): left out until it is complete",
                n + 1,
                t.len()
            ));
        }
    }
    Some(NewLines {
        start,
        new_data,
        src,
        tail: has_tail,
    })
}

/// The time of the first timestamped line: lines of a new session before it take it.
fn first_time(src: &[SrcLine<'_>]) -> Option<i64> {
    src.iter().find_map(|l| {
        l.value
            .as_ref()
            .and_then(|v| get_str(v, "timestamp"))
            .and_then(parse_time)
    })
}

/// Runs the format's mapping over `src`.
fn build_format(
    builder: &mut Builder<'_>,
    format: Format,
    src: &[SrcLine<'_>],
    path: &Path,
) -> Result<()> {
    match format {
        Format::Codex => codex::build(builder, src),
        Format::ClaudeCode => claude_code::build(builder, src, path, false),
    }
}

/// [`import_file`], leaving the source's open turn open when `keep_open`.
fn import_source(
    store: &Store,
    path: &Path,
    format: Option<Format>,
    keep_open: bool,
    summary: &mut Summary,
) -> Result<()> {
    let (first_line, size) = read_head(path)?;
    let first_line = first_line.as_slice();
    summary.files += 1;
    let format = match format.or_else(|| detect(first_line)) {
        Some(f) => f,
        None if size == 0 => {
            summary.unchanged += 1;
            return Ok(());
        }
        None => {
            return Err(Error::Invalid(format!(
                "{}: neither a Codex rollout nor a Claude Code transcript (first line)",
                path.display()
            )))
        }
    };
    let first_value = std::str::from_utf8(first_line)
        .ok()
        .and_then(|t| crate::event::parse_json(t.trim_start_matches('\u{feff}').trim()).ok());
    let id = session_id(format, path, first_value.as_ref());
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let shown = path.display().to_string();

    // Nothing new since the last import: known from session.json alone, without opening the
    // session or reading the file (what makes a repeated run over a whole tree cheap).
    let dir = store.session_dir(&id)?;
    if dir.join(crate::session::META_FILE).is_file() {
        let meta = SessionMeta::load(&dir)?;
        if let Some(state) = meta
            .store_extra
            .get(META_MEMBER)
            .and_then(SourceState::from_value)
        {
            // (A turn an earlier run left open is closed by a run that does not keep it open.)
            if state.bytes == size
                && state.path == abs.display().to_string()
                && (keep_open || !state.open)
            {
                summary.unchanged += 1;
                return Ok(());
            }
        }
    }
    let data = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;

    // A session of that id: continue it from where the last import stopped.
    match store.open_session(&id) {
        Ok(session) => {
            let meta = session.meta();
            let Some(state) = meta
                .store_extra
                .get(META_MEMBER)
                .and_then(SourceState::from_value)
            else {
                return Err(Error::Invalid(format!(
                    "{shown}: session {id} exists and was not imported from a file"
                )));
            };
            if state.path != abs.display().to_string() || state.format != format {
                session.close()?;
                return Err(Error::Invalid(format!(
                    "{shown}: session {id} was imported from another file ({}, {}); not imported",
                    state.path,
                    state.format.as_str()
                )));
            }
            if state.events.is_some_and(|n| n != session.len()) {
                if state.lines == 0 {
                    // The first import of this file was killed half-way (a session created in
                    // place by an earlier version): built again.
                    session.close()?;
                    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("remove", &dir, e))?;
                    summary.files -= 1;
                    return import_source(store, path, Some(format), keep_open, summary);
                }
                let held = session.len();
                session.close()?;
                return Err(Error::Invalid(format!(
                    "{shown}: session {id} holds {held} events, its last import recorded {}: \
                     events were written after that import (a killed run, or appends); not \
                     continued (delete the session and import the file again)",
                    state.events.unwrap_or(0)
                )));
            }
            let outcome = continue_session(
                store, path, &shown, &id, &data, &session, state, keep_open, summary,
            );
            let closed = session.close();
            outcome?;
            closed
        }
        Err(Error::NotFound(_)) => {
            if dir.exists() {
                return Err(Error::Exists(id));
            }
            let mut meta = SessionMeta::new(id.clone(), now_ms());
            meta.title = claude_code::title_hint(format, &data).into();
            meta.cwd = first_value
                .as_ref()
                .and_then(|v| {
                    get(v, "payload")
                        .and_then(|p| get_str(p, "cwd"))
                        .or_else(|| get_str(v, "cwd"))
                        .map(str::to_owned)
                })
                .into();
            if let Some(parent) = parent_of(format, path, first_value.as_ref()) {
                meta.parent_session = Opt::Present(parent);
            }
            new_session(
                store, path, &shown, meta, format, &abs, &data, keep_open, summary,
            )
        }
        Err(e) => Err(e),
    }
}

/// Imports a file seen for the first time: its events are built first, then the session is
/// written in a hidden folder of the store with the log's syncs deferred, made durable once
/// (its log files and folder), and renamed into place with its import state already in its
/// `session.json`. A failure, or a kill at any point, leaves no session behind (a hidden
/// folder at most, which the next import or `gc` removes).
#[allow(clippy::too_many_arguments)]
fn new_session(
    store: &Store,
    path: &Path,
    shown: &str,
    mut meta: SessionMeta,
    format: Format,
    abs: &Path,
    data: &[u8],
    keep_open: bool,
    summary: &mut Summary,
) -> Result<()> {
    let id = meta.id.clone();
    let mut state = SourceState {
        format,
        path: abs.display().to_string(),
        bytes: 0,
        lines: 0,
        final_newline: true,
        events: Some(0),
        open: false,
        resume: None,
    };
    let Some(lines) = new_lines(data, &mut state, shown, summary) else {
        return Ok(());
    };
    let mut builder = Builder::fresh(summary, shown.to_owned());
    builder.keep_open = keep_open;
    if let Some(t) = first_time(&lines.src) {
        builder.time = t;
    }
    let built = build_format(&mut builder, format, &lines.src, path);
    let drafts = std::mem::take(&mut builder.out);
    let sidechains = std::mem::take(&mut builder.sidechain_lines);
    state.open = builder.turn_is_open();
    state.resume = builder.resume_out.take();
    drop(builder);
    built?;
    lines.done(&mut state);
    state.events = Some(drafts.len() as u64);
    let _ = meta.store_extra.push(META_MEMBER, state.to_value());
    store.build_session_batched(&id, |temp| {
        let mut options = store.config().session_options();
        options.log.durability = crate::log::Durability::Os;
        options.log.storage = std::sync::Arc::new(deferred::ImportStorage);
        let session = Session::create(temp, meta, options)?;
        let appended = session.append_drafts(drafts);
        let closed = session.close_without_checkpoint();
        appended?;
        closed?;
        deferred::sync_built(temp)
    })?;
    summary.created.push(id.clone());
    summary.bytes += lines.new_data.len() as u64;
    import_sidechains_of(store, &id, &lines.src, &sidechains, path, shown, summary)?;
    Ok(())
}

/// Imports the lines at `indexes` of `src` (the inline sidechains a build set aside) as the
/// sidechain sessions of session `id`; nothing when there are none.
fn import_sidechains_of(
    store: &Store,
    id: &str,
    src: &[SrcLine<'_>],
    indexes: &[usize],
    path: &Path,
    shown: &str,
    summary: &mut Summary,
) -> Result<()> {
    if indexes.is_empty() {
        return Ok(());
    }
    let side: Vec<SrcLine<'_>> = indexes
        .iter()
        .filter_map(|&i| src.get(i))
        .map(|l| SrcLine {
            n: l.n,
            bytes: l.bytes,
            value: l.value.clone(),
        })
        .collect();
    import_sidechains(store, id, &side, path, shown, summary)
}

/// Appends the lines a file got since its last import to its session. The events are synced
/// before the import state that counts them is written, so the state never vouches for events
/// that a power loss could take.
#[allow(clippy::too_many_arguments)]
fn continue_session(
    store: &Store,
    path: &Path,
    shown: &str,
    id: &str,
    data: &[u8],
    session: &Session,
    mut state: SourceState,
    keep_open: bool,
    summary: &mut Summary,
) -> Result<()> {
    let Some(lines) = new_lines(data, &mut state, shown, summary) else {
        return Ok(());
    };
    let close_left_open = state.open && !keep_open;
    if lines.src.is_empty() && !close_left_open {
        summary.unchanged += 1;
        return Ok(());
    }
    let mut builder = Builder::new(summary, shown.to_owned(), session);
    builder.keep_open = keep_open;
    builder.resume_in = state.resume.take();
    if session.is_empty() {
        if let Some(t) = first_time(&lines.src) {
            builder.time = t;
        }
    }
    let built = build_format(&mut builder, state.format, &lines.src, path);
    let drafts = std::mem::take(&mut builder.out);
    let sidechains = std::mem::take(&mut builder.sidechain_lines);
    state.open = builder.turn_is_open();
    state.resume = builder.resume_out.take();
    drop(builder);
    built?;
    // One batch: a refusal writes nothing (the state stays where it was).
    session.append_drafts(drafts)?;
    session.sync()?;
    lines.done(&mut state);
    save_state(session, &state)?;
    summary.updated.push(id.to_owned());
    import_sidechains_of(store, id, &lines.src, &sidechains, path, shown, summary)?;
    summary.bytes += lines.new_data.len() as u64;
    Ok(())
}

fn save_state(session: &Session, state: &SourceState) -> Result<()> {
    let mut state = state.clone();
    state.events = Some(session.len());
    session.update_meta(|m| {
        let _ = m.store_extra.remove(META_MEMBER);
        let _ = m.store_extra.push(META_MEMBER, state.to_value());
    })
}

/// Writes the source file an imported session was built from, byte for byte: every kept source
/// line in its order, each with its newline (but the last when the source had none). Returns the
/// number of lines written.
pub fn export_source(reader: &crate::session::SessionReader, out: &mut impl Write) -> Result<u64> {
    let meta = reader.meta();
    let state = meta
        .store_extra
        .get(META_MEMBER)
        .and_then(SourceState::from_value)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "session {} was not imported from a Codex or Claude Code file",
                meta.id
            ))
        })?;
    let mut lines: Vec<(u64, Vec<u8>)> = Vec::new();
    for ev in reader.events() {
        let ev = ev?;
        let Some(src) = ev.extra.get(SOURCE_MEMBER) else {
            continue;
        };
        let Some(entries) = src.as_array() else {
            continue;
        };
        for entry in entries {
            let Some(n) = entry
                .get("line")
                .and_then(|v| v.as_number())
                .and_then(|n| n.as_u64())
            else {
                continue;
            };
            if let Some(raw) = entry.get("raw").and_then(|v| v.as_str()) {
                lines.push((n, raw.as_bytes().to_vec()));
            } else if let Some(hex) = entry.get("rawHex").and_then(|v| v.as_str()) {
                lines.push((n, unhex(hex)));
            }
        }
    }
    lines.sort_by_key(|(n, _)| *n);
    let count = lines.len() as u64;
    if count != state.lines {
        return Err(Error::Invalid(format!(
            "session {} holds {count} source lines of the {} imported",
            meta.id, state.lines
        )));
    }
    let io = |e| Error::io("write", Path::new("export"), e);
    for (i, (_, bytes)) in lines.iter().enumerate() {
        out.write_all(bytes).map_err(io)?;
        if i + 1 < lines.len() || state.final_newline {
            out.write_all(b"\n").map_err(io)?;
        }
    }
    out.flush().map_err(io)?;
    Ok(count)
}

/// The format a session was imported from, if it was.
pub fn source_format(meta: &crate::session::SessionMeta) -> Option<Format> {
    meta.store_extra
        .get(META_MEMBER)
        .and_then(SourceState::from_value)
        .map(|s| s.format)
}

fn unhex(hex: &str) -> Vec<u8> {
    hex.as_bytes()
        .chunks(2)
        .filter_map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Protects the time conversion every imported event's `time` comes from.
    #[test]
    fn iso_times_convert_to_epoch_ms() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_time("2025-09-25T01:22:20.083Z"),
            Some(1_758_763_340_083)
        );
        assert_eq!(
            parse_time("2025-09-25T03:22:20.083+02:00"),
            Some(1_758_763_340_083)
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    /// Protects the rewind replacement: the nodes after a mark are replaced by the new message
    /// (a valid surface op, so the batch appends), nothing is replaced when no node follows the
    /// mark, and `None` as the mark (a new root) replaces every node of the run.
    #[test]
    fn user_after_replaces_the_nodes_after_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let session = Session::create(
            dir.path().join("s"),
            SessionMeta::new("s".to_owned(), 0),
            crate::session::SessionOptions::default(),
        )
        .unwrap();
        let mut summary = Summary::default();
        let mut b = Builder::new(&mut summary, "f".to_owned(), &session);
        let kind = "{\"source\":\"claude-code\",\"kind\":\"prompt\"}";
        b.start_turn();
        b.user(&[text_block("one")], kind);
        b.assistant(&[text_block("two")], None, "anthropic", None, &[]);
        let mark = b.surface_mark();
        assert!(!b.has_nodes_after(mark));
        b.user(&[text_block("three")], kind);
        b.assistant(&[text_block("four")], None, "anthropic", None, &[]);
        assert!(b.has_nodes_after(mark));
        assert_eq!(b.user_after(&[text_block("three again")], kind, mark), 2);
        let last = b.surface_mark();
        assert_eq!(b.user_after(&[text_block("five")], kind, last), 0);
        assert_eq!(b.user_after(&[text_block("root")], kind, None), 4);
        b.finish(true);
        let drafts = std::mem::take(&mut b.out);
        drop(b);
        session.append_drafts(drafts).unwrap();
        let history = session.messages().to_value().to_string();
        assert!(history.contains("root"), "{history}");
        for gone in ["one", "two", "three", "four", "five"] {
            assert!(!history.contains(&format!("\"{gone}")), "{gone}: {history}");
        }
    }

    /// Protects detection: each format's first lines, and a line of neither.
    #[test]
    fn detects_formats_from_the_first_line() {
        assert_eq!(
            detect(br#"{"timestamp":"x","type":"session_meta","payload":{}}"#),
            Some(Format::Codex)
        );
        assert_eq!(
            detect(br#"{"id":"a","timestamp":"x","instructions":null}"#),
            Some(Format::Codex)
        );
        assert_eq!(
            detect(br#"{"type":"summary","summary":"t","leafUuid":"u"}"#),
            Some(Format::ClaudeCode)
        );
        assert_eq!(
            detect(br#"{"parentUuid":null,"type":"user","sessionId":"s"}"#),
            Some(Format::ClaudeCode)
        );
        assert_eq!(detect(br#"{"type":"turn/start","seq":0}"#), None);
    }
}
