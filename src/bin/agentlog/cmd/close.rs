//! `agentlog close SESSION [--reason KIND]`: close what a crash left open, so the session can go
//! on.

use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::event::ReasonKind;
use agentlog::session::Session;

use agentlog::event::Value;

use crate::cmd::{object, print_json};
use crate::output::{Color, Paint};
use crate::target::Ctx;

/// Close the turn, step and tool calls a crash left open
///
/// Appends the closers of docs/events.md §7 for whatever is open: an error tool/result (error code
/// TOOL_OUTCOME_UNKNOWN) for every tool call of the open turn without a result, then step/end,
/// then turn/end with the given reason; and compact/end (ok: false) for a compaction left open.
/// The derived history is then valid for a provider again (every tool use has its result) and
/// the agent can start a new turn. Prints the events appended; nothing when nothing was open.
/// Needs the session's writer lock.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// The end reason of the closed turn: completed, aborted, blocked, error, max-tokens or
    /// interrupted
    #[arg(
        long,
        default_value = "interrupted",
        value_name = "KIND",
        value_parser = clap::builder::PossibleValuesParser::new(ReasonKind::NAMES)
    )]
    reason: String,
    /// Print one JSON object instead: {"session","appended":[{"seq","type"}],"state"}
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let reason = ReasonKind::from_name(&args.reason).ok_or_else(|| {
        anyhow!(
            "unknown reason {:?}: one of {}",
            args.reason,
            ReasonKind::NAMES.join(", ")
        )
    })?;
    let target = ctx.resolve(&args.session)?;
    let options = target.options()?;
    let session = Session::open(&target.dir, options).map_err(|e| target.error(e))?;
    let seqs = session
        .close_open_work(reason)
        .map_err(|e| target.error(e))?;
    let p = Paint::stdout();
    if args.json {
        let reader = session.reader();
        let mut appended = Vec::new();
        for seq in &seqs {
            let event = reader.get(*seq).map_err(|e| target.error(e))?;
            appended.push(object(vec![
                ("seq", (*seq).into()),
                ("type", event.type_name().into()),
            ]));
        }
        print_json(&object(vec![
            ("session", target.label.as_str().into()),
            ("appended", Value::Array(appended)),
            ("state", session.state().as_str().into()),
        ]))?;
    } else if seqs.is_empty() {
        outln!("{}: nothing was open", target.label)?;
    } else {
        let reader = session.reader();
        for seq in &seqs {
            let event = reader.get(*seq).map_err(|e| target.error(e))?;
            outln!(
                "{} {:>6}  {}",
                p.paint(Color::Green, "appended"),
                seq,
                event.type_name()
            )?;
        }
        outln!(
            "{}: closed; state {}",
            target.label,
            session.state().as_str()
        )?;
    }
    session.close().map_err(|e| target.error(e))?;
    Ok(ExitCode::SUCCESS)
}
