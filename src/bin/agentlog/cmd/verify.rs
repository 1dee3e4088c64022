//! `agentlog verify SESSION|--all`: a read-only full check.

use std::process::ExitCode;

use anyhow::Result;

use agentlog::log::{self, DamageClass, IndexCheck};
use agentlog::session::{CheckpointCheck, SessionMeta, META_FILE};
use agentlog::store::SESSIONS_DIR;

use agentlog::event::Value;

use crate::cmd::{object, print_json};
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
// One of SESSION and --all: the usage line and a usage error say so.
#[command(group(clap::ArgGroup::new("which").required(true).args(["session", "all"])))]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: Option<String>,
    /// Check every session of the store (deleted ones included)
    #[arg(long)]
    all: bool,
    /// Print one JSON line per session: {"session","ok","events","segments","problems":[…],
    /// "notes":[…]} (the messages as the text report words them)
    #[arg(long)]
    json: bool,
}

/// What checking one session found.
struct Checked {
    /// The log could not be read at all (its one problem says why).
    unreadable: bool,
    events: u64,
    segments: usize,
    problems: Vec<String>,
    notes: Vec<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let p = Paint::stdout();
    let targets = match &args.session {
        Some(s) => vec![ctx.resolve(s)?],
        None => {
            ctx.require()?;
            let store = ctx.open_store()?;
            let ids = store
                .ids(agentlog::store::Deleted::Include)
                .map_err(|e| ctx.error("cannot list store", e))?;
            note_strangers(ctx, &ids);
            ids.iter().map(|id| ctx.in_store(id)).collect()
        }
    };
    let mut bad = 0usize;
    for target in &targets {
        let checked = check(target)?;
        if !checked.problems.is_empty() {
            bad += 1;
        }
        if args.json {
            print_json(&checked_json(&target.label, &checked))?;
        } else {
            print_text(&target.label, &checked, p)?;
        }
    }
    if args.all && !args.json {
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

/// The JSON line of one session's report.
fn checked_json(label: &str, c: &Checked) -> Value {
    let strings = |v: &[String]| Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect());
    object(vec![
        ("session", label.into()),
        ("ok", c.problems.is_empty().into()),
        ("events", c.events.into()),
        ("segments", (c.segments as u64).into()),
        ("problems", strings(&c.problems)),
        ("notes", strings(&c.notes)),
    ])
}

/// The text report of one session.
fn print_text(label: &str, c: &Checked, p: Paint) -> Result<()> {
    let (events, segments) = (c.events, c.segments);
    if c.problems.is_empty() {
        outln!(
            "{} {label}: {events} event(s) in {segments} segment(s); every record, index, \
             lifecycle rule and projection step checked",
            p.paint(Color::Green, "ok")
        )?;
    } else if c.unreadable {
        let why = c.problems.first().map_or("", String::as_str);
        outln!("{} {label}: {why}", p.paint(Color::Red, "FAILED"))?;
    } else {
        outln!(
            "{} {label}: {} problem(s); {events} valid event(s) in {segments} segment(s)",
            p.paint(Color::Red, "FAILED"),
            c.problems.len()
        )?;
        for problem in &c.problems {
            outln!("  {} {problem}", p.paint(Color::Red, "-"))?;
        }
    }
    for note in &c.notes {
        outln!("  {} {note}", p.paint(Color::Yellow, "note:"))?;
    }
    Ok(())
}

/// Checks one session: what is wrong (problems) and what is worth knowing (notes).
fn check(target: &Target) -> Result<Checked> {
    let label = &target.label;
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    // The log's structure: every record, every index, the segment chain.
    let report = match log::verify(&target.dir) {
        Ok(r) => r,
        Err(e) => {
            let e = explain(agentlog::Error::Log(e), label);
            return Ok(Checked {
                unreadable: true,
                events: 0,
                segments: 0,
                problems: vec![format!("{e:#}")],
                notes: Vec::new(),
            });
        }
    };
    if let Some(d) = &report.damage {
        match d.class {
            DamageClass::Corruption => problems.push(format!(
                "damaged record: {} (`agentlog recover {label}` refuses it; `agentlog recover --salvage {label}` \
                 keeps the {} event(s) before it and writes the valid ones after it to \
                 damaged/*.after.jsonl)",
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

    // session.json (its checksum) and LOGMETA (what rebuilds it).
    // The id the session was created with (a session.json copied in from another session
    // passes its own checksum).
    let created = SessionMeta::from_logmeta(&target.dir)
        .ok()
        .flatten()
        .map(|m| m.id);
    let meta_broken = match SessionMeta::load_checked(&target.dir) {
        Ok((meta, _)) if created.as_ref().is_some_and(|id| *id != meta.id) => {
            let created = created.unwrap_or_default();
            problems.push(format!(
                "{META_FILE} is another session's: it names session {:?} and {} (written when \
                 this session was created) names {created:?}; `agentlog recover {label}` \
                 rebuilds it from {}",
                meta.id,
                log::LOGMETA_FILE,
                log::LOGMETA_FILE
            ));
            true
        }
        Ok((_, true)) => false,
        Ok((_, false)) => {
            notes.push(format!(
                "{META_FILE} has no checksum (an older agentlog wrote it); `agentlog recover \
                 {label}` adds it"
            ));
            false
        }
        Err(e @ agentlog::Error::BrokenMeta { .. }) => {
            problems.push(format!("{:#}", explain(e, label)));
            true
        }
        // Reported below, when the session is opened.
        Err(_) => false,
    };
    match log::read_meta(&target.dir) {
        Ok(Some(_)) => {}
        Ok(None) => notes.push(format!(
            "no {} (an older agentlog created the session): {META_FILE} could not be rebuilt if \
             it were lost; `agentlog recover {label}` writes it",
            log::LOGMETA_FILE
        )),
        Err(e) => problems.push(format!(
            "{} is damaged: {e} (it is what rebuilds {META_FILE}; the events are not affected)",
            log::LOGMETA_FILE
        )),
    }

    // The events: each archive, the lifecycle rules, the projection; up to the damage.
    let events = report.events;
    match target.reader() {
        // The damage found above is why the log cannot be opened: reported once.
        Err(_) if report.damage.is_some() || !report.unchecked.is_empty() || meta_broken => {}
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
                    Ok((lifecycle, violations)) => {
                        let closed = lifecycle.closed_unanswered();
                        if !closed.is_empty() {
                            let calls: Vec<String> = closed
                                .iter()
                                .take(5)
                                .map(|c| format!("{} (seq {})", c.call_id, c.seq))
                                .collect();
                            notes.push(format!(
                                "{} tool call(s) whose step ended without a result: {}{} \
                                 (the provider renderings answer each with \
                                 TOOL_OUTCOME_UNKNOWN)",
                                closed.len(),
                                calls.join(", "),
                                if closed.len() > 5 { ", …" } else { "" }
                            ));
                        }
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
                // The checkpoint (a cache of what is derived) against a full replay; not on a
                // damaged log (the replay would stop at the damage already reported).
                let damaged = report.damage.is_some() || !report.unchecked.is_empty();
                match reader.verify_checkpoint() {
                    Err(_) if damaged => {}
                    Ok(CheckpointCheck::Mismatch { covers, detail }) => problems.push(format!(
                        "checkpoint: covering {covers} events, {detail} (it is a cache: \
                         removing it is safe, the next close writes a new one)"
                    )),
                    Ok(CheckpointCheck::Unusable { reason }) => notes.push(format!(
                        "checkpoint not used: {reason} (ignored; the next close rebuilds it)"
                    )),
                    Ok(_) => {}
                    Err(e) => problems.push(format!("checkpoint: {e}")),
                }
                if let Err(e) = reader.messages_at(n) {
                    problems.push(format!("projection: {e}"));
                }
            }
        }
    }

    Ok(Checked {
        unreadable: false,
        events,
        segments: report.segments.len(),
        problems,
        notes,
    })
}
