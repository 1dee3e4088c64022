//! The payload (`data`) of each known event type, with canonical member order as field order
//! (docs/events.md §3), and the closed value sets `ReasonKind` and `Decision`.

use rkyv::{Archive, Deserialize, Serialize};

use super::blocks::{Block, Chunk, ToolContent};
use super::opt::Opt;
use super::value::{Map, Value};

/// An event of a type not in docs/events.md: its name and `data`, kept verbatim.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct UnknownEvent {
    /// The `type` as written.
    pub type_name: String,
    /// The `data` object as written.
    pub data: Map,
}

/// `turn/start`: `{turn}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct TurnStart {
    /// The turn number (the first is 0 or 1, each next +1).
    pub turn: u64,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `turn/end`: `{turn, reason}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct TurnEnd {
    /// The turn that ends.
    pub turn: u64,
    /// Why it ended.
    pub reason: TurnEndReason,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `turn/end` `reason`: `{kind, error?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct TurnEndReason {
    /// How the turn ended.
    pub kind: ReasonKind,
    /// The error, for turns that failed.
    pub error: Opt<ErrorInfo>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// How a turn ended (`reason.kind`). Any other value is refused.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[rkyv(derive(Debug))]
pub enum ReasonKind {
    /// `completed`
    Completed,
    /// `aborted`
    Aborted,
    /// `blocked`
    Blocked,
    /// `error`
    Error,
    /// `max-tokens`
    MaxTokens,
    /// `interrupted`
    Interrupted,
}

/// An error description: `{code?, message?}`.
///
/// One struct serves `turn/end`'s `reason.error` (docs/events.md: `{code?, message}`) and
/// `tool/result`'s `error` (which the spec gives no members), so `message` is optional in the
/// type. For `turn/end` it is required: the JSONL codec refuses a `reason.error` without
/// `message` (naming the line and `data.reason.error.message`), and a session refuses such a
/// `turn/end` built in code.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct ErrorInfo {
    /// A machine-readable code, e.g. `"PROVIDER_5XX"`.
    pub code: Opt<String>,
    /// A human message.
    pub message: Opt<String>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `step/start`: `{turn, step, request?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct StepStart {
    /// The open turn.
    pub turn: u64,
    /// The step number within the turn (the first is 0 or 1, each next +1).
    pub step: u64,
    /// The model call's settings (`{model, temperature, maxTokens, …}`), kept verbatim.
    pub request: Opt<Map>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `step/end`: `{turn, step}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct StepEnd {
    /// The turn.
    pub turn: u64,
    /// The step that ends.
    pub step: u64,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `user/message`: `{role:"user", content, envelope?}`. The role is a constant and not stored.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct UserMessage {
    /// The content blocks.
    pub content: Vec<Block>,
    /// Display metadata, never projected.
    pub envelope: Opt<Value>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `assistant/chunk`: `{turn, step, chunk}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct AssistantChunk {
    /// The open turn.
    pub turn: u64,
    /// The open step.
    pub step: u64,
    /// The streamed piece.
    pub chunk: Chunk,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `assistant/message`: `{turn, step, message, usage?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct AssistantMessage {
    /// The open turn.
    pub turn: u64,
    /// The open step.
    pub step: u64,
    /// The assembled message.
    pub message: AssistantContent,
    /// Token usage of the call.
    pub usage: Opt<Usage>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `assistant/message` `message`: `{role:"assistant", content, provider?, model?, replay?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct AssistantContent {
    /// The content blocks (may be empty).
    pub content: Vec<Block>,
    /// The provider that answered.
    pub provider: Opt<String>,
    /// The model that answered.
    pub model: Opt<String>,
    /// Provider-specific data needed to replay the message, kept verbatim.
    pub replay: Opt<Value>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// Token usage: `{inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?,
/// reasoningTokens?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct Usage {
    /// `inputTokens`
    pub input_tokens: u64,
    /// `outputTokens`
    pub output_tokens: u64,
    /// `cacheReadTokens`
    pub cache_read_tokens: Opt<u64>,
    /// `cacheWriteTokens`
    pub cache_write_tokens: Opt<u64>,
    /// `reasoningTokens`
    pub reasoning_tokens: Opt<u64>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `tool/call`: `{turn, step, callId, name, arguments}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct ToolCall {
    /// The open turn.
    pub turn: u64,
    /// The open step.
    pub step: u64,
    /// The call's id (`callId`).
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The raw JSON text the model produced, kept byte for byte and never parsed.
    pub arguments: String,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `tool/result`: `{turn, step, message, callId?, error?, meta?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ToolResult {
    /// The turn of the call.
    pub turn: u64,
    /// The step of the call.
    pub step: u64,
    /// The result message.
    pub message: ToolMessage,
    /// The id of the call answered (`callId`).
    pub call_id: Opt<String>,
    /// Why the tool failed, e.g. `{"code":"TOOL_OUTCOME_UNKNOWN"}`. docs/events.md gives this
    /// `error` no members, so it is kept verbatim: an object `{code?, message?, …}` (strings or
    /// null, `code` before `message`, unknown members after both) is held here; any other value (a
    /// string, another member order, a numeric code, …) is held as the member `"error"` of
    /// [`extra`](Self::extra), with this field absent, and written back in this field's place.
    /// (The archived layout is the one of earlier versions.) When both are set, this field wins.
    pub error: Opt<ErrorInfo>,
    /// Extra data, kept verbatim.
    pub meta: Opt<Value>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `tool/result` `message`: `{role:"tool", toolName, content, isError}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ToolMessage {
    /// The tool's name (`toolName`).
    pub tool_name: String,
    /// The output.
    pub content: ToolContent,
    /// True when the tool failed (`isError`).
    pub is_error: bool,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `system/message`: `{role:"system", content}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct SystemMessage {
    /// The content blocks.
    pub content: Vec<Block>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `approval/request`: `{turn, step, callId, tool, reason?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct ApprovalRequest {
    /// The open turn.
    pub turn: u64,
    /// The open step.
    pub step: u64,
    /// The call that waits for approval (`callId`).
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// Why approval is needed.
    pub reason: Opt<String>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `approval/decision`: `{turn, step, callId, decision, by?, note?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct ApprovalDecision {
    /// The open turn.
    pub turn: u64,
    /// The open step.
    pub step: u64,
    /// The call decided on (`callId`).
    pub call_id: String,
    /// The decision.
    pub decision: Decision,
    /// Who decided.
    pub by: Opt<String>,
    /// A note on the decision.
    pub note: Opt<String>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// An approval decision: `approved` or `denied`. Any other value is refused.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[rkyv(derive(Debug))]
pub enum Decision {
    /// `approved`
    Approved,
    /// `denied`
    Denied,
}

/// `sandbox/event`: `{kind, turn?, detail?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct SandboxEvent {
    /// What happened, e.g. `start`, `stop`, `escalate` (open set).
    pub kind: String,
    /// The turn it happened in.
    pub turn: Opt<u64>,
    /// Details, kept verbatim.
    pub detail: Opt<Value>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `error`: `{message, turn?, step?, stack?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct ErrorEvent {
    /// What went wrong.
    pub message: String,
    /// The turn it happened in.
    pub turn: Opt<u64>,
    /// The step it happened in.
    pub step: Opt<u64>,
    /// A stack trace.
    pub stack: Opt<String>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `compact/start`: `{startSeq, endSeq}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct CompactStart {
    /// The first seq of the compacted range (`startSeq`).
    pub start_seq: u64,
    /// The last seq of the compacted range (`endSeq`).
    pub end_seq: u64,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `compact/summary`: `{startSeq, endSeq, summary, usage?}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct CompactSummary {
    /// The first seq of the compacted range (`startSeq`).
    pub start_seq: u64,
    /// The last seq of the compacted range (`endSeq`).
    pub end_seq: u64,
    /// The summary text.
    pub summary: String,
    /// Token usage of the summarizing call.
    pub usage: Opt<Usage>,
    /// Unknown members, in order.
    pub extra: Map,
}

/// `compact/end`: `{ok}`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct CompactEnd {
    /// False when the compaction failed.
    pub ok: bool,
    /// Unknown members, in order.
    pub extra: Map,
}

/// Expands to `as_str`, `from_name` and `ALL` for an enum written as a fixed set of strings.
macro_rules! string_enum {
    ($ty:ident / $archived:ident { $($variant:ident = $name:literal),* $(,)? }) => {
        impl $ty {
            /// Every value, in the order of docs/events.md.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),*];
            /// Every value's name.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The value as written in JSON.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)*
                }
            }

            /// The value named `name`, if it is one.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some($ty::$variant),)*
                    _ => None,
                }
            }
        }

        impl $archived {
            /// The value as written in JSON.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $($archived::$variant => $name,)*
                }
            }
        }
    };
}
string_enum!(ReasonKind / ArchivedReasonKind {
    Completed = "completed",
    Aborted = "aborted",
    Blocked = "blocked",
    Error = "error",
    MaxTokens = "max-tokens",
    Interrupted = "interrupted",
});
string_enum!(Decision / ArchivedDecision {
    Approved = "approved",
    Denied = "denied",
});

// Constructors of the payloads with a member that has no default (the others derive `Default`:
// `TurnStart { turn: 1, ..Default::default() }`). Optional members start absent, `extra` empty.

impl TurnEndReason {
    /// A reason of `kind` without `error`.
    pub fn new(kind: ReasonKind) -> Self {
        TurnEndReason {
            kind,
            error: Opt::Absent,
            extra: Map::new(),
        }
    }
}

impl TurnEnd {
    /// The `turn/end` of `turn` for a reason of `kind` (without `error`).
    pub fn new(turn: u64, kind: ReasonKind) -> Self {
        TurnEnd {
            turn,
            reason: TurnEndReason::new(kind),
            extra: Map::new(),
        }
    }
}

impl AssistantChunk {
    /// A chunk of step `step` of turn `turn`.
    pub fn new(turn: u64, step: u64, chunk: Chunk) -> Self {
        AssistantChunk {
            turn,
            step,
            chunk,
            extra: Map::new(),
        }
    }
}

impl ToolMessage {
    /// The tool message of `tool_name` with `content`, not an error.
    pub fn new(tool_name: impl Into<String>, content: ToolContent) -> Self {
        ToolMessage {
            tool_name: tool_name.into(),
            content,
            is_error: false,
            extra: Map::new(),
        }
    }
}

impl ToolResult {
    /// The `tool/result` of step `step` of turn `turn` carrying `message`, without `callId`,
    /// `error` or `meta`.
    pub fn new(turn: u64, step: u64, message: ToolMessage) -> Self {
        ToolResult {
            turn,
            step,
            message,
            call_id: Opt::Absent,
            error: Opt::Absent,
            meta: Opt::Absent,
            extra: Map::new(),
        }
    }

    /// The result that closes call `call_id` (of tool `tool_name`) when its outcome is unknown
    /// (docs/events.md §7): an error with `error.code` `TOOL_OUTCOME_UNKNOWN`, `content` telling
    /// the model why, `message` telling a reader.
    pub(crate) fn outcome_unknown(
        turn: u64,
        step: u64,
        tool_name: String,
        call_id: String,
        content: &str,
        message: &str,
    ) -> Self {
        ToolResult {
            turn,
            step,
            message: ToolMessage {
                tool_name,
                content: ToolContent::Text(content.to_owned()),
                is_error: true,
                extra: Map::new(),
            },
            call_id: Opt::Present(call_id),
            error: Opt::Present(ErrorInfo {
                code: Opt::Present("TOOL_OUTCOME_UNKNOWN".to_owned()),
                message: Opt::Present(message.to_owned()),
                extra: Map::new(),
            }),
            meta: Opt::Absent,
            extra: Map::new(),
        }
    }
}

impl ApprovalDecision {
    /// The `decision` on call `call_id` of step `step` of turn `turn`, without `by` or `note`.
    pub fn new(turn: u64, step: u64, call_id: impl Into<String>, decision: Decision) -> Self {
        ApprovalDecision {
            turn,
            step,
            call_id: call_id.into(),
            decision,
            by: Opt::Absent,
            note: Opt::Absent,
            extra: Map::new(),
        }
    }
}
