//! `agentlog append SESSION [--ack] [--sync]`: events from stdin, one JSONL line each.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::event::{parse_draft_line, read_line_bounded, BoundedLine, ParseErrorKind};
use agentlog::log::Durability;
use agentlog::session::Session;
use agentlog::store::NewSession;

use crate::target::{Ctx, Target};

/// Append events from standard input, one JSONL line each
///
/// A line is an event of docs/events.md §2; its "seq" and "time" may be left out (the log assigns
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
    /// Create the session (SESSION is then an id of the store) when the store holds none of
    /// that id; the store too when missing
    #[arg(long)]
    create: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = if args.create {
        create_missing(ctx, &args.session)?
    } else {
        ctx.resolve(&args.session)?
    };
    let mut options = target.options()?;
    if args.sync {
        options.log.durability = Durability::Sync;
    }
    // A longer line cannot hold an event of the maximum size however escaped: refused after
    // reading that much, so an endless line (a binary file, /dev/zero) never fills memory.
    let max_line = agentlog::event::max_line_for(options.log.max_event_size);
    let session = Session::open(&target.dir, options).map_err(|e| target.error(e))?;
    let report = session.open_report().clone();
    if let Some(cut) = &report.log.cut {
        eprintln!(
            "note: session {} was not closed cleanly; opening it cut {} bytes from seq {} ({})",
            target.label, cut.bytes, cut.first_lost_seq, cut.at
        );
    }
    let result = append_lines(&session, &args, max_line);
    let closed = session.close().map_err(|e| target.error(e));
    let appended = result?;
    closed?;
    if !args.ack && appended == 0 {
        eprintln!("note: standard input held no event; nothing was appended");
    }
    Ok(ExitCode::SUCCESS)
}

/// What a session header line piped to `append` is, and what to do with it.
const HEADER_LINE: &str = "this is a session header line ({\"type\":\"session\",…}, what \
    `export --header` writes first), not an event: append takes events only; leave the header \
    out, or import the whole file with `agentlog import FILE` (a header is its first line)";

/// True when `text` is a JSON object whose `type` is `"session"`: a session header line.
pub fn is_header_line(text: &str) -> bool {
    agentlog::event::parse_json(text).is_ok_and(|v| {
        v.get("type")
            .and_then(agentlog::event::Value::as_str)
            .is_some_and(|t| t == "session")
    })
}

/// `--create`: the store's session `id`, created (empty) when the store holds none of that id.
/// A session created meanwhile by another process is used as it is.
fn create_missing(ctx: &Ctx, id: &str) -> Result<Target> {
    agentlog::session::validate_id(id)
        .map_err(|e| anyhow!("{e} (with --create, SESSION is an id of the store)"))?;
    let target = ctx.in_store(id);
    let exists = agentlog::session::is_session_dir(&target.dir).map_err(|e| target.error(e))?;
    if !exists {
        let store = ctx.open_store()?;
        match store.create(NewSession::default().id(id)) {
            Ok(session) => session.close().map_err(|e| target.error(e))?,
            // Another process creates it right now: its folder exists before its files do.
            // Wait (a little) for them, so that opening it says what is true (the other
            // process holds it, or it is there), never "no session".
            Err(agentlog::Error::Exists(_)) => wait_created(&target.dir),
            Err(agentlog::Error::Log(agentlog::log::Error::Locked { .. })) => {
                wait_created(&target.dir)
            }
            Err(e) => return Err(ctx.error("cannot create a session in store", e)),
        }
    } else {
        // Another process may be creating it: its log can be there before its session.json
        // (opening it then said the metadata file is missing). Returns at once when it is there.
        wait_created(&target.dir);
    }
    Ok(target)
}

/// Waits up to two seconds for a session another process is creating to have its
/// `session.json`.
fn wait_created(dir: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !dir.join("session.json").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Appends every line of stdin; returns how many were appended.
fn append_lines(session: &Session, args: &Args, max_line: u64) -> Result<u64> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    let mut appended = 0u64;
    let first = session.len();
    // The seq of the last event stored (an assistant/chunk the store does not keep has none).
    let mut last_stored: Option<u64> = None;
    let refused = |line_no: u64, appended: u64, last: Option<u64>, why: String| {
        let (lines, stay, were) = match appended {
            1 => ("the line before it".to_string(), "stays", "was"),
            n => (format!("the {n} lines before it"), "stay", "were"),
        };
        let kept = match (appended, last) {
            (0, _) => "nothing was appended".to_string(),
            (_, None) => format!("{lines} {were} accepted (chunks this store does not keep)"),
            (_, Some(l)) if l == first => format!("{lines} {stay} appended (seq {first})"),
            (_, Some(l)) => format!("{lines} {stay} appended (seqs {first}..{l})"),
        };
        anyhow!("line {line_no}: {why}; {kept}")
    };
    loop {
        let read = read_line_bounded(&mut input, &mut buf, max_line)
            .map_err(|e| anyhow!("cannot read standard input: {e}"))?;
        match read {
            BoundedLine::End => return Ok(appended),
            BoundedLine::Line(_) => line_no += 1,
            BoundedLine::TooLong => {
                let why = ParseErrorKind::LineTooLong { limit: max_line }.to_string();
                return Err(refused(line_no + 1, appended, last_stored, why));
            }
        }
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
                last_stored,
                format!("invalid UTF-8 at byte {}", e.valid_up_to() + 1),
            )
        })?;
        let draft = parse_draft_line(text).map_err(|mut e| {
            e.line = line_no;
            let why = match e.kind {
                ParseErrorKind::BlankLine => {
                    "blank line (every line must hold one JSON object)".to_string()
                }
                _ if is_header_line(text) => HEADER_LINE.to_string(),
                _ => match e.column {
                    Some(c) => format!("column {c}: {}", e.kind),
                    None => e.kind.to_string(),
                },
            };
            refused(line_no, appended, last_stored, why)
        })?;
        let seq = session.append_draft(draft).map_err(|e| {
            let why = match e {
                agentlog::Error::Lifecycle(l) => l.to_string(),
                e @ (agentlog::Error::Archived(_) | agentlog::Error::Deleted(_)) => {
                    format!("{:#}", crate::target::explain(e, &args.session))
                }
                // The library's "nothing was written" is said once, with what was appended.
                other => {
                    let text = other.to_string();
                    text.strip_suffix("; nothing was written")
                        .unwrap_or(&text)
                        .to_string()
                }
            };
            refused(line_no, appended, last_stored, why)
        })?;
        appended += 1;
        last_stored = seq.or(last_stored);
        if args.ack {
            match seq {
                Some(s) => writeln!(out, "{s}")?,
                None => writeln!(out, "-")?,
            }
            out.flush()?;
        }
    }
}
