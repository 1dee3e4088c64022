//! Provider renderings of the neutral projection: OpenAI chat and Anthropic messages.
//!
//! Both are views of [`Messages`]; nothing here reads the log. What each does where the
//! providers' shapes and the neutral model differ is written on [`render_openai`] and
//! [`render_anthropic`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use crate::event::{Block, Map, ToolContent, Value};

use super::message::{block_value, Message, Messages, Role};

/// A shape of the model-visible history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// The neutral projection (docs/events.md §5): an array of `{"role","content"}`.
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
/// - Unknown blocks ([`Block::Other`]): in a user message an OpenAI part (`image_url`,
///   `input_audio`, `file`) is kept, and an Anthropic-style `image` with a `base64` or `url`
///   source (a `data:` URL for base64) and a Responses API `input_image` (Codex) become an
///   `image_url`; any other block with no OpenAI
///   part where it stands (anywhere in system, assistant and tool content; a `tool_use` in a
///   user message, say) is described in a text part. Unknown members of known blocks are left
///   out (OpenAI refuses unknown part members).
/// - Every `tool_calls` entry is answered: a call whose step or turn ended without a result
///   (and a tool use some message follows whose result is not in the history, replaced away,
///   say) gets a synthetic `tool` message right after the assistant message, content
///   [`OUTCOME_UNKNOWN`] (docs/events.md §7). Calls still running in an open step are left as they
///   are while only results follow them; once other content follows (a user message steering
///   the agent while the tool runs), each gets a synthetic tool message saying it has no
///   result yet (`TOOL_OUTCOME_UNKNOWN: … yet (it is still running)`). A result of a call of
///   the last assistant message that comes after other content (a user message steering the
///   agent while the tool ran, a system message) is moved up to a tool message right after
///   the call. A tool result that answers no `tool_calls` entry just
///   before it becomes user text, `[result of tool call ID (NAME): TEXT]`, which the
///   conversation goes on with (a later result of those calls is moved up).
/// - A `tool_use` repeating the id of an earlier one of its message is left out (both providers
///   refuse two tool uses with one id); a second result with that id becomes text as above.
pub fn render_openai(messages: &Messages) -> Value {
    let placed = placed_results(messages, true);
    let synthetic = synthetic_results(messages, true, &placed);
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        match message.role {
            Role::System => out.push(chat_message(
                "system",
                openai_content(&message.content, Context::Text),
            )),
            Role::User => {
                let mut rest = Vec::new();
                let mut tool_results = 0;
                let mut moved = 0;
                for (b, block) in message.content.iter().enumerate() {
                    match block {
                        _ if placed.moved.contains(&(index, b)) => moved += 1,
                        Block::ToolResult { .. } if placed.orphans.contains(&(index, b)) => {
                            rest.push(orphan_text(block));
                        }
                        Block::ToolResult {
                            tool_use_id,
                            content,
                            ..
                        } => {
                            tool_results += 1;
                            out.push(tool_message(tool_use_id, openai_tool_content(content)));
                        }
                        other => rest.push(other.clone()),
                    }
                }
                // A message whose blocks all moved up leaves nothing here.
                let all_moved = moved > 0 && moved == message.content.len();
                if !all_moved && (tool_results == 0 || !rest.is_empty()) {
                    out.push(chat_message("user", openai_content(&rest, Context::User)));
                }
            }
            Role::Assistant => {
                out.push(openai_assistant(message));
                let moved = placed.after.get(&index).map_or(&[][..], Vec::as_slice);
                for block in blocks_at(messages, moved) {
                    if let Block::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    } = block
                    {
                        out.push(tool_message(tool_use_id, openai_tool_content(content)));
                    }
                }
                for (id, outcome) in synthetic.get(&index).into_iter().flatten() {
                    out.push(tool_message(id, (*outcome).into()));
                }
            }
        }
    }
    Value::Array(out)
}

/// A tool result that answers no tool use in the history, as a text block:
/// `[result of tool call ID (NAME), an error: TEXT]`.
fn orphan_text(block: &Block) -> Block {
    let Block::ToolResult {
        tool_use_id,
        tool_name,
        content,
        is_error,
        ..
    } = block
    else {
        return block.clone();
    };
    let text = match content {
        ToolContent::Text(t) => t.clone(),
        ToolContent::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b {
                Block::Text { text, .. } => text.clone(),
                other => block_value(other).to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    Block::text(format!(
        "[result of tool call {tool_use_id} ({tool_name}){}: {text}]",
        if *is_error { ", an error" } else { "" }
    ))
}

/// The text of the user message an Anthropic rendering starts with when the history starts with
/// an assistant message (the API wants a user message first).
pub const HISTORY_START: &str = "(the conversation starts with the assistant's message below)";

/// The content of the synthetic result a rendering gives a tool call whose step ended without
/// one (docs/events.md §7), an error.
pub const OUTCOME_UNKNOWN: &str =
    "TOOL_OUTCOME_UNKNOWN: the history holds no result for this tool call (its step ended without one)";

/// The content of the synthetic result a rendering gives a call still in flight (its step
/// open, no result yet) that other content follows: a user message steering the agent while
/// the tool runs. Providers refuse a tool use without its result before the conversation goes
/// on, and the outcome is not known yet; when the result is logged, it takes this one's place
/// (moved up right after the call, [`Placed`]).
const OUTCOME_PENDING: &str =
    "TOOL_OUTCOME_UNKNOWN: the history holds no result for this tool call yet (it is still running)";

/// Where the renderings put each `tool_result` block, decided in one pass over the history so
/// that every result is either a provider's tool result right after its call or text.
///
/// A result answers a `tool_use` of the last assistant message before it that no earlier result
/// answered. One that comes after other content before that next assistant message (a user
/// message steering the agent while its tool ran, text shown for a result that answers
/// nothing, or for OpenAI a system message) is moved up to right after the call: providers want
/// a call's result right after it. A result that answers nothing (its call replaced away,
/// answered already, or in an earlier response) is an orphan, shown as text ([`orphan_text`]),
/// which is content the conversation goes on with. The neutral projection keeps everything
/// where it was recorded.
#[derive(Default)]
struct Placed {
    /// Per assistant message (by index): the result blocks (message index, block index) to
    /// render right after it, in order.
    after: HashMap<usize, Vec<(usize, usize)>>,
    /// Every moved block's place, skipped where it stands.
    moved: HashSet<(usize, usize)>,
    /// The results that answer no `tool_use`, shown as text where they stand.
    orphans: HashSet<(usize, usize)>,
}

fn placed_results(messages: &Messages, system_separates: bool) -> Placed {
    let mut out = Placed::default();
    // The last assistant message, its tool uses no result answered yet, and whether other
    // content came after it.
    let mut owner: Option<usize> = None;
    let mut open: Vec<&str> = Vec::new();
    let mut moved_on = false;
    for (j, m) in messages.iter().enumerate() {
        match m.role {
            Role::Assistant => {
                owner = Some(j);
                open = tool_use_ids(m);
                moved_on = false;
            }
            Role::System => moved_on |= system_separates,
            Role::User => {
                // The renderings put a message's results before the rest of it. A message
                // without blocks is rendered too (an empty user message): it goes on.
                let mut other = m.content.is_empty();
                for (b, block) in m.content.iter().enumerate() {
                    match block {
                        Block::ToolResult { tool_use_id, .. } => {
                            match open.iter().position(|id| *id == tool_use_id.as_str()) {
                                Some(at) => {
                                    open.remove(at);
                                    if let (true, Some(i)) = (moved_on, owner) {
                                        out.after.entry(i).or_default().push((j, b));
                                        out.moved.insert((j, b));
                                    }
                                }
                                None => {
                                    out.orphans.insert((j, b));
                                    other = true;
                                }
                            }
                        }
                        _ => other = true,
                    }
                }
                moved_on |= other;
            }
        }
    }
    out
}

/// The ids of a message's `tool_use` blocks, in order, each once: a block repeating an id of an
/// earlier one of the message is not rendered ([`repeated_tool_use`]).
fn tool_use_ids(m: &Message) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::new();
    for b in &m.content {
        if let Block::ToolUse { id, .. } = b {
            if !ids.contains(&id.as_str()) {
                ids.push(id.as_str());
            }
        }
    }
    ids
}

/// Whether the block at `index` of `content` is a `tool_use` whose id an earlier `tool_use` of
/// the same message has (a line repeated in a damaged source file, say). Both providers refuse
/// two tool uses with one id, so the renderings keep the first: the result answering it is
/// the first result with that id, and a second is shown as text ([`orphan_text`]).
fn repeated_tool_use(content: &[Block], index: usize) -> bool {
    let Some(Block::ToolUse { id, .. }) = content.get(index) else {
        return false;
    };
    content[..index]
        .iter()
        .any(|b| matches!(b, Block::ToolUse { id: earlier, .. } if earlier == id))
}

/// The blocks of `places` (message index, block index) in `messages`.
fn blocks_at<'m>(messages: &'m Messages, places: &[(usize, usize)]) -> Vec<&'m Block> {
    places
        .iter()
        .filter_map(|&(m, b)| messages.get(m)?.content.get(b))
        .collect()
}

/// For each assistant message (by index): the ids of its `tool_use` blocks that get a
/// synthetic result, with its content: no `tool_result` for them follows before the
/// conversation goes on (the next assistant message, or a user message holding more than tool
/// results, or for OpenAI a system message). A call whose step ended without a result
/// ([`Messages::closed_unanswered`]) gets [`OUTCOME_UNKNOWN`], and so does a tool use that some
/// message follows and whose result was replaced away or that has no `tool/call`. A call in
/// flight ([`Messages::in_flight`]: made after the message, unanswered, in a step still open,
/// its tool perhaps running) gets [`OUTCOME_PENDING`] only once the conversation went on after
/// it (a user message steering the agent); while only its siblings' results follow, it is
/// left as it is. A tool use in the last message without a `tool/call` gets
/// [`OUTCOME_UNKNOWN`] once its step has ended ([`Messages::last_step_end`]); before, its call
/// may not be logged yet.
fn synthetic_results(
    messages: &Messages,
    system_separates: bool,
    placed: &Placed,
) -> HashMap<usize, Vec<(String, &'static str)>> {
    let list: Vec<&Message> = messages.iter().collect();
    let in_flight: Vec<(u64, &str)> = messages.in_flight().collect();
    let closed_calls: Vec<(u64, &str)> = messages.closed_unanswered().collect();
    let mut out = HashMap::new();
    for (i, m) in list.iter().enumerate() {
        if m.role != Role::Assistant {
            continue;
        }
        let mut answered = HashSet::new();
        let mut went_on = false;
        for (j, later) in list.iter().enumerate().skip(i + 1) {
            // An empty user message is rendered, between the call and any result.
            let mut moved_on = later.role == Role::User && later.content.is_empty();
            match later.role {
                Role::Assistant => moved_on = true,
                Role::User => {
                    for (b, block) in later.content.iter().enumerate() {
                        match block {
                            // Shown as text: it answers nothing.
                            Block::ToolResult { .. } if placed.orphans.contains(&(j, b)) => {
                                moved_on = true;
                            }
                            Block::ToolResult { tool_use_id, .. } => {
                                answered.insert(tool_use_id.as_str());
                            }
                            _ => moved_on = true,
                        }
                    }
                }
                // An OpenAI system message ends the run of tool messages; Anthropic lifts
                // system messages out of the conversation.
                Role::System => moved_on = system_separates,
            }
            if moved_on {
                went_on = true;
                break;
            }
        }
        for block in blocks_at(messages, placed.after.get(&i).map_or(&[], Vec::as_slice)) {
            if let Block::ToolResult { tool_use_id, .. } = block {
                answered.insert(tool_use_id.as_str());
            }
        }
        let followed = i + 1 < list.len();
        // A tool use without a `tool/call` in a step that has ended: no call of it can be
        // logged any more.
        let ended = messages.last_step_end().is_some_and(|e| e > m.source_seq);
        let mut ids: Vec<(String, &'static str)> = Vec::new();
        for b in &m.content {
            if let Block::ToolUse { id, .. } = b {
                if answered.contains(id.as_str()) || ids.iter().any(|(i, _)| i == id) {
                    continue;
                }
                let flying = in_flight
                    .iter()
                    .any(|&(seq, c)| c == id.as_str() && seq > m.source_seq);
                let closed = closed_calls
                    .iter()
                    .any(|&(seq, c)| c == id.as_str() && seq > m.source_seq);
                if flying {
                    if went_on {
                        ids.push((id.clone(), OUTCOME_PENDING));
                    }
                } else if closed || followed || ended {
                    ids.push((id.clone(), OUTCOME_UNKNOWN));
                }
            }
        }
        if !ids.is_empty() {
            out.insert(i, ids);
        }
    }
    out
}

/// An OpenAI tool message: the result of the call `id`.
fn tool_message(id: &str, content: Value) -> Value {
    object(
        vec![
            ("role", "tool".into()),
            ("tool_call_id", id.into()),
            ("content", content),
        ],
        None,
    )
}

fn chat_message(role: &str, content: Value) -> Value {
    object(vec![("role", role.into()), ("content", content)], None)
}

fn openai_assistant(message: &Message) -> Value {
    let mut calls = Vec::new();
    let mut rest = Vec::new();
    for (b, block) in message.content.iter().enumerate() {
        match block {
            _ if repeated_tool_use(&message.content, b) => {}
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
    let parts = openai_parts(&rest, Context::Text);
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

/// Where OpenAI content stands: a user message (text, `image_url`, `input_audio` and `file`
/// parts) or anywhere else (system, assistant, tool: text parts only).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    User,
    Text,
}

/// The parts of OpenAI content: text parts, reasoning dropped; in a user message an OpenAI
/// part (`image_url`, `input_audio`, `file`) is kept and an Anthropic-style `image` (base64 or
/// url source) becomes an `image_url`; any other block is described in a text part.
fn openai_parts(blocks: &[Block], context: Context) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text { text, .. } => Some(text_part(text)),
            Block::Reasoning { .. } => None,
            Block::Other(map) => Some(openai_other(map, context)),
            other => Some(text_part(&format!(
                "[{} block: {}]",
                block_type(other),
                block_value(other)
            ))),
        })
        .collect()
}

fn block_type(block: &Block) -> String {
    block_value(block)
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned()
}

/// An unknown block in OpenAI content: converted when OpenAI has its equivalent, else described.
fn openai_other(map: &Map, context: Context) -> Value {
    let value = Value::Object(map.clone());
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if context == Context::User {
        match kind {
            "image_url" | "input_audio" | "file" => return value,
            // The Responses API's image part (Codex rollouts): its `image_url` is a URL string.
            "input_image" => {
                if let Some(url) = value.get("image_url").and_then(Value::as_str) {
                    return image_url_part(url);
                }
            }
            "image" => {
                let source = value.get("source");
                let field = |k: &str| source.and_then(|s| s.get(k)).and_then(Value::as_str);
                let url = match field("type") {
                    Some("base64") => field("data").map(|data| {
                        format!(
                            "data:{};base64,{data}",
                            field("media_type").unwrap_or("application/octet-stream")
                        )
                    }),
                    Some("url") => field("url").map(str::to_owned),
                    _ => None,
                };
                if let Some(url) = url {
                    return image_url_part(&url);
                }
            }
            _ => {}
        }
    }
    text_part(&format!(
        "[{kind} block left out: no OpenAI equivalent here]"
    ))
}

/// An OpenAI `image_url` part.
fn image_url_part(url: &str) -> Value {
    object(
        vec![
            ("type", "image_url".into()),
            ("image_url", object(vec![("url", url.into())], None)),
        ],
        None,
    )
}

/// An OpenAI image part (`image_url` of chat completions, whose `image_url` is `{url}`, or
/// `input_image` of the Responses API, whose `image_url` is the URL) as an Anthropic `image`
/// block: a `data:` URL becomes a `base64` source, any other URL a `url` source. `None` for any
/// other block, or one without a URL.
fn anthropic_image(map: &Map) -> Option<Value> {
    let url = match map.get("type").and_then(Value::as_str)? {
        "image_url" => map.get("image_url")?.get("url")?.as_str()?,
        "input_image" => map.get("image_url")?.as_str()?,
        _ => return None,
    };
    let source = match url
        .strip_prefix("data:")
        .and_then(|r| r.split_once(";base64,"))
    {
        Some((media_type, data)) => object(
            vec![
                ("type", "base64".into()),
                ("media_type", media_type.into()),
                ("data", data.into()),
            ],
            None,
        ),
        None => object(vec![("type", "url".into()), ("url", url.into())], None),
    };
    Some(object(
        vec![("type", "image".into()), ("source", source)],
        None,
    ))
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

fn openai_content(blocks: &[Block], context: Context) -> Value {
    content_value(openai_parts(blocks, context))
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
                Value::Array(openai_parts(blocks, Context::Text))
            }
        }
    }
}

/// The history as an Anthropic messages request body: `{"system":[…],"messages":[…]}`.
///
/// - Every `system` message, wherever it stands, is gathered in order into the top-level
///   `system`, an array of text blocks (`{"type":"text","text"}`, so per-block members such as
///   `cache_control` survive; other blocks are described in text, below); `system` is left out when there is none. Anthropic has no system
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
///   ([`Block::Other`]) of a type Anthropic has (`image`, `document`, `redacted_thinking`,
///   `server_tool_use`, …) pass through unchanged, and OpenAI image parts (`image_url`, and
///   `input_image` of Codex rollouts) become `image` blocks (a `data:` URL a `base64` source,
///   any other URL a `url` source).
/// - A block the API refuses where it stands is described in a text block,
///   `[TYPE block: JSON]`: any block but text in `system` (reasoning there is left out), a
///   `tool_use` in a user message, a `tool_result` in an assistant message or in another
///   result's content, a block of a type Anthropic does not have, and in a result's content
///   anything but text, images, documents and search results. An empty text block is left out.
/// - The API's rules: a reasoning block without a string `signature` is left out (the API
///   refuses unsigned `thinking`), and a message left with no block is dropped (its neighbours
///   merged); a `tool_use` `input` that is not an object is wrapped as `{"input": value}`; a
///   history whose first message is the assistant's starts with a user message holding
///   [`HISTORY_START`]; a call whose step ended without a result gets a synthetic `tool_result`
///   (`is_error: true`, content [`OUTCOME_UNKNOWN`]) first in the next user message, and so
///   does a call still running that other content follows (content: no result yet); a result
///   of a call of the last assistant message that comes after other user content (a message
///   steering the agent while the tool ran) is moved up, first in the user message after the
///   call; and a result that answers no `tool_use` of the assistant message before it becomes a
///   text block, as for OpenAI. A `tool_use` repeating the id of an earlier one of its message
///   is left out, as for OpenAI.
pub fn render_anthropic(messages: &Messages) -> Value {
    let placed = placed_results(messages, false);
    let synthetic = synthetic_results(messages, false, &placed);
    let mut system = Vec::new();
    // (role, tool results, the rest) per message, then merged by role.
    let mut rendered: Vec<(Role, Vec<Value>, Vec<Value>)> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if message.role == Role::System {
            system.extend(
                message
                    .content
                    .iter()
                    .filter_map(|b| anthropic_block(b, Place::System)),
            );
            continue;
        }
        let (mut results, mut rest) = (Vec::new(), Vec::new());
        for (b, block) in message.content.iter().enumerate() {
            if placed.moved.contains(&(index, b)) || repeated_tool_use(&message.content, b) {
                continue;
            }
            let orphan;
            let block = if placed.orphans.contains(&(index, b)) {
                orphan = orphan_text(block);
                &orphan
            } else {
                block
            };
            let place = match message.role {
                Role::Assistant => Place::Assistant,
                _ => Place::User,
            };
            let Some(value) = anthropic_block(block, place) else {
                continue;
            };
            if message.role == Role::User && matches!(block, Block::ToolResult { .. }) {
                results.push(value);
            } else {
                rest.push(value);
            }
        }
        rendered.push((message.role, results, rest));
        if let Some(moved) = placed.after.get(&index) {
            let results = blocks_at(messages, moved)
                .into_iter()
                .filter_map(|b| anthropic_block(b, Place::User))
                .collect();
            rendered.push((Role::User, results, Vec::new()));
        }
        if let Some(ids) = synthetic.get(&index) {
            let results = ids
                .iter()
                .map(|(id, outcome)| {
                    object(
                        vec![
                            ("type", "tool_result".into()),
                            ("tool_use_id", id.as_str().into()),
                            ("content", (*outcome).into()),
                            ("is_error", Value::Bool(true)),
                        ],
                        None,
                    )
                })
                .collect();
            rendered.push((Role::User, results, Vec::new()));
        }
    }
    let mut turns: Vec<(Role, Vec<Value>, Vec<Value>)> = Vec::new();
    for (role, results, rest) in rendered {
        if results.is_empty() && rest.is_empty() {
            // Nothing the API accepts is left (a message of unsigned thinking only).
            continue;
        }
        match turns.last_mut() {
            Some((last, r, o)) if *last == role => {
                r.extend(results);
                o.extend(rest);
            }
            _ => turns.push((role, results, rest)),
        }
    }
    if turns
        .first()
        .is_some_and(|(role, ..)| *role == Role::Assistant)
    {
        // Anthropic refuses a conversation that does not start with a user message.
        let start = object(
            vec![("type", "text".into()), ("text", HISTORY_START.into())],
            None,
        );
        turns.insert(0, (Role::User, Vec::new(), vec![start]));
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

/// Where an Anthropic block stands: which blocks the API takes there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The top-level `system`: text blocks only.
    System,
    /// A user message: no `tool_use`.
    User,
    /// An assistant message: no `tool_result`.
    Assistant,
    /// The content of a `tool_result`: text, images, documents, search results.
    ToolResult,
}

/// Anthropic's content block types: an unknown block of another type is described in a text
/// block (the API refuses a type it does not know).
const ANTHROPIC_TYPES: &[&str] = &[
    "text",
    "image",
    "document",
    "search_result",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "tool_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
];

/// The block types a `tool_result`'s content takes.
const ANTHROPIC_RESULT_TYPES: &[&str] = &["text", "image", "document", "search_result"];

/// A block Anthropic refuses where it stands, described in a text block:
/// `[TYPE block: JSON]`, as the OpenAI rendering describes a block it has no part for.
fn described(block: &Block) -> Value {
    text_part(&format!(
        "[{} block: {}]",
        block_type(block),
        block_value(block)
    ))
}

/// A block as Anthropic takes it at `place`, or `None` for a block the API refuses and that is
/// left out (a reasoning block without a string `signature`; an empty text block). A block of
/// a type the API does not take there (any but text in `system`, a `tool_use` in a user
/// message, a `tool_result` in an assistant message or inside another result, an unknown
/// type) is [`described`] in a text block.
fn anthropic_block(block: &Block, place: Place) -> Option<Value> {
    // An OpenAI image part, as Anthropic's `image` block (converted once, here).
    let image = match block {
        Block::Other(map) => anthropic_image(map),
        _ => None,
    };
    let refused = match (block, place) {
        (Block::Text { .. }, _) => false,
        (Block::Reasoning { .. }, Place::System | Place::ToolResult) => return None,
        (_, Place::System) => true,
        (Block::ToolUse { .. }, Place::User | Place::ToolResult) => true,
        (Block::ToolResult { .. }, Place::Assistant | Place::ToolResult) => true,
        (Block::Other(map), _) => {
            let kind = image
                .as_ref()
                .and(Some("image"))
                .or_else(|| map.get("type").and_then(Value::as_str))
                .unwrap_or("");
            let known = if place == Place::ToolResult {
                ANTHROPIC_RESULT_TYPES
            } else {
                ANTHROPIC_TYPES
            };
            !known.contains(&kind)
        }
        _ => false,
    };
    if refused {
        return Some(described(block));
    }
    Some(match block {
        // The API refuses an empty text block.
        Block::Text { text, .. } if text.is_empty() => return None,
        Block::Text { text, extra } => object(
            vec![("type", "text".into()), ("text", text.as_str().into())],
            Some(extra),
        ),
        Block::Reasoning { extra, .. }
            if extra.get("signature").and_then(Value::as_str).is_none() =>
        {
            return None
        }
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
                (
                    "input",
                    match input {
                        Value::Object(_) => input.clone(),
                        other => object(vec![("input", other.clone())], None),
                    },
                ),
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
                        ToolContent::Blocks(blocks) => Value::Array(
                            blocks
                                .iter()
                                .filter_map(|b| anthropic_block(b, Place::ToolResult))
                                .collect(),
                        ),
                    },
                ),
                ("is_error", Value::Bool(*is_error)),
            ],
            Some(extra),
        ),
        Block::Other(map) => image.unwrap_or_else(|| Value::Object(map.clone())),
    })
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
