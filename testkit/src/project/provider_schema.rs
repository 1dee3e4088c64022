//! The providers' request shapes as typed structs with `deny_unknown_fields`, after the published
//! OpenAI chat-completions `messages` and Anthropic messages API (`system`, `messages`), plus the
//! ordering rules both state: every tool call is answered by the next messages, and every result
//! answers a call just made.
#![allow(dead_code)]

use std::collections::HashSet;

use serde::Deserialize;

/// `value` as a serde_json value to deserialize the typed structs from; numbers (which may be
/// out of f64's range, `1E+400`, and are kept as text) become 0: only their type matters here.
fn to_serde(value: &agentlog::event::Value) -> serde_json::Value {
    use agentlog::event::Value;
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Number(_) => serde_json::Value::from(0),
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Array(items) => serde_json::Value::Array(items.iter().map(to_serde).collect()),
        Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| (k.to_owned(), to_serde(v)))
                .collect(),
        ),
    }
}

// ---------------------------------------------------------------- OpenAI chat completions

#[derive(Deserialize, Debug)]
#[serde(tag = "role", rename_all = "lowercase", deny_unknown_fields)]
enum ChatMessage {
    System {
        content: TextContent,
        #[serde(default)]
        name: Option<String>,
    },
    User {
        content: UserContent,
        #[serde(default)]
        name: Option<String>,
    },
    Assistant {
        #[serde(default)]
        content: Option<AssistantContent>,
        #[serde(default)]
        tool_calls: Option<Vec<ToolCall>>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        refusal: Option<String>,
    },
    Tool {
        content: TextContent,
        tool_call_id: String,
    },
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum TextContent {
    Text(String),
    Parts(Vec<TextPart>),
}

#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum TextPart {
    Text { text: String },
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum UserContent {
    Text(String),
    Parts(Vec<UserPart>),
}

#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum UserPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    InputAudio { input_audio: InputAudio },
    File { file: FileRef },
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ImageUrl {
    url: String,
    #[serde(default)]
    detail: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct InputAudio {
    data: String,
    format: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileRef {
    #[serde(default)]
    file_data: Option<String>,
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    filename: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum AssistantContent {
    Text(String),
    Parts(Vec<AssistantPart>),
}

#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum AssistantPart {
    Text { text: String },
    Refusal { refusal: String },
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ToolCall {
    id: String,
    #[serde(rename = "type")]
    kind: FunctionType,
    function: Function,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "lowercase")]
enum FunctionType {
    Function,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Function {
    name: String,
    arguments: String,
}

/// Checks an OpenAI `messages` array: the shapes, and that every assistant `tool_calls` entry is
/// answered by the `tool` messages right after it, each answering one of them.
pub fn check_openai(value: &agentlog::event::Value) -> Result<(), String> {
    let messages: Vec<ChatMessage> = serde_json::from_value(to_serde(value))
        .map_err(|e| format!("openai shape: {e}: {value}"))?;
    let mut pending: Option<HashSet<String>> = None;
    for (i, m) in messages.iter().enumerate() {
        match m {
            ChatMessage::Tool { tool_call_id, .. } => {
                let open = pending
                    .as_mut()
                    .ok_or_else(|| format!("message {i}: a tool message after no tool call"))?;
                if !open.remove(tool_call_id) {
                    return Err(format!(
                        "message {i}: tool_call_id {tool_call_id:?} answers no open tool call"
                    ));
                }
            }
            other => {
                if let Some(open) = &pending {
                    if !open.is_empty() {
                        return Err(format!(
                            "message {i}: tool calls {open:?} have no tool message"
                        ));
                    }
                }
                pending = match other {
                    ChatMessage::Assistant {
                        tool_calls: Some(calls),
                        ..
                    } => Some(calls.iter().map(|c| c.id.clone()).collect()),
                    _ => None,
                };
            }
        }
    }
    match pending {
        Some(open) if !open.is_empty() => {
            // The last assistant message's calls may be in flight (an open step).
            Ok(())
        }
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------- Anthropic messages

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct AnthropicRequest {
    #[serde(default)]
    system: Option<SystemContent>,
    messages: Vec<AnthropicMessage>,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum SystemContent {
    Text(String),
    Blocks(Vec<SystemBlock>),
}

#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum SystemBlock {
    Text {
        text: String,
        #[serde(default)]
        cache_control: Option<serde_json::Value>,
        #[serde(default)]
        citations: Option<serde_json::Value>,
    },
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct AnthropicMessage {
    role: AnthropicRole,
    content: AnthropicContent,
}

#[derive(Deserialize, Debug, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum AnthropicRole {
    User,
    Assistant,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum AnthropicContent {
    Text(String),
    Blocks(Vec<AnthropicBlock>),
}

#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum AnthropicBlock {
    Text {
        text: String,
        #[serde(default)]
        cache_control: Option<serde_json::Value>,
        #[serde(default)]
        citations: Option<serde_json::Value>,
    },
    Image {
        source: serde_json::Value,
        #[serde(default)]
        cache_control: Option<serde_json::Value>,
    },
    Document {
        source: serde_json::Value,
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        context: Option<String>,
        #[serde(default)]
        citations: Option<serde_json::Value>,
        #[serde(default)]
        cache_control: Option<serde_json::Value>,
    },
    ToolUse {
        id: String,
        name: String,
        input: serde_json::Map<String, serde_json::Value>,
        #[serde(default)]
        cache_control: Option<serde_json::Value>,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<ToolResultContent>,
        #[serde(default)]
        is_error: Option<bool>,
        #[serde(default)]
        cache_control: Option<serde_json::Value>,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum ToolResultContent {
    Text(String),
    Blocks(Vec<AnthropicBlock>),
}

/// Checks an Anthropic request body: the shapes; roles alternating, the first a user message;
/// no empty content; in a user message the tool results first, each answering a `tool_use` of
/// the assistant message just before; every `tool_use` answered in the next user message (but
/// those of the last assistant message, which may be in flight: while nothing follows it or
/// only some of their results).
pub fn check_anthropic(value: &agentlog::event::Value) -> Result<(), String> {
    let request: AnthropicRequest = serde_json::from_value(to_serde(value))
        .map_err(|e| format!("anthropic shape: {e}: {value}"))?;
    let mut previous: Option<AnthropicRole> = None;
    let mut open: HashSet<String> = HashSet::new();
    let count = request.messages.len();
    for (i, m) in request.messages.iter().enumerate() {
        if previous == Some(m.role) {
            return Err(format!("message {i}: two {:?} messages in a row", m.role));
        }
        if previous.is_none() && m.role != AnthropicRole::User {
            return Err("the first message is not a user message".into());
        }
        previous = Some(m.role);
        let blocks: &[AnthropicBlock] = match &m.content {
            AnthropicContent::Text(t) if t.is_empty() => {
                return Err(format!("message {i}: empty content"))
            }
            AnthropicContent::Text(_) => &[],
            AnthropicContent::Blocks(b) if b.is_empty() => {
                return Err(format!("message {i}: empty content"))
            }
            AnthropicContent::Blocks(b) => b,
        };
        match m.role {
            AnthropicRole::User => {
                let mut results_done = false;
                for b in blocks {
                    match b {
                        AnthropicBlock::ToolResult { tool_use_id, .. } => {
                            if results_done {
                                return Err(format!(
                                    "message {i}: a tool_result after other content"
                                ));
                            }
                            if !open.remove(tool_use_id) {
                                return Err(format!(
                                    "message {i}: tool_result {tool_use_id:?} answers no tool_use of the message before"
                                ));
                            }
                        }
                        _ => results_done = true,
                    }
                }
                // The last message holding only results may leave calls of the message
                // before in flight (an open step whose tools still run), as for OpenAI.
                let in_flight = i + 1 == count && !results_done;
                if !open.is_empty() && !in_flight {
                    return Err(format!(
                        "message {i}: tool_use {open:?} without a tool_result"
                    ));
                }
            }
            AnthropicRole::Assistant => {
                if !open.is_empty() {
                    return Err(format!(
                        "message {i}: tool_use {open:?} without a tool_result"
                    ));
                }
                for b in blocks {
                    if let AnthropicBlock::ToolUse { id, .. } = b {
                        open.insert(id.clone());
                    }
                }
            }
        }
    }
    Ok(())
}
