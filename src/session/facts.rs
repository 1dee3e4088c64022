//! What the lifecycle rules need to know of an event, read from an owned [`Event`] or straight
//! from an archived one in the log (no decoding, no allocation).

use crate::event::archived::{ArchivedEvent, ArchivedEventData};
use crate::event::{Decision, Event, EventData, ReasonKind};

/// The lifecycle-relevant part of an event's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind<'a> {
    TurnStart {
        turn: u64,
    },
    TurnEnd {
        turn: u64,
        reason: ReasonKind,
    },
    StepStart {
        turn: u64,
        step: u64,
    },
    StepEnd {
        turn: u64,
        step: u64,
    },
    /// `assistant/chunk`, `assistant/message`: inside the open step.
    Assistant {
        turn: u64,
        step: u64,
        message: bool,
    },
    ToolCall {
        turn: u64,
        step: u64,
        call_id: &'a str,
        name: &'a str,
    },
    ToolResult {
        turn: u64,
        step: u64,
        call_id: Option<&'a str>,
        tool_name: &'a str,
        is_error: bool,
    },
    ApprovalRequest {
        turn: u64,
        step: u64,
        call_id: &'a str,
    },
    ApprovalDecision {
        turn: u64,
        step: u64,
        call_id: &'a str,
        decision: Decision,
    },
    CompactStart,
    CompactSummary,
    CompactEnd,
    /// Types allowed anywhere: user and system messages, sandbox events, errors, unknown types.
    Anywhere,
}

/// The facts of one event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    pub seq: u64,
    pub type_name: &'a str,
    pub kind: Kind<'a>,
    /// `sourceEventSeqs[0]`, the first source.
    pub first_source: Option<u64>,
    /// The largest seq named in `sourceEventSeqs`.
    pub max_source: Option<u64>,
}

impl<'a> Facts<'a> {
    pub(crate) fn of(e: &'a Event) -> Facts<'a> {
        let kind = match &e.data {
            EventData::TurnStart(d) => Kind::TurnStart { turn: d.turn },
            EventData::TurnEnd(d) => Kind::TurnEnd {
                turn: d.turn,
                reason: d.reason.kind,
            },
            EventData::StepStart(d) => Kind::StepStart {
                turn: d.turn,
                step: d.step,
            },
            EventData::StepEnd(d) => Kind::StepEnd {
                turn: d.turn,
                step: d.step,
            },
            EventData::AssistantChunk(d) => Kind::Assistant {
                turn: d.turn,
                step: d.step,
                message: false,
            },
            EventData::AssistantMessage(d) => Kind::Assistant {
                turn: d.turn,
                step: d.step,
                message: true,
            },
            EventData::ToolCall(d) => Kind::ToolCall {
                turn: d.turn,
                step: d.step,
                call_id: &d.call_id,
                name: &d.name,
            },
            EventData::ToolResult(d) => Kind::ToolResult {
                turn: d.turn,
                step: d.step,
                call_id: d.call_id.present().map(String::as_str),
                tool_name: &d.message.tool_name,
                is_error: d.message.is_error,
            },
            EventData::ApprovalRequest(d) => Kind::ApprovalRequest {
                turn: d.turn,
                step: d.step,
                call_id: &d.call_id,
            },
            EventData::ApprovalDecision(d) => Kind::ApprovalDecision {
                turn: d.turn,
                step: d.step,
                call_id: &d.call_id,
                decision: d.decision,
            },
            EventData::CompactStart(_) => Kind::CompactStart,
            EventData::CompactSummary(_) => Kind::CompactSummary,
            EventData::CompactEnd(_) => Kind::CompactEnd,
            EventData::UserMessage(_)
            | EventData::SystemMessage(_)
            | EventData::SandboxEvent(_)
            | EventData::Error(_)
            | EventData::Unknown(_) => Kind::Anywhere,
        };
        let sources = e.source_event_seqs.as_deref().unwrap_or(&[]);
        Facts {
            seq: e.seq,
            type_name: e.type_name(),
            kind,
            first_source: sources.first().copied(),
            max_source: sources.iter().copied().max(),
        }
    }

    pub(crate) fn of_archived(e: &'a ArchivedEvent) -> Facts<'a> {
        let kind = match &e.data {
            ArchivedEventData::TurnStart(d) => Kind::TurnStart {
                turn: d.turn.to_native(),
            },
            ArchivedEventData::TurnEnd(d) => Kind::TurnEnd {
                turn: d.turn.to_native(),
                reason: ReasonKind::from_name(d.reason.kind.as_str())
                    .unwrap_or(ReasonKind::Completed),
            },
            ArchivedEventData::StepStart(d) => Kind::StepStart {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
            },
            ArchivedEventData::StepEnd(d) => Kind::StepEnd {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
            },
            ArchivedEventData::AssistantChunk(d) => Kind::Assistant {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
                message: false,
            },
            ArchivedEventData::AssistantMessage(d) => Kind::Assistant {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
                message: true,
            },
            ArchivedEventData::ToolCall(d) => Kind::ToolCall {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
                call_id: d.call_id.as_str(),
                name: d.name.as_str(),
            },
            ArchivedEventData::ToolResult(d) => Kind::ToolResult {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
                call_id: d.call_id.present().map(|s| s.as_str()),
                tool_name: d.message.tool_name.as_str(),
                is_error: d.message.is_error,
            },
            ArchivedEventData::ApprovalRequest(d) => Kind::ApprovalRequest {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
                call_id: d.call_id.as_str(),
            },
            ArchivedEventData::ApprovalDecision(d) => Kind::ApprovalDecision {
                turn: d.turn.to_native(),
                step: d.step.to_native(),
                call_id: d.call_id.as_str(),
                decision: Decision::from_name(d.decision.as_str()).unwrap_or(Decision::Denied),
            },
            ArchivedEventData::CompactStart(_) => Kind::CompactStart,
            ArchivedEventData::CompactSummary(_) => Kind::CompactSummary,
            ArchivedEventData::CompactEnd(_) => Kind::CompactEnd,
            ArchivedEventData::UserMessage(_)
            | ArchivedEventData::SystemMessage(_)
            | ArchivedEventData::SandboxEvent(_)
            | ArchivedEventData::Error(_)
            | ArchivedEventData::Unknown(_) => Kind::Anywhere,
        };
        let (first_source, max_source) = match e.source_event_seqs() {
            Some(mut it) => {
                let first = it.next();
                (first, first.into_iter().chain(it).max())
            }
            None => (None, None),
        };
        Facts {
            seq: e.seq(),
            type_name: e.type_name(),
            kind,
            first_source,
            max_source,
        }
    }
}
