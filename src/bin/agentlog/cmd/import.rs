//! `agentlog import FILE|- [--id ID] [--title T]`: a new session from JSONL, all or nothing.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read};
use std::process::ExitCode;
use std::rc::Rc;

use anyhow::{anyhow, Result};

use agentlog::store::ImportOptions;

use agentlog::event::Value;

use crate::cmd::{object, print_json};
use crate::progress::Progress;
use crate::target::Ctx;

/// Create a session from a JSONL file, all or nothing
///
/// The file is canonical (or any valid) JSONL of docs/events.md §4. The id is --id, else the id of
/// the file's session header, else a new one. An id that exists is refused. Every event is checked
/// as a live append would be (seq order, lifecycle rules, projection); a refused file writes
/// nothing. Prints the new session's id alone on stdout.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The JSONL file, or - for standard input; with --from, files or directory trees (not -)
    #[arg(value_name = "FILE|-", required = true)]
    files: Vec<std::path::PathBuf>,
    /// Import Codex rollouts or Claude Code transcripts (auto: detect per file), one session
    /// per source file; a file imported before gets only its new lines
    #[arg(long, value_name = "codex|claude-code|auto", value_parser = ["codex", "claude-code", "auto"])]
    from: Option<String>,
    /// With --from: keep watching the paths, importing new lines as they are written (once a
    /// second), until interrupted; implies --keep-open
    #[arg(long, requires = "from")]
    follow: bool,
    /// With --from: leave a turn the source has open at its end open (a file still being
    /// written), so the next run continues it; a later run without it closes it. The lines of a
    /// response the file ends inside wait for the next run while the file was written in the
    /// last 5 s
    #[arg(long, requires = "from")]
    keep_open: bool,
    /// With --from: files imported side by side, at least 1 (default: four per processor, 4 to
    /// 16)
    #[arg(long, value_name = "N", requires = "from",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    jobs: Option<usize>,
    /// The session id (1 to 128 characters from A-Z a-z 0-9 . _ -)
    #[arg(long)]
    id: Option<String>,
    /// The session title (else the header's)
    #[arg(long)]
    title: Option<String>,
    /// Print one JSON object instead of the id: {"id","events","hadHeader"}; with --from,
    /// {"files","bytes","lines","created":[…],"updated":[…],"unchanged","events":{TYPE:n},
    /// "warnings":[…],"failed"} (with --follow, one line per round that changed something)
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, mut args: Args) -> Result<ExitCode> {
    if let Some(from) = args.from.take() {
        if args.files.iter().any(|f| f.as_os_str() == "-") {
            // A source file is imported by its path: the import state that lets a later run
            // take only the new lines names it.
            return Err(anyhow!(
                "--from imports files by their path, not standard input: write it to a file \
                 first (import - reads canonical JSONL from standard input)"
            ));
        }
        return run_from(ctx, &from, &args);
    }
    if args.files.len() != 1 {
        return Err(anyhow!(
            "import takes one JSONL file (or -); several paths need --from codex|claude-code|auto"
        ));
    }
    let file = args.files[0].clone();
    let shown = file.display().to_string();
    if let Some(id) = &args.id {
        agentlog::session::validate_id(id).map_err(|e| anyhow!("{e}"))?;
    }
    let (input, size, name): (Box<dyn Read>, Option<u64>, String) = if file.as_os_str() == "-" {
        (
            Box::new(std::io::stdin().lock()),
            None,
            "standard input".into(),
        )
    } else {
        let f = std::fs::File::open(&file).map_err(|e| anyhow!("cannot read {shown}: {e}"))?;
        if f.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(anyhow!("cannot read {shown}: it is a directory"));
        }
        let size = f.metadata().ok().map(|m| m.len());
        (Box::new(f), size, shown.clone())
    };
    let last_line = LastLine::default();
    let input: Box<dyn BufRead> =
        Box::new(last_line.track(BufReader::with_capacity(1 << 16, input)));
    let store = ctx.open_store()?;
    let mut progress = Progress::bytes(size, "importing");
    let options = ImportOptions {
        id: args.id,
        title: args.title,
    };
    let report = store
        .import(input, options, |bytes| progress.set(bytes))
        .map_err(|e| refused(e, &name, ctx, &last_line))?;
    progress.finish();
    if args.json {
        print_json(&object(vec![
            ("id", report.id.as_str().into()),
            ("events", report.events.into()),
            ("hadHeader", report.had_header.into()),
        ]))?;
    } else {
        outln!("{}", report.id)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn refused(e: agentlog::Error, name: &str, ctx: &Ctx, last: &LastLine) -> anyhow::Error {
    match e {
        // The line a parse error names is the last one read.
        agentlog::Error::Parse(p) if last.is_header() && p.line > 1 => anyhow!(
            "cannot import {name}: line {} is a second session header line \
             ({{\"type\":\"session\",…}}): a file holds one session, its header on line 1 \
             only; import each session from a file of its own (or remove the line); nothing was \
             written",
            p.line
        ),
        agentlog::Error::Parse(agentlog::event::ParseError {
            line,
            kind: agentlog::event::ParseErrorKind::MissingMember { path },
            ..
        }) if path == "seq" || path == "time" => anyhow!(
            "cannot import {name}: line {line} has no {path}: import takes a session's events as \
             `agentlog export` writes them, each with its seq and time; to add events without \
             them (the log assigns them), use `agentlog append --create ID < FILE`; nothing was \
             written"
        ),
        agentlog::Error::Exists(id) => anyhow!(
            "cannot import {name}: a session {id:?} exists already in store {}; nothing was \
             written (give another id with --id)",
            ctx.shown()
        ),
        agentlog::Error::InvalidId(_) => anyhow!("cannot import {name}: {e} (give one with --id)"),
        other => anyhow!("cannot import {name}: {other}"),
    }
}

/// The start of the last complete line read through [`LastLine::track`] (to say what a refused
/// line is without reading the input twice).
#[derive(Debug, Clone, Default)]
struct LastLine(Rc<RefCell<Tracked>>);

#[derive(Debug, Default)]
struct Tracked {
    current: Vec<u8>,
    last: Vec<u8>,
}

/// How much of a line is kept: enough to tell a session header.
const KEPT: usize = 256;

impl LastLine {
    fn track<R: BufRead>(&self, inner: R) -> Tracking<R> {
        Tracking {
            inner,
            lines: self.clone(),
        }
    }

    /// True when the last line read (the one a parse error names) is a session header line (`{"type":"session",…`).
    fn is_header(&self) -> bool {
        let t = self.0.borrow();
        // An unfinished line is the last one when the input ended without a line end.
        let line = if t.current.is_empty() {
            &t.last
        } else {
            &t.current
        };
        let squeezed: Vec<u8> = line
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        squeezed.starts_with(br#"{"type":"session""#)
    }

    fn record(&self, bytes: &[u8]) {
        let mut t = self.0.borrow_mut();
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            let room = KEPT.saturating_sub(t.current.len());
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            t.current.extend_from_slice(&body[..body.len().min(room)]);
            if line.ends_with(b"\n") {
                let done = std::mem::take(&mut t.current);
                t.last = done;
            }
        }
    }
}

/// A reader that records the start of each line it passes on.
struct Tracking<R> {
    inner: R,
    lines: LastLine,
}

impl<R: BufRead> Read for Tracking<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.lines.record(&buf[..n]);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Tracking<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        // The bytes are in the buffer already: no read happens here.
        if let Ok(buf) = self.inner.fill_buf() {
            self.lines.record(&buf[..amt.min(buf.len())]);
        }
        self.inner.consume(amt);
    }
}

/// `import --from FORMAT PATH…`: Codex rollouts or Claude Code transcripts, one session per
/// source file, then the summary on standard error (the ids created on standard output).
fn run_from(ctx: &Ctx, from: &str, args: &Args) -> Result<ExitCode> {
    let format = match from {
        "auto" => None,
        other => Some(
            agentlog::import::Format::from_name(other)
                .ok_or_else(|| anyhow!("--from {other}: expected codex, claude-code or auto"))?,
        ),
    };
    if args.id.is_some() || args.title.is_some() {
        return Err(anyhow!(
            "--id and --title are for a JSONL import; with --from the ids come from the sources"
        ));
    }
    let store = ctx.open_store()?;
    let paths: Vec<std::path::PathBuf> = args.files.clone();
    let mut progress: Option<Progress> = None;
    let options = agentlog::import::Options {
        format,
        workers: args.jobs,
        keep_open: args.keep_open || args.follow,
    };
    let summary = agentlog::import::import_paths(&store, &paths, &options, |done, total| {
        let bar = progress.get_or_insert_with(|| Progress::bytes(Some(total), "importing"));
        bar.set(done);
    })
    .map_err(|e| anyhow!("cannot import: {e}"))?;
    if let Some(p) = progress {
        p.finish();
    }
    if args.json {
        print_json(&summary_json(&summary))?;
    } else {
        print_summary(&summary)?;
    }
    let failed = summary.failed;
    if args.follow {
        // Each round reads only session.json of the files that did not grow; a warning is
        // printed once.
        let mut seen: std::collections::HashSet<String> = summary.warnings.into_iter().collect();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            let round = agentlog::import::import_paths(&store, &paths, &options, |_, _| {})
                .map_err(|e| anyhow!("cannot import: {e}"))?;
            if args.json {
                if !round.created.is_empty() || !round.updated.is_empty() {
                    print_json(&summary_json(&round))?;
                }
            } else {
                for id in round.created.iter().chain(&round.updated) {
                    outln!("{id}")?;
                }
            }
            for w in round.warnings {
                if seen.insert(w.clone()) {
                    eprintln!("warning: {w}");
                }
            }
        }
    }
    if failed > 0 {
        // Named among the warnings above; the files that could be imported were.
        eprintln!(
            "error: {failed} file{} not imported",
            if failed == 1 { "" } else { "s" }
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON form of an `import --from` summary.
fn summary_json(summary: &agentlog::import::Summary) -> Value {
    let ids = |v: &[String]| Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect());
    let events = object(
        summary
            .events
            .iter()
            .map(|(ty, n)| (ty.as_str(), Value::from(*n)))
            .collect(),
    );
    object(vec![
        ("files", summary.files.into()),
        ("bytes", summary.bytes.into()),
        ("lines", summary.lines.into()),
        ("created", ids(&summary.created)),
        ("updated", ids(&summary.updated)),
        ("unchanged", summary.unchanged.into()),
        ("events", events),
        ("warnings", ids(&summary.warnings)),
        ("failed", summary.failed.into()),
    ])
}

fn print_summary(summary: &agentlog::import::Summary) -> Result<()> {
    for id in summary.created.iter().chain(&summary.updated) {
        outln!("{id}")?;
    }
    // "1 file", "2 files".
    let n = |count: u64, one: &str, many: &str| {
        format!("{count} {}", if count == 1 { one } else { many })
    };
    let failed = match summary.failed {
        0 => String::new(),
        k => format!(", {k} not imported"),
    };
    eprintln!(
        "read {} ({} bytes, {} imported): {} created, {} updated, {} unchanged{failed}; {}",
        n(summary.files, "file", "files"),
        summary.bytes,
        n(summary.lines, "line", "lines"),
        n(summary.created.len() as u64, "session", "sessions"),
        summary.updated.len(),
        summary.unchanged,
        n(summary.total_events(), "event", "events"),
    );
    if !summary.events.is_empty() {
        eprintln!("events by type:");
        for (ty, n) in &summary.events {
            eprintln!("  {ty:<20} {n}");
        }
    }
    if !summary.unmapped.is_empty() {
        eprintln!("source lines kept as import/line (no typed event of their own):");
        for (kind, n) in &summary.unmapped {
            eprintln!("  {kind:<40} {n}");
        }
    }
    if !summary.warnings.is_empty() {
        eprintln!("warnings ({}):", summary.warnings.len());
        for w in &summary.warnings {
            eprintln!("  {w}");
        }
    }
    Ok(())
}
