//! `agentlog append SESSION [--ack] [--sync]`: events from stdin, one JSONL line each.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::event::{parse_draft_line, ParseErrorKind};
use agentlog::log::Durability;
use agentlog::session::Session;

use crate::target::Ctx;

/// Append events from standard input, one JSONL line each
///
/// A line is an event of EVENTS.md §2; its "seq" and "time" may be left out (the log assigns
/// them; a given seq must be the next one, a given time is kept). Every event is checked against
/// the lifecycle rules before it is written.
///
/// Lines are appended one at a time, as they arrive. A refused line (bad JSON, a blank line, a
/// broken rule) stops the command with `error: line N: …` and exit code 1; the lines before it
/// stay appended.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Print each assigned seq on its own line (flushed) once the event is in the log ("-" for
    /// an assistant/chunk the store is configured not to keep)
    #[arg(long)]
    ack: bool,
    /// Make each event durable (fdatasync, shared by concurrent appenders) before it is
    /// acknowledged: it then survives a power loss, not only a crash of the process
    #[arg(long)]
    sync: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let mut options = target.options()?;
    if args.sync {
        options.log.durability = Durability::Sync;
    }
    let (session, report) = Session::open(&target.dir, options).map_err(|e| target.error(e))?;
    if let Some(cut) = &report.log.cut {
        eprintln!(
            "note: session {} was not closed cleanly; opening it cut {} bytes from seq {} ({})",
            target.label, cut.bytes, cut.first_lost_seq, cut.at
        );
    }
    let result = append_lines(&session, &args);
    let closed = session.close().map_err(|e| target.error(e));
    let appended = result?;
    closed?;
    if !args.ack && appended == 0 {
        eprintln!("note: standard input held no event; nothing was appended");
    }
    Ok(ExitCode::SUCCESS)
}

/// Appends every line of stdin; returns how many were appended.
fn append_lines(session: &Session, args: &Args) -> Result<u64> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    let mut appended = 0u64;
    let first = session.len();
    let refused = |line_no: u64, appended: u64, why: String| {
        let kept = match appended {
            0 => "nothing was appended".to_string(),
            1 => format!("the line before it stays appended (seq {first})"),
            n => format!(
                "the {n} lines before it stay appended (seqs {first}..{})",
                first + n - 1
            ),
        };
        anyhow!("line {line_no}: {why}; {kept}")
    };
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|e| anyhow!("cannot read standard input: {e}"))?;
        if n == 0 {
            return Ok(appended);
        }
        line_no += 1;
        let mut text: &[u8] = &buf;
        if let Some(rest) = text.strip_suffix(b"\n") {
            text = rest.strip_suffix(b"\r").unwrap_or(rest);
        }
        if line_no == 1 {
            text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        }
        let text = std::str::from_utf8(text).map_err(|e| {
            refused(
                line_no,
                appended,
                format!("invalid UTF-8 at byte {}", e.valid_up_to() + 1),
            )
        })?;
        let draft = parse_draft_line(text).map_err(|mut e| {
            e.line = line_no;
            let why = match e.kind {
                ParseErrorKind::BlankLine => {
                    "blank line (every line must hold one JSON object)".to_string()
                }
                _ => match e.column {
                    Some(c) => format!("column {c}: {}", e.kind),
                    None => e.kind.to_string(),
                },
            };
            refused(line_no, appended, why)
        })?;
        let seq = session.append_draft(draft).map_err(|e| {
            let why = match e {
                agentlog::Error::Lifecycle(l) => l.to_string(),
                other => other.to_string(),
            };
            refused(line_no, appended, why)
        })?;
        appended += 1;
        if args.ack {
            match seq {
                Some(s) => writeln!(out, "{s}")?,
                None => writeln!(out, "-")?,
            }
            out.flush()?;
        }
    }
}
