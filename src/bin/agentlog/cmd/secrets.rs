//! `agentlog secrets`, `agentlog redact`, `agentlog purge`: secrets found in sessions, redacted
//! away retroactively, and turns purged (docs/events.md §9).

use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};

use agentlog::event::Value;
use agentlog::redact::{load_or_create_key, Mode, Redactor};
use agentlog::store::{PurgeRange, RewriteReport, Store};

use crate::cmd::{object, print_json};
use crate::output::{Color, Paint};
use crate::target::Ctx;

const RULES_HELP: &str = "\
Rules: the sets credentials (aws-access-key-id, aws-secret-access-key, anthropic-key, openai-key,
github-token, gitlab-token, slack-token, google-api-key, stripe-key, jwt, private-key,
url-password, password-assignment) and pii (email, card-number, phone), single rule names, and
the custom rules of the store's agentlog.toml ([redact.custom], always on). See docs/events.md §9.";

/// Scan sessions for secrets and personal data; exit 1 when anything is found
///
/// Exit codes: 0 nothing found, 1 something found, 2 the scan could not be completed (a
/// session that cannot be read is named on stderr and skipped; the others are scanned).
///
/// Prints one line per finding: the session, the seq (or `header` for the session's metadata),
/// where in the event (`data.content[0].text`), the rule and a masked preview (never more than
/// the first 4 characters). The files of a session's damaged/ folder (what a salvage cut) are
/// scanned too: `damaged` and the file instead of seq and path (`redact` does not rewrite them:
/// delete the folder once nothing in it is needed). Default rules: the store's [redact] rules,
/// else credentials and pii.
///
/// Example: agentlog secrets --all --rules credentials
#[derive(Debug, clap::Args)]
#[command(
    after_help = RULES_HELP,
    override_usage = "agentlog secrets [OPTIONS] <SESSION>...\n       agentlog secrets [OPTIONS] --all"
)]
pub struct ScanArgs {
    /// Session ids of the store
    #[arg(
        value_name = "SESSION",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    ids: Vec<String>,
    /// Every session of the store (deleted ones too: their files are still there)
    #[arg(long)]
    all: bool,
    /// Comma-separated sets or rule names (e.g. credentials,email)
    #[arg(long, value_name = "R")]
    rules: Option<String>,
    /// One JSON object per finding, one per line:
    /// {"session","seq","path","rule","preview"} (seq null for the metadata; for a file of
    /// damaged/: path "damaged/<name>" and "file", its path)
    #[arg(long)]
    json: bool,
}

/// Redact sessions retroactively: rewrite them with every match replaced, atomically
///
/// Each session with a finding is rewritten into new segments (same seqs, same times, the
/// matches replaced as the store's [redact] mode says: [REDACTED:<rule>] or
/// [HASH:<rule>:<12 hex>]), swapped in atomically, and its old files removed: afterwards no
/// byte of a found secret remains in the store. Sessions sharing a segment with it (forks) are
/// rewritten too and named. A crash leaves the old or the new session whole. Refused while a
/// writer has the session open.
///
/// Example: agentlog redact --all --rules credentials
#[derive(Debug, clap::Args)]
#[command(
    after_help = RULES_HELP,
    override_usage = "agentlog redact [OPTIONS] <SESSION>...\n       agentlog redact [OPTIONS] --all"
)]
pub struct RedactArgs {
    /// Session ids of the store
    #[arg(
        value_name = "SESSION",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    ids: Vec<String>,
    /// Every session of the store (deleted ones too)
    #[arg(long)]
    all: bool,
    /// Comma-separated sets or rule names (e.g. credentials,email)
    #[arg(long, value_name = "R")]
    rules: Option<String>,
    /// One JSON object per session rewritten: {"session","events","changed","matches","sharedWith"}
    #[arg(long)]
    json: bool,
}

/// Purge a turn (or a range of seqs): its content is removed, the session is kept
///
/// Each event becomes a tombstone keeping seq, time, type, turn and step: turn/start, turn/end,
/// step/start and step/end stay (without error messages or request settings), every other event
/// becomes {"type":"purged","data":{"type":ORIGINAL,"turn"?,"step"?}}. The derived history
/// leaves them out, an `audit/purge` event records the purge, and the session is rewritten as
/// `redact` rewrites it (no byte of the purged events remains in its files; the sessions forked
/// from it get the same seqs purged, the session it was forked from keeps its own). Tombstones
/// and earlier audit/purge events are left as they are.
///
/// Examples: agentlog purge SESSION --turn 3; agentlog purge SESSION --seq 10..14
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("range").required(true).multiple(false))]
pub struct PurgeArgs {
    /// A session id of the store
    #[arg(value_name = "SESSION")]
    id: String,
    /// The turn to purge (its turn/start through its turn/end)
    #[arg(long, value_name = "N", group = "range")]
    turn: Option<u64>,
    /// The seqs to purge, A..B (both included)
    #[arg(long, value_name = "A..B", value_parser = parse_range, group = "range")]
    seq: Option<(u64, u64)>,
    /// One JSON object per session rewritten: {"session","events","changed","purged",
    /// "sharedWith"} ("matches", the member `redact` writes, is "purged" again)
    #[arg(long)]
    json: bool,
}

fn store(ctx: &Ctx) -> Result<Store> {
    ctx.require()?;
    ctx.open_store()
}

/// The redactor of `--rules` (default: the store's [redact] rules, else credentials and pii),
/// with the store's custom rules and mode.
fn redactor(store: &Store, rules: Option<&str>) -> Result<Redactor> {
    let cfg = store.config().redact.clone().unwrap_or_default();
    let names: Vec<String> = match rules {
        Some(r) => r
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None if store.config().redact.is_some() => cfg.rules.clone(),
        None => vec!["credentials".into(), "pii".into()],
    };
    if rules.is_some() && names.is_empty() {
        // `--rules "$UNSET"` would scan with no rule and report a clean store.
        bail!("--rules names no rule: give sets (credentials, pii) or rule names, comma-separated");
    }
    let key = match cfg.mode {
        Mode::Hash => Some(load_or_create_key(store.root()).map_err(|e| anyhow!("{e}"))?),
        Mode::Replace => None,
    };
    Redactor::new(&names, &cfg.custom, cfg.mode, key).map_err(|e| anyhow!("--rules: {e}"))
}

fn ids(store: &Store, ids: Vec<String>, all: bool) -> Result<Vec<String>> {
    if all {
        store
            .ids(agentlog::store::Deleted::Include)
            .map_err(|e| anyhow!("{e}"))
    } else {
        Ok(ids)
    }
}

/// The exit code of `secrets` when the scan could not be completed (a session that cannot be
/// read, a store that cannot be opened, bad `--rules`): 2, as grep, so that a script can tell
/// "secrets found" (1) from "not scanned" (2).
const SCAN_ERROR: u8 = 2;

/// `agentlog secrets`: exit 0 when nothing is found, 1 when anything is, 2 when the scan could
/// not be completed (the sessions that could be read are still scanned and reported).
pub fn run_scan(ctx: &Ctx, a: ScanArgs) -> Result<ExitCode> {
    match scan(ctx, a) {
        Ok(code) => Ok(code),
        Err(e) if crate::broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(ExitCode::from(SCAN_ERROR))
        }
    }
}

fn scan(ctx: &Ctx, a: ScanArgs) -> Result<ExitCode> {
    let store = store(ctx)?;
    let r = redactor(&store, a.rules.as_deref())?;
    let mut found = 0usize;
    let mut unread = 0usize;
    let paint = Paint::stdout();
    for id in ids(&store, a.ids, a.all)? {
        let findings = match store.scan_secrets(&id, &r) {
            Ok(f) => f,
            Err(e) => {
                // Named and skipped: the other sessions are still scanned.
                eprintln!("error: {:#}", ctx.explain(e, &id));
                unread += 1;
                continue;
            }
        };
        // The damaged/ folder is read on its own: an error there is named, and the session's
        // events are still reported.
        let damaged = store.scan_damaged(&id, &r).unwrap_or_else(|e| {
            eprintln!("error: {:#}", ctx.explain(e, &id));
            unread += 1;
            Vec::new()
        });
        for f in findings {
            found += 1;
            if a.json {
                print_json(&object(vec![
                    ("session", Value::from(f.session.as_str())),
                    ("seq", f.seq.map_or(Value::Null, Value::from)),
                    ("path", Value::from(f.finding.path.as_str())),
                    ("rule", Value::from(f.finding.rule.as_str())),
                    ("preview", Value::from(f.finding.preview.as_str())),
                ]))?;
            } else {
                let at = f.seq.map_or("header".to_string(), |s| format!("seq {s}"));
                outln!(
                    "{}  {at}  {}  {}  {}",
                    f.session,
                    f.finding.path,
                    paint.paint(Color::Red, &f.finding.rule),
                    f.finding.preview
                )?;
            }
        }
        for f in &damaged {
            found += 1;
            let file = f.file.display().to_string();
            if a.json {
                print_json(&object(vec![
                    ("session", Value::from(f.session.as_str())),
                    ("seq", Value::Null),
                    ("path", Value::from(f.finding.path.as_str())),
                    ("file", Value::from(file.as_str())),
                    ("rule", Value::from(f.finding.rule.as_str())),
                    ("preview", Value::from(f.finding.preview.as_str())),
                ]))?;
            } else {
                outln!(
                    "{}  damaged  {file}  {}  {}",
                    f.session,
                    paint.paint(Color::Red, &f.finding.rule),
                    f.finding.preview
                )?;
            }
        }
        damaged_note(&store, &id, damaged.len());
    }
    if !a.json {
        eprintln!("{found} finding{}", if found == 1 { "" } else { "s" });
    }
    Ok(if unread > 0 {
        eprintln!(
            "{unread} session{} could not be scanned",
            if unread == 1 { "" } else { "s" }
        );
        ExitCode::from(SCAN_ERROR)
    } else if found > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Says on stderr how to remove the findings in a session's `damaged/` folder, which `redact`
/// does not rewrite (salvaged bytes, not events).
fn damaged_note(store: &Store, id: &str, n: usize) {
    if n == 0 {
        return;
    }
    let Ok(dir) = store.session_dir(id) else {
        return;
    };
    let dir = dir.join(agentlog::log::DAMAGED_DIR);
    eprintln!(
        "note: session {id}: {n} finding{} in {} (what a salvage cut; `redact` does not rewrite \
         it): once nothing in it is needed, delete it: rm -r {}",
        if n == 1 { "" } else { "s" },
        dir.display(),
        dir.display()
    );
}

/// Prints what each rewrite did. `what` names its count in the text (matches replaced, events
/// purged); a purge's JSON also names it `purged` (next to `matches`, the name `redact` uses).
fn print_reports(reports: &[RewriteReport], what: &str, json: bool, purge: bool) -> Result<()> {
    for r in reports {
        if json {
            let mut members = vec![
                ("session", Value::from(r.id.as_str())),
                ("events", Value::from(r.events)),
                ("changed", Value::from(r.changed)),
                ("matches", Value::from(r.matches)),
            ];
            if purge {
                members.push(("purged", Value::from(r.matches)));
            }
            members.push((
                "sharedWith",
                r.shared_with.as_deref().map_or(Value::Null, Value::from),
            ));
            print_json(&object(members))?;
        } else {
            let shared = r.shared_with.as_deref().map_or(String::new(), |s| {
                format!(" (it shares segments with or was forked from {s}: rewritten too)")
            });
            outln!(
                "{} {}: {} events, {} changed, {} {what}{shared}",
                Paint::stdout().paint(Color::Green, "rewrote"),
                r.id,
                r.events,
                r.changed,
                r.matches
            )?;
        }
    }
    Ok(())
}

/// `agentlog redact`.
pub fn run_redact(ctx: &Ctx, a: RedactArgs) -> Result<ExitCode> {
    let store = store(ctx)?;
    let r = redactor(&store, a.rules.as_deref())?;
    let mut failed = false;
    let mut any = false;
    for id in ids(&store, a.ids, a.all)? {
        match store.redact(&id, &r) {
            Ok(reports) => {
                any |= !reports.is_empty();
                print_reports(&reports, "matches replaced", a.json, false)?;
                // A rewrite leaves `damaged/` behind; a session not rewritten keeps it.
                if let Ok(d) = store.scan_damaged(&id, &r) {
                    damaged_note(&store, &id, d.len());
                }
            }
            Err(e) => {
                eprintln!("error: {:#}", ctx.explain(e, &id));
                failed = true;
            }
        }
    }
    if !any && !failed && !a.json {
        eprintln!("nothing to redact");
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `--seq A..B` (a usage error when it is not one: exit 2).
fn parse_range(s: &str) -> std::result::Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| "expected A..B (e.g. 10..14, both included)".to_string())?;
    let a: u64 = a
        .trim()
        .parse()
        .map_err(|_| format!("{a:?} is not a seq"))?;
    let b: u64 = b
        .trim()
        .parse()
        .map_err(|_| format!("{b:?} is not a seq"))?;
    if a > b {
        return Err("the first seq is after the last".into());
    }
    Ok((a, b))
}

/// `agentlog purge`.
pub fn run_purge(ctx: &Ctx, a: PurgeArgs) -> Result<ExitCode> {
    let range = match (a.turn, a.seq) {
        (Some(t), _) => PurgeRange::Turn(t),
        (None, Some((x, y))) => PurgeRange::Seqs(x, y),
        (None, None) => bail!("give --turn N or --seq A..B"),
    };
    let store = store(ctx)?;
    let reports = store
        .purge(&a.id, range)
        .map_err(|e| ctx.explain(e, &a.id))?;
    if reports.is_empty() && !a.json {
        eprintln!("nothing to purge: the events there are purged already");
    }
    print_reports(&reports, "events purged", a.json, true)?;
    Ok(ExitCode::SUCCESS)
}
