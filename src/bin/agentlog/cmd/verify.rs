//! `agentlog verify SESSION|--all`: a read-only full check.

use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::log::{self, DamageClass, IndexCheck};
use agentlog::session::META_FILE;
use agentlog::store::SESSIONS_DIR;

use crate::output::{Color, Paint};
use crate::progress::Progress;
use crate::target::{explain, Ctx, Target};

/// Check every record, index, event and lifecycle rule, read-only
///
/// Checks every record (length, seq, checksum), every index against its segment, every event
/// archive, and every lifecycle rule and projection step, without changing anything. Works while a writer appends (what it has not finished yet is not damage). Exit code 0 when
/// everything is sound; 1 with a report naming the segment, byte offset and seq of the damage.
/// An incomplete last record (a crash in the middle of an append, or an append in progress) is
/// reported but is not damage: the next writer, or `agentlog recover`, cuts it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    session: Option<String>,
    /// Check every session of the store (deleted ones included)
    #[arg(long)]
    all: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let p = Paint::stdout();
    let targets = match &args.session {
        Some(s) => vec![ctx.resolve(s)?],
        None => {
            if !ctx.exists() {
                return Err(anyhow!("no store at {}", ctx.shown()));
            }
            let store = ctx.open_store()?;
            let ids = store
                .ids(true)
                .map_err(|e| anyhow!("cannot list store {}: {e}", ctx.shown()))?;
            note_strangers(ctx, &ids);
            ids.iter().map(|id| ctx.in_store(id)).collect()
        }
    };
    let mut bad = 0usize;
    for target in &targets {
        let problems = check(target, p)?;
        if problems > 0 {
            bad += 1;
        }
    }
    if args.all {
        outln!(
            "{} session(s) checked, {}",
            targets.len(),
            if bad == 0 {
                p.paint(Color::Green, "all sound")
            } else {
                p.paint(Color::Red, &format!("{bad} with problems"))
            }
        )?;
    }
    if bad > 0 {
        eprintln!(
            "error: {} of {} session(s) failed verification (see the report above)",
            bad,
            targets.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Notes the folders of the store's sessions directory that are not sessions (no session.json):
/// no command lists or changes them.
fn note_strangers(ctx: &Ctx, ids: &[String]) {
    let dir = ctx.root.join(SESSIONS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut strangers: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_dir() && !e.path().join(META_FILE).exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // Imports and forks being built (or killed half-way: the next one removes them).
        .filter(|name| !name.starts_with('.') && !ids.contains(name))
        .collect();
    strangers.sort();
    for name in strangers {
        eprintln!(
            "note: {}: not a session (it holds no {META_FILE}); left as it is",
            dir.join(name).display()
        );
    }
}

/// Checks one session and prints its report; returns the number of problems found.
fn check(target: &Target, p: Paint) -> Result<usize> {
    let label = &target.label;
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    // The log's structure: every record, every index, the segment chain.
    let report = match log::verify(&target.dir) {
        Ok(r) => r,
        Err(e) => {
            let e = explain(agentlog::Error::Log(e), label);
            outln!("{} {label}: {e:#}", p.paint(Color::Red, "FAILED"))?;
            return Ok(1);
        }
    };
    if let Some(d) = &report.damage {
        match d.class {
            DamageClass::Corruption => problems.push(format!(
                "damaged record: {} (an open refuses it; `agentlog recover --salvage {label}` \
                 keeps the {} event(s) before it)",
                d.corruption, report.events
            )),
            DamageClass::TornTail => notes.push(format!(
                "incomplete last record at {} (a crash during an append, or an append in \
                 progress; {} byte(s); the next writer open or `agentlog recover {label}` cuts \
                 it)",
                d.corruption, d.bytes
            )),
        }
    }
    for s in &report.segments {
        match &s.index {
            // The index is derived data: every event is still there, so it is a note, not a
            // failure.
            IndexCheck::Missing => notes.push(format!(
                "{}: index missing or unreadable (derived data: readers find the records without \
                 it, and the next writer open or `agentlog recover {label}` rebuilds it)",
                s.path.display()
            )),
            IndexCheck::Wrong(why) => notes.push(format!(
                "{}: index wrong: {why} (derived data: readers check it against the segment, \
                 and the next writer open or `agentlog recover {label}` rebuilds it)",
                s.path.display()
            )),
            _ => {}
        }
    }
    if !report.unchecked.is_empty() {
        let names: Vec<String> = report
            .unchecked
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        let shown = match names.as_slice() {
            [a, b, c, _, ..] => format!("{a}, {b}, {c}, …"),
            all => all.join(", "),
        };
        notes.push(format!(
            "{} later segment(s) not checked (after the damage): {shown}",
            names.len()
        ));
    }
    for path in &report.strays {
        notes.push(format!(
            "{}: left by a crashed writer (the next writer open removes it)",
            path.display()
        ));
    }

    // The events: each archive, the lifecycle rules, the projection; up to the damage.
    let events = report.events;
    match target.reader() {
        // The damage found above is why the log cannot be opened: reported once.
        Err(_) if report.damage.is_some() || !report.unchecked.is_empty() => {}
        Err(e) => problems.push(format!("{e:#}")),
        Ok(reader) => {
            let n = events.min(reader.len());
            let mut progress = Progress::events(n, "verifying");
            let mut checked = 0u64;
            for event in reader.range(0..n) {
                match event {
                    Ok(_) => {
                        checked += 1;
                        if checked.is_multiple_of(4096) {
                            progress.set(checked);
                        }
                    }
                    Err(e) => {
                        problems.push(format!("{e}"));
                        break;
                    }
                }
            }
            progress.finish();
            if checked == n {
                match reader.lifecycle_at(n) {
                    Ok((_, violations)) => {
                        for v in violations.iter().take(20) {
                            problems.push(format!("lifecycle: {v}"));
                        }
                        if violations.len() > 20 {
                            problems.push(format!(
                                "lifecycle: … and {} more violation(s)",
                                violations.len() - 20
                            ));
                        }
                    }
                    Err(e) => problems.push(format!("{e}")),
                }
                if let Err(e) = reader.derive_at(n) {
                    problems.push(format!("projection: {e}"));
                }
            }
        }
    }

    let segments = report.segments.len();
    if problems.is_empty() {
        outln!(
            "{} {label}: {events} event(s) in {segments} segment(s); every record, index, \
             lifecycle rule and projection step checked",
            p.paint(Color::Green, "ok")
        )?;
    } else {
        outln!(
            "{} {label}: {} problem(s); {events} valid event(s) in {segments} segment(s)",
            p.paint(Color::Red, "FAILED"),
            problems.len()
        )?;
        for problem in &problems {
            outln!("  {} {problem}", p.paint(Color::Red, "-"))?;
        }
    }
    for note in &notes {
        outln!("  {} {note}", p.paint(Color::Yellow, "note:"))?;
    }
    Ok(problems.len())
}
