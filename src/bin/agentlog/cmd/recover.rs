//! `agentlog recover SESSION [--salvage]`: open for writing after a crash and report what was
//! cut.

use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::log::{self, DamageClass, RecoveryMode};
use agentlog::session::Session;

use crate::output::{Color, Paint};
use crate::target::Ctx;

/// Repair a session after a crash, reporting exactly what was cut
///
/// By default only a torn tail is cut (an incomplete last record, which a crash in the middle
/// of an append leaves; no acknowledged event is lost). Damage a crash cannot explain (a complete
/// record that fails its checksum, damage in a sealed segment) is refused; --salvage keeps every
/// valid event before the damage and cuts the rest, keeping the cut files in the session's
/// damaged/ folder. Then the session is closed cleanly. Needs the session's writer lock.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Cut everything from the first damaged record on (kept in damaged/)
    #[arg(long)]
    salvage: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let p = Paint::stdout();
    let target = ctx.resolve(&args.session)?;
    let mut options = target.options()?;
    options.log.recovery = if args.salvage {
        RecoveryMode::Salvage
    } else {
        RecoveryMode::TolerateTornTail
    };
    let (session, report) = Session::open(&target.dir, options).map_err(|e| match e {
        agentlog::Error::Log(log::Error::Corrupt(c)) if !args.salvage => anyhow!(
            "session {} is damaged where a crash cannot explain it: {c}; nothing was changed. \
             `agentlog recover --salvage {}` keeps every valid event before the damage and \
             moves the rest to its damaged/ folder",
            target.label,
            target.label
        ),
        other => target.error(other),
    })?;
    let log = &report.log;
    outln!("{}: {log}", target.label)?;
    match &log.cut {
        None => outln!("  nothing was cut")?,
        Some(cut) => {
            let what = match cut.class {
                DamageClass::TornTail => "torn tail",
                DamageClass::Corruption => "damage",
            };
            outln!(
                "  {} {what} in {} at byte offset {}",
                p.paint(Color::Yellow, "cut:"),
                cut.at.path.display(),
                cut.at.offset
            )?;
            outln!(
                "    from seq {} on, {} byte(s): {}",
                cut.first_lost_seq,
                cut.bytes,
                cut.at.kind
            )?;
            for seg in &cut.dropped_segments {
                outln!("    later segment moved to damaged/: {}", seg.display())?;
            }
            for copy in &cut.kept_copies {
                outln!("    copy of the damaged segment kept: {}", copy.display())?;
            }
        }
    }
    for idx in &log.indexes_rebuilt {
        outln!("  index rebuilt: {}", idx.display())?;
    }
    for f in &log.removed {
        outln!("  removed a file a crashed writer left: {}", f.display())?;
    }
    outln!("  {} event(s) now, turn state {}", log.events, report.state)?;
    let work = &report.open_work;
    if let Some((turn, _)) = work.turn {
        outln!(
            "  turn {turn} is still open{}{}: `agentlog close {}` closes it (an agent resuming \
             the session may do it itself: Session::close_open_work)",
            work.step
                .map(|(s, _)| format!(", step {s}"))
                .unwrap_or_default(),
            match work.unanswered_calls.len() {
                0 => String::new(),
                n => format!(", {n} tool call(s) without a result"),
            },
            target.label
        )?;
    }
    if !report.violations.is_empty() {
        outln!(
            "  {} the stored events break {} lifecycle rule(s) (first: {})",
            p.paint(Color::Red, "warning:"),
            report.violations.len(),
            report.violations[0]
        )?;
    }
    session.close().map_err(|e| target.error(e))?;
    Ok(ExitCode::SUCCESS)
}
