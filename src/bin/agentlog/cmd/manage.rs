//! `agentlog archive|unarchive|delete ID…` and `agentlog gc`: the state of sessions in the store.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};

use agentlog::store::Store;

use crate::output::{Color, Paint};
use crate::target::{explain, Ctx};

/// Archive sessions: they stay readable (show, export, search, …), appends are refused
///
/// Takes session ids of the store, or --idle-days N to archive every active session whose last
/// event (or creation, when it has none) is older than N days. A session a writer has open is
/// not changed (its lock is held): an error names it. `unarchive` makes a session writable again.
#[derive(Debug, clap::Args)]
pub struct ArchiveArgs {
    /// Session ids of the store
    #[arg(required_unless_present = "idle_days", value_name = "ID")]
    ids: Vec<String>,
    /// Archive the active sessions idle for longer than N days instead
    #[arg(long, value_name = "N", conflicts_with = "ids")]
    idle_days: Option<u64>,
}

/// Make archived (or deleted, not yet garbage-collected) sessions active and writable again
#[derive(Debug, clap::Args)]
pub struct UnarchiveArgs {
    /// Session ids of the store
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
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
}

/// Remove the files of deleted sessions, and what imports or forks killed half-way left behind
///
/// Prints each session removed. A deleted session a writer still has open is left for a later gc.
#[derive(Debug, clap::Args)]
pub struct GcArgs {}

/// The store, which must exist: these commands never create one.
fn store(ctx: &Ctx) -> Result<Store> {
    if !ctx.exists() {
        return Err(anyhow!(
            "no store at {} (choose the store with --store DIR or $AGENTLOG_STORE)",
            ctx.shown()
        ));
    }
    ctx.open_store()
}

/// Applies `change` to each id, printing `WHAT ID` for each done and an error for each not;
/// exit 1 when any failed.
fn each(
    ctx: &Ctx,
    ids: &[String],
    what: &str,
    change: impl Fn(&Store, &str) -> agentlog::Result<()>,
) -> Result<ExitCode> {
    let store = store(ctx)?;
    let p = Paint::stdout();
    let mut failed = false;
    for id in ids {
        match change(&store, id) {
            Ok(()) => outln!("{} {id}", p.paint(Color::Green, what))?,
            Err(e) => {
                eprintln!("error: {:#}", explain(e, id));
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub fn run_archive(ctx: &Ctx, args: ArchiveArgs) -> Result<ExitCode> {
    match args.idle_days {
        Some(days) => {
            let store = store(ctx)?;
            let age = Duration::from_secs(days.saturating_mul(86_400));
            let archived = store
                .archive_idle(age)
                .map_err(|e| anyhow!("cannot archive in store {}: {e}", ctx.shown()))?;
            let p = Paint::stdout();
            for id in &archived {
                outln!("{} {id}", p.paint(Color::Green, "archived"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        None => each(ctx, &args.ids, "archived", |s, id| s.archive(id)),
    }
}

pub fn run_unarchive(ctx: &Ctx, args: UnarchiveArgs) -> Result<ExitCode> {
    each(ctx, &args.ids, "active", |s, id| s.unarchive(id))
}

pub fn run_delete(ctx: &Ctx, args: DeleteArgs) -> Result<ExitCode> {
    each(ctx, &args.ids, "deleted", |s, id| s.delete(id))
}

pub fn run_gc(ctx: &Ctx, _args: GcArgs) -> Result<ExitCode> {
    let store = store(ctx)?;
    let removed = store
        .gc()
        .map_err(|e| anyhow!("cannot collect garbage in store {}: {e}", ctx.shown()))?;
    let p = Paint::stdout();
    for id in &removed {
        outln!("{} {id}", p.paint(Color::Yellow, "removed"))?;
    }
    Ok(ExitCode::SUCCESS)
}
