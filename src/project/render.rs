//! Provider renderings of the neutral projection: OpenAI chat and Anthropic messages.
//!
//! Both are views of [`Messages`]; nothing here reads the log. What each does where the
//! providers' shapes and the neutral model differ is written on [`render_openai`] and
//! [`render_anthropic`].

use std::fmt;
use std::str::FromStr;

use crate::event::{Block, Map, ToolContent, Value};

use super::message::{block_value, Message, Messages, Role};

/// A shape of the model-visible history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// The neutral projection (EVENTS.md §5): an array of `{"role","content"}`.
    Neutral,
    /// OpenAI chat completions `messages` ([`render_openai`]).
    OpenAi,
    /// Anthropic messages `{"system","messages"}` ([`render_anthropic`]).
    Anthropic,
}

impl Format {
    /// Every format.
    pub const ALL: &'static [Format] = &[Self::Neutral, Self::OpenAi, Self::Anthropic];

    /// The format's name: `"neutral"`, `"openai"` or `"anthropic"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Neutral => "neutral",
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A format name that is not `neutral`, `openai` or `anthropic`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown format {:?} (expected neutral, openai or anthropic)",
            self.0
        )
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;

    /// `"neutral"`, `"openai"` or `"anthropic"` (exactly, lowercase).
    fn from_str(name: &str) -> Result<Self, UnknownFormat> {
        Self::ALL
            .iter()
            .copied()
            .find(|f| f.as_str() == name)
            .ok_or_else(|| UnknownFormat(name.to_owned()))
    }
}

/// The history in `format`: [`Messages::to_value`], [`render_openai`] or [`render_anthropic`].
pub fn render(format: Format, messages: &Messages) -> Value {
    match format {
        Format::Neutral => messages.to_value(),
        Format::OpenAi => render_openai(messages),
        Format::Anthropic => render_anthropic(messages),
    }
}

/// The history as OpenAI chat completions `messages` (a JSON array).
///
/// - `system` → `{"role":"system","content":…}`.
/// - `user` → `{"role":"user","content":…}`. Its `tool_result` blocks become
///   `{"role":"tool","tool_call_id":toolUseId,"content":…}` messages, placed where the user
///   message was and before a user message holding the rest of its content (OpenAI wants tool
///   messages right after the assistant's `tool_calls`). A user message that held only tool
///   results leaves only the tool messages.
/// - `assistant` → `{"role":"assistant","content":…,"tool_calls":[…]}`: each `tool_use` block is
///   `{"id","type":"function","function":{"name","arguments"}}`, `arguments` being the input
///   written as compact JSON text (the canonical writer: member order and number text as
///   recorded); `tool_calls` is left out when there are none. `content` is `null` when the
///   message has tool calls and no other content, `""` when it has neither (only reasoning).
/// - Content: a single text block is a string; anything else an array of parts, a text block
///   being `{"type":"text","text"}`; no part at all is `""`.
/// - Reasoning blocks are dropped: chat completions take no reasoning input.
/// - A tool message's content is a string: the text of a string result, or the texts of its
///   text blocks joined with `"\n"` (reasoning blocks dropped). A result holding other blocks is
///   an array of parts instead, so nothing is lost.
/// - Unknown blocks ([`Block::Other`]) pass through unchanged, as parts; so do blocks with no
///   OpenAI form where they stand (a `tool_use` in a user message, say), in their neutral form.
///   Unknown members of known blocks are left out (OpenAI refuses unknown part members).
pub fn render_openai(messages: &Messages) -> Value {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::System => out.push(chat_message("system", openai_content(&message.content))),
            Role::User => {
                let mut rest = Vec::new();
                let mut tool_results = 0;
                for block in &message.content {
                    match block {
                        Block::ToolResult {
                            tool_use_id,
                            content,
                            ..
                        } => {
                            tool_results += 1;
                            out.push(object(
                                vec![
                                    ("role", "tool".into()),
                                    ("tool_call_id", tool_use_id.as_str().into()),
                                    ("content", openai_tool_content(content)),
                                ],
                                None,
                            ));
                        }
                        other => rest.push(other.clone()),
                    }
                }
                if tool_results == 0 || !rest.is_empty() {
                    out.push(chat_message("user", openai_content(&rest)));
                }
            }
            Role::Assistant => out.push(openai_assistant(message)),
        }
    }
    Value::Array(out)
}

fn chat_message(role: &str, content: Value) -> Value {
    object(vec![("role", role.into()), ("content", content)], None)
}

fn openai_assistant(message: &Message) -> Value {
    let mut calls = Vec::new();
    let mut rest = Vec::new();
    for block in &message.content {
        match block {
            Block::ToolUse {
                id, name, input, ..
            } => calls.push(object(
                vec![
                    ("id", id.as_str().into()),
                    ("type", "function".into()),
                    (
                        "function",
                        object(
                            vec![
                                ("name", name.as_str().into()),
                                ("arguments", input.to_string().into()),
                            ],
                            None,
                        ),
                    ),
                ],
                None,
            )),
            other => rest.push(other.clone()),
        }
    }
    let parts = openai_parts(&rest);
    let content = match (parts.is_empty(), calls.is_empty()) {
        (true, false) => Value::Null,
        _ => content_value(parts),
    };
    let mut members = vec![("role", "assistant".into()), ("content", content)];
    if !calls.is_empty() {
        members.push(("tool_calls", Value::Array(calls)));
    }
    object(members, None)
}

/// The parts of OpenAI content: text parts, reasoning dropped, everything else as it is.
fn openai_parts(blocks: &[Block]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text { text, .. } => Some(text_part(text)),
            Block::Reasoning { .. } => None,
            Block::Other(map) => Some(Value::Object(map.clone())),
            other => Some(block_value(other)),
        })
        .collect()
}

fn text_part(text: &str) -> Value {
    object(vec![("type", "text".into()), ("text", text.into())], None)
}

/// A single text part as a string, no part as `""`, else the array of parts.
fn content_value(parts: Vec<Value>) -> Value {
    if let [only] = parts.as_slice() {
        if only.get("type").and_then(Value::as_str) == Some("text") {
            if let Some(text) = only.get("text").and_then(Value::as_str) {
                return Value::String(text.to_owned());
            }
        }
    }
    if parts.is_empty() {
        return Value::String(String::new());
    }
    Value::Array(parts)
}

fn openai_content(blocks: &[Block]) -> Value {
    content_value(openai_parts(blocks))
}

fn openai_tool_content(content: &ToolContent) -> Value {
    match content {
        ToolContent::Text(text) => Value::String(text.clone()),
        ToolContent::Blocks(blocks) => {
            let only_text = blocks
                .iter()
                .all(|b| matches!(b, Block::Text { .. } | Block::Reasoning { .. }));
            if only_text {
                let texts: Vec<&str> = blocks
                    .iter()
                    .filter_map(|b| match b {
                        Block::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                Value::String(texts.join("\n"))
            } else {
                Value::Array(openai_parts(blocks))
            }
        }
    }
}

/// The history as an Anthropic messages request body: `{"system":[…],"messages":[…]}`.
///
/// - Every `system` message, wherever it stands, is gathered in order into the top-level
///   `system`, an array of text blocks (`{"type":"text","text"}`, so per-block members such as
///   `cache_control` survive); `system` is left out when there is none. Anthropic has no system
///   role inside the conversation, so the position of a system message that changed mid-session
///   is not shown.
/// - Consecutive messages of the same role are merged into one (Anthropic requires user and
///   assistant to alternate): a tool result and the user text after it become one user message.
/// - In a user message, `tool_result` blocks come first (Anthropic requires it), in order,
///   then the rest in order.
/// - Blocks: text → `{"type":"text","text"}`; reasoning → `{"type":"thinking","thinking":text}`;
///   `tool_use` → `{"type":"tool_use","id","name","input"}`; `tool_result` →
///   `{"type":"tool_result","tool_use_id","content","is_error"}`, `content` a string or the
///   blocks rendered the same way. Content is always an array of blocks.
/// - Unknown members of known blocks are kept after the rendered ones (a reasoning block's
///   `signature`, a `cache_control`), unless they would collide with one; unknown blocks
///   ([`Block::Other`]) pass through unchanged.
pub fn render_anthropic(messages: &Messages) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(Role, Vec<Value>, Vec<Value>)> = Vec::new();
    for message in messages {
        if message.role == Role::System {
            system.extend(message.content.iter().map(anthropic_block));
            continue;
        }
        if turns.last().is_none_or(|(role, ..)| *role != message.role) {
            turns.push((message.role, Vec::new(), Vec::new()));
        }
        if let Some((role, results, rest)) = turns.last_mut() {
            for block in &message.content {
                let rendered = anthropic_block(block);
                if *role == Role::User && matches!(block, Block::ToolResult { .. }) {
                    results.push(rendered);
                } else {
                    rest.push(rendered);
                }
            }
        }
    }
    let messages = turns
        .into_iter()
        .map(|(role, mut results, rest)| {
            results.extend(rest);
            object(
                vec![
                    ("role", role.as_str().into()),
                    ("content", Value::Array(results)),
                ],
                None,
            )
        })
        .collect();
    let mut members = Vec::new();
    if !system.is_empty() {
        members.push(("system", Value::Array(system)));
    }
    members.push(("messages", Value::Array(messages)));
    object(members, None)
}

fn anthropic_block(block: &Block) -> Value {
    match block {
        Block::Text { text, extra } => object(
            vec![("type", "text".into()), ("text", text.as_str().into())],
            Some(extra),
        ),
        Block::Reasoning { text, extra } => object(
            vec![
                ("type", "thinking".into()),
                ("thinking", text.as_str().into()),
            ],
            Some(extra),
        ),
        Block::ToolUse {
            id,
            name,
            input,
            extra,
        } => object(
            vec![
                ("type", "tool_use".into()),
                ("id", id.as_str().into()),
                ("name", name.as_str().into()),
                ("input", input.clone()),
            ],
            Some(extra),
        ),
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
            extra,
            ..
        } => object(
            vec![
                ("type", "tool_result".into()),
                ("tool_use_id", tool_use_id.as_str().into()),
                (
                    "content",
                    match content {
                        ToolContent::Text(text) => text.as_str().into(),
                        ToolContent::Blocks(blocks) => {
                            Value::Array(blocks.iter().map(anthropic_block).collect())
                        }
                    },
                ),
                ("is_error", Value::Bool(*is_error)),
            ],
            Some(extra),
        ),
        Block::Other(map) => Value::Object(map.clone()),
    }
}

/// An object of `members` (distinct names), then the members of `extra` whose names are not
/// taken.
fn object(members: Vec<(&str, Value)>, extra: Option<&Map>) -> Value {
    let mut map = Map::new();
    let extra = extra.into_iter().flat_map(Map::iter);
    for (key, value) in members
        .into_iter()
        .chain(extra.map(|(k, v)| (k, v.clone())))
    {
        // A name already there is skipped: the rendered members win over unknown ones.
        let _ = map.push(key, value);
    }
    Value::Object(map)
}
