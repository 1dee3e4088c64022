//! The typed event model and its canonical JSONL codec (docs/events.md §2–4).
//!
//! - [`Event`] is the envelope (`type`, `seq`, `time`, `data`, `surfaceOp?`, `sourceEventSeqs?`,
//!   unknown members); [`EventData`] holds the type and its typed payload, or [`UnknownEvent`]
//!   for a type not in docs/events.md, kept verbatim.
//! - [`Value`] is the lossless JSON value used wherever the shape is open: numbers keep their
//!   exact text, objects ([`Map`]) their member order.
//! - Reading: [`parse_event_line`], [`parse_jsonl`] and the streaming [`JsonlReader`] refuse every
//!   malformed line with a [`ParseError`] naming the line, the column and the reason.
//! - Writing: [`Event::write_canonical`] (also on [`ArchivedEvent`](archived::ArchivedEvent),
//!   straight from an archive), [`JsonlWriter`]. For any canonical line `x`, writing what was read from `x` gives `x` again,
//!   byte for byte.
//! - Storage: [`encode_event`] / [`access_event`] / [`decode_event`] turn events into checked,
//!   zero-copy rkyv archives and back.
//!
//! ```
//! use agentlog::event::{parse_event_line, EventData, ReasonKind};
//!
//! let line = r#"{"type":"turn/end","seq":9,"time":1755000000090,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;
//! let event = parse_event_line(line)?;
//! match &event.data {
//!     EventData::TurnEnd(end) => {
//!         assert_eq!(end.turn, 1);
//!         assert_eq!(end.reason.kind, ReasonKind::Completed);
//!     }
//!     other => panic!("unexpected {}", other.type_name()),
//! }
//! assert_eq!(event.to_canonical_string(), line);
//! # Ok::<(), agentlog::event::ParseError>(())
//! ```
//!
//! # Choices where the rules are silent (docs/events.md §8)
//!
//! - Optional members are tri-state ([`Opt`]): absent, `null`, or a value; each is written back
//!   as read. A *required* member given as `null` is mistyped and refused.
//! - Integers the log owns (`seq`, `time`, `turn`, `step`, `startSeq`, `endSeq`, token counts,
//!   `sourceEventSeqs` items, the header's `version`, `createdAt`, `seedLength`) must be written
//!   as plain integers: a fraction, an exponent or a value out of range (negative for the
//!   unsigned ones) is refused as mistyped, because they are written back in plain decimal and
//!   anything else would not survive the round trip. `-0` is the integer 0 (written back `0`).
//! - The `error` object of `turn/end` and of `tool/result` is one type, [`ErrorInfo`], whose
//!   `message` is optional in the type (crash recovery writes a `tool/result` `error` of
//!   `{"code":"TOOL_OUTCOME_UNKNOWN",…}`). A `turn/end`'s `reason.error` is `{code?, message}`
//!   (docs/events.md §3): one without `message` is refused (`missing member
//!   data.reason.error.message`), one whose `message` is not a string too. A `tool/result`'s
//!   `error` has no member list in the spec and is kept verbatim, whatever its shape (see
//!   [`ToolResult::error`]).
//! - Message roles are constants (`"user"`, `"assistant"`, `"tool"`, `"system"`): required,
//!   not stored, any other value refused.
//! - A block or chunk of an unknown `type` is kept as the whole object, members in their order
//!   (`type` included, wherever it was). A known type with wrong members is refused.
//! - `surfaceOp` is refused on unknown types and on known types that are not surface events.
//!   `"surfaceOp":null` and `"sourceEventSeqs":null` are refused (they are envelope members the
//!   log interprets: absent or a valid value).
//! - A content block must be an object with a string `type`: `"hi"`, `null` or `{"foo":1}` in a
//!   `content` array is refused (the spec's "anything else" is a block of another type).
//! - `time` is required on import (it is kept as given); only a live append assigns it.
//! - The first line is a header iff its `type` is `"session"` and it has no `seq`; a later line
//!   of type `"session"` is an event of an unknown type (and needs a `seq`).
//! - Columns in errors count characters (not bytes) from 1, after a first-line BOM.
//! - A line that holds only whitespace is a blank line (refused).

mod archive;
mod blocks;
mod data;
mod decode;
mod error;
mod jsonl;
mod opt;
mod parse;
mod scan;
mod schema;
mod types;
mod value;
mod write;

pub(crate) use archive::archive_is_valid;
pub use archive::{
    access_event, decode_event, encode_event, ArchiveError, ArchiveOp, EventEncoder, ARCHIVE_ALIGN,
    MAX_ARCHIVE_DEPTH,
};
pub use blocks::{Block, Chunk, ToolContent};
pub use data::{
    ApprovalDecision, ApprovalRequest, AssistantChunk, AssistantContent, AssistantMessage,
    CompactEnd, CompactStart, CompactSummary, Decision, ErrorEvent, ErrorInfo, ReasonKind,
    SandboxEvent, StepEnd, StepStart, SystemMessage, ToolCall, ToolMessage, ToolResult, TurnEnd,
    TurnEndReason, TurnStart, UnknownEvent, Usage, UserMessage,
};
pub use error::{ParseError, ParseErrorKind};
pub(crate) use jsonl::parse_json_lenient;
pub use jsonl::{
    max_line_for, parse_draft_line, parse_event_line, parse_header_line, parse_json, parse_jsonl,
    parse_tool_content, read_line_bounded, skip_line, BoundedLine, Draft, JsonlReader, JsonlWriter,
    Line, DEFAULT_MAX_LINE,
};
pub use opt::Opt;
pub use parse::MAX_DEPTH;
/// The aligned buffer [`encode_event`] writes into (rkyv's, re-exported so that callers need not
/// depend on rkyv with the same pinned format features).
pub use rkyv::util::AlignedVec;
pub use types::{Event, EventData, EventType, SessionHeader, SurfaceOp};
// The canonical writer, for the layers above that write event parts (the projection writes
// content blocks with it, so block JSON is written in one place).
pub(crate) use write::{ObjectWriter, WriteJson};

/// The archived (zero-copy, rkyv) forms of the event types: what [`access_event`] returns
/// and what readers iterate without decoding. Each is named after its owned type
/// (`ArchivedEvent` for [`Event`], …) and reads the same data (`to_native()` on integers,
/// `as_str()` on strings; [`decode_event`] makes the owned event).
pub mod archived {
    pub use super::blocks::{ArchivedBlock, ArchivedChunk, ArchivedToolContent};
    pub use super::data::{
        ArchivedApprovalDecision, ArchivedApprovalRequest, ArchivedAssistantChunk,
        ArchivedAssistantContent, ArchivedAssistantMessage, ArchivedCompactEnd,
        ArchivedCompactStart, ArchivedCompactSummary, ArchivedDecision, ArchivedErrorEvent,
        ArchivedErrorInfo, ArchivedReasonKind, ArchivedSandboxEvent, ArchivedStepEnd,
        ArchivedStepStart, ArchivedSystemMessage, ArchivedToolCall, ArchivedToolMessage,
        ArchivedToolResult, ArchivedTurnEnd, ArchivedTurnEndReason, ArchivedTurnStart,
        ArchivedUnknownEvent, ArchivedUsage, ArchivedUserMessage,
    };
    pub use super::opt::ArchivedOpt;
    pub use super::types::{
        ArchivedEvent, ArchivedEventData, ArchivedSessionHeader, ArchivedSurfaceOp,
    };
    pub use super::value::{ArchivedMap, ArchivedMember, ArchivedNumber, ArchivedValue};
}

pub use value::{DuplicateKey, Map, Member, Number, Value};
