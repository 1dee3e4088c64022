//! Why an event cannot be projected onto the current surface.

use std::fmt;

/// Which end of a replace range a [`ProjectError::NotANode`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeEnd {
    /// `startSeq`.
    Start,
    /// `endSeq`.
    End,
}

impl RangeEnd {
    /// The member's name: `"startSeq"` or `"endSeq"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "startSeq",
            Self::End => "endSeq",
        }
    }
}

/// An event that cannot be projected onto the current surface (docs/events.md §5). Returned by
/// [`Projector::check`](super::Projector::check) and [`Projector::apply`](super::Projector::apply);
/// the projector is unchanged when it is returned.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProjectError {
    /// The event's seq is not after the last projected one: events are projected in seq order,
    /// each once.
    OutOfOrder {
        /// The event's seq.
        seq: u64,
        /// The smallest seq the projector accepts next.
        expected_at_least: u64,
    },
    /// A `surfaceOp` on an event that is not a surface event (only `user/message`,
    /// `assistant/message`, `tool/result` and `system/message` may carry one).
    UnexpectedSurfaceOp {
        /// The event's seq.
        seq: u64,
        /// The event's type.
        type_name: String,
    },
    /// A `tool/result` whose `toolUseId` none of the three rules resolves: no `callId`, no
    /// `tool/call` named by `sourceEventSeqs[0]`, and no unanswered `tool/call` of the same turn
    /// and step with that name.
    UnresolvedToolResult {
        /// The result's seq.
        seq: u64,
        /// Its `toolName`.
        tool_name: String,
        /// Its turn.
        turn: u64,
        /// Its step.
        step: u64,
    },
    /// A `tool/result` for a `tool/call` that another result already answered (a call is
    /// answered at most once, docs/events.md §6).
    AlreadyAnswered {
        /// The result's seq.
        seq: u64,
        /// The call's id.
        call_id: String,
        /// The seq of the `tool/call`.
        call_seq: u64,
        /// The seq of the `tool/result` that answered it.
        answered_by: u64,
    },
    /// A replace names a seq that is not a current surface node: an event that was never
    /// projected (not a surface event, an empty assistant message, a later seq) or whose node
    /// an earlier replace removed.
    NotANode {
        /// The replacing event's seq.
        seq: u64,
        /// Which end of the range.
        end: RangeEnd,
        /// The seq named.
        named: u64,
    },
    /// A replace whose `startSeq` node comes after its `endSeq` node in surface order.
    ReversedRange {
        /// The replacing event's seq.
        seq: u64,
        /// `startSeq`.
        start_seq: u64,
        /// `endSeq`.
        end_seq: u64,
        /// The position of `startSeq`'s node in the surface.
        start_index: usize,
        /// The position of `endSeq`'s node in the surface.
        end_index: usize,
    },
    /// A replace carried by an `assistant/message` with empty content. An empty assistant
    /// message is not a node, so the replace would delete the run and put nothing in its place;
    /// that is refused rather than done silently.
    EmptyReplacement {
        /// The replacing event's seq.
        seq: u64,
        /// `startSeq`.
        start_seq: u64,
        /// `endSeq`.
        end_seq: u64,
    },
}

impl ProjectError {
    /// The seq of the event that was refused.
    pub fn seq(&self) -> u64 {
        match self {
            Self::OutOfOrder { seq, .. }
            | Self::UnexpectedSurfaceOp { seq, .. }
            | Self::UnresolvedToolResult { seq, .. }
            | Self::AlreadyAnswered { seq, .. }
            | Self::NotANode { seq, .. }
            | Self::ReversedRange { seq, .. }
            | Self::EmptyReplacement { seq, .. } => *seq,
        }
    }
}

impl fmt::Display for ProjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OutOfOrder {
                seq,
                expected_at_least,
            } => write!(
                f,
                "event seq {seq} is out of order: the projection is at seq {expected_at_least} \
                 (events are projected once each, in seq order)"
            ),
            Self::UnexpectedSurfaceOp { seq, type_name } => write!(
                f,
                "event seq {seq}: a {type_name} event carries surfaceOp, but only surface events \
                 (user/message, assistant/message, tool/result, system/message) may"
            ),
            Self::UnresolvedToolResult {
                seq,
                tool_name,
                turn,
                step,
            } => write!(
                f,
                "tool/result seq {seq} (toolName {tool_name:?}, turn {turn}, step {step}) answers \
                 no tool/call: it has no callId, sourceEventSeqs[0] names no tool/call, and no \
                 unanswered {tool_name:?} call is open in turn {turn} step {step}"
            ),
            Self::AlreadyAnswered {
                seq,
                call_id,
                call_seq,
                answered_by,
            } => write!(
                f,
                "tool/result seq {seq} answers tool/call {call_id:?} (seq {call_seq}), which \
                 tool/result seq {answered_by} already answered"
            ),
            Self::NotANode { seq, end, named } => write!(
                f,
                "event seq {seq}: replace {} {named} is not a current surface node (never \
                 projected, an empty assistant message, or removed by an earlier replace)",
                end.as_str()
            ),
            Self::ReversedRange {
                seq,
                start_seq,
                end_seq,
                start_index,
                end_index,
            } => write!(
                f,
                "event seq {seq}: replace startSeq {start_seq} (surface position {start_index}) \
                 comes after endSeq {end_seq} (surface position {end_index})"
            ),
            Self::EmptyReplacement {
                seq,
                start_seq,
                end_seq,
            } => write!(
                f,
                "assistant/message seq {seq} with empty content would replace the surface nodes \
                 {start_seq}..={end_seq} with nothing; an empty assistant message is not a node"
            ),
        }
    }
}

impl std::error::Error for ProjectError {}
