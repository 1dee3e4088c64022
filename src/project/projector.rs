//! The incremental projection (EVENTS.md §5): [`Projector`], [`derive`], [`derive_at`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::event::{Block, Event, EventData, Map, Opt, SurfaceOp, ToolCall, ToolResult};

use super::error::{ProjectError, RangeEnd};
use super::message::{Message, Messages, Role};

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
///   rebuilt. *Finding* the run scans the surface from the front to the `endSeq` node, O(position);
///   replaces are rare (compactions), so no position index is kept. A set of the current node
///   seqs refuses a replace naming a non-node without scanning.
/// - `tool/call`s are tracked (seq, callId, name, turn, step, answered or not) to resolve the
///   `toolUseId` of later results and to refuse a second answer to one call; see
///   [`is_answered`](Self::is_answered) and [`unanswered_calls`](Self::unanswered_calls).
///
/// Cloning a `Projector` (to fork a session, say) copies the call tables, O(calls); the surface
/// itself is shared.
#[derive(Clone, Debug, Default)]
pub struct Projector {
    /// The surface, in order.
    surface: imbl::Vector<Arc<Message>>,
    /// The source seqs of the current surface nodes.
    nodes: HashSet<u64>,
    /// Every `tool/call` seen, by seq.
    calls: HashMap<u64, ToolCallInfo>,
    /// The seqs of the `tool/call`s with each callId, ascending.
    calls_by_id: HashMap<String, Vec<u64>>,
    /// The seqs of the unanswered calls.
    unanswered: BTreeSet<u64>,
    /// The unanswered calls by (turn, step) and name, for resolution by name.
    open_by_step: HashMap<(u64, u64), HashMap<String, BTreeSet<u64>>>,
    /// The seq of the last event applied.
    last_seq: Option<u64>,
}

/// What applying an event would do, worked out without changing anything.
enum Plan<'e> {
    /// Nothing is projected or tracked.
    Skip,
    /// A `tool/call` to track.
    Call(&'e ToolCall),
    /// A surface node to place.
    Node {
        /// The message's role and content.
        message: Pending<'e>,
        /// Where it goes.
        place: Place,
    },
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
enum Place {
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
        match plan {
            Plan::Skip => {}
            Plan::Call(call) => self.track_call(event.seq, call),
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
        Ok(())
    }

    /// The current history: an immutable snapshot, O(1) (shares the persistent vector).
    pub fn messages(&self) -> Messages {
        Messages(self.surface.clone())
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

    /// True when the event `seq` is a current surface node (nameable by a replace).
    pub fn is_node(&self, seq: u64) -> bool {
        self.nodes.contains(&seq)
    }

    /// The `tool/call` event `seq`, if one was applied.
    pub fn tool_call(&self, seq: u64) -> Option<&ToolCallInfo> {
        self.calls.get(&seq)
    }

    /// True when a `tool/call` with this `callId` was answered by a `tool/result`.
    pub fn is_answered(&self, call_id: &str) -> bool {
        self.calls_by_id.get(call_id).is_some_and(|seqs| {
            seqs.iter()
                .any(|seq| self.calls.get(seq).is_some_and(|c| c.answered_by.is_some()))
        })
    }

    /// The `tool/call`s no `tool/result` answered yet, in seq order (what crash recovery must
    /// close with `TOOL_OUTCOME_UNKNOWN` results, EVENTS.md §7).
    pub fn unanswered_calls(&self) -> impl Iterator<Item = &ToolCallInfo> + '_ {
        self.unanswered.iter().filter_map(|seq| self.calls.get(seq))
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

    /// The `toolUseId` of a result and the call it answers: its `callId`; else the call named by
    /// `sourceEventSeqs[0]`; else the earliest unanswered call of its turn and step with its
    /// tool's name.
    fn resolve(
        &self,
        seq: u64,
        result: &ToolResult,
        sources: Option<&[u64]>,
    ) -> Result<(String, Option<u64>), ProjectError> {
        if let Opt::Present(call_id) = &result.call_id {
            let seqs = self.calls_by_id.get(call_id).map_or(&[][..], Vec::as_slice);
            let open = seqs.iter().copied().find(|s| self.unanswered.contains(s));
            return match (open, seqs.last()) {
                (Some(call_seq), _) => Ok((call_id.clone(), Some(call_seq))),
                // Every call with this id is answered.
                (None, Some(&call_seq)) => Err(self.already_answered(seq, call_seq)),
                // No call seen with this id: the result names it itself; whether it must name a
                // call of the same turn is the session's lifecycle rule.
                (None, None) => Ok((call_id.clone(), None)),
            };
        }
        if let Some(call) = sources
            .and_then(<[u64]>::first)
            .and_then(|first| self.calls.get(first))
        {
            if call.answered_by.is_some() {
                return Err(self.already_answered(seq, call.seq));
            }
            return Ok((call.call_id.clone(), Some(call.seq)));
        }
        let by_name = self
            .open_by_step
            .get(&(result.turn, result.step))
            .and_then(|names| names.get(result.message.tool_name.as_str()))
            .and_then(|seqs| seqs.first())
            .and_then(|call_seq| self.calls.get(call_seq));
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

    fn already_answered(&self, seq: u64, call_seq: u64) -> ProjectError {
        let call = self.calls.get(&call_seq);
        ProjectError::AlreadyAnswered {
            seq,
            call_id: call.map(|c| c.call_id.clone()).unwrap_or_default(),
            call_seq,
            answered_by: call.and_then(|c| c.answered_by).unwrap_or_default(),
        }
    }

    /// The surface positions of the nodes of `start_seq` and `end_seq`.
    fn locate(&self, seq: u64, start_seq: u64, end_seq: u64) -> Result<Place, ProjectError> {
        for (named, end) in [(start_seq, RangeEnd::Start), (end_seq, RangeEnd::End)] {
            if !self.nodes.contains(&named) {
                return Err(ProjectError::NotANode { seq, end, named });
            }
        }
        let (mut start, mut end) = (None, None);
        for (i, node) in self.surface.iter().enumerate() {
            if node.source_seq == start_seq {
                start = Some(i);
            }
            if node.source_seq == end_seq {
                end = Some(i);
            }
            if start.is_some() && end.is_some() {
                break;
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
            // `nodes` holds exactly the source seqs of the surface, so both were found.
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
        let seq = message.source_seq;
        match place {
            Place::Append => self.surface.push_back(message),
            Place::Replace { start, end } => {
                let mut run = self.surface.split_off(start);
                let tail = run.split_off(end - start + 1);
                for node in &run {
                    self.nodes.remove(&node.source_seq);
                }
                self.surface.push_back(message);
                self.surface.append(tail);
            }
        }
        self.nodes.insert(seq);
    }

    fn track_call(&mut self, seq: u64, call: &ToolCall) {
        self.calls.insert(
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
        self.calls_by_id
            .entry(call.call_id.clone())
            .or_default()
            .push(seq);
        self.unanswered.insert(seq);
        self.open_by_step
            .entry((call.turn, call.step))
            .or_default()
            .entry(call.name.clone())
            .or_default()
            .insert(seq);
    }

    fn mark_answered(&mut self, call_seq: u64, by: u64) {
        let Some(call) = self.calls.get_mut(&call_seq) else {
            return;
        };
        call.answered_by = Some(by);
        self.unanswered.remove(&call_seq);
        let key = (call.turn, call.step);
        if let Some(names) = self.open_by_step.get_mut(&key) {
            if let Some(seqs) = names.get_mut(call.name.as_str()) {
                seqs.remove(&call_seq);
                if seqs.is_empty() {
                    names.remove(call.name.as_str());
                }
            }
            if names.is_empty() {
                self.open_by_step.remove(&key);
            }
        }
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
pub fn derive<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Messages, ProjectError> {
    let mut projector = Projector::new();
    for event in events {
        projector.apply(event)?;
    }
    Ok(projector.messages())
}

/// The history as it was when the log held `n` events: [`derive`] of the events with seq < `n`
/// (the rest of the iterator is not read).
pub fn derive_at<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    n: u64,
) -> Result<Messages, ProjectError> {
    derive(events.into_iter().take_while(|event| event.seq < n))
}
