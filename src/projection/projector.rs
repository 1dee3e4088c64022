//! The incremental projection (docs/events.md §5): [`Projector`], [`messages()`], [`messages_at`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::event::{
    Block, Event, EventData, Map, Opt, SurfaceOp, ToolCall, ToolContent, ToolResult,
};

use super::error::{ProjectError, RangeEnd};
use super::message::{Frozen, Message, Messages, Role, Surface};

/// A `tool/call` the projector has seen, and whether a `tool/result` answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallInfo {
    /// The seq of the `tool/call` event.
    pub seq: u64,
    /// Its `callId`.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// Its turn.
    pub turn: u64,
    /// Its step.
    pub step: u64,
    /// The seq of the `tool/result` that answered it, if one did.
    pub answered_by: Option<u64>,
}

/// The model-visible history of a session, kept up to date one event at a time.
///
/// - Each surface event is projected once, when it is applied; an append costs O(log n) (a push
///   onto a persistent vector), and [`messages`](Self::messages) is an O(1) snapshot that later
///   events never change.
/// - A replace splices the persistent vector: the nodes outside the replaced run are shared, not
///   rebuilt. *Finding* the run scans the surface from the front until both ends are found,
///   O(position) (O(n) for a replace naming a non-node, which is refused); replaces are rare
///   (compactions), so no seq → position index is kept and an append touches nothing but the
///   vector.
/// - `tool/call`s are tracked (seq, callId, name, turn, step, answered or not) to resolve the
///   `toolUseId` of later results and to refuse a second answer to one call; see
///   [`is_answered`](Self::is_answered) and [`unanswered_calls`](Self::unanswered_calls). The
///   tables a result looks in hold only the *open* calls (a handful: calls are answered within
///   their step); answered calls move to a persistent ordered map by seq, where a second answer
///   is looked for among the calls of the result's turn (the latest ones) and by seq
///   (O(log calls)). So the work per event barely grows with the log.
///
/// Cloning a `Projector` (to fork a session, say) copies only the open calls; the surface and
/// the answered calls are shared.
#[derive(Clone, Debug, Default)]
pub struct Projector {
    /// The surface, in order (a prefix restored from a checkpoint is built lazily).
    surface: Surface,
    /// The unanswered calls, by seq.
    open: BTreeMap<u64, ToolCallInfo>,
    /// The seqs of the unanswered calls of each turn, in order: a result answers a call of its
    /// own turn (docs/events.md §6), by callId or by step and name, so it looks only among its
    /// turn's open calls (a handful: calls are answered within their step). A list per turn
    /// rather than maps by callId and name: no key is copied or hashed per call.
    open_by_turn: BTreeMap<u64, Vec<u64>>,
    /// The answered calls, by seq: a persistent map, so cloning the projector is O(1) and a
    /// growing log never copies it whole.
    answered: imbl::OrdMap<u64, Arc<ToolCallInfo>>,
    /// The seq of the last event applied.
    last_seq: Option<u64>,
    /// The calls whose step or turn ended while they were unanswered: seq → callId.
    closed_unanswered: imbl::OrdMap<u64, Arc<str>>,
    /// The seq of the last `step/end` or `turn/end`: a message before it is in a step that has
    /// ended (the renderings answer its tool uses that have no result and no `tool/call`).
    last_end: Option<u64>,
    /// Drop the answered calls of a turn when it ends (a session's writer and the checkpoints:
    /// the lifecycle rules refuse a result for a call of another turn, so memory need not grow
    /// with the number of calls). Off by default: [`tool_call`](Self::tool_call) and
    /// [`is_answered`](Self::is_answered) see every call.
    forget_closed: bool,
}

/// What applying an event would do, worked out without changing anything.
enum Plan<'e> {
    /// Nothing is projected or tracked.
    Skip,
    /// A `tool/call` to track.
    Call(&'e ToolCall),
    /// A `step/end` (with its step) or `turn/end` (without): its unanswered calls are closed.
    End { turn: u64, step: Option<u64> },
    /// A surface node to place.
    Node {
        /// The message's role and content.
        message: Pending<'e>,
        /// Where it goes.
        place: Place,
    },
}

/// An event checked against a projector's state, and what applying it will do
/// ([`Projector::check_plan`]).
pub(crate) struct Checked<'e>(Plan<'e>);

/// A [`Checked`] plan that no longer borrows its event ([`Checked::detach`]), for
/// [`Projector::apply_detached`], which moves the content out of the event.
pub(crate) enum Detached {
    /// Nothing is projected or tracked.
    Skip,
    /// A `tool/call` to track (read from the event, which keeps it).
    Call,
    /// A `step/end` (with its step) or `turn/end` (without): its unanswered calls are closed.
    End { turn: u64, step: Option<u64> },
    /// A user, assistant or system message: its blocks.
    Blocks { role: Role, place: Place },
    /// A tool result, its `toolUseId` resolved, and the call it answers.
    ToolResult {
        tool_use_id: String,
        answers: Option<u64>,
        place: Place,
    },
}

impl Checked<'_> {
    /// The plan without its borrow of the event.
    pub(crate) fn detach(self) -> Detached {
        match self.0 {
            Plan::Node {
                message: Pending::Blocks(role, _),
                place,
            } => Detached::Blocks { role, place },
            Plan::Node {
                message:
                    Pending::ToolResult {
                        tool_use_id,
                        answers,
                        ..
                    },
                place,
            } => Detached::ToolResult {
                tool_use_id,
                answers,
                place,
            },
            Plan::Skip => Detached::Skip,
            Plan::Call(_) => Detached::Call,
            Plan::End { turn, step } => Detached::End { turn, step },
        }
    }
}

/// The message a surface event projects to, still borrowed from the event.
enum Pending<'e> {
    /// The exact content blocks of a user, assistant or system message.
    Blocks(Role, &'e [Block]),
    /// A tool result, its `toolUseId` resolved, and the seq of the call it answers (`None` when
    /// its `callId` names no call the projector has seen).
    ToolResult {
        result: &'e ToolResult,
        tool_use_id: String,
        answers: Option<u64>,
    },
}

/// Where a new node goes.
pub(crate) enum Place {
    /// At the end.
    Append,
    /// In place of the nodes at surface positions `start..=end`.
    Replace { start: usize, end: usize },
}

impl Projector {
    /// An empty projection: no event applied.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks that `event` can be projected onto the current surface without changing anything:
    /// its seq comes after the last one applied, a `surfaceOp` is on a surface event, a replace
    /// names current nodes in order (and does not carry an empty assistant message), and a
    /// `tool/result` resolves to a call not answered yet (or names its `callId` itself).
    pub fn check(&self, event: &Event) -> Result<(), ProjectError> {
        self.plan(event).map(drop)
    }

    /// Projects one event, in seq order. It runs the same checks as [`check`](Self::check)
    /// first and, when one fails, returns its error and changes nothing.
    pub fn apply(&mut self, event: &Event) -> Result<(), ProjectError> {
        let plan = self.plan(event)?;
        self.apply_plan(event, plan);
        Ok(())
    }

    /// Checks `event` as [`check`](Self::check) does and returns what applying it will do, for
    /// [`apply_detached`](Self::apply_detached): a caller that writes the event between the check
    /// and the apply works the plan out once.
    pub(crate) fn check_plan<'e>(&self, event: &'e Event) -> Result<Checked<'e>, ProjectError> {
        Ok(Checked(self.plan(event)?))
    }

    /// Applies `event` as [`check_plan`](Self::check_plan) planned it (its plan
    /// [`detach`](Checked::detach)ed), against this same state, moving the message's content out
    /// of the event instead of copying it. For a caller that owns the event and has written it
    /// already: the event's surface content (blocks, a tool result's name and output) is left
    /// empty.
    pub(crate) fn apply_detached(&mut self, event: &mut Event, plan: Detached) {
        let seq = event.seq;
        match plan {
            Detached::Skip => self.apply_plan(event, Plan::Skip),
            Detached::End { turn, step } => self.apply_plan(event, Plan::End { turn, step }),
            Detached::Call => match &event.data {
                EventData::ToolCall(call) => self.apply_plan(event, Plan::Call(call)),
                // The plan came from this event: only a call plans a call.
                _ => self.last_seq = Some(seq),
            },
            Detached::Blocks { role, place } => {
                let content = match &mut event.data {
                    EventData::UserMessage(m) => std::mem::take(&mut m.content),
                    EventData::SystemMessage(m) => std::mem::take(&mut m.content),
                    EventData::AssistantMessage(m) => std::mem::take(&mut m.message.content),
                    // The plan came from this event: no other type plans blocks.
                    _ => Vec::new(),
                };
                let message = Message {
                    role,
                    content,
                    source_seq: seq,
                };
                self.place(Arc::new(message), place);
                self.last_seq = Some(seq);
            }
            Detached::ToolResult {
                tool_use_id,
                answers,
                place,
            } => {
                if let EventData::ToolResult(result) = &mut event.data {
                    let m = &mut result.message;
                    let message = Message {
                        role: Role::User,
                        content: vec![Block::ToolResult {
                            tool_use_id,
                            tool_name: std::mem::take(&mut m.tool_name),
                            content: std::mem::replace(
                                &mut m.content,
                                ToolContent::Text(String::new()),
                            ),
                            is_error: m.is_error,
                            extra: Map::new(),
                        }],
                        source_seq: seq,
                    };
                    self.place(Arc::new(message), place);
                    if let Some(call_seq) = answers {
                        self.mark_answered(call_seq, seq);
                    }
                }
                self.last_seq = Some(seq);
            }
        }
    }

    fn apply_plan(&mut self, event: &Event, plan: Plan<'_>) {
        match plan {
            Plan::Skip => {}
            Plan::Call(call) => self.track_call(event.seq, call),
            Plan::End { turn, step } => {
                self.last_end = Some(event.seq);
                for call in self.open.values() {
                    if call.turn == turn && step.is_none_or(|s| s == call.step) {
                        self.closed_unanswered
                            .insert(call.seq, Arc::from(call.call_id.as_str()));
                    }
                }
                if step.is_none() && self.forget_closed {
                    self.forget_answered_up_to(turn);
                }
            }
            Plan::Node { message, place } => {
                let (message, answers) = match message {
                    Pending::Blocks(role, content) => (
                        Message {
                            role,
                            content: content.to_vec(),
                            source_seq: event.seq,
                        },
                        None,
                    ),
                    Pending::ToolResult {
                        result,
                        tool_use_id,
                        answers,
                    } => (tool_result_message(event.seq, result, tool_use_id), answers),
                };
                self.place(Arc::new(message), place);
                if let Some(call_seq) = answers {
                    self.mark_answered(call_seq, event.seq);
                }
            }
        }
        self.last_seq = Some(event.seq);
    }

    /// The current history: an immutable snapshot (shares the persistent vector and the map of
    /// closed calls; only the calls in flight, a handful, are copied).
    pub fn messages(&self) -> Messages {
        let in_flight = self
            .open
            .values()
            .filter(|c| !self.closed_unanswered.contains_key(&c.seq))
            .map(|c| (c.seq, Arc::from(c.call_id.as_str())))
            .collect();
        Messages(
            self.surface.clone(),
            self.closed_unanswered.clone(),
            in_flight,
            self.last_end,
        )
    }

    /// The number of messages in the current history.
    pub fn len(&self) -> usize {
        self.surface.len()
    }

    /// True when the current history has no message.
    pub fn is_empty(&self) -> bool {
        self.surface.is_empty()
    }

    /// The seq after the last event applied (0 before any): the length of the log this
    /// projection reflects. Events may skip seqs that matter nothing to the projection, so this
    /// is not a count of `apply` calls.
    pub fn events_seen(&self) -> u64 {
        self.last_seq.map_or(0, |seq| seq.saturating_add(1))
    }

    /// The surface position of the node of event `seq`, if it is a current node (nameable by a
    /// replace). Scans the surface: O(n).
    pub fn node_index(&self, seq: u64) -> Option<usize> {
        self.surface.seqs().position(|s| s == seq)
    }

    /// The `tool/call` event `seq`, if one was applied. O(log calls).
    pub fn tool_call(&self, seq: u64) -> Option<&ToolCallInfo> {
        self.open.get(&seq).or_else(|| self.answered_call(seq))
    }

    /// True when a `tool/call` with this `callId` was answered by a `tool/result`. Scans the
    /// answered calls from the latest: O(calls) for an id that was never answered.
    pub fn is_answered(&self, call_id: &str) -> bool {
        self.answered.values().rev().any(|c| c.call_id == call_id)
    }

    /// The `tool/call`s no `tool/result` answered yet, in seq order (what crash recovery must
    /// close with `TOOL_OUTCOME_UNKNOWN` results, docs/events.md §7).
    pub fn unanswered_calls(&self) -> impl Iterator<Item = &ToolCallInfo> + '_ {
        self.open.values()
    }

    /// The earliest unanswered `tool/call` with this `callId`, of any turn. O(open calls). A
    /// result only answers a call of its own turn: see
    /// [`open_call_of_turn`](Self::open_call_of_turn).
    pub fn open_call(&self, call_id: &str) -> Option<&ToolCallInfo> {
        self.open.values().find(|c| c.call_id == call_id)
    }

    /// The earliest unanswered `tool/call` of turn `turn` with this `callId`: the call a result
    /// of that turn giving this `callId` answers. O(open calls of that turn).
    pub fn open_call_of_turn(&self, turn: u64, call_id: &str) -> Option<&ToolCallInfo> {
        self.open_of_turn(turn).find(|c| c.call_id == call_id)
    }

    /// The unanswered calls of turn `turn`, in seq order.
    fn open_of_turn(&self, turn: u64) -> impl Iterator<Item = &ToolCallInfo> + '_ {
        self.open_by_turn
            .get(&turn)
            .into_iter()
            .flatten()
            .filter_map(|seq| self.open.get(seq))
    }

    /// The call a `tool/result` would answer if applied now, by the rules of §5 (see
    /// [`check`](Self::check)): `Ok(None)` for any other event, and for a result whose `callId`
    /// names no call of its turn seen so far or whose `sourceEventSeqs[0]` names a call of another
    /// turn (neither answers a call). A session checks its lifecycle rules on it (the
    /// call is of the result's turn, …) without resolving the result a second way.
    pub fn call_answered_by(&self, event: &Event) -> Result<Option<&ToolCallInfo>, ProjectError> {
        match &event.data {
            EventData::ToolResult(result) => {
                let (_, answers) =
                    self.resolve(event.seq, result, event.source_event_seqs.as_deref())?;
                Ok(answers.and_then(|seq| self.open.get(&seq)))
            }
            _ => Ok(None),
        }
    }

    /// The answered call `seq`.
    fn answered_call(&self, seq: u64) -> Option<&ToolCallInfo> {
        self.answered.get(&seq).map(|c| &**c)
    }

    /// Works out what `event` would do.
    fn plan<'e>(&self, event: &'e Event) -> Result<Plan<'e>, ProjectError> {
        let seq = event.seq;
        if let Some(last) = self.last_seq {
            if seq <= last {
                return Err(ProjectError::OutOfOrder {
                    seq,
                    expected_at_least: last.saturating_add(1),
                });
            }
        }
        if event.surface_op.is_some() && !event.data.is_surface() {
            return Err(ProjectError::UnexpectedSurfaceOp {
                seq,
                type_name: event.type_name().to_owned(),
            });
        }
        let message = match &event.data {
            EventData::ToolCall(call) => return Ok(Plan::Call(call)),
            EventData::StepEnd(end) => {
                return Ok(Plan::End {
                    turn: end.turn,
                    step: Some(end.step),
                })
            }
            EventData::TurnEnd(end) => {
                return Ok(Plan::End {
                    turn: end.turn,
                    step: None,
                })
            }
            EventData::UserMessage(m) => Pending::Blocks(Role::User, &m.content),
            EventData::SystemMessage(m) => Pending::Blocks(Role::System, &m.content),
            EventData::AssistantMessage(m) if m.message.content.is_empty() => {
                // Skipped: not a node. A replace carrying it would only delete.
                return match &event.surface_op {
                    Some(SurfaceOp::Replace {
                        start_seq, end_seq, ..
                    }) => Err(ProjectError::EmptyReplacement {
                        seq,
                        start_seq: *start_seq,
                        end_seq: *end_seq,
                    }),
                    _ => Ok(Plan::Skip),
                };
            }
            EventData::AssistantMessage(m) => Pending::Blocks(Role::Assistant, &m.message.content),
            EventData::ToolResult(result) => {
                let (tool_use_id, answers) =
                    self.resolve(seq, result, event.source_event_seqs.as_deref())?;
                Pending::ToolResult {
                    result,
                    tool_use_id,
                    answers,
                }
            }
            _ => return Ok(Plan::Skip),
        };
        let place = match &event.surface_op {
            None | Some(SurfaceOp::Append) => Place::Append,
            Some(SurfaceOp::Replace {
                start_seq, end_seq, ..
            }) => self.locate(seq, *start_seq, *end_seq)?,
        };
        Ok(Plan::Node { message, place })
    }

    /// The `toolUseId` of a result and the call it answers (docs/events.md §5, within the result's
    /// turn as §6 wants):
    ///
    /// 1. `callId`, when present: the id is the `toolUseId`; the call answered is the earliest
    ///    *unanswered* call of the result's turn with that id (ids may repeat). When every call
    ///    of the turn with that id is answered, the result is refused (a call is answered at
    ///    most once); when the turn has no call with that id it answers nothing and is projected
    ///    as given (refusing it is the session's lifecycle rule).
    /// 2. else `sourceEventSeqs[0]`, when it names a `tool/call`: that call's id. A call of the
    ///    result's turn is answered (refused when it was answered already); a call of another
    ///    turn is not (the lifecycle refuses such a result). When `sourceEventSeqs[0]` names no
    ///    `tool/call` at all, the spec's "otherwise" applies: on to the name rule.
    /// 3. else the earliest unanswered call of the result's turn and step with its tool's name.
    fn resolve(
        &self,
        seq: u64,
        result: &ToolResult,
        sources: Option<&[u64]>,
    ) -> Result<(String, Option<u64>), ProjectError> {
        if let Opt::Present(call_id) = &result.call_id {
            if let Some(call) = self.open_call_of_turn(result.turn, call_id) {
                return Ok((call_id.clone(), Some(call.seq)));
            }
            // Answered already? The calls of the latest turns are at the end of the list.
            let answered = self
                .answered
                .values()
                .rev()
                .take_while(|c| c.turn >= result.turn)
                .find(|c| c.turn == result.turn && c.call_id == *call_id);
            return match answered {
                Some(call) => Err(already_answered(seq, call)),
                // No call of this turn has this id: the result names it itself; that it must
                // name a call of the same turn is the session's lifecycle rule.
                None => Ok((call_id.clone(), None)),
            };
        }
        if let Some(&first) = sources.and_then(<[u64]>::first) {
            if let Some(call) = self.open.get(&first) {
                let answers = (call.turn == result.turn).then_some(call.seq);
                return Ok((call.call_id.clone(), answers));
            }
            if let Some(call) = self.answered_call(first) {
                return if call.turn == result.turn {
                    Err(already_answered(seq, call))
                } else {
                    Ok((call.call_id.clone(), None))
                };
            }
        }
        let by_name = self
            .open_of_turn(result.turn)
            .find(|c| c.step == result.step && c.name == result.message.tool_name);
        match by_name {
            Some(call) => Ok((call.call_id.clone(), Some(call.seq))),
            None => Err(ProjectError::UnresolvedToolResult {
                seq,
                tool_name: result.message.tool_name.clone(),
                turn: result.turn,
                step: result.step,
            }),
        }
    }

    /// The surface positions of the nodes of `start_seq` and `end_seq`.
    fn locate(&self, seq: u64, start_seq: u64, end_seq: u64) -> Result<Place, ProjectError> {
        let (mut start, mut end) = (None, None);
        // A node's seq is below the replacing event's: a later seq is refused without a scan.
        if start_seq < seq || end_seq < seq {
            for (i, node_seq) in self.surface.seqs().enumerate() {
                if node_seq == start_seq {
                    start = Some(i);
                }
                if node_seq == end_seq {
                    end = Some(i);
                }
                if start.is_some() && end.is_some() {
                    break;
                }
            }
        }
        match (start, end) {
            (Some(start), Some(end)) if start <= end => Ok(Place::Replace { start, end }),
            (Some(start_index), Some(end_index)) => Err(ProjectError::ReversedRange {
                seq,
                start_seq,
                end_seq,
                start_index,
                end_index,
            }),
            (None, _) => Err(ProjectError::NotANode {
                seq,
                end: RangeEnd::Start,
                named: start_seq,
            }),
            (_, None) => Err(ProjectError::NotANode {
                seq,
                end: RangeEnd::End,
                named: end_seq,
            }),
        }
    }

    /// Puts a new node on the surface.
    fn place(&mut self, message: Arc<Message>, place: Place) {
        match place {
            Place::Append => self.surface.push_back(message),
            Place::Replace { start, end } => self.surface.replace(start, end, message),
        }
    }

    fn track_call(&mut self, seq: u64, call: &ToolCall) {
        self.open.insert(
            seq,
            ToolCallInfo {
                seq,
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                turn: call.turn,
                step: call.step,
                answered_by: None,
            },
        );
        let seqs = self.open_by_turn.entry(call.turn).or_default();
        // Seqs come in order; a checkpoint's open calls too. Kept sorted either way.
        match seqs.last() {
            Some(&last) if last > seq => {
                if let Err(at) = seqs.binary_search(&seq) {
                    seqs.insert(at, seq);
                }
            }
            Some(&last) if last == seq => {}
            _ => seqs.push(seq),
        }
    }

    /// Moves the open call `call_seq` to the answered list.
    fn mark_answered(&mut self, call_seq: u64, by: u64) {
        let Some(mut call) = self.open.remove(&call_seq) else {
            return;
        };
        self.closed_unanswered.remove(&call_seq);
        if let Some(seqs) = self.open_by_turn.get_mut(&call.turn) {
            if let Ok(at) = seqs.binary_search(&call_seq) {
                seqs.remove(at);
            }
            if seqs.is_empty() {
                self.open_by_turn.remove(&call.turn);
            }
        }
        call.answered_by = Some(by);
        self.answered.insert(call_seq, Arc::new(call));
    }
}

fn already_answered(seq: u64, call: &ToolCallInfo) -> ProjectError {
    ProjectError::AlreadyAnswered {
        seq,
        call_id: call.call_id.clone(),
        call_seq: call.seq,
        answered_by: call.answered_by.unwrap_or_default(),
    }
}

/// `{role:"user", content:[{type:"tool_result", toolUseId, toolName, content, isError}]}`.
fn tool_result_message(seq: u64, result: &ToolResult, tool_use_id: String) -> Message {
    Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id,
            tool_name: result.message.tool_name.clone(),
            content: result.message.content.clone(),
            is_error: result.message.is_error,
            extra: Map::new(),
        }],
        source_seq: seq,
    }
}

/// The history after `events` (in seq order, from the first event of the log): a fresh
/// [`Projector`] applied to each.
pub fn messages<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Messages, ProjectError> {
    let mut projector = Projector::new();
    for event in events {
        projector.apply(event)?;
    }
    Ok(projector.messages())
}

/// The history as it was when the log held `n` events: [`messages()`] of the events with
/// seq < `n` (the rest of the iterator is not read).
pub fn messages_at<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    n: u64,
) -> Result<Messages, ProjectError> {
    messages(events.into_iter().take_while(|event| event.seq < n))
}

/// The former name of [`messages()`].
#[deprecated(note = "renamed: use `projection::messages`")]
pub fn derive<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Messages, ProjectError> {
    messages(events)
}

/// The former name of [`messages_at`].
#[deprecated(note = "renamed: use `projection::messages_at`")]
pub fn derive_at<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    n: u64,
) -> Result<Messages, ProjectError> {
    messages_at(events, n)
}

/// True for the types the projection reads: surface events, tool calls, and the step and turn
/// ends (which close the calls left unanswered).
pub(crate) fn projector_wants(t: Option<crate::event::EventType>) -> bool {
    t.is_some_and(|t| {
        t.is_surface()
            || matches!(
                t,
                crate::event::EventType::ToolCall
                    | crate::event::EventType::StepEnd
                    | crate::event::EventType::TurnEnd
            )
    })
}

/// The message a surface event projects to: its role and content, exactly as
/// [`Projector::apply`] builds it (`tool_use_id` is the resolved id of a `tool/result`). `None`
/// for an event that projects to no message. What a checkpoint restores a node from.
pub(crate) fn node_message(event: &Event, tool_use_id: Option<&str>) -> Option<Message> {
    let (role, content) = match &event.data {
        EventData::UserMessage(m) => (Role::User, &m.content),
        EventData::SystemMessage(m) => (Role::System, &m.content),
        EventData::AssistantMessage(m) if !m.message.content.is_empty() => {
            (Role::Assistant, &m.message.content)
        }
        EventData::ToolResult(result) => {
            return Some(tool_result_message(
                event.seq,
                result,
                tool_use_id?.to_string(),
            ))
        }
        _ => return None,
    };
    Some(Message {
        role,
        content: content.clone(),
        source_seq: event.seq,
    })
}

use crate::session::checkpoint::{Bad, Dec, Enc};

/// Where a checkpoint's node table lies in its projection section: `n` entries of
/// [`NODE_ENTRY`] bytes (seq u64, offset u32 and length u32 of the `toolUseId` in the id area,
/// length `u32::MAX` for none) at `entries`, the id area at `ids`.
pub(crate) struct NodeTable {
    pub n: usize,
    pub entries: std::ops::Range<usize>,
    pub ids: std::ops::Range<usize>,
}

/// The bytes of one node table entry.
pub(crate) const NODE_ENTRY: usize = 16;

/// Makes the frozen prefix of a restored surface from its node table.
pub(crate) type FrozenFn<'a> = dyn FnMut(NodeTable) -> Result<Frozen, Bad> + 'a;

fn encode_call(c: &ToolCallInfo, e: &mut Enc) {
    e.u64(c.seq);
    e.str(&c.call_id);
    e.str(&c.name);
    e.u64(c.turn);
    e.u64(c.step);
    e.opt_u64(c.answered_by);
}

fn decode_call(d: &mut Dec<'_>) -> Result<ToolCallInfo, Bad> {
    Ok(ToolCallInfo {
        seq: d.u64()?,
        call_id: d.string()?,
        name: d.string()?,
        turn: d.u64()?,
        step: d.u64()?,
        answered_by: d.opt_u64()?,
    })
}

impl Projector {
    /// From now on drops the answered calls of each turn when it ends (and those of turns up to
    /// the last one ended now): what a session's writer keeps no longer grows with the number
    /// of calls. A result naming a call of a closed turn (which the lifecycle rules refuse)
    /// then resolves as if that call were not there.
    pub(crate) fn forget_answered_calls_of_closed_turns(&mut self, last_ended_turn: Option<u64>) {
        self.forget_closed = true;
        if let Some(turn) = last_ended_turn {
            self.forget_answered_up_to(turn);
        }
    }

    /// The answered calls kept.
    #[cfg(test)]
    pub(crate) fn answered_len(&self) -> usize {
        self.answered.len()
    }

    fn forget_answered_up_to(&mut self, turn: u64) {
        let gone: Vec<u64> = self
            .answered
            .values()
            .filter(|c| c.turn <= turn)
            .map(|c| c.seq)
            .collect();
        for seq in gone {
            self.answered.remove(&seq);
        }
    }

    /// The projection as checkpoint bytes: each surface node by the seq of its event (and a
    /// tool result's resolved `toolUseId`), not its content, which the log holds; in a table of
    /// fixed-size entries, so a restored surface reads message `i` without reading the others.
    /// `None` when the ids do not fit 32-bit offsets (no checkpoint is written).
    pub(crate) fn encode_state(&self, e: &mut Enc) -> Option<()> {
        e.opt_u64(self.last_seq);
        let n = self.surface.len();
        let mut ids: Vec<u8> = Vec::new();
        let mut table: Vec<u8> = Vec::with_capacity(n * NODE_ENTRY);
        for i in 0..n {
            let (seq, id) = self.surface.entry(i)?;
            table.extend_from_slice(&seq.to_le_bytes());
            match id {
                Some(id) => {
                    let off = u32::try_from(ids.len()).ok()?;
                    let len = u32::try_from(id.len()).ok().filter(|&l| l != u32::MAX)?;
                    table.extend_from_slice(&off.to_le_bytes());
                    table.extend_from_slice(&len.to_le_bytes());
                    ids.extend_from_slice(id.as_bytes());
                }
                None => {
                    table.extend_from_slice(&0u32.to_le_bytes());
                    table.extend_from_slice(&u32::MAX.to_le_bytes());
                }
            }
        }
        u32::try_from(ids.len()).ok()?;
        e.u64(n as u64);
        e.u64(ids.len() as u64);
        e.0.extend_from_slice(&table);
        e.0.extend_from_slice(&ids);
        e.u64(self.open.len() as u64);
        for c in self.open.values() {
            encode_call(c, e);
        }
        e.u64(self.answered.len() as u64);
        for c in self.answered.values() {
            encode_call(c, e);
        }
        e.u64(self.closed_unanswered.len() as u64);
        for (seq, id) in &self.closed_unanswered {
            e.u64(*seq);
            e.str(id);
        }
        e.opt_u64(self.last_end);
        Some(())
    }

    /// The projection [`encode_state`](Self::encode_state) wrote; `frozen` makes the lazily
    /// built prefix of the surface from the node table (no message is read here).
    pub(crate) fn decode_state(
        d: &mut Dec<'_>,
        frozen: &mut FrozenFn<'_>,
    ) -> Result<Projector, Bad> {
        let mut p = Projector {
            last_seq: d.opt_u64()?,
            ..Projector::default()
        };
        let n = d.count(NODE_ENTRY)?;
        let ids_len = d.u64()?;
        let start = d.pos();
        d.skip(n * NODE_ENTRY)?;
        let ids_start = d.pos();
        let ids_len = usize::try_from(ids_len).map_err(|_| "an id area too long".to_string())?;
        d.skip(ids_len)?;
        if n > 0 {
            p.surface = Surface::frozen(frozen(NodeTable {
                n,
                entries: start..ids_start,
                ids: ids_start..ids_start + ids_len,
            })?);
        }
        let n = d.count(41)?;
        for _ in 0..n {
            let c = decode_call(d)?;
            let call = ToolCall {
                turn: c.turn,
                step: c.step,
                call_id: c.call_id,
                name: c.name,
                arguments: String::new(),
                extra: Map::new(),
            };
            p.track_call(c.seq, &call);
        }
        let n = d.count(41)?;
        for _ in 0..n {
            let c = decode_call(d)?;
            p.answered.insert(c.seq, Arc::new(c));
        }
        let n = d.count(16)?;
        for _ in 0..n {
            let seq = d.u64()?;
            p.closed_unanswered.insert(seq, Arc::from(d.str()?));
        }
        p.last_end = d.opt_u64()?;
        Ok(p)
    }
}
