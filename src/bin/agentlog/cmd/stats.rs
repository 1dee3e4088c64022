//! `agentlog stats SESSION|--all [--json]`: statistics of a session, or summed over the store.
//! The computation is the library's ([`SessionStats`]); this prints it.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;

use agentlog::session::{Durations, SessionStats};

use crate::cmd::print_json;
use crate::output::size;
use crate::target::Ctx;

/// Print statistics of a session, or of every session
///
/// Events per type; turns, their end reasons and durations; steps; tokens (input, output,
/// cache read and write, reasoning; over assistant messages and compaction summaries); tool
/// calls, errors (results with isError), failure rate and call-to-result latency per tool;
/// bytes on disk. --all sums every session of the store (medians over all of its samples).
/// --json prints one object: {"events","byType":{TYPE:n},"turns","endReasons":{KIND:n},
/// "turnDurationMs":{"median","max"},"steps",
/// "tokens":{"input","output","cacheRead","cacheWrite","reasoning"},"tools":{NAME:{"calls",
/// "errors","failureRate","latencyMs":{"median","max"}}},"unansweredCalls","bytes"}, with a last member
/// "sessions" for --all. With --all, a session that cannot be read (damaged) is named on stderr
/// and left out of the sums, and the exit code is 1.
///
/// The counters start from the session's checkpoint (docs/design.md) and only the events after
/// it are counted; every record is still read and its checksum checked, so damage is found.
#[derive(Debug, clap::Args)]
// One of SESSION and --all: the usage line and a usage error say so.
#[command(group(clap::ArgGroup::new("which").required(true).args(["session", "all"])))]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: Option<String>,
    /// Sum over every session of the store (deleted ones excepted)
    #[arg(long)]
    all: bool,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let mut failed = false;
    match &args.session {
        Some(session) => {
            let target = ctx.resolve(session)?;
            let stats = target.reader()?.stats().map_err(|e| target.error(e))?;
            if args.json {
                print_json(&stats.to_json())?;
            } else {
                out!("{}", text(&stats, None))?;
            }
        }
        None => {
            ctx.require()?;
            let store = ctx.open_store()?;
            // A session that cannot be read is reported and left out of the sums.
            let mut skipped = Vec::new();
            let all = store
                .stats_skipping(|id, e| {
                    skipped.push((id.to_string(), e));
                    Ok(())
                })
                .map_err(|e| ctx.error("cannot read store", e))?;
            failed = super::search::report_skipped(skipped);
            if args.json {
                print_json(&all.to_json())?;
            } else {
                out!("{}", text(&all.total, Some(all.sessions)))?;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Milliseconds for people: `850 ms`, `12.5 ms`, `3.2 s`, `2m 05s`, `1h 02m`.
fn ms(v: f64) -> String {
    let neg = if v < 0.0 { "-" } else { "" };
    let a = v.abs();
    let body = if a < 1000.0 {
        if a.fract() == 0.0 {
            format!("{a:.0} ms")
        } else {
            format!("{a:.1} ms")
        }
    } else if a < 60_000.0 {
        format!("{:.1} s", a / 1000.0)
    } else if a < 3_600_000.0 {
        let s = (a / 1000.0).round() as u64;
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        let m = (a / 60_000.0).round() as u64;
        format!("{}h {:02}m", m / 60, m % 60)
    };
    format!("{neg}{body}")
}

/// `median X, max Y` of samples, or `-`.
fn spread(d: &Durations) -> (String, String) {
    match (d.median(), d.max()) {
        (Some(median), Some(max)) => (ms(median), ms(max as f64)),
        _ => ("-".into(), "-".into()),
    }
}

/// The human report.
fn text(s: &SessionStats, sessions: Option<u64>) -> String {
    let mut o = String::new();
    // Writing to a String cannot fail.
    if let Some(n) = sessions {
        let _ = writeln!(o, "sessions {n}");
    }
    let _ = writeln!(o, "events   {}", s.events);
    for (t, n) in &s.by_type {
        let _ = writeln!(o, "  {t:<24} {n:>8}");
    }
    let _ = writeln!(o, "turns    {}", s.turns);
    for (r, n) in &s.end_reasons {
        let _ = writeln!(o, "  {r:<24} {n:>8}");
    }
    if !s.turn_durations.is_empty() {
        let (median, max) = spread(&s.turn_durations);
        let _ = writeln!(o, "  duration: median {median}, max {max}");
    }
    let _ = writeln!(o, "steps    {}", s.steps);
    let t = &s.tokens;
    let _ = writeln!(
        o,
        "tokens   {} in, {} out, {} cache read, {} cache write, {} reasoning",
        t.input, t.output, t.cache_read, t.cache_write, t.reasoning
    );
    if s.unanswered_calls > 0 {
        let _ = writeln!(
            o,
            "unanswered calls {} (their step ended without a result; renderings answer them \
             with TOOL_OUTCOME_UNKNOWN)",
            s.unanswered_calls
        );
    }
    let _ = writeln!(o, "bytes    {} ({})", s.bytes, size(s.bytes));
    if !s.tools.is_empty() {
        let width = s
            .tools
            .keys()
            .map(|k| k.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        let _ = writeln!(
            o,
            "tools\n  {:<width$} {:>6} {:>6} {:>6} {:>10} {:>10}",
            "NAME", "CALLS", "ERRORS", "RATE", "MEDIAN", "MAX"
        );
        for (name, st) in &s.tools {
            let rate = if st.calls == 0 {
                "-".to_string()
            } else {
                format!("{:.0}%", 100.0 * st.failure_rate())
            };
            let (median, max) = spread(&st.latency);
            let _ = writeln!(
                o,
                "  {name:<width$} {:>6} {:>6} {rate:>6} {median:>10} {max:>10}",
                st.calls, st.errors
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_for_people() {
        assert_eq!(ms(850.0), "850 ms");
        assert_eq!(ms(12.5), "12.5 ms");
        assert_eq!(ms(3_240.0), "3.2 s");
        assert_eq!(ms(125_000.0), "2m 05s");
        assert_eq!(ms(3_720_000.0), "1h 02m");
        assert_eq!(ms(-40.0), "-40 ms");
    }
}
