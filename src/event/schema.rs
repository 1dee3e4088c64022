//! The member tables: for every known object, its JSON member names in canonical order
//! (docs/events.md §3–4). Each table generates the decoder ([`Decode`]) and the writer
//! ([`WriteJson`]) of the owned type and of its archived twin, so the order is written down exactly
//! once.

use super::blocks::{ArchivedBlock, ArchivedChunk, Block, Chunk};
use super::data::*;
use super::decode::{
    expect_object, field, missing, mistyped, split_members, take_constant, to_map, to_value,
};
use super::decode::{Decode, Path};
use super::error::LineError;
use super::opt::Opt;
use super::parse::{Raw, RawKind};
use super::types::ArchivedSessionHeader;
use super::types::SessionHeader;
use super::write::{ObjectWriter, WriteJson};

/// An object with fixed members: `Type / ArchivedType { ("role" = "user"), field: "jsonName", … }`.
/// The optional constant is a member whose value is always that string (not stored).
macro_rules! object {
    ($ty:ident / $archived:ident {
        $(($ckey:literal = $cvalue:literal),)?
        $($field:ident: $key:literal),* $(,)?
    }) => {
        impl Decode for $ty {
            fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
                #[allow(unused_mut)]
                let (obj_pos, mut members) = expect_object(raw, path)?;
                $(take_constant(&mut members, $ckey, $cvalue, path, obj_pos)?;)?
                let ([$($field),*], extra) = split_members(members, &[$($key),*]);
                Ok($ty {
                    $($field: field($field, $key, path, obj_pos)?,)*
                    extra,
                })
            }
        }

        object!(@write $ty { $(($ckey = $cvalue),)? $($field: $key),* });
        object!(@write $archived { $(($ckey = $cvalue),)? $($field: $key),* });
    };
    (@write $ty:ident { $(($ckey:literal = $cvalue:literal),)? $($field:ident: $key:literal),* }) => {
        impl WriteJson for $ty {
            fn write_json(&self, out: &mut Vec<u8>) {
                let mut w = ObjectWriter::begin(out);
                $(w.raw_member(concat!("\"", $ckey, "\":"), concat!("\"", $cvalue, "\""));)?
                $(w.member(concat!("\"", $key, "\":"), &self.$field);)*
                w.extra(&self.extra);
                w.end();
            }
        }
    };
}

/// An object whose `type` member picks the variant: `Type / ArchivedType { Variant = "tag"
/// { field: "jsonName", … }, … }`. Any other `type` string is kept verbatim as `Type::Other(Map)`.
macro_rules! tagged {
    ($ty:ident / $archived:ident {
        $($variant:ident = $tag:literal { $($field:ident: $key:literal),* $(,)? }),* $(,)?
    }) => {
        impl Decode for $ty {
            fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
                let (obj_pos, mut members) = expect_object(raw, path)?;
                let type_path = Path::Key(&path, "type");
                let i = members
                    .iter()
                    .position(|m| m.key == "type")
                    .ok_or_else(|| missing(obj_pos, type_path))?;
                let tag = match &members[i].value.kind {
                    RawKind::String(tag) => tag,
                    _ => return Err(mistyped(&members[i].value, type_path, "a string")),
                };
                $(
                    if tag == $tag {
                        members.remove(i);
                        let ([$($field),*], extra) = split_members(members, &[$($key),*]);
                        return Ok($ty::$variant {
                            $($field: field($field, $key, path, obj_pos)?,)*
                            extra,
                        });
                    }
                )*
                Ok($ty::Other(to_map(members)))
            }
        }

        tagged!(@write $ty { $($variant = $tag { $($field: $key),* }),* });
        tagged!(@write $archived { $($variant = $tag { $($field: $key),* }),* });
    };
    (@write $ty:ident { $($variant:ident = $tag:literal { $($field:ident: $key:literal),* }),* }) => {
        impl WriteJson for $ty {
            fn write_json(&self, out: &mut Vec<u8>) {
                match self {
                    $($ty::$variant { $($field,)* extra } => {
                        let mut w = ObjectWriter::begin(out);
                        w.raw_member("\"type\":", concat!("\"", $tag, "\""));
                        $(w.member(concat!("\"", $key, "\":"), $field);)*
                        w.extra(extra);
                        w.end();
                    })*
                    $ty::Other(map) => map.write_json(out),
                }
            }
        }
    };
}

object!(SessionHeader / ArchivedSessionHeader {
    ("type" = "session"),
    version: "version",
    id: "id",
    created_at: "createdAt",
    title: "title",
    cwd: "cwd",
    parent_session: "parentSession",
    seed_length: "seedLength",
});

object!(TurnStart / ArchivedTurnStart { turn: "turn" });
object!(
    TurnEnd
        / ArchivedTurnEnd {
            turn: "turn",
            reason: "reason"
        }
);
// `reason` is `{kind, error?}` and its `error` is `{code?, message}` (docs/events.md §3): `message`
// is required there, unlike in a `tool/result`'s `error`, though both are stored as [`ErrorInfo`]
// (the archived layout stays as it was). So `reason` has its own decoder.
impl Decode for TurnEndReason {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        let (obj_pos, members) = expect_object(raw, path)?;
        let ([kind, error], extra) = split_members(members, &["kind", "error"]);
        let kind = field(kind, "kind", path, obj_pos)?;
        let error = match error {
            Some(raw) if !matches!(raw.kind, RawKind::Null) => {
                let error_path = Path::Key(&path, "error");
                let (error_pos, members) = expect_object(raw, error_path)?;
                let ([code, message], extra) = split_members(members, &["code", "message"]);
                Opt::Present(ErrorInfo {
                    code: field(code, "code", error_path, error_pos)?,
                    message: Opt::Present(field::<String>(
                        message, "message", error_path, error_pos,
                    )?),
                    extra,
                })
            }
            other => field(other, "error", path, obj_pos)?,
        };
        Ok(TurnEndReason { kind, error, extra })
    }
}
object!(@write TurnEndReason { kind: "kind", error: "error" });
object!(@write ArchivedTurnEndReason { kind: "kind", error: "error" });
object!(
    ErrorInfo
        / ArchivedErrorInfo {
            code: "code",
            message: "message"
        }
);
object!(
    StepStart
        / ArchivedStepStart {
            turn: "turn",
            step: "step",
            request: "request"
        }
);
object!(
    StepEnd
        / ArchivedStepEnd {
            turn: "turn",
            step: "step"
        }
);

object!(UserMessage / ArchivedUserMessage {
    ("role" = "user"),
    content: "content",
    envelope: "envelope",
});
object!(
    AssistantChunk
        / ArchivedAssistantChunk {
            turn: "turn",
            step: "step",
            chunk: "chunk"
        }
);
object!(
    AssistantMessage
        / ArchivedAssistantMessage {
            turn: "turn",
            step: "step",
            message: "message",
            usage: "usage",
        }
);
object!(AssistantContent / ArchivedAssistantContent {
    ("role" = "assistant"),
    content: "content",
    provider: "provider",
    model: "model",
    replay: "replay",
});
object!(
    Usage
        / ArchivedUsage {
            input_tokens: "inputTokens",
            output_tokens: "outputTokens",
            cache_read_tokens: "cacheReadTokens",
            cache_write_tokens: "cacheWriteTokens",
            reasoning_tokens: "reasoningTokens",
        }
);
object!(
    ToolCall
        / ArchivedToolCall {
            turn: "turn",
            step: "step",
            call_id: "callId",
            name: "name",
            arguments: "arguments",
        }
);
// A `tool/result`'s `error` has no member list in docs/events.md, so it is kept verbatim. One of
// the shape `{code?, message?, …}` (strings or null, `code` before `message`, unknown members after
// both) is stored as [`ErrorInfo`], which writes it back byte for byte; any other value (a string,
// members in another order, a numeric code, …) is kept as the member `"error"` of `extra`, with
// `error` absent, and written back in `error`'s place. `extra` never otherwise holds a known
// member's name, and the archived layout is the one of before.
impl Decode for ToolResult {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        let (obj_pos, members) = expect_object(raw, path)?;
        let ([turn, step, message, call_id, error, meta], mut extra) = split_members(
            members,
            &["turn", "step", "message", "callId", "error", "meta"],
        );
        let turn = field(turn, "turn", path, obj_pos)?;
        let step = field(step, "step", path, obj_pos)?;
        let message = field(message, "message", path, obj_pos)?;
        let call_id = field(call_id, "callId", path, obj_pos)?;
        let error = match error {
            Some(raw) if !fits_error_info(&raw) => {
                // `split_members` took every member named "error" out of `extra`.
                let _ = extra.push("error", to_value(raw));
                Opt::Absent
            }
            other => field(other, "error", path, obj_pos)?,
        };
        Ok(ToolResult {
            turn,
            step,
            message,
            call_id,
            error,
            meta: field(meta, "meta", path, obj_pos)?,
            extra,
        })
    }
}

/// True when `raw` is `null` or an object that [`ErrorInfo`] stores and writes back unchanged.
fn fits_error_info(raw: &Raw<'_>) -> bool {
    let members = match &raw.kind {
        RawKind::Null => return true,
        RawKind::Object(members) => members,
        _ => return false,
    };
    // The members must be: `code`?, `message`?, then unknown ones.
    let mut next_known = 0;
    let mut seen_unknown = false;
    for m in members {
        let rank = match m.key.as_ref() {
            "code" => 1,
            "message" => 2,
            _ => {
                seen_unknown = true;
                continue;
            }
        };
        let string_or_null = matches!(m.value.kind, RawKind::String(_) | RawKind::Null);
        if seen_unknown || rank <= next_known || !string_or_null {
            return false;
        }
        next_known = rank;
    }
    true
}

macro_rules! write_tool_result {
    ($ty:ident) => {
        impl WriteJson for $ty {
            fn write_json(&self, out: &mut Vec<u8>) {
                let mut w = ObjectWriter::begin(out);
                w.member("\"turn\":", &self.turn);
                w.member("\"step\":", &self.step);
                w.member("\"message\":", &self.message);
                w.member("\"callId\":", &self.call_id);
                if !self.error.is_absent() {
                    w.member("\"error\":", &self.error);
                } else if let Some(verbatim) = self.extra.get("error") {
                    w.member("\"error\":", verbatim);
                }
                w.member("\"meta\":", &self.meta);
                w.extra_except(&self.extra, "error");
                w.end();
            }
        }
    };
}
write_tool_result!(ToolResult);
write_tool_result!(ArchivedToolResult);
object!(ToolMessage / ArchivedToolMessage {
    ("role" = "tool"),
    tool_name: "toolName",
    content: "content",
    is_error: "isError",
});
object!(SystemMessage / ArchivedSystemMessage {
    ("role" = "system"),
    content: "content",
});

object!(
    ApprovalRequest
        / ArchivedApprovalRequest {
            turn: "turn",
            step: "step",
            call_id: "callId",
            tool: "tool",
            reason: "reason",
        }
);
object!(
    ApprovalDecision
        / ArchivedApprovalDecision {
            turn: "turn",
            step: "step",
            call_id: "callId",
            decision: "decision",
            by: "by",
            note: "note",
        }
);
object!(
    SandboxEvent
        / ArchivedSandboxEvent {
            kind: "kind",
            turn: "turn",
            detail: "detail"
        }
);
object!(
    ErrorEvent
        / ArchivedErrorEvent {
            message: "message",
            turn: "turn",
            step: "step",
            stack: "stack",
        }
);
object!(
    CompactStart
        / ArchivedCompactStart {
            start_seq: "startSeq",
            end_seq: "endSeq"
        }
);
object!(
    CompactSummary
        / ArchivedCompactSummary {
            start_seq: "startSeq",
            end_seq: "endSeq",
            summary: "summary",
            usage: "usage",
        }
);
object!(CompactEnd / ArchivedCompactEnd { ok: "ok" });

tagged!(Block / ArchivedBlock {
    Text = "text" { text: "text" },
    Reasoning = "reasoning" { text: "text" },
    ToolUse = "tool_use" { id: "id", name: "name", input: "input" },
    ToolResult = "tool_result" {
        tool_use_id: "toolUseId",
        tool_name: "toolName",
        content: "content",
        is_error: "isError",
    },
});

tagged!(Chunk / ArchivedChunk {
    TextDelta = "text-delta" { text: "text" },
    ReasoningDelta = "reasoning-delta" { text: "text" },
    ToolCallDelta = "tool-call-delta" { id: "id", name: "name", arguments: "arguments" },
});
