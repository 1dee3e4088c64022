//! The [`Builder`]: the events of one imported session, built from source lines by the format
//! modules (`codex`, `claude_code`), keeping the lifecycle rules of docs/events.md §6 and closing
//! what the source leaves open as docs/events.md §7 does.

use crate::event::{
    parse_json, parse_tool_content, AssistantContent, AssistantMessage, Block, CompactEnd,
    CompactStart, CompactSummary, Draft, ErrorEvent, ErrorInfo, Event, EventData, Map, Opt,
    ReasonKind, StepEnd, StepStart, SurfaceOp, SystemMessage, ToolCall, ToolContent, ToolMessage,
    ToolResult, TurnEnd, TurnEndReason, TurnStart, UnknownEvent, UserMessage, Value,
};
use crate::session::{Session, SessionReader};

use super::{js, SrcLine, Summary, HEX, LINE_EVENT, SOURCE_MEMBER};

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
    /// The current surface nodes (seqs, in surface order), those of earlier runs first: a
    /// compaction replaces them all, a Claude Code rewind those after its branch point.
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
    /// With `keep_open`: where the lines the import may hold back for the next run start
    /// (`build_holding`).
    pub hold: HoldFrom,
    /// With `keep_open`, each response written: the index of its first line and of the line
    /// that ended it (a hold point between the two would write it before lines that one run
    /// of the file writes after it).
    pub spans: Vec<(usize, usize)>,
    /// The first surface node when compactions keep it (Codex's base instructions, which it
    /// sends with every request, after a compaction too): a compaction replaces the nodes
    /// after it.
    pub pinned: Option<u64>,
    /// The events earlier runs wrote (a reader, and how many there were): the lines a branch
    /// point of this run may name ([`Builder::earlier_mark`]).
    earlier: Option<(SessionReader, u64)>,
}

/// Where a build's lines end inside something that may go on: the index (in the lines given)
/// of the first line of it, `None` when nothing is unfinished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HoldFrom {
    /// A response (or compaction) the lines end inside: its last lines, or the line that shows
    /// it finished, may still come. Held while the file is being written.
    pub maybe: Option<usize>,
    /// A response that surely goes on: its last block is reasoning, which a response never
    /// ends with. Held however long the file has been quiet (a run that does not keep the turn
    /// open imports it).
    pub surely: Option<usize>,
}

impl HoldFrom {
    /// Adds a place where something unfinished starts (`surely`: it surely goes on).
    pub fn add(&mut self, from: usize, surely: bool) {
        let min = |a: Option<usize>| Some(a.map_or(from, |a| a.min(from)));
        self.maybe = min(self.maybe);
        if surely {
            self.surely = min(self.surely);
        }
    }
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
            next_seq: session.len(),
            time: session.last_event_time().unwrap_or(0),
            last_turn,
            turn_open: work.turn.is_some(),
            step,
            step_open: work.step.is_some(),
            calls,
            // The surface the earlier runs built: a compaction (or a rewind to a first prompt)
            // of this run replaces it as one run of the whole file would.
            nodes: session.messages().iter().map(|m| m.source_seq).collect(),
            earlier: (!session.is_empty()).then(|| (session.reader(), session.len())),
            ..Builder::fresh(summary, file)
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
            hold: HoldFrom::default(),
            spans: Vec::new(),
            pinned: None,
            earlier: None,
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

    /// How many surface nodes are current.
    pub fn surface_len(&self) -> usize {
        self.nodes.len()
    }

    /// The [`Builder::surface_mark`] an earlier run took after its line whose `uuid` member is
    /// `uuid` (a Claude Code line): the last surface node, still current, built before the
    /// events of the lines after it. `None` when no earlier run kept such a line (and for a
    /// session whose events keep no source lines). The events are searched from the last one
    /// back: the line a run's first prompt continues from is usually the last one of the run
    /// before.
    pub fn earlier_mark(&self, uuid: &str) -> Option<Option<u64>> {
        let (_, before) = self.earlier_line(uuid)?;
        Some(self.last_node_before(before))
    }

    /// The mark before the content of an earlier run's line whose `uuid` member is `uuid`: the
    /// last surface node, still current, built before the event that keeps the line (for a
    /// line of a response: before the response's message). `None` as for
    /// [`Builder::earlier_mark`].
    pub fn earlier_mark_before(&self, uuid: &str) -> Option<Option<u64>> {
        let (kept_in, _) = self.earlier_line(uuid)?;
        Some(self.last_node_before(kept_in))
    }

    /// The last current node (in surface order) built before event `seq`.
    fn last_node_before(&self, seq: u64) -> Option<u64> {
        self.nodes.iter().rev().copied().find(|&n| n < seq)
    }

    /// The earlier run's main-thread line whose `uuid` member is `uuid`: the seq of the event
    /// that keeps it, and the seq of the first event built from the lines after it.
    fn earlier_line(&self, uuid: &str) -> Option<(u64, u64)> {
        let (reader, len) = self.earlier.as_ref().filter(|_| self.keep_raw)?;
        // The first event after the one being looked at that keeps a line: the events between
        // are built from that one's lines (a response's calls after its message).
        let mut next_with_lines = *len;
        // The events passed (after the one being looked at) that keep lines: (the first
        // event after them that keeps lines, their lowest line number), newest first.
        let mut passed: Vec<(u64, u64)> = Vec::new();
        for seq in (0..*len).rev() {
            // An unreadable event is one this search cannot use (the export reports it).
            let Ok(ev) = reader.get(seq) else {
                continue;
            };
            let Some(entries) = ev.extra.get(SOURCE_MEMBER).and_then(|v| v.as_array()) else {
                continue;
            };
            let line_of = |entry: &crate::event::archived::ArchivedValue| {
                entry.get("line").and_then(|v| v.as_u64())
            };
            let found = entries.iter().find(|entry| {
                entry
                    .get("raw")
                    .and_then(|v| v.as_str())
                    .filter(|raw| raw.contains(uuid))
                    .and_then(|raw| parse_json(raw).ok())
                    .is_some_and(|line| {
                        line.get("uuid").and_then(Value::as_str) == Some(uuid)
                            && line.get("isSidechain").and_then(Value::as_bool) != Some(true)
                    })
            });
            if let Some(entry) = found {
                // A line met while a response was being assembled is kept (as its own event)
                // before that response's events, which were written when the response ended:
                // its mark is after them, as within a run (the latest event built from an
                // earlier line).
                let before = line_of(entry)
                    .and_then(|at| passed.iter().find(|&&(_, first)| first < at))
                    .map_or(next_with_lines, |&(after, _)| after);
                return Some((seq, before));
            }
            if let Some(first) = entries.iter().filter_map(line_of).min() {
                passed.push((next_with_lines, first));
            }
            next_with_lines = seq;
        }
        None
    }

    /// True when surface nodes were added after `mark` (a [`Builder::surface_mark`]; `None`:
    /// before the first node of this run) and are still current, so a message continuing from
    /// `mark` leaves a branch behind.
    pub fn has_nodes_after(&self, mark: Option<u64>) -> bool {
        self.first_after(mark) < self.nodes.len()
    }

    /// The index (in surface order) of the first current node after `mark` (a
    /// [`Builder::surface_mark`]), the number of nodes when none is after it. A mark that is no
    /// longer current (a compaction replaced it) is after the current nodes built before it.
    /// Surface order is seq order but after a compaction that kept the last nodes: its summary
    /// comes before them.
    fn first_after(&self, mark: Option<u64>) -> usize {
        match mark {
            None => 0,
            Some(m) => match self.position(m) {
                Some(i) => i + 1,
                None => self
                    .nodes
                    .iter()
                    .position(|&n| n > m)
                    .unwrap_or(self.nodes.len()),
            },
        }
    }

    /// Where a rollback of the last `n` user turns goes back to: the surface node before the
    /// earliest of the last `n` current nodes that are user messages `is_turn` accepts (each
    /// starts a user turn), as a [`Builder::surface_mark`]; only nodes up to `within` are looked
    /// at (`Some(None)`: none; `None`: all). `None` when no such message is found (or `n` is 0).
    /// Fewer than `n`: back to before the first one.
    pub fn mark_before_last_turns(
        &self,
        n: u64,
        within: Option<Option<u64>>,
        is_turn: impl Fn(&UserMessage) -> bool,
    ) -> Option<Option<u64>> {
        let first_out = self.out.first().and_then(|d| d.seq);
        let is_prompt = |seq: u64| -> bool {
            let owned;
            let event = match first_out.filter(|&f| seq >= f) {
                Some(f) => match usize::try_from(seq - f).ok().and_then(|i| self.out.get(i)) {
                    Some(d) => &d.event,
                    None => return false,
                },
                None => match self.earlier.as_ref().map(|(r, _)| r.get_owned(seq)) {
                    Some(Ok(e)) => {
                        owned = e;
                        &owned
                    }
                    _ => return false,
                },
            };
            matches!(&event.data, EventData::UserMessage(m) if is_turn(m))
        };
        let upto = match within {
            None => self.nodes.len(),
            Some(mark) => self.first_after(mark),
        };
        let mut found = None;
        let mut left = n;
        for i in (0..upto).rev() {
            if left == 0 {
                break;
            }
            if is_prompt(self.nodes[i]) {
                found = Some(i);
                left -= 1;
            }
        }
        found.map(|i| i.checked_sub(1).map(|j| self.nodes[j]))
    }

    /// A user message that continues the thread from `mark` (a rewind: the source went back to
    /// an earlier message): the surface nodes after `mark` (the abandoned branch) are replaced
    /// by this message, so they leave the model-visible history while their events (and source
    /// lines) stay in the log. A plain user message when nothing is after `mark`, or while a
    /// compaction is open (its range must stay current). Returns the number of nodes replaced.
    pub fn user_after(&mut self, blocks: &[String], envelope: &str, mark: Option<u64>) -> usize {
        let from = self.first_after(mark);
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
                let data = ToolResult::outcome_unknown(
                    turn,
                    step,
                    call.name,
                    call.id,
                    "The source ended this turn before the tool reported a result; its outcome \
                     is unknown.",
                    "the source recorded no result for this call",
                );
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
        let last = self.nodes.len().checked_sub(1);
        self.open_compaction(last);
    }

    /// Opens a compaction of the current surface that keeps its last nodes: those after `keep`
    /// (a [`Builder::surface_mark`]: the last node that goes). The summary then takes the
    /// place of the nodes before the kept ones, as Claude Code orders them after a compaction
    /// that keeps the last messages (`preservedSegment`). A `keep` that is not a current node,
    /// or that leaves nothing to compact, compacts the whole surface (with a warning).
    pub fn compact_start_keeping(&mut self, keep: Option<u64>) {
        if self.compaction_open.is_some() {
            return;
        }
        let first = self.first_compacted();
        let last = match keep.and_then(|m| self.position(m)).filter(|&i| i >= first) {
            Some(i) => Some(i),
            None => {
                self.warn(
                    "the messages this compaction keeps do not follow a message it compacts: \
                     its summary replaces the whole history",
                );
                self.nodes.len().checked_sub(1)
            }
        };
        self.open_compaction(last);
    }

    /// The index of the first node a compaction replaces: the pinned one stays.
    fn first_compacted(&self) -> usize {
        usize::from(self.pinned.is_some() && self.nodes.first() == self.pinned.as_ref())
    }

    /// `compact/start` of the nodes from the first compacted one through the one at index
    /// `last` (none when there are none).
    fn open_compaction(&mut self, last: Option<usize>) {
        if self.compaction_open.is_some() {
            return;
        }
        let first = self.first_compacted();
        if let (Some(&a), Some(&b)) = (self.nodes.get(first), last.and_then(|i| self.nodes.get(i)))
        {
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

    /// Where the current node of event `seq` is in surface order.
    fn position(&self, seq: u64) -> Option<usize> {
        self.nodes.iter().position(|&n| n == seq)
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
            // The summary takes the place of the nodes `a` through `b` (in surface order); the
            // ones a compaction keeps stay after it.
            if let (Some(i), Some(j)) = (self.position(a), self.position(b)) {
                self.nodes.splice(i..=j.max(i), [seq]);
            }
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

    /// True while a compaction waits for its summary.
    pub fn compaction_is_open(&self) -> bool {
        self.compaction_open.is_some()
    }

    /// Adds `usage` (its JSON, as [`Builder::assistant`] takes it) to the last response of the
    /// turn that ended last, when this run wrote that response: a count the source wrote after
    /// the turn's end. False (nothing changed) while a turn is open, when the turn had no
    /// response, or when the response is an earlier run's.
    pub fn add_to_last_response(&mut self, usage: &str) -> bool {
        if self.turn_open {
            return false;
        }
        let Some(add) = parse_json(usage).ok().as_ref().and_then(usage_of) else {
            return false;
        };
        for draft in self.out.iter_mut().rev() {
            match &mut draft.event.data {
                EventData::AssistantMessage(m) => {
                    let sum = |a: &Opt<u64>, b: &Opt<u64>| match (a, b) {
                        (Opt::Present(a), Opt::Present(b)) => Opt::Present(a.saturating_add(*b)),
                        (Opt::Present(n), _) | (_, Opt::Present(n)) => Opt::Present(*n),
                        _ => Opt::Absent,
                    };
                    m.usage = Opt::Present(match &m.usage {
                        Opt::Present(u) => crate::event::Usage {
                            input_tokens: u.input_tokens.saturating_add(add.input_tokens),
                            output_tokens: u.output_tokens.saturating_add(add.output_tokens),
                            cache_read_tokens: sum(&u.cache_read_tokens, &add.cache_read_tokens),
                            cache_write_tokens: sum(&u.cache_write_tokens, &add.cache_write_tokens),
                            reasoning_tokens: sum(&u.reasoning_tokens, &add.reasoning_tokens),
                            extra: u.extra.clone(),
                        },
                        _ => add,
                    });
                    return true;
                }
                EventData::TurnStart(_) | EventData::UserMessage(_) => return false,
                _ => {}
            }
        }
        false
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
