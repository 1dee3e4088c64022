//! `agentlog import FILE|- [--id ID] [--title T]`: a new session from JSONL, all or nothing.

use std::io::{BufRead, BufReader, Read};
use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::store::ImportOptions;

use crate::progress::Progress;
use crate::target::Ctx;

/// Create a session from a JSONL file, all or nothing
///
/// The file is canonical (or any valid) JSONL of EVENTS.md §4. The id is --id, else the id of the file's session header, else a new one. An id that exists is
/// refused. Every event is checked as a live append would be (seq order, lifecycle rules,
/// projection); a refused file writes nothing. Prints the new session's id alone on stdout.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The JSONL file, or - for standard input
    #[arg(value_name = "FILE|-")]
    file: String,
    /// The session id (1 to 128 characters from A-Z a-z 0-9 . _ -)
    #[arg(long)]
    id: Option<String>,
    /// The session title (else the header's)
    #[arg(long)]
    title: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    if let Some(id) = &args.id {
        agentlog::session::validate_id(id).map_err(|e| anyhow!("{e}"))?;
    }
    let (input, size, name): (Box<dyn Read>, Option<u64>, String) = if args.file == "-" {
        (
            Box::new(std::io::stdin().lock()),
            None,
            "standard input".into(),
        )
    } else {
        let file = std::fs::File::open(&args.file)
            .map_err(|e| anyhow!("cannot read {}: {e}", args.file))?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(anyhow!("cannot read {}: it is a directory", args.file));
        }
        let size = file.metadata().ok().map(|m| m.len());
        (Box::new(file), size, args.file.clone())
    };
    let input: Box<dyn BufRead> = Box::new(BufReader::with_capacity(1 << 16, input));
    let store = ctx.open_store()?;
    let mut progress = Progress::bytes(size, "importing");
    let options = ImportOptions {
        id: args.id,
        title: args.title,
    };
    let report = store
        .import(input, options, |bytes| progress.set(bytes))
        .map_err(|e| refused(e, &name, ctx))?;
    progress.finish();
    outln!("{}", report.id)?;
    Ok(ExitCode::SUCCESS)
}

fn refused(e: agentlog::Error, name: &str, ctx: &Ctx) -> anyhow::Error {
    match e {
        agentlog::Error::Exists(id) => anyhow!(
            "cannot import {name}: a session {id:?} exists already in store {}; nothing was \
             written (give another id with --id)",
            ctx.shown()
        ),
        agentlog::Error::InvalidId(_) => anyhow!("cannot import {name}: {e} (give one with --id)"),
        other => anyhow!("cannot import {name}: {other}"),
    }
}
