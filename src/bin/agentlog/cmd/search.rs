//! `agentlog search`: the events that match filters, across the store or in some sessions.

use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::process::ExitCode;

use anyhow::Result;

use agentlog::event::archived::ArchivedEvent;
use agentlog::event::{decode_event, Value};
use agentlog::session::{SearchStats, SessionReader, SessionState};
use agentlog::store::Query;

use crate::lines::{self, Pairing};
use crate::output::{local_to_ms, stderr_is_terminal, Color, Paint};
use crate::target::{explain, Ctx};

/// Search the events of the store (or of some sessions)
///
/// Prints the events that match every filter given (the --type values: any of them), sessions
/// in id order, events in seq order: one line per event (session id, seq, local date and time,
/// type, a short summary), or with --json one {"session":ID,"event":EVENT} per line, EVENT in
/// canonical form. --tool NAME selects the tool/call, tool/result, approval/request and
/// approval/decision events of that tool. --turn N selects the events from turn N's turn/start
/// to its turn/end. --since is inclusive, --until exclusive. --text looks, ignoring case, in the
/// text and reasoning of user, assistant and system messages, the string values of their
/// tool_use inputs, tool/call arguments and tool/result output. The exit code is 0 whether or
/// not anything matched. Searching the whole store, a session that cannot be read (damaged) is
/// named on stderr and skipped, the others are searched, and the exit code is 1.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this session (an id in the store, or a session directory; a deleted one is read
    /// until `gc`, as `show` reads it); repeat for several
    #[arg(long = "session", value_name = "ID")]
    sessions: Vec<String>,
    /// Only events of this type: a type (tool/call), a domain (tool or tool/*) or * for all;
    /// repeat or separate with commas
    #[arg(long = "type", value_name = "T", value_delimiter = ',',
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    types: Vec<String>,
    /// Only the calls, results and approvals of this tool
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// Only the events of turn N (from its turn/start to its turn/end)
    #[arg(long, value_name = "N")]
    turn: Option<u64>,
    /// Only events at or after TIME: epoch milliseconds, RFC 3339 (2025-08-12T09:30:00Z), or a
    /// local date or date-time (2025-08-12, 2025-08-12T09:30)
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_hyphen_values = true)]
    since: Option<i64>,
    /// Only events before TIME (same forms as --since)
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_hyphen_values = true)]
    until: Option<i64>,
    /// Only events whose text contains STR, ignoring case
    #[arg(long, value_name = "STR", allow_hyphen_values = true)]
    text: Option<String>,
    /// At most N events
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print {"session":ID,"event":EVENT} lines instead
    #[arg(long)]
    json: bool,
}

/// `--since` / `--until`: epoch milliseconds, an RFC 3339 timestamp, or a local date or
/// date-time.
fn parse_time(text: &str) -> std::result::Result<i64, String> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Ok(ts.as_millisecond());
    }
    let local = text.parse::<jiff::civil::DateTime>().ok().or_else(|| {
        text.parse::<jiff::civil::Date>()
            .ok()
            .map(|d| d.to_datetime(jiff::civil::Time::midnight()))
    });
    match local.and_then(local_to_ms) {
        Some(ms) => Ok(ms),
        None => Err(format!(
            "{text:?} is not a time: expected epoch milliseconds (1755000000000), an RFC 3339 \
             time (2025-08-12T09:30:00Z, 2025-08-12T11:30:00+02:00), or a local date or \
             date-time (2025-08-12, 2025-08-12T09:30)"
        )),
    }
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let mut query = Query::new();
    for t in &args.types {
        query = query.event_type(t);
    }
    if let Some(tool) = &args.tool {
        query = query.tool(tool.as_str());
    }
    if let Some(turn) = args.turn {
        query = query.turn(turn);
    }
    if let Some(ms) = args.since {
        query = query.since(ms);
    }
    if let Some(ms) = args.until {
        query = query.until(ms);
    }
    if let Some(text) = &args.text {
        query = query.text(text);
    }
    if let Some(n) = args.limit {
        query = query.limit(n);
    }

    let mut printer = Printer {
        out: BufWriter::with_capacity(1 << 16, std::io::stdout().lock()),
        paint: Paint::stdout(),
        json: args.json,
        failed: None,
        width: 0,
    };
    let mut failed = false;
    let stats = if args.sessions.is_empty() {
        ctx.require()?;
        let store = ctx.open_store()?;
        printer.width = store
            .ids(agentlog::store::Deleted::Skip)
            .map_err(|e| ctx.error("cannot list store", e))?
            .iter()
            .map(|id| id.chars().count())
            .max()
            .unwrap_or(0);
        // A session that cannot be read is reported and skipped: the others are still searched.
        let mut skipped = Vec::new();
        let result = store.search_skipping(
            &query,
            |id, e| printer.print(id, e),
            |id, e| {
                skipped.push((id.to_string(), e));
                Ok(())
            },
        );
        printer.finish()?;
        let stats = result.map_err(|e| ctx.error("cannot search store", e))?;
        failed = report_skipped(skipped);
        stats
    } else {
        search_sessions(ctx, &args.sessions, &query, &mut printer)?
    };
    if let (Some(since), Some(until)) = (args.since, args.until) {
        if since >= until && stats.matches == 0 {
            eprintln!(
                "note: no match: --since ({since}) is not before --until ({until}), so no time \
                 is in the range (since <= time < until; both in epoch milliseconds here)"
            );
        }
    }
    if stderr_is_terminal() {
        eprintln!(
            "{} match(es); {} event(s) of {} session(s) searched",
            stats.matches, stats.events_scanned, stats.sessions
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints an error for each session a store-wide command skipped; true when there was one.
pub fn report_skipped(skipped: Vec<(String, agentlog::Error)>) -> bool {
    for (id, e) in &skipped {
        eprintln!("error: {}", skipped_message(id, e));
    }
    !skipped.is_empty()
}

fn skipped_message(id: &str, e: &agentlog::Error) -> String {
    if let Some(why) = crate::target::explain_ref(e, id) {
        return format!("{why:#} (skipped)");
    }
    format!(
        "session {id} was skipped: {e} (check it with `agentlog verify {id}`; \
         `agentlog recover --salvage {id}` keeps its valid events)"
    )
}

/// Searches the sessions named by `--session`, in id order (each once).
fn search_sessions(
    ctx: &Ctx,
    names: &[String],
    query: &Query,
    printer: &mut Printer,
) -> Result<SearchStats> {
    let mut readers: Vec<(String, SessionReader)> = Vec::new();
    for name in names {
        let target = ctx.resolve(name)?;
        let reader = target.reader()?;
        if reader.meta().state == SessionState::Deleted {
            // Read as `show`, `stats` and `export` read it (a store-wide search leaves it out).
            eprintln!(
                "note: session {} is deleted (its files go at the next `agentlog gc`)",
                target.label
            );
        }
        readers.push((target.label.clone(), reader));
    }
    // In id order, each directory once (an id and a path may name the same one).
    readers.sort_by(|a, b| a.1.meta().id.cmp(&b.1.meta().id));
    readers.dedup_by(|a, b| same_dir(a.1.dir(), b.1.dir()));
    printer.width = readers
        .iter()
        .map(|(_, r)| r.meta().id.chars().count())
        .max()
        .unwrap_or(0);
    let mut total = SearchStats::default();
    let mut remaining = query.max_matches();
    for (label, reader) in &readers {
        if remaining == Some(0) {
            break;
        }
        let q = match remaining {
            Some(n) => query.clone().limit(n),
            None => query.clone(),
        };
        let id = reader.meta().id.as_str();
        let result = reader.search(&q, |e| printer.print(id, e));
        printer.finish()?;
        let stats = result.map_err(|e| explain(e, label))?;
        total.sessions += stats.sessions;
        total.events_scanned += stats.events_scanned;
        total.bytes_scanned += stats.bytes_scanned;
        total.matches += stats.matches;
        if let Some(n) = remaining.as_mut() {
            *n = n.saturating_sub(stats.matches as usize);
        }
        if printer.failed.is_some() {
            break;
        }
    }
    Ok(total)
}

fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Prints matches; keeps the first error (a closed stdout, say) and stops the search with it.
struct Printer {
    out: BufWriter<std::io::StdoutLock<'static>>,
    paint: Paint,
    json: bool,
    failed: Option<anyhow::Error>,
    /// The width of the session column: the longest id searched, so columns stay aligned.
    width: usize,
}

impl Printer {
    fn print(&mut self, session: &str, e: &ArchivedEvent) -> ControlFlow<()> {
        match self.write(session, e) {
            Ok(()) => ControlFlow::Continue(()),
            Err(err) => {
                self.failed = Some(err);
                ControlFlow::Break(())
            }
        }
    }

    fn write(&mut self, session: &str, e: &ArchivedEvent) -> Result<()> {
        if self.json {
            let mut line = Vec::with_capacity(256);
            line.extend_from_slice(b"{\"session\":");
            line.extend_from_slice(Value::String(session.to_string()).to_string().as_bytes());
            line.extend_from_slice(b",\"event\":");
            e.write_canonical(&mut line);
            line.extend_from_slice(b"}\n");
            self.out.write_all(&line)?;
        } else {
            let owned = decode_event(e).map_err(|source| {
                explain(
                    agentlog::Error::Archive {
                        seq: Some(e.seq()),
                        source,
                    },
                    session,
                )
            })?;
            let p = self.paint;
            let line = lines::event_line(p, &owned, true, 0, Pairing::Unknown);
            let column = format!("{session:<width$}", width = self.width);
            writeln!(
                self.out,
                "{} {}",
                p.paint(Color::Bold, &column),
                line.trim_end()
            )?;
        }
        Ok(())
    }

    /// Flushes what was printed; returns the error that stopped the printing, if any.
    fn finish(&mut self) -> Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("1755000000000"), Ok(1_755_000_000_000));
        assert_eq!(parse_time("-5"), Ok(-5));
        assert_eq!(parse_time("2025-08-12T12:00:00Z"), Ok(1_755_000_000_000));
        assert_eq!(
            parse_time("2025-08-12T14:00:00.5+02:00"),
            Ok(1_755_000_000_500)
        );
        assert!(parse_time("2025-08-12").is_ok());
        assert!(parse_time("2025-08-12T09:30").is_ok());
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("").is_err());
    }
}
