//! `agentlog status SESSION [--json]`: the turn state and what is open.

use std::process::ExitCode;

use anyhow::Result;

use crate::cmd::print_json;
use crate::output::{Color, Paint};
use crate::target::Ctx;

/// Print the turn state and what is open
///
/// The turn state of docs/events.md §7, the open turn and step, unanswered tool calls, pending
/// approvals, the calls whose step ended without a result, and the number of events. --json
/// prints {"state","openTurn","openStep","unansweredCalls":[callId…],"pendingApprovals":[callId…],
/// "closedUnanswered":[callId…],"events","lastTurnEnd":{"turn","reason"}}, with null for what is
/// not open (lastTurnEnd: the last turn that ended and its end reason's kind, null before one
/// has).
///
/// It reads the session's checkpoint and the events after it, not the rest of the log: damage
/// there (a segment missing, a record that does not check) is found by the commands that read
/// it and by `agentlog verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    let lifecycle = reader.lifecycle().map_err(|e| target.error(e))?;
    let state = lifecycle.state();
    let work = lifecycle.open_work();
    let closed = lifecycle.closed_unanswered();
    let events = reader.len();
    if args.json {
        print_json(&lifecycle.status_json(events))?;
        return Ok(ExitCode::SUCCESS);
    }
    let p = Paint::stdout();
    let state_color = match state.as_str() {
        "idle" => Color::Green,
        "awaitUserConfirm" => Color::Yellow,
        _ => Color::Cyan,
    };
    outln!("session      {}", reader.meta().id)?;
    let mut state_line = p.paint(state_color, state.as_str());
    if let (None, Some((turn, reason))) = (work.turn, lifecycle.last_end()) {
        let error = last_end_error(&reader, turn)
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        state_line.push_str(&format!(" (turn {turn} ended: {}{error})", reason.as_str()));
    }
    outln!("state        {state_line}")?;
    outln!("events       {events}")?;
    match work.turn {
        Some((turn, seq)) => outln!("open turn    {turn} (since seq {seq})")?,
        None => outln!("open turn    -")?,
    }
    match work.step {
        Some((step, seq)) => outln!("open step    {step} (since seq {seq})")?,
        None => outln!("open step    -")?,
    }
    if work.unanswered_calls.is_empty() {
        outln!("unanswered   -")?;
    } else {
        for (i, c) in work.unanswered_calls.iter().enumerate() {
            outln!(
                "{}{} {} (step {}, seq {})",
                if i == 0 {
                    "unanswered   "
                } else {
                    "             "
                },
                p.paint(Color::Yellow, &c.call_id),
                c.name,
                c.step,
                c.seq
            )?;
        }
    }
    for (i, c) in closed.iter().enumerate() {
        outln!(
            "{}{} {} (step {}, seq {}): its step ended without a result; renderings answer \
             it with TOOL_OUTCOME_UNKNOWN",
            if i == 0 {
                "no result    "
            } else {
                "             "
            },
            p.paint(Color::Yellow, &c.call_id),
            c.name,
            c.step,
            c.seq
        )?;
    }
    if work.pending_approvals.is_empty() {
        outln!("approvals    -")?;
    } else {
        outln!(
            "approvals    {} awaiting a decision",
            p.paint(Color::Yellow, &work.pending_approvals.join(", "))
        )?;
    }
    if let Some(seq) = work.compaction {
        outln!(
            "compaction   {} since seq {seq} (no compact/end)",
            p.paint(Color::Yellow, "open")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How far back from the end `status` looks for the last turn's `turn/end` (an idle session's
/// is among its last events).
const END_LOOKBACK: u64 = 10_000;

/// The error of turn `turn`'s `turn/end` (`code: message`, or one of them), when it has one
/// and is among the last [`END_LOOKBACK`] events.
fn last_end_error(reader: &agentlog::session::SessionReader, turn: u64) -> Option<String> {
    use agentlog::event::EventData;
    let len = reader.len();
    for seq in (len.saturating_sub(END_LOOKBACK)..len).rev() {
        let Ok(event) = reader.get_owned(seq) else {
            return None;
        };
        let EventData::TurnEnd(end) = event.data else {
            continue;
        };
        if end.turn != turn {
            return None;
        }
        let error = end.reason.error.present()?;
        let parts: Vec<&str> = [error.code.present(), error.message.present()]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        return (!parts.is_empty()).then(|| parts.join(": "));
    }
    None
}
