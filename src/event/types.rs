//! The event model: the envelope ([`Event`]), the type and payload ([`EventData`], with the
//! payload structs in `data.rs`) and the session header (the tri-state [`Opt`] for optional
//! members is in `opt.rs`, which both use).
//!
//! Field order in every struct is the canonical member order of docs/events.md §2–3. Every known
//! object has an `extra` map with its unknown members, in their original order; they are written
//! after the known ones.

use rkyv::with::{AsBox, MapNiche};
use rkyv::{Archive, Deserialize, Serialize};

#[allow(clippy::wildcard_imports)] // every payload type, for the event type table
use super::data::*;
use super::opt::Opt;
use super::value::Map;

/// One event of a session log: the envelope of docs/events.md §2 around a typed payload.
///
/// The archived layout (format version 2) keeps small events small: the payload is stored out of
/// line behind a 4-byte pointer, so an archive pays only for its own event type, and the optional
/// envelope members `surfaceOp` and `sourceEventSeqs` take 4 bytes when absent (a null pointer).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Event {
    /// Position in the log: the first event has seq 0, each next one +1.
    pub seq: u64,
    /// Epoch milliseconds.
    pub time: i64,
    /// The event's type and its `data` payload.
    pub data: EventData,
    /// `surfaceOp`: `None` when absent (absent, `"append"` and replace are all distinct). Only
    /// surface events carry it.
    #[rkyv(with = MapNiche<AsBox>)]
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`: `None` when absent; `Some(vec![])` is an explicit `[]`.
    #[rkyv(with = MapNiche<AsBox>)]
    pub source_event_seqs: Option<Vec<u64>>,
    /// Unknown envelope members, in their original order.
    pub extra: Map,
}

/// `surfaceOp`: how a surface event changes the model-visible history (docs/events.md §5).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub enum SurfaceOp {
    /// `"append"`: the event's message goes at the end of the surface.
    Append,
    /// `{"op":"replace","startSeq":a,"endSeq":b}`: the event's message replaces the surface nodes
    /// of events `a` through `b`.
    ///
    /// Its members are archived out of line, so that the archived `surfaceOp` of the common
    /// `"append"` stays small.
    Replace {
        /// The seq of the first event whose node is replaced.
        #[rkyv(with = AsBox)]
        start_seq: u64,
        /// The seq of the last event whose node is replaced.
        #[rkyv(with = AsBox)]
        end_seq: u64,
        /// Unknown members of the replace object, in order.
        #[rkyv(with = AsBox)]
        extra: Map,
    },
}

/// The session header line (docs/events.md §4):
/// `{"type":"session","version":…,"id":…,"createdAt":…,
/// "title"?,"cwd"?,"parentSession"?,"seedLength"?, …}`. It has no `seq`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct SessionHeader {
    /// The header format version.
    pub version: u64,
    /// The session id.
    pub id: String,
    /// Creation time, epoch milliseconds (`createdAt`).
    pub created_at: i64,
    /// A human title.
    pub title: Opt<String>,
    /// The working directory the session ran in.
    pub cwd: Opt<String>,
    /// The id of the session this one was forked from (`parentSession`).
    pub parent_session: Opt<String>,
    /// How many events were copied from the parent (`seedLength`).
    pub seed_length: Opt<u64>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// Expands `$callback!` with the table of known event types: `Variant(DataType) = "type/name"`.
/// The one list every per-type `match` (names, decoding, writing) is generated from.
macro_rules! with_event_types {
    ($callback:ident) => {
        $callback! {
            TurnStart(TurnStart) = "turn/start",
            TurnEnd(TurnEnd) = "turn/end",
            StepStart(StepStart) = "step/start",
            StepEnd(StepEnd) = "step/end",
            UserMessage(UserMessage) = "user/message",
            AssistantChunk(AssistantChunk) = "assistant/chunk",
            AssistantMessage(AssistantMessage) = "assistant/message",
            ToolCall(ToolCall) = "tool/call",
            ToolResult(ToolResult) = "tool/result",
            SystemMessage(SystemMessage) = "system/message",
            ApprovalRequest(ApprovalRequest) = "approval/request",
            ApprovalDecision(ApprovalDecision) = "approval/decision",
            SandboxEvent(SandboxEvent) = "sandbox/event",
            Error(ErrorEvent) = "error",
            CompactStart(CompactStart) = "compact/start",
            CompactSummary(CompactSummary) = "compact/summary",
            CompactEnd(CompactEnd) = "compact/end",
        }
    };
}
pub(crate) use with_event_types;

macro_rules! define_event_types {
    ($($variant:ident($data:ident) = $name:literal,)*) => {
        /// An event's type and its payload (`data`).
        ///
        /// Archived, every payload sits out of line behind a 4-byte pointer (`ArchivedBox`, which
        /// derefs to the archived payload): an archive takes the size of its own payload, not of
        /// the largest variant.
        #[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
        #[rkyv(derive(Debug))]
        pub enum EventData {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant(#[rkyv(with = AsBox)] $data),
            )*
            /// A type not in docs/events.md, kept verbatim and never projected.
            Unknown(#[rkyv(with = AsBox)] UnknownEvent),
        }

        /// The known event types, without payload.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventType {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl EventType {
            /// Every known type, in the order of docs/events.md §3.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant),*];

            /// The type's name as written in `type`, e.g. `"turn/start"`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name,)*
                }
            }

            /// The type named `name`, if it is a known one.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(EventType::$variant),)*
                    _ => None,
                }
            }
        }

        impl EventData {
            /// The known type of this payload (`None` for [`EventData::Unknown`]).
            pub fn event_type(&self) -> Option<EventType> {
                match self {
                    $(EventData::$variant(_) => Some(EventType::$variant),)*
                    EventData::Unknown(_) => None,
                }
            }
        }

        impl ArchivedEventData {
            /// The known type of this payload (`None` for an unknown type).
            pub fn event_type(&self) -> Option<EventType> {
                match self {
                    $(ArchivedEventData::$variant(_) => Some(EventType::$variant),)*
                    ArchivedEventData::Unknown(_) => None,
                }
            }
        }
    };
}
with_event_types!(define_event_types);

impl EventType {
    /// True for the surface events, the ones projected into the model-visible history and the
    /// only ones that may carry `surfaceOp`: `user/message`, `assistant/message`, `tool/result`,
    /// `system/message`.
    pub fn is_surface(self) -> bool {
        matches!(
            self,
            Self::UserMessage | Self::AssistantMessage | Self::ToolResult | Self::SystemMessage
        )
    }
}

impl EventData {
    /// The `type` member, e.g. `"turn/start"`, or the unknown type's own name.
    pub fn type_name(&self) -> &str {
        match self {
            Self::Unknown(u) => &u.type_name,
            known => known.event_type().map_or("", EventType::as_str),
        }
    }

    /// True for surface events (see [`EventType::is_surface`]).
    pub fn is_surface(&self) -> bool {
        self.event_type().is_some_and(EventType::is_surface)
    }
}

impl ArchivedEventData {
    /// The `type` member, e.g. `"turn/start"`, or the unknown type's own name.
    pub fn type_name(&self) -> &str {
        match self {
            Self::Unknown(u) => u.type_name.as_str(),
            known => known.event_type().map_or("", EventType::as_str),
        }
    }

    /// True for surface events (see [`EventType::is_surface`]).
    pub fn is_surface(&self) -> bool {
        self.event_type().is_some_and(EventType::is_surface)
    }
}

impl Event {
    /// The `type` member (see [`EventData::type_name`]).
    pub fn type_name(&self) -> &str {
        self.data.type_name()
    }
}

impl ArchivedEvent {
    /// The event's seq.
    pub fn seq(&self) -> u64 {
        self.seq.to_native()
    }

    /// The event's time, epoch milliseconds.
    pub fn time(&self) -> i64 {
        self.time.to_native()
    }

    /// The `type` member (see [`ArchivedEventData::type_name`]).
    pub fn type_name(&self) -> &str {
        self.data.type_name()
    }

    /// The known type (`None` for an unknown type).
    pub fn event_type(&self) -> Option<EventType> {
        self.data.event_type()
    }

    /// The `sourceEventSeqs`, if present, as native integers.
    pub fn source_event_seqs(&self) -> Option<impl ExactSizeIterator<Item = u64> + '_> {
        self.source_event_seqs
            .as_ref()
            .map(|seqs| seqs.iter().map(|s| s.to_native()))
    }
}
