//! `agentlog derive SESSION [--at SEQ] [--format neutral|openai|anthropic]`.

use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::event::Block;
use agentlog::projection::{render, Format, Role};

use crate::cmd::print_json;
use crate::target::Ctx;

/// Print the model-visible history as JSON
///
/// The projection of docs/events.md §5, as one line of JSON. neutral: an array of
/// {"role","content"} messages (the *.messages.json shape); openai: the chat completions "messages"
/// array; anthropic: {"system","messages"} ("system" left out when there is no system message).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// The history when the log held N events (events with seq < N); default: all of them
    #[arg(long, value_name = "N")]
    at: Option<u64>,
    /// The shape of the output
    #[arg(long, value_enum, default_value_t = FormatArg::Neutral)]
    format: FormatArg,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    Neutral,
    Openai,
    Anthropic,
}

/// How the library's stand-in for a message whose event cannot be read starts
/// (docs/design.md, "Checkpoints").
const STAND_IN: &str = "agentlog: the message of the event at seq ";

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    let n = match args.at {
        Some(at) if at > reader.len() => {
            return Err(anyhow!(
                "--at {at}: session {} holds {} events",
                target.label,
                reader.len()
            ))
        }
        Some(at) => at,
        None => reader.len(),
    };
    let messages = reader.messages_at(n).map_err(|e| target.error(e))?;
    // A message whose event can no longer be read (the log was damaged after the checkpoint
    // was written) is a stand-in in the library, which cannot fail the read; here it is the
    // damage, named, and no history is printed.
    for m in messages.iter() {
        let stand_in = m.role == Role::System
            && matches!(m.content.first(), Some(Block::Text { text, .. }) if text.starts_with(STAND_IN));
        if stand_in {
            if let Err(e) = reader.get(m.source_seq) {
                return Err(target.error(e));
            }
        }
    }
    let format = match args.format {
        FormatArg::Neutral => Format::Neutral,
        FormatArg::Openai => Format::OpenAi,
        FormatArg::Anthropic => Format::Anthropic,
    };
    print_json(&render(format, &messages))?;
    Ok(ExitCode::SUCCESS)
}
