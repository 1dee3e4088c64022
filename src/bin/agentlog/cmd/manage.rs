//! `agentlog archive|unarchive|delete ID…` and `agentlog gc`: the state of sessions in the store.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use agentlog::session::{SessionMeta, META_FILE};
use agentlog::store::Store;

use agentlog::event::Value;

use crate::cmd::{object, print_json};
use crate::output::{Color, Paint};
use crate::target::{explain_ref, Ctx};

/// Archive sessions: compressed, they stay readable (show, export, search, …), appends are refused
///
/// Every segment of an archived session's log is compressed (zstd, in independently decodable
/// blocks; see docs/format.md, "Cold segment file"): every command reads it as before, and
/// `export` writes the same bytes. Archiving an archived session compresses what is not yet
/// compressed. `unarchive` makes it writable again: appends go to a new segment, the compressed
/// ones stay compressed. Example: `agentlog archive 01J…` then `agentlog export 01J…`.
///
/// Takes session ids of the store, or --idle-days N to archive every active session whose last
/// append is older than N days (judged by its log files' modification times, not the events'
/// own times: a session just imported is not idle). A session a writer has open is not changed
/// (its lock is held): an error names it. A deleted session is refused (`unarchive` brings it
/// back). `unarchive` makes a session writable again.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["ids", "idle_days"]))]
pub struct ArchiveArgs {
    /// Session ids of the store
    #[arg(value_name = "ID")]
    ids: Vec<String>,
    /// Archive the active sessions idle for longer than N days instead
    #[arg(long, value_name = "N", conflicts_with = "ids")]
    idle_days: Option<u64>,
    /// With --idle-days: print `would archive ID` for each idle session, change nothing
    #[arg(long, requires = "idle_days", conflicts_with = "ids")]
    dry_run: bool,
    /// Print one JSON object instead: {"archived":[ID…]} ({"wouldArchive":[ID…]} with
    /// --dry-run); errors stay on stderr
    #[arg(long)]
    json: bool,
}

/// Make archived (or deleted, not yet garbage-collected) sessions active and writable again
#[derive(Debug, clap::Args)]
pub struct UnarchiveArgs {
    /// Session ids of the store
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
    /// Print one JSON object instead: {"active":[ID…]}; errors stay on stderr
    #[arg(long)]
    json: bool,
}

/// Delete sessions: hidden from ls, search and stats at once; `agentlog gc` removes their files
///
/// Until gc runs, `unarchive` brings a deleted session back and `ls --all` shows it. A session
/// a writer has open is not changed (its lock is held): an error names it.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// Session ids of the store
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
    /// Print one JSON object instead: {"deleted":[ID…]}; errors stay on stderr
    #[arg(long)]
    json: bool,
}

/// Remove the files of deleted sessions, and what imports or forks killed half-way left behind
///
/// Prints each session removed. A deleted session a writer still has open is left for a later gc.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Print one JSON object instead: {"removed":[ID…]}; errors stay on stderr
    #[arg(long)]
    json: bool,
}

/// The store, which must exist: these commands never create one.
fn store(ctx: &Ctx) -> Result<Store> {
    ctx.require()?;
    ctx.open_store()
}

/// Applies `change` to each id, printing `WHAT ID` for each done and an error for each not;
/// exit 1 when any failed.
fn each(
    ctx: &Ctx,
    ids: &[String],
    what: &str,
    json: bool,
    change: impl Fn(&Store, &str) -> agentlog::Result<()>,
) -> Result<ExitCode> {
    let store = store(ctx)?;
    let mut done = Vec::new();
    let mut failed = false;
    for id in ids {
        match change(&store, id) {
            Ok(()) => {
                if !json {
                    outln!("{} {id}", Paint::stdout().paint(Color::Green, what))?;
                }
                done.push(id.clone());
            }
            Err(e) => {
                eprintln!("error: {:#}", ctx.explain(e, id));
                failed = true;
            }
        }
    }
    if json {
        print_ids(what, &done)?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `{"KEY":[ID…]}` on one line.
fn print_ids(key: &str, ids: &[String]) -> Result<()> {
    let ids = Value::Array(ids.iter().map(|id| Value::from(id.as_str())).collect());
    print_json(&object(vec![(key, ids)]))
}

pub fn run_archive(ctx: &Ctx, args: ArchiveArgs) -> Result<ExitCode> {
    match args.idle_days {
        Some(days) => {
            let store = store(ctx)?;
            let age = Duration::from_secs(days.saturating_mul(86_400));
            // A session that cannot be read is named and left as it is; the others are archived.
            let mut skipped = Vec::new();
            let skip = |id: &str, e| {
                skipped.push((id.to_string(), e));
                Ok(())
            };
            let (what, ids) = if args.dry_run {
                ("would archive", store.idle_skipping(age, skip))
            } else {
                ("archived", store.archive_idle_skipping(age, skip))
            };
            let ids = ids.map_err(|e| ctx.error("cannot archive in store", e))?;
            if args.json {
                let key = if args.dry_run {
                    "wouldArchive"
                } else {
                    "archived"
                };
                print_ids(key, &ids)?;
            } else {
                let p = Paint::stdout();
                for id in &ids {
                    outln!("{} {id}", p.paint(Color::Green, what))?;
                }
            }
            Ok(if super::search::report_skipped(skipped) {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        None => each(ctx, &args.ids, "archived", args.json, |s, id| s.archive(id)),
    }
}

pub fn run_unarchive(ctx: &Ctx, args: UnarchiveArgs) -> Result<ExitCode> {
    each(ctx, &args.ids, "active", args.json, |s, id| s.unarchive(id))
}

pub fn run_delete(ctx: &Ctx, args: DeleteArgs) -> Result<ExitCode> {
    each(ctx, &args.ids, "deleted", args.json, |s, id| {
        // A session whose session.json is lost or damaged is deleted too: say what was done.
        let broken = match SessionMeta::load(&s.session_dir(id)?) {
            Err(agentlog::Error::BrokenMeta { path, reason }) => Some((path, reason)),
            _ => None,
        };
        s.delete(id)?;
        if let Some((path, reason)) = broken {
            eprintln!(
                "note: session {id}: its {} was damaged ({reason}); it was replaced by one \
                 saying \"deleted\" (the damaged file, if any, kept beside it as {META_FILE}.damaged)",
                path.display()
            );
        }
        Ok(())
    })
}

pub fn run_gc(ctx: &Ctx, args: GcArgs) -> Result<ExitCode> {
    let store = store(ctx)?;
    // A session whose state cannot be read (session.json lost or damaged) is left as it is,
    // named, and the others are collected.
    let mut skipped = Vec::new();
    let removed = store
        .gc_skipping(|id, e| {
            skipped.push((id.to_string(), e));
            Ok(())
        })
        .map_err(|e| ctx.error("cannot collect garbage in store", e))?;
    if args.json {
        print_ids("removed", &removed)?;
    } else {
        let p = Paint::stdout();
        for id in &removed {
            outln!("{} {id}", p.paint(Color::Yellow, "removed"))?;
        }
    }
    for (id, e) in &skipped {
        match explain_ref(e, id) {
            Some(why) => eprintln!("error: {why:#} (gc left it as it is)"),
            None => eprintln!("error: session {id}: {e} (gc left it as it is)"),
        }
    }
    Ok(if skipped.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
