//! `agentlog recover SESSION [--salvage]`: open for writing after a crash and report what was
//! cut.

use std::process::ExitCode;

use anyhow::{anyhow, Result};

use std::path::Path;

use agentlog::log::{self, DamageClass, Log, RecoveryMode};
use agentlog::session::{Session, SessionMeta, SessionOptions, META_FILE, PAYLOAD_SCHEMA};

use agentlog::event::Value;

use crate::cmd::{object, print_json};
use crate::output::{Color, Paint};
use crate::target::{Ctx, Target};

/// Repair a session after a crash, reporting exactly what was cut
///
/// By default only a torn tail is cut (an incomplete last record, which a crash in the middle
/// of an append leaves; no acknowledged event is lost). Damage a crash cannot explain (a complete
/// record that fails its checksum, damage in a sealed segment) is refused; --salvage keeps every
/// valid event before the damage and cuts the rest, keeping the cut files in the session's
/// damaged/ folder, and writes every valid event found after the damage (decoded, with its
/// original seq) to damaged/<file>.after.jsonl. Then the session is closed cleanly. Needs the
/// session's writer lock. An archived session whose every record is sound is left as it is.
///
/// A missing, invalid or checksum-failing session.json, or another session's (its id is not the
/// one LOGMETA names), is rebuilt first from the session's LOGMETA (the header and
/// configuration it was created with; state active; the damaged file kept as
/// session.json.damaged). A session without LOGMETA (created by an older agentlog), or whose
/// LOGMETA is damaged (kept as LOGMETA.damaged), gets one from its sound session.json; when both
/// are lost the log is still recovered and the command says how to write session.json by hand.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Cut everything from the first damaged record on (kept in damaged/)
    #[arg(long)]
    salvage: bool,
    /// Print one JSON object instead: {"session","metaRebuilt","events","state","cut",
    /// "salvaged":[…],"indexesRebuilt":[…],"removed":[…],"openTurn","violations"} ("cut": null,
    /// or {"class","path","offset","firstLostSeq","bytes","reason","droppedSegments",
    /// "keptCopies"}; "metaRebuilt": null or what was wrong with session.json)
    #[arg(long)]
    json: bool,
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
    let refused = |c: &dyn std::fmt::Display| {
        anyhow!(
            "session {} is damaged where a crash cannot explain it: {c}; nothing was changed. \
             `agentlog recover --salvage {}` keeps every valid event before the damage and \
             moves the rest to its damaged/ folder",
            target.label,
            target.label
        )
    };
    if !args.salvage {
        // Every record first, read-only: a writer's open after a clean close reads only the
        // headers and index tails, so damage inside a sealed segment would pass it, and the
        // session would be called recovered while every full read fails.
        if let Ok(check) = log::verify(&target.dir) {
            if let Some(d) = check.corruption() {
                return Err(refused(&d.corruption));
            }
            // An archived session (compressed, read-only until unarchived) whose every record
            // is sound has nothing to recover: opening it for writing would start a new,
            // empty segment in the archive.
            if check.is_clean() && is_archived(&target.dir) {
                return archived_and_sound(&target, check.events, check.segments.len(), args.json);
            }
        }
    }
    // session.json first: the session cannot be opened without it.
    let repair = match SessionMeta::repair(&target.dir) {
        Ok(r) => r,
        Err(agentlog::Error::BrokenMeta { path, reason }) => {
            return recover_log_only(&target, options, &path, &reason, p, args.json)
        }
        Err(e) => return Err(target.error(e)),
    };
    if let Some(problem) = repair.problem.as_ref().filter(|_| !args.json) {
        let problem = match problem.strip_prefix("missing") {
            Some(rest) => format!("was missing{rest}"),
            None => format!("was damaged ({problem})"),
        };
        outln!(
            "{}: {} {META_FILE} {problem}; rebuilt from {} with the header and \
             configuration the session was created with, state active{}",
            target.label,
            p.paint(Color::Yellow, "rebuilt:"),
            log::LOGMETA_FILE,
            repair
                .kept
                .as_ref()
                .map(|k| format!("; the damaged file is kept as {}", k.display()))
                .unwrap_or_default()
        )?;
    }
    if repair.checksum_added && !args.json {
        outln!(
            "{}: {META_FILE} had no checksum (an older agentlog wrote it): written again with one",
            target.label
        )?;
    }
    match (&repair.logmeta_problem, repair.logmeta_written) {
        (Some(problem), true) if !args.json => outln!(
            "{}: {} {} was damaged ({problem}); written again from the sound {META_FILE}{}",
            target.label,
            p.paint(Color::Yellow, "rebuilt:"),
            log::LOGMETA_FILE,
            repair
                .logmeta_kept
                .as_ref()
                .map(|k| format!("; the damaged file is kept as {}", k.display()))
                .unwrap_or_default()
        )?,
        (None, true) if !args.json => outln!(
            "{}: {} written (what rebuilding {META_FILE} needs, kept beside the log)",
            target.label,
            log::LOGMETA_FILE
        )?,
        _ => {}
    }
    if let Some(problem) = repair
        .logmeta_problem
        .as_ref()
        .filter(|_| !repair.logmeta_written)
    {
        if args.json {
            eprintln!("warning: {}: {problem}", target.label);
        } else {
            outln!(
                "{}: {} {problem} ({META_FILE} is sound, so nothing is lost, but it could not be \
             rebuilt from it)",
                target.label,
                p.paint(Color::Red, "warning:")
            )?;
        }
    }
    let session = Session::open(&target.dir, options).map_err(|e| match e {
        agentlog::Error::Log(log::Error::Corrupt(c)) if !args.salvage => refused(&c),
        other => target.error(other),
    })?;
    let report = session.open_report();
    if args.json {
        let turn = report.open_work.turn.map(|(t, _)| t);
        print_json(&object(vec![
            ("session", target.label.as_str().into()),
            (
                "metaRebuilt",
                repair.problem.as_deref().map_or(Value::Null, Value::from),
            ),
            ("events", report.log.events.into()),
            ("state", report.state.to_string().into()),
            ("cut", cut_json(&report.log)),
            (
                "salvaged",
                strings(report.salvaged.iter().map(ToString::to_string)),
            ),
            (
                "indexesRebuilt",
                strings(
                    report
                        .log
                        .indexes_rebuilt
                        .iter()
                        .map(|p| p.display().to_string()),
                ),
            ),
            (
                "removed",
                strings(report.log.removed.iter().map(|p| p.display().to_string())),
            ),
            ("openTurn", turn.map_or(Value::Null, Value::from)),
            ("violations", (report.violations.len() as u64).into()),
        ]))?;
        session.close().map_err(|e| target.error(e))?;
        return Ok(ExitCode::SUCCESS);
    }
    print_log_report(&target.label, &report.log, &report.salvaged, p)?;
    let log = &report.log;
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

/// A JSON array of strings.
fn strings(items: impl Iterator<Item = String>) -> Value {
    Value::Array(items.map(Value::from).collect())
}

/// What opening the log cut, as JSON (`null` when nothing).
fn cut_json(log: &log::RecoveryReport) -> Value {
    let Some(cut) = &log.cut else {
        return Value::Null;
    };
    let class = match cut.class {
        DamageClass::TornTail => "tornTail",
        DamageClass::Corruption => "damage",
    };
    object(vec![
        ("class", class.into()),
        ("path", cut.at.path.display().to_string().into()),
        ("offset", cut.at.offset.into()),
        ("firstLostSeq", cut.first_lost_seq.into()),
        ("bytes", cut.bytes.into()),
        ("reason", cut.at.kind.to_string().into()),
        (
            "droppedSegments",
            strings(cut.dropped_segments.iter().map(|p| p.display().to_string())),
        ),
        (
            "keptCopies",
            strings(cut.kept_copies.iter().map(|p| p.display().to_string())),
        ),
    ])
}

/// Prints what opening the log found and did.
/// True when the session's `session.json` is sound and says it is archived.
fn is_archived(dir: &Path) -> bool {
    SessionMeta::load(dir).is_ok_and(|m| m.state == agentlog::session::SessionState::Archived)
}

/// The report of `recover` on an archived session whose records are all sound: nothing done.
fn archived_and_sound(
    target: &Target,
    events: u64,
    segments: usize,
    json: bool,
) -> Result<ExitCode> {
    let reader =
        agentlog::session::SessionReader::open(&target.dir).map_err(|e| target.error(e))?;
    let lifecycle = reader.lifecycle().map_err(|e| target.error(e))?;
    if json {
        print_json(&object(vec![
            ("session", target.label.as_str().into()),
            ("metaRebuilt", Value::Null),
            ("events", events.into()),
            ("state", lifecycle.state().to_string().into()),
            ("cut", Value::Null),
            ("salvaged", Value::Array(Vec::new())),
            ("indexesRebuilt", Value::Array(Vec::new())),
            ("removed", Value::Array(Vec::new())),
            (
                "openTurn",
                lifecycle
                    .open_work()
                    .turn
                    .map_or(Value::Null, |(t, _)| Value::from(t)),
            ),
            ("violations", 0u64.into()),
        ]))?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{}: archived, {events} event(s) in {segments} segment(s), every record sound: nothing \
         to recover, nothing changed (`agentlog unarchive {}` makes it writable)",
        target.label,
        target.label
    )?;
    Ok(ExitCode::SUCCESS)
}

fn print_log_report(
    label: &str,
    log: &log::RecoveryReport,
    salvaged: &[agentlog::session::SalvagedEvents],
    p: Paint,
) -> Result<()> {
    outln!("{label}: {log}")?;
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
            for s in salvaged {
                outln!("    {s}")?;
            }
        }
    }
    for idx in &log.indexes_rebuilt {
        outln!("  index rebuilt: {}", idx.display())?;
    }
    for f in &log.removed {
        outln!("  removed a file a crashed writer left: {}", f.display())?;
    }
    Ok(())
}

/// session.json is lost and cannot be rebuilt: recovers the log alone (it needs no
/// session.json), then says what the user can do; exit 1.
fn recover_log_only(
    target: &Target,
    options: SessionOptions,
    path: &Path,
    reason: &str,
    p: Paint,
    json: bool,
) -> Result<ExitCode> {
    let log_options = options
        .log
        .clone()
        .payload_schema(PAYLOAD_SCHEMA)
        .create(false);
    let log = Log::open(&target.dir, log_options).map_err(|e| match e {
        log::Error::Corrupt(c) => anyhow!(
            "session {}: {} is damaged ({reason}), and its log is damaged where a crash cannot \
             explain it: {c}; nothing was changed. `agentlog recover --salvage {}` keeps every \
             valid event before the damage",
            target.label,
            path.display(),
            target.label
        ),
        other => target.error(other.into()),
    })?;
    let report = log.recovery_report();
    // With --json the error below is the whole answer (stdout stays empty).
    if !json {
        print_log_report(&target.label, report, &[], p)?;
        outln!("  {} event(s) in the log", report.events)?;
    }
    // The time of the first event: a creation time for the session.json to write.
    let first_time = log
        .reader()
        .iter()
        .next()
        .and_then(|r| r.ok())
        .and_then(|rec| {
            agentlog::event::access_event(rec.payload)
                .ok()
                .map(|e| e.time())
        });
    log.close().map_err(|e| target.error(e.into()))?;
    let id = target
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| target.label.clone());
    Err(anyhow!(
        "session {}: {}: {reason}. The events are intact (the log was recovered above), but \
         session.json cannot be rebuilt without {}. Restore it from a backup, or \
         write it by hand as one line, e.g. \
         {{\"header\":{{\"type\":\"session\",\"version\":1,\"id\":{id:?},\"createdAt\":{}}},\"state\":\"active\"}} \
         (a file without a checksum line is accepted), then run `agentlog recover {}` again: it \
         adds the checksum and writes {}",
        target.label,
        path.display(),
        log::LOGMETA_FILE,
        first_time.unwrap_or(0),
        target.label,
        log::LOGMETA_FILE
    ))
}
