//! `agentlog fork SESSION (--at N | --turn T) [--id NEW]`: a new session holding the first
//! events of another.

use std::process::ExitCode;

use anyhow::Result;

use agentlog::store::ForkPoint;

use crate::cmd::{object, print_json};
use crate::target::{explain, Ctx};

/// Fork a session: a new session holding its first events
///
/// The new session holds the first N events (--at N), or every event through the end of turn T
/// (--turn T), with parentSession and seedLength recorded in its header; the parent is never
/// changed. Sealed segments are shared through hard links, so a fork costs about one segment's
/// copy whatever the parent's size. The new session is created in the store; its id (--id, else
/// a new one) is printed alone on stdout.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("point").required(true).args(["at", "turn"])))]
pub struct Args {
    /// The session to fork: an id in the store, or a session directory
    session: String,
    /// Fork after the first N events (seqs 0..N)
    #[arg(long, value_name = "N")]
    at: Option<u64>,
    /// Fork through the turn/end of turn T
    #[arg(long, value_name = "T")]
    turn: Option<u64>,
    /// The new session's id (default: a new unique, time-sortable id)
    #[arg(long, value_name = "NEW")]
    id: Option<String>,
    /// Print one JSON object instead: {"id","parentSession","seedLength"}
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    if let Some(id) = &args.id {
        // The new session's id: its error is not the source session's.
        agentlog::session::validate_id(id).map_err(|e| anyhow::anyhow!("--id: {e}"))?;
    }
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    let point = match (args.at, args.turn) {
        (Some(n), _) => ForkPoint::At(n),
        (None, Some(t)) => ForkPoint::Turn(t),
        // clap requires one of the two.
        (None, None) => return Err(anyhow::anyhow!("give --at N or --turn T")),
    };
    let store = ctx.open_store()?;
    let report = store
        .fork_from(&reader, point, args.id)
        .map_err(|e| explain(e, &target.label))?;
    if args.json {
        print_json(&object(vec![
            ("id", report.id.as_str().into()),
            ("parentSession", reader.meta().id.as_str().into()),
            ("seedLength", report.events.into()),
        ]))?;
    } else {
        outln!("{}", report.id)?;
    }
    Ok(ExitCode::SUCCESS)
}
