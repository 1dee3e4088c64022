//! The lifecycle rules of docs/events.md §6, checked on every append and on import, and the turn
//! state of §7, derived from the same bookkeeping.
//!
//! How a `tool/result` finds its call (the same in the projection, `crate::projection`):
//!
//! - A result answers one `tool/call` of its own turn, and a call is answered at most once.
//! - `data.callId`, when present, names the call: the earliest *unanswered* call of the turn with
//!   that id. Call ids may repeat, also within a turn; a result whose id matches only answered
//!   calls is refused ([`Rule::AnsweredOnce`]), one whose id matches no call of the turn too
//!   ([`Rule::ResultAnswersCall`]).
//! - Else `sourceEventSeqs[0]`, when it names a `tool/call`, names the call. It must be a call of
//!   the same turn ([`Rule::ResultAnswersCall`]) not answered yet ([`Rule::AnsweredOnce`]); the
//!   name rule is not tried instead, since §5's "the `tool/call` named by `sourceEventSeqs[0]`"
//!   exists and its "otherwise" does not apply.
//! - Otherwise (no `sourceEventSeqs`, or its first seq names an event that is not a `tool/call`):
//!   the earliest unanswered call of the same turn and step whose name is the result's
//!   `toolName`.
//!
//! Approvals (§7 `awaitUserConfirm`): an `approval/decision` settles every `approval/request`
//! for its call made before it, so a repeated request needs one decision; a request after the
//! decision waits again. [`OpenWork::pending_approvals`] lists each waiting call id once.
//!
//! Compactions: `compact/*` may appear anywhere (§6); the one rule is §3's, a `compact/start`
//! while another has no `compact/end` is refused ([`Rule::OneCompactionAtATime`]). A
//! `compact/summary` or `compact/end` with no compaction open is accepted; such a `compact/end`
//! closes nothing and leaves the turn state and the open work as they were.

use std::fmt;

use crate::event::{Decision, ReasonKind};

use super::facts::{Facts, Kind};

/// A lifecycle rule of docs/events.md §6 (and the few this crate adds where the spec is silent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The appended event's `seq` must be the log's length.
    SeqIsLength,
    /// `sourceEventSeqs` may only name earlier events.
    SourcesBeforeEvent,
    /// `turn/start` only when no turn is open.
    TurnStartWhenIdle,
    /// The first turn is 0 or 1, each next one the previous + 1.
    TurnNumber,
    /// `step/start` only inside the open turn.
    StepInsideTurn,
    /// `step/start` only when no step is open.
    StepStartWhenNoStep,
    /// Within a turn the first step is 0 or 1, each next one the previous + 1.
    StepNumber,
    /// `step/end` closes the open step (same turn and step).
    StepEndClosesOpenStep,
    /// `turn/end` closes the open turn.
    TurnEndClosesOpenTurn,
    /// `turn/end` requires that no step is open.
    TurnEndWithoutOpenStep,
    /// Chunks, assistant messages, tool calls and results, approvals carry the turn and step of
    /// the open step and appear only while it is open.
    InsideOpenStep,
    /// A `tool/result` answers one `tool/call` of the same turn.
    ResultAnswersCall,
    /// A call is answered at most once.
    AnsweredOnce,
    /// A surface event's `surfaceOp` must be valid against the surface at that point.
    SurfaceOpValid,
    /// A new compaction is refused while one is open (`compact/start` without `compact/end`).
    OneCompactionAtATime,
}

impl Rule {
    /// The rule in words, as docs/events.md states it.
    pub fn text(self) -> &'static str {
        match self {
            Rule::SeqIsLength => "seq = log length at append",
            Rule::SourcesBeforeEvent => "sourceEventSeqs name earlier events",
            Rule::TurnStartWhenIdle => "turn/start only when no turn is open",
            Rule::TurnNumber => "turn = previous turn + 1 (the first is 0 or 1)",
            Rule::StepInsideTurn => "step/start only inside the open turn",
            Rule::StepStartWhenNoStep => "step/start only when no step is open",
            Rule::StepNumber => "step = previous step of this turn + 1 (the first is 0 or 1)",
            Rule::StepEndClosesOpenStep => "step/end closes the open step (same turn and step)",
            Rule::TurnEndClosesOpenTurn => "turn/end closes the open turn",
            Rule::TurnEndWithoutOpenStep => "turn/end requires that no step is open",
            Rule::InsideOpenStep => {
                "assistant/chunk, assistant/message, tool/call, tool/result and approval/* carry \
                 the turn and step of the open step and appear only while it is open"
            }
            Rule::ResultAnswersCall => "a tool/result answers one tool/call of the same turn",
            Rule::AnsweredOnce => "a call is answered at most once",
            Rule::SurfaceOpValid => {
                "a surface event's surfaceOp must be valid against the surface at that point"
            }
            Rule::OneCompactionAtATime => {
                "a new compaction is refused until the open one is closed (compact/end)"
            }
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// What was open when an event was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenState {
    /// The open turn.
    pub turn: Option<u64>,
    /// The open step (of the open turn).
    pub step: Option<u64>,
    /// The seq of an open `compact/start`.
    pub compaction: Option<u64>,
}

impl fmt::Display for OpenState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.turn, self.step) {
            (None, _) => write!(f, "no turn open")?,
            (Some(t), None) => write!(f, "turn {t} open, no step open")?,
            (Some(t), Some(s)) => write!(f, "turn {t}, step {s} open")?,
        }
        if let Some(c) = self.compaction {
            write!(f, ", compaction open since seq {c}")?;
        }
        Ok(())
    }
}

/// An event refused by a lifecycle rule: nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleError {
    /// The rule the event breaks.
    pub rule: Rule,
    /// The seq the event would have had.
    pub seq: u64,
    /// The event's type.
    pub type_name: String,
    /// What was open.
    pub open: OpenState,
    /// The particulars (which turn, step, call).
    pub detail: String,
}

impl fmt::Display for LifecycleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at seq {} refused by the rule \"{}\": {} ({})",
            self.type_name, self.seq, self.rule, self.detail, self.open
        )
    }
}

impl std::error::Error for LifecycleError {}

/// The turn state of docs/events.md §7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TurnState {
    /// No turn open.
    Idle,
    /// A turn is open and no step is open.
    Pending,
    /// The first step of the open turn is open and has no `assistant/message` yet.
    Inferring,
    /// A later step is open (the model works on tool results) and has no `assistant/message` yet.
    Generating,
    /// The open step has its `assistant/message` and has not ended (its tools run).
    ToolInvoking,
    /// As `ToolInvoking`, and a call of the step has an `approval/request` without decision
    /// (an `approval/decision` for the call settles every request for it made before).
    AwaitUserConfirm,
}

impl TurnState {
    /// The state's name as docs/events.md writes it (`"toolInvoking"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Idle => "idle",
            TurnState::Pending => "pending",
            TurnState::Inferring => "inferring",
            TurnState::Generating => "generating",
            TurnState::ToolInvoking => "toolInvoking",
            TurnState::AwaitUserConfirm => "awaitUserConfirm",
        }
    }
}

impl fmt::Display for TurnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `tool/call` of the open turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallInfo {
    /// The call's seq.
    pub seq: u64,
    /// `callId`.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The step it was made in.
    pub step: u64,
    /// The seq of the `tool/result` that answered it.
    pub answered_by: Option<u64>,
}

/// What a crash (or a caller) left open: everything `close` has to close.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenWork {
    /// The open turn and the seq of its `turn/start`.
    pub turn: Option<(u64, u64)>,
    /// The open step and the seq of its `step/start`.
    pub step: Option<(u64, u64)>,
    /// Calls of the open turn without a result, in call order.
    pub unanswered_calls: Vec<CallInfo>,
    /// Call ids of the open step with an `approval/request` and no `approval/decision` after
    /// it, each once, in the order of their first such request. A decision settles every
    /// request for its call made before it.
    pub pending_approvals: Vec<String>,
    /// The seq of a `compact/start` without `compact/end`.
    pub compaction: Option<u64>,
}

impl OpenWork {
    /// True when nothing is open.
    pub fn is_empty(&self) -> bool {
        self.turn.is_none() && self.compaction.is_none()
    }
}

#[derive(Debug, Clone)]
struct StepTrack {
    step: u64,
    start_seq: u64,
    first: bool,
    has_message: bool,
    /// Approval requests of this step: call id and decision (at most one undecided per call).
    approvals: Vec<(String, Option<Decision>)>,
}

#[derive(Debug, Clone)]
struct TurnTrack {
    turn: u64,
    start_seq: u64,
    last_step: Option<u64>,
    step: Option<StepTrack>,
    calls: Vec<CallInfo>,
}

/// Where a [`Lifecycle`] finds the `tool/call`s of closed turns when it does not keep them: the
/// log it is derived from.
pub(crate) trait PastCalls: Send + Sync {
    /// The events it can read: seqs below this.
    fn visible(&self) -> u64;
    /// The turn of the `tool/call` at `seq` (below [`visible`](Self::visible)); `None` when
    /// the event there is no `tool/call` (or cannot be read).
    fn call_turn(&self, seq: u64) -> Option<u64>;
}

/// The calls of closed turns, read from a log (a writer's attached reader sees its appends).
/// `follow`: the reader is a writer's, refreshed to see the appends.
struct LogCalls(std::sync::Mutex<crate::log::LogReader>, bool);

impl PastCalls for LogCalls {
    fn visible(&self) -> u64 {
        let mut r = crate::util::lock(&self.0);
        if self.1 {
            let _ = r.refresh();
        }
        r.len()
    }

    fn call_turn(&self, seq: u64) -> Option<u64> {
        let r = crate::util::lock(&self.0);
        let rec = r.get(seq).ok()?;
        match &crate::event::access_event(rec.payload).ok()?.data {
            crate::event::archived::ArchivedEventData::ToolCall(c) => Some(c.turn.to_native()),
            _ => None,
        }
    }
}

#[derive(Clone, Default)]
struct Past(Option<std::sync::Arc<dyn PastCalls>>);

impl fmt::Debug for Past {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Past(log)"
        } else {
            "Past(kept)"
        })
    }
}

/// The lifecycle bookkeeping of one session.
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    len: u64,
    last_turn: Option<u64>,
    last_end: Option<(u64, ReasonKind)>,
    turn: Option<TurnTrack>,
    compaction: Option<u64>,
    turns_completed: u64,
    /// The turn of the `tool/call`s applied, by seq (a persistent map: cloning the bookkeeping
    /// for a batch stays O(1)). Tells a `sourceEventSeqs[0]` that names a call of another turn
    /// (refused) from one that names no call (on to the name rule). Every call, unless `past`
    /// is set: then only those of the open turn and those its log cannot show yet (a batch being
    /// checked), the rest read from the log when needed, so the memory does not grow with the
    /// number of calls.
    call_turns: imbl::OrdMap<u64, u64>,
    /// Where the calls of closed turns are read from, when they are not kept.
    past: Past,
    /// The calls that were unanswered when their step (or turn) ended, in seq order (a later
    /// result for one takes it off). The renderings give them the synthetic error result of
    /// docs/events.md §7 (a persistent vector: cloning stays O(1)).
    closed_unanswered: imbl::Vector<CallInfo>,
}

impl Lifecycle {
    /// The tool calls whose step (or turn) ended without a result (and got none since): the
    /// provider renderings answer each with `TOOL_OUTCOME_UNKNOWN` (docs/events.md §7).
    pub fn closed_unanswered(&self) -> Vec<CallInfo> {
        self.closed_unanswered.iter().cloned().collect()
    }

    /// An empty session's bookkeeping.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on keeps only the calls of the open turn (and those `log` cannot show yet),
    /// reading older ones from `log` when a result names one: the memory no longer grows with
    /// the number of calls. `log` must hold the events this bookkeeping was derived from.
    /// `follow`: `log` is a writer's, which must see the events appended after this call.
    pub(crate) fn read_past_calls_from(&mut self, log: crate::log::LogReader, follow: bool) {
        self.past = Past(Some(std::sync::Arc::new(LogCalls(
            std::sync::Mutex::new(log),
            follow,
        ))));
        self.forget_visible_calls();
    }

    /// The calls kept in the call map (all of them unless they are read from the log).
    #[cfg(test)]
    pub(crate) fn kept_calls(&self) -> usize {
        self.call_turns.len()
    }

    /// The turn of the `tool/call` at `seq`, if the event there is one.
    fn call_turn(&self, seq: u64) -> Option<u64> {
        if let Some(&turn) = self.call_turns.get(&seq) {
            return Some(turn);
        }
        let past = self.past.0.as_ref()?;
        if self
            .turn
            .as_ref()
            .is_some_and(|t| t.calls.iter().any(|c| c.seq == seq))
        {
            // Kept in `call_turns`: not found there means not a call.
            return None;
        }
        past.call_turn(seq)
    }

    /// Drops the calls of closed turns that the log shows (when `past` is set).
    fn forget_visible_calls(&mut self) {
        let Some(past) = &self.past.0 else {
            return;
        };
        if self.call_turns.is_empty() {
            return;
        }
        let visible = past.visible();
        let open: Vec<u64> = self
            .turn
            .as_ref()
            .map(|t| t.calls.iter().map(|c| c.seq).collect())
            .unwrap_or_default();
        let gone: Vec<u64> = self
            .call_turns
            .keys()
            .copied()
            .filter(|seq| *seq < visible && !open.contains(seq))
            .collect();
        for seq in gone {
            self.call_turns.remove(&seq);
        }
    }

    /// Events applied so far (the seq the next one gets).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when no event was applied.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The turn and end reason of the last closed turn.
    pub fn last_end(&self) -> Option<(u64, ReasonKind)> {
        self.last_end
    }

    /// The number of the last turn started (open or closed).
    pub fn last_turn(&self) -> Option<u64> {
        self.last_turn
    }

    /// What is open now.
    pub fn open_state(&self) -> OpenState {
        OpenState {
            turn: self.turn.as_ref().map(|t| t.turn),
            step: self
                .turn
                .as_ref()
                .and_then(|t| t.step.as_ref().map(|s| s.step)),
            compaction: self.compaction,
        }
    }

    /// The turn state (docs/events.md §7).
    pub fn state(&self) -> TurnState {
        let Some(t) = &self.turn else {
            return TurnState::Idle;
        };
        let Some(s) = &t.step else {
            return TurnState::Pending;
        };
        if !s.has_message {
            return if s.first {
                TurnState::Inferring
            } else {
                TurnState::Generating
            };
        }
        if s.approvals.iter().any(|(_, d)| d.is_none()) {
            TurnState::AwaitUserConfirm
        } else {
            TurnState::ToolInvoking
        }
    }

    /// What is open: turn, step, unanswered calls, pending approvals, an open compaction.
    pub fn open_work(&self) -> OpenWork {
        let mut w = OpenWork {
            compaction: self.compaction,
            ..OpenWork::default()
        };
        if let Some(t) = &self.turn {
            w.turn = Some((t.turn, t.start_seq));
            w.unanswered_calls = t
                .calls
                .iter()
                .filter(|c| c.answered_by.is_none())
                .cloned()
                .collect();
            if let Some(s) = &t.step {
                w.step = Some((s.step, s.start_seq));
                for (id, _) in s.approvals.iter().filter(|(_, d)| d.is_none()) {
                    if !w.pending_approvals.contains(id) {
                        w.pending_approvals.push(id.clone());
                    }
                }
            }
        }
        w
    }

    /// The calls of the open turn.
    pub fn calls(&self) -> &[CallInfo] {
        self.turn.as_ref().map_or(&[], |t| &t.calls)
    }

    /// The number of the step a new `step/start` of the open turn must carry.
    pub fn next_step(&self) -> Option<u64> {
        let t = self.turn.as_ref()?;
        Some(t.last_step.map_or(1, |s| s.saturating_add(1)))
    }

    /// The number the next `turn/start` must carry.
    pub fn next_turn(&self) -> u64 {
        self.last_turn.map_or(1, |t| t.saturating_add(1))
    }

    fn refuse(&self, f: &Facts<'_>, rule: Rule, detail: String) -> LifecycleError {
        LifecycleError {
            rule,
            seq: f.seq,
            type_name: f.type_name.to_string(),
            open: self.open_state(),
            detail,
        }
    }

    /// Which call a tool result answers: the resolution order of docs/events.md §5, within the open
    /// turn (§6: "a `tool/result` answers one `tool/call` of the same turn; a call is answered
    /// at most once"). The projector resolves the same way (see `Projector::resolve`).
    ///
    /// 1. Its `callId`, when present: the earliest unanswered call of the open turn with that id
    ///    (ids may repeat). When every call of the turn with the id is answered, [`AnsweredOnce`]
    ///    refuses it; when none has the id, [`ResultAnswersCall`] does (no fall-through: the
    ///    result names its call itself).
    /// 2. Else, when `sourceEventSeqs[0]` names a `tool/call`, that call: §5's "the `tool/call`
    ///    named by `sourceEventSeqs[0]`" exists, so the next "otherwise" does not apply. A call of
    ///    another turn is refused ([`ResultAnswersCall`]), an answered one too ([`AnsweredOnce`]).
    /// 3. Otherwise (no `sourceEventSeqs`, or its first seq names an event that is not a
    ///    `tool/call`, say the assistant message): the earliest unanswered call of the same turn
    ///    and step with the result's tool name.
    ///
    /// [`AnsweredOnce`]: Rule::AnsweredOnce
    /// [`ResultAnswersCall`]: Rule::ResultAnswersCall
    fn resolve(&self, f: &Facts<'_>) -> Result<usize, LifecycleError> {
        let Kind::ToolResult {
            turn,
            step,
            call_id,
            tool_name,
            ..
        } = f.kind
        else {
            return Err(self.refuse(f, Rule::ResultAnswersCall, "not a tool result".into()));
        };
        let calls = self.calls();
        let named = f.first_source.filter(|&src| self.call_turn(src).is_some());
        let found = if let Some(id) = call_id {
            // The earliest unanswered call of the turn with this id (ids may repeat); when every
            // call with it is answered, the result would answer one a second time.
            match calls
                .iter()
                .position(|c| c.call_id == id && c.answered_by.is_none())
            {
                Some(i) => i,
                None => calls.iter().rposition(|c| c.call_id == id).ok_or_else(|| {
                    self.refuse(
                        f,
                        Rule::ResultAnswersCall,
                        format!("callId {id:?} names no tool/call of turn {turn}"),
                    )
                })?,
            }
        } else if let Some(src) = named {
            match calls.iter().position(|c| c.seq == src) {
                Some(i) => i,
                None => {
                    let other = self.call_turn(src).unwrap_or_default();
                    return Err(self.refuse(
                        f,
                        Rule::ResultAnswersCall,
                        format!(
                            "sourceEventSeqs[0] = {src} names a tool/call of turn {other}, not \
                             of turn {turn}"
                        ),
                    ));
                }
            }
        } else {
            calls
                .iter()
                .position(|c| c.answered_by.is_none() && c.step == step && c.name == tool_name)
                .ok_or_else(|| {
                    let how = match f.first_source {
                        Some(src) => format!("sourceEventSeqs[0] = {src} names no tool/call"),
                        None => "no sourceEventSeqs".to_string(),
                    };
                    self.refuse(
                        f,
                        Rule::ResultAnswersCall,
                        format!(
                            "no callId, {how}, and no unanswered {tool_name:?} call in turn \
                             {turn}, step {step}"
                        ),
                    )
                })?
        };
        if let Some(by) = calls[found].answered_by {
            return Err(self.refuse(
                f,
                Rule::AnsweredOnce,
                format!(
                    "call {:?} (seq {}) was already answered at seq {by}",
                    calls[found].call_id, calls[found].seq
                ),
            ));
        }
        Ok(found)
    }

    /// The call of the open turn the tool result `f` answers, found as [`resolve`] finds it;
    /// `None` when it names no call or a call already answered (or `f` is no tool result).
    ///
    /// [`resolve`]: Self::resolve
    pub(crate) fn call_answered(&self, f: &Facts<'_>) -> Option<&CallInfo> {
        match f.kind {
            Kind::ToolResult { .. } => self.resolve(f).ok().and_then(|i| self.calls().get(i)),
            _ => None,
        }
    }

    /// Checks the step-bound events: the event carries the open step's turn and step.
    fn check_in_step(&self, f: &Facts<'_>, turn: u64, step: u64) -> Result<(), LifecycleError> {
        let open = self
            .turn
            .as_ref()
            .and_then(|t| t.step.as_ref().map(|s| (t.turn, s.step)));
        match open {
            Some((t, s)) if t == turn && s == step => Ok(()),
            Some((t, s)) => Err(self.refuse(
                f,
                Rule::InsideOpenStep,
                format!("it carries turn {turn}, step {step}; the open step is turn {t}, step {s}"),
            )),
            None => Err(self.refuse(
                f,
                Rule::InsideOpenStep,
                format!("it carries turn {turn}, step {step}, but no step is open"),
            )),
        }
    }

    /// Checks `f` against every rule (but the surface rule, which the projection checks), without
    /// changing anything.
    pub(crate) fn check(&self, f: &Facts<'_>) -> Result<(), LifecycleError> {
        if f.seq != self.len {
            return Err(self.refuse(
                f,
                Rule::SeqIsLength,
                format!(
                    "the log holds {} events, so the next seq is {}",
                    self.len, self.len
                ),
            ));
        }
        if let Some(max) = f.max_source.filter(|&m| m >= f.seq) {
            return Err(self.refuse(
                f,
                Rule::SourcesBeforeEvent,
                format!("sourceEventSeqs names seq {max}"),
            ));
        }
        match f.kind {
            Kind::TurnStart { turn } => {
                if let Some(t) = &self.turn {
                    return Err(self.refuse(
                        f,
                        Rule::TurnStartWhenIdle,
                        format!("turn {} is still open", t.turn),
                    ));
                }
                let ok = match self.last_turn {
                    None => turn == 0 || turn == 1,
                    Some(last) => Some(turn) == last.checked_add(1),
                };
                if !ok {
                    let expected = match self.last_turn {
                        None => "0 or 1 (the first turn)".to_string(),
                        Some(last) => {
                            format!("{} (the previous turn was {last})", last.saturating_add(1))
                        }
                    };
                    return Err(self.refuse(
                        f,
                        Rule::TurnNumber,
                        format!("turn {turn}, expected {expected}"),
                    ));
                }
            }
            Kind::StepStart { turn, step } => {
                let Some(t) = self.turn.as_ref().filter(|t| t.turn == turn) else {
                    return Err(self.refuse(
                        f,
                        Rule::StepInsideTurn,
                        format!("it names turn {turn}, which is not open"),
                    ));
                };
                if let Some(s) = &t.step {
                    return Err(self.refuse(
                        f,
                        Rule::StepStartWhenNoStep,
                        format!("step {} is still open", s.step),
                    ));
                }
                let ok = match t.last_step {
                    None => step == 0 || step == 1,
                    Some(last) => Some(step) == last.checked_add(1),
                };
                if !ok {
                    let expected = match t.last_step {
                        None => "0 or 1 (the turn's first step)".to_string(),
                        Some(last) => {
                            format!("{} (the previous step was {last})", last.saturating_add(1))
                        }
                    };
                    return Err(self.refuse(
                        f,
                        Rule::StepNumber,
                        format!("step {step}, expected {expected}"),
                    ));
                }
            }
            Kind::StepEnd { turn, step } => {
                let open = self
                    .turn
                    .as_ref()
                    .and_then(|t| t.step.as_ref().map(|s| (t.turn, s.step)));
                if open != Some((turn, step)) {
                    return Err(self.refuse(
                        f,
                        Rule::StepEndClosesOpenStep,
                        format!("it names turn {turn}, step {step}"),
                    ));
                }
            }
            Kind::TurnEnd { turn, .. } => match &self.turn {
                Some(t) if t.turn == turn => {
                    if let Some(s) = &t.step {
                        return Err(self.refuse(
                            f,
                            Rule::TurnEndWithoutOpenStep,
                            format!("step {} of turn {turn} is still open", s.step),
                        ));
                    }
                }
                _ => {
                    return Err(self.refuse(
                        f,
                        Rule::TurnEndClosesOpenTurn,
                        format!("it names turn {turn}"),
                    ))
                }
            },
            Kind::Assistant { turn, step, .. } => self.check_in_step(f, turn, step)?,
            Kind::ApprovalRequest { turn, step, .. }
            | Kind::ApprovalDecision { turn, step, .. } => self.check_in_step(f, turn, step)?,
            // Call ids may repeat, also within a turn (docs/events.md has no rule against it): a
            // result giving a `callId` answers the earliest unanswered call with that id.
            Kind::ToolCall { turn, step, .. } => self.check_in_step(f, turn, step)?,
            Kind::ToolResult { turn, step, .. } => {
                self.check_in_step(f, turn, step)?;
                self.resolve(f)?;
            }
            Kind::CompactStart => {
                if let Some(c) = self.compaction {
                    return Err(self.refuse(
                        f,
                        Rule::OneCompactionAtATime,
                        format!("the compaction started at seq {c} has no compact/end"),
                    ));
                }
            }
            // `compact/*` may appear anywhere (docs/events.md §6): only a new compaction is refused
            // while one is open. A `compact/summary` or `compact/end` with no compaction open
            // (a recovery tool closing a lock twice, say) is accepted and closes nothing.
            Kind::CompactSummary | Kind::CompactEnd => {}
            Kind::Anywhere => {}
        }
        Ok(())
    }

    /// Records `f` (which [`check`](Self::check) accepted). On an event that breaks a rule (a log
    /// written by something else) it keeps going with the most sensible reading.
    pub(crate) fn apply(&mut self, f: &Facts<'_>) {
        let resolved = match f.kind {
            Kind::ToolResult { .. } => self.resolve(f).ok(),
            _ => None,
        };
        self.len = self.len.max(f.seq.saturating_add(1));
        match f.kind {
            Kind::TurnStart { turn } => {
                self.last_turn = Some(turn);
                self.turn = Some(TurnTrack {
                    turn,
                    start_seq: f.seq,
                    last_step: None,
                    step: None,
                    calls: Vec::new(),
                });
            }
            Kind::StepStart { step, .. } => {
                if let Some(t) = &mut self.turn {
                    t.step = Some(StepTrack {
                        step,
                        start_seq: f.seq,
                        first: t.last_step.is_none(),
                        has_message: false,
                        approvals: Vec::new(),
                    });
                    t.last_step = Some(step);
                }
            }
            Kind::StepEnd { step, .. } => {
                if let Some(t) = &mut self.turn {
                    t.step = None;
                    for c in &t.calls {
                        if c.step == step
                            && c.answered_by.is_none()
                            && !self.closed_unanswered.iter().any(|k| k.seq == c.seq)
                        {
                            self.closed_unanswered.push_back(c.clone());
                        }
                    }
                }
            }
            Kind::TurnEnd { turn, reason } => {
                if let Some(t) = &self.turn {
                    for c in &t.calls {
                        if c.answered_by.is_none()
                            && !self.closed_unanswered.iter().any(|k| k.seq == c.seq)
                        {
                            self.closed_unanswered.push_back(c.clone());
                        }
                    }
                }
                self.turn = None;
                self.last_end = Some((turn, reason));
                self.turns_completed += 1;
                self.forget_visible_calls();
            }
            Kind::Assistant { message: true, .. } => {
                if let Some(s) = self.turn.as_mut().and_then(|t| t.step.as_mut()) {
                    s.has_message = true;
                }
            }
            Kind::Assistant { message: false, .. } => {}
            Kind::ToolCall {
                turn,
                step,
                call_id,
                name,
            } => {
                self.call_turns.insert(f.seq, turn);
                if let Some(t) = &mut self.turn {
                    t.calls.push(CallInfo {
                        seq: f.seq,
                        call_id: call_id.to_string(),
                        name: name.to_string(),
                        step,
                        answered_by: None,
                    });
                }
            }
            Kind::ToolResult { .. } => {
                if let (Some(i), Some(t)) = (resolved, &mut self.turn) {
                    if let Some(c) = t.calls.get_mut(i) {
                        c.answered_by = Some(f.seq);
                        let seq = c.seq;
                        self.closed_unanswered.retain(|k| k.seq != seq);
                    }
                }
            }
            Kind::ApprovalRequest { call_id, .. } => {
                if let Some(s) = self.turn.as_mut().and_then(|t| t.step.as_mut()) {
                    // A repeated request for a call still waiting adds nothing: the call waits
                    // for one decision. A request after a decision waits again.
                    if !s
                        .approvals
                        .iter()
                        .any(|(id, d)| id == call_id && d.is_none())
                    {
                        s.approvals.push((call_id.to_string(), None));
                    }
                }
            }
            Kind::ApprovalDecision {
                call_id, decision, ..
            } => {
                if let Some(s) = self.turn.as_mut().and_then(|t| t.step.as_mut()) {
                    // A decision settles every open request for its call.
                    let mut settled = false;
                    for (_, d) in s
                        .approvals
                        .iter_mut()
                        .filter(|(id, d)| id == call_id && d.is_none())
                    {
                        *d = Some(decision);
                        settled = true;
                    }
                    if !settled {
                        s.approvals.push((call_id.to_string(), Some(decision)));
                    }
                }
            }
            Kind::CompactStart => self.compaction = Some(f.seq),
            // Closes the open compaction, if any; a stray one changes nothing.
            Kind::CompactEnd => self.compaction = None,
            Kind::CompactSummary | Kind::Anywhere => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints (super::checkpoint): the bookkeeping as bytes and back.

use super::checkpoint::{reason_code, reason_of, Bad, Dec, Enc};

const RULES: [Rule; 15] = [
    Rule::SeqIsLength,
    Rule::SourcesBeforeEvent,
    Rule::TurnStartWhenIdle,
    Rule::TurnNumber,
    Rule::StepInsideTurn,
    Rule::StepStartWhenNoStep,
    Rule::StepNumber,
    Rule::StepEndClosesOpenStep,
    Rule::TurnEndClosesOpenTurn,
    Rule::TurnEndWithoutOpenStep,
    Rule::InsideOpenStep,
    Rule::ResultAnswersCall,
    Rule::AnsweredOnce,
    Rule::SurfaceOpValid,
    Rule::OneCompactionAtATime,
];

fn decision_code(d: Option<Decision>) -> u8 {
    match d {
        None => 0,
        Some(Decision::Approved) => 1,
        Some(Decision::Denied) => 2,
    }
}

fn decision_of(c: u8) -> Result<Option<Decision>, Bad> {
    Ok(match c {
        0 => None,
        1 => Some(Decision::Approved),
        2 => Some(Decision::Denied),
        c => return Err(format!("a decision of {c}")),
    })
}

fn encode_call(c: &CallInfo, e: &mut Enc) {
    e.u64(c.seq);
    e.str(&c.call_id);
    e.str(&c.name);
    e.u64(c.step);
    e.opt_u64(c.answered_by);
}

fn decode_call(d: &mut Dec<'_>) -> Result<CallInfo, Bad> {
    Ok(CallInfo {
        seq: d.u64()?,
        call_id: d.string()?,
        name: d.string()?,
        step: d.u64()?,
        answered_by: d.opt_u64()?,
    })
}

pub(crate) fn encode_violation(v: &LifecycleError, e: &mut Enc) {
    let rule = RULES.iter().position(|r| *r == v.rule).unwrap_or(0);
    e.u8(rule as u8);
    e.u64(v.seq);
    e.str(&v.type_name);
    e.opt_u64(v.open.turn);
    e.opt_u64(v.open.step);
    e.opt_u64(v.open.compaction);
    e.str(&v.detail);
}

pub(crate) fn decode_violation(d: &mut Dec<'_>) -> Result<LifecycleError, Bad> {
    let rule = *RULES
        .get(d.u8()? as usize)
        .ok_or_else(|| "a rule past the list".to_string())?;
    Ok(LifecycleError {
        rule,
        seq: d.u64()?,
        type_name: d.string()?,
        open: OpenState {
            turn: d.opt_u64()?,
            step: d.opt_u64()?,
            compaction: d.opt_u64()?,
        },
        detail: d.string()?,
    })
}

impl Lifecycle {
    pub(crate) fn encode(&self, e: &mut Enc) {
        e.u64(self.len);
        e.opt_u64(self.last_turn);
        match self.last_end {
            None => e.u8(0),
            Some((turn, reason)) => {
                e.u8(1);
                e.u64(turn);
                e.u8(reason_code(reason));
            }
        }
        match &self.turn {
            None => e.u8(0),
            Some(t) => {
                e.u8(1);
                e.u64(t.turn);
                e.u64(t.start_seq);
                e.opt_u64(t.last_step);
                match &t.step {
                    None => e.u8(0),
                    Some(s) => {
                        e.u8(1);
                        e.u64(s.step);
                        e.u64(s.start_seq);
                        e.bool(s.first);
                        e.bool(s.has_message);
                        e.u64(s.approvals.len() as u64);
                        for (id, dec) in &s.approvals {
                            e.str(id);
                            e.u8(decision_code(*dec));
                        }
                    }
                }
                e.u64(t.calls.len() as u64);
                for c in &t.calls {
                    encode_call(c, e);
                }
            }
        }
        e.opt_u64(self.compaction);
        e.u64(self.turns_completed);
        e.u64(self.call_turns.len() as u64);
        for (seq, turn) in &self.call_turns {
            e.u64(*seq);
            e.u64(*turn);
        }
        e.u64(self.closed_unanswered.len() as u64);
        for c in &self.closed_unanswered {
            encode_call(c, e);
        }
    }

    pub(crate) fn decode(d: &mut Dec<'_>) -> Result<Lifecycle, Bad> {
        let len = d.u64()?;
        let last_turn = d.opt_u64()?;
        let last_end = match d.u8()? {
            0 => None,
            1 => Some((d.u64()?, reason_of(d.u8()?)?)),
            t => return Err(format!("a last-end tag of {t}")),
        };
        let turn = match d.u8()? {
            0 => None,
            1 => {
                let turn = d.u64()?;
                let start_seq = d.u64()?;
                let last_step = d.opt_u64()?;
                let step = match d.u8()? {
                    0 => None,
                    1 => {
                        let step = d.u64()?;
                        let start_seq = d.u64()?;
                        let first = d.bool()?;
                        let has_message = d.bool()?;
                        let n = d.count(9)?;
                        let mut approvals = Vec::with_capacity(n);
                        for _ in 0..n {
                            approvals.push((d.string()?, decision_of(d.u8()?)?));
                        }
                        Some(StepTrack {
                            step,
                            start_seq,
                            first,
                            has_message,
                            approvals,
                        })
                    }
                    t => return Err(format!("a step tag of {t}")),
                };
                let n = d.count(33)?;
                let mut calls = Vec::with_capacity(n);
                for _ in 0..n {
                    calls.push(decode_call(d)?);
                }
                Some(TurnTrack {
                    turn,
                    start_seq,
                    last_step,
                    step,
                    calls,
                })
            }
            t => return Err(format!("a turn tag of {t}")),
        };
        let compaction = d.opt_u64()?;
        let turns_completed = d.u64()?;
        let n = d.count(16)?;
        let mut call_turns = imbl::OrdMap::new();
        for _ in 0..n {
            let seq = d.u64()?;
            call_turns.insert(seq, d.u64()?);
        }
        let n = d.count(33)?;
        let mut closed_unanswered = imbl::Vector::new();
        for _ in 0..n {
            closed_unanswered.push_back(decode_call(d)?);
        }
        Ok(Lifecycle {
            len,
            last_turn,
            last_end,
            turn,
            compaction,
            turns_completed,
            call_turns,
            past: Past::default(),
            closed_unanswered,
        })
    }
}
