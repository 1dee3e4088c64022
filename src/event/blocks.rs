//! Content blocks of messages, streamed chunks, and tool output (docs/events.md §3).

use rkyv::{Archive, Deserialize, Serialize};

use super::value::{Map, Value};

/// A content block: `{type, …}`. A block of a type other than the four known ones is kept
/// verbatim as [`Block::Other`]; a known type with missing or mistyped members is refused.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub enum Block {
    /// `{type:"text", text}`
    Text {
        /// The text.
        text: String,
        /// Unknown members, in order.
        extra: Map,
    },
    /// `{type:"reasoning", text}`
    Reasoning {
        /// The reasoning text.
        text: String,
        /// Unknown members, in order.
        extra: Map,
    },
    /// `{type:"tool_use", id, name, input}`
    ToolUse {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The tool's input, any JSON value.
        input: Value,
        /// Unknown members, in order.
        extra: Map,
    },
    /// `{type:"tool_result", toolUseId, toolName, content, isError}`
    ToolResult {
        /// The id of the `tool_use` answered (`toolUseId`).
        tool_use_id: String,
        /// The tool's name (`toolName`).
        tool_name: String,
        /// The output.
        content: ToolContent,
        /// True when the tool failed (`isError`).
        is_error: bool,
        /// Unknown members, in order.
        extra: Map,
    },
    /// Any other block type: the whole object (`type` included) kept verbatim, never
    /// interpreted. Its `type` is a string that is none of the known ones.
    Other(Map),
}

/// `assistant/chunk` `chunk`: `{type, …}`. Types other than the three known ones are kept
/// verbatim as [`Chunk::Other`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub enum Chunk {
    /// `{type:"text-delta", text}`
    TextDelta {
        /// The text piece.
        text: String,
        /// Unknown members, in order.
        extra: Map,
    },
    /// `{type:"reasoning-delta", text}`
    ReasoningDelta {
        /// The reasoning piece.
        text: String,
        /// Unknown members, in order.
        extra: Map,
    },
    /// `{type:"tool-call-delta", id?, name?, arguments?}`. Its optional members are archived
    /// out of line (behind 4-byte pointers), so that every archived chunk is as small as a text
    /// delta's.
    ToolCallDelta {
        /// The call id.
        #[rkyv(with = rkyv::with::AsBox)]
        id: super::Opt<String>,
        /// The tool's name.
        #[rkyv(with = rkyv::with::AsBox)]
        name: super::Opt<String>,
        /// A piece of the arguments text.
        #[rkyv(with = rkyv::with::AsBox)]
        arguments: super::Opt<String>,
        /// Unknown members, in order.
        extra: Map,
    },
    /// Any other chunk type: the whole object kept verbatim. Its `type` is a string.
    Other(Map),
}

/// A tool's output: a string or content blocks.
///
/// Recursive (a `tool_result` block holds a `ToolContent`), hence the explicit rkyv bounds.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(serialize_bounds(
    __S: rkyv::ser::Writer + rkyv::ser::Allocator,
    __S::Error: rkyv::rancor::Source,
))]
#[rkyv(deserialize_bounds(__D::Error: rkyv::rancor::Source))]
#[rkyv(bytecheck(bounds(__C: rkyv::validation::ArchiveContext)))]
#[rkyv(derive(Debug))]
pub enum ToolContent {
    /// A string.
    Text(String),
    /// Content blocks.
    Blocks(#[rkyv(omit_bounds)] Vec<Block>),
}

impl Block {
    /// The block's `type`: `"text"`, `"reasoning"`, `"tool_use"`, `"tool_result"`, or the
    /// unknown block's own type.
    pub fn type_name(&self) -> &str {
        match self {
            Self::Text { .. } => "text",
            Self::Reasoning { .. } => "reasoning",
            Self::ToolUse { .. } => "tool_use",
            Self::ToolResult { .. } => "tool_result",
            Self::Other(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            extra: Map::new(),
        }
    }
}

impl ArchivedBlock {
    /// See [`Block::type_name`].
    pub fn type_name(&self) -> &str {
        match self {
            Self::Text { .. } => "text",
            Self::Reasoning { .. } => "reasoning",
            Self::ToolUse { .. } => "tool_use",
            Self::ToolResult { .. } => "tool_result",
            Self::Other(map) => map
                .get("type")
                .and_then(super::value::ArchivedValue::as_str)
                .unwrap_or(""),
        }
    }
}

impl Chunk {
    /// The chunk's `type`: `"text-delta"`, `"reasoning-delta"`, `"tool-call-delta"`, or the
    /// unknown chunk's own type.
    pub fn type_name(&self) -> &str {
        match self {
            Self::TextDelta { .. } => "text-delta",
            Self::ReasoningDelta { .. } => "reasoning-delta",
            Self::ToolCallDelta { .. } => "tool-call-delta",
            Self::Other(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}
