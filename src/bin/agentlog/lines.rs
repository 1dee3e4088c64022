//! One event as one line of text, for `show`, `tail` and `search`: seq, local time, type (in
//! its color) and a short summary of the payload.

use agentlog::event::{Block, Chunk, Event, EventData, SurfaceOp, ToolContent, Value};

use crate::output::{event_time, one_line, Color, Paint};

/// `SEQ TIME INDENT TYPE SUMMARY`: the seq right-aligned in 6 columns, the local time
/// (`HH:MM:SS.mmm`, with the date when `date`), two spaces per `depth`, the type padded to 17
/// columns, the summary.
pub fn event_line(p: Paint, e: &Event, date: bool, depth: usize, answers: Pairing<'_>) -> String {
    let mut line = format!(
        "{} {} {}{}",
        p.paint(Color::Dim, &format!("{:>6}", e.seq)),
        p.paint(Color::Dim, &event_time(e.time, date)),
        "  ".repeat(depth),
        p.paint(type_color(e), &format!("{:<17}", e.type_name())),
    );
    let summary = summary(e, answers, p);
    if !summary.is_empty() {
        line.push(' ');
        line.push_str(&summary);
    }
    line
}

/// The color of an event's type.
pub fn type_color(e: &Event) -> Color {
    match &e.data {
        EventData::TurnStart(_) | EventData::TurnEnd(_) => Color::Magenta,
        EventData::StepStart(_) | EventData::StepEnd(_) => Color::Blue,
        EventData::UserMessage(_) => Color::Green,
        EventData::AssistantMessage(_) => Color::Cyan,
        EventData::AssistantChunk(_) => Color::Dim,
        EventData::ToolCall(_) => Color::Yellow,
        EventData::ToolResult(d) if d.message.is_error => Color::Red,
        EventData::ToolResult(_) => Color::Yellow,
        EventData::SystemMessage(_) => Color::Magenta,
        EventData::ApprovalRequest(_) | EventData::ApprovalDecision(_) => Color::Yellow,
        EventData::Error(_) => Color::Red,
        EventData::CompactStart(_) | EventData::CompactSummary(_) | EventData::CompactEnd(_) => {
            Color::Blue
        }
        EventData::SandboxEvent(_) | EventData::Unknown(_) => Color::Dim,
    }
}

const TEXT: usize = 80;
const ARGS: usize = 60;

/// The blocks of a message as one short line.
fn blocks_text(blocks: &[Block]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .map(|b| match b {
            Block::Text { text, .. } => text.clone(),
            Block::Reasoning { text, .. } => format!("(thinking) {text}"),
            Block::ToolUse { id, name, .. } => format!("[tool_use {id} {name}]"),
            Block::ToolResult { tool_use_id, .. } => format!("[tool_result {tool_use_id}]"),
            Block::Other(_) => format!("[{}]", b.type_name()),
        })
        .collect();
    one_line(&parts.join(" "), TEXT)
}

/// The first `max` characters of `text`, as they are (shown quoted and escaped).
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

fn content_text(c: &ToolContent) -> String {
    match c {
        ToolContent::Text(s) => one_line(s, ARGS),
        ToolContent::Blocks(b) => one_line(&blocks_text(b), ARGS),
    }
}

/// What is known of the call a tool result answers.
#[derive(Debug, Clone, Copy)]
pub enum Pairing<'a> {
    /// The call was found: its `callId` and tool (`↳ CALL_ID TOOL`).
    Call(&'a str, &'a str),
    /// The call was looked for and not found: the result's own `callId`, or `?`.
    NotFound,
    /// Not looked for: the result's own `callId`, if it has one, and its tool.
    Unknown,
}

/// A short summary of the payload: the first characters of the text, the tool's name and
/// arguments, the end reason, …
pub fn summary(e: &Event, answers: Pairing<'_>, p: Paint) -> String {
    let mut s = match &e.data {
        EventData::TurnStart(d) => format!("turn {}", d.turn),
        EventData::TurnEnd(d) => {
            let kind = d.reason.kind.as_str();
            let color = if kind == "completed" {
                Color::Green
            } else {
                Color::Red
            };
            let mut s = format!("turn {} {}", d.turn, p.paint(color, kind));
            if let Some(err) = d.reason.error.present() {
                let msg = err.message.present().or(err.code.present());
                if let Some(m) = msg {
                    s.push_str(&format!(": {}", one_line(m, TEXT)));
                }
            }
            s
        }
        EventData::StepStart(d) => {
            let mut s = format!("turn {} step {}", d.turn, d.step);
            if let Some(model) = d
                .request
                .present()
                .and_then(|r| r.get("model"))
                .and_then(Value::as_str)
            {
                s.push_str(&format!(
                    " {}",
                    p.paint(Color::Dim, &format!("model={model}"))
                ));
            }
            s
        }
        EventData::StepEnd(d) => format!("turn {} step {}", d.turn, d.step),
        EventData::UserMessage(d) => blocks_text(&d.content),
        EventData::SystemMessage(d) => blocks_text(&d.content),
        EventData::AssistantMessage(d) => {
            let mut s = if d.message.content.is_empty() {
                p.paint(Color::Dim, "(empty)")
            } else {
                blocks_text(&d.message.content)
            };
            if let Some(u) = d.usage.present() {
                s.push_str(&format!(
                    " {}",
                    p.paint(
                        Color::Dim,
                        &format!("[{} in, {} out tokens]", u.input_tokens, u.output_tokens)
                    )
                ));
            }
            s
        }
        EventData::AssistantChunk(d) => match &d.chunk {
            Chunk::TextDelta { text, .. } => format!("{:?}", cut(text, TEXT)),
            Chunk::ReasoningDelta { text, .. } => format!("(thinking) {:?}", cut(text, TEXT)),
            Chunk::ToolCallDelta {
                id,
                name,
                arguments,
                ..
            } => [id.present(), name.present(), arguments.present()]
                .into_iter()
                .flatten()
                .map(|s| one_line(s, ARGS))
                .collect::<Vec<_>>()
                .join(" "),
            Chunk::Other(_) => format!("[{}]", d.chunk.type_name()),
        },
        EventData::ToolCall(d) => format!(
            "{} {} {}",
            d.name,
            one_line(&d.arguments, ARGS),
            p.paint(Color::Yellow, &format!("→ {}", d.call_id))
        ),
        EventData::ToolResult(d) => {
            let tool = &d.message.tool_name;
            let pair = match (answers, d.call_id.present()) {
                (Pairing::Call(id, name), _) => format!("↳ {id} {name}"),
                (_, Some(id)) => format!("↳ {id} {tool}"),
                (Pairing::NotFound, None) => format!("↳ ? {tool}"),
                (Pairing::Unknown, None) => format!("↳ {tool}"),
            };
            let mut s = format!(
                "{}: {}",
                p.paint(Color::Yellow, &pair),
                content_text(&d.message.content)
            );
            if d.message.is_error {
                s.push_str(&format!(" {}", p.paint(Color::Red, "(error)")));
            }
            s
        }
        EventData::ApprovalRequest(d) => {
            let mut s = format!("{} {}", d.call_id, d.tool);
            if let Some(r) = d.reason.present() {
                s.push_str(&format!(": {}", one_line(r, TEXT)));
            }
            s
        }
        EventData::ApprovalDecision(d) => {
            let color = match d.decision.as_str() {
                "approved" => Color::Green,
                _ => Color::Red,
            };
            let mut s = format!("{} {}", d.call_id, p.paint(color, d.decision.as_str()));
            if let Some(by) = d.by.present() {
                s.push_str(&format!(" by {by}"));
            }
            if let Some(n) = d.note.present() {
                s.push_str(&format!(": {}", one_line(n, TEXT)));
            }
            s
        }
        EventData::SandboxEvent(d) => {
            let mut s = d.kind.clone();
            if let Some(detail) = d.detail.present() {
                s.push_str(&format!(" {}", one_line(&detail.to_string(), TEXT)));
            }
            s
        }
        EventData::Error(d) => one_line(&d.message, TEXT),
        EventData::CompactStart(d) => format!("seqs {}..{}", d.start_seq, d.end_seq),
        EventData::CompactSummary(d) => format!(
            "seqs {}..{}: {}",
            d.start_seq,
            d.end_seq,
            one_line(&d.summary, TEXT)
        ),
        EventData::CompactEnd(d) => if d.ok { "ok" } else { "failed" }.to_string(),
        EventData::Unknown(u) => one_line(&Value::Object(u.data.clone()).to_string(), TEXT),
    };
    if let Some(SurfaceOp::Replace {
        start_seq, end_seq, ..
    }) = &e.surface_op
    {
        s.push_str(&format!(
            " {}",
            p.paint(
                Color::Blue,
                &format!("[replaces seqs {start_seq}..{end_seq}]")
            )
        ));
    }
    s
}
