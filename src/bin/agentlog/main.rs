//! `agentlog`: the command line over the agentlog library. One file per command group in `cmd/`.
//!
//! Exit codes: 0 success, 1 failure (the message on stderr starts with `error:`), 2 usage.
#![deny(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

/// `println!` that returns the error of a closed stdout instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` that returns the error of a closed stdout instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod cmd;
mod lines;
mod output;
mod progress;
mod target;

use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::target::Ctx;

const AFTER_HELP: &str = "\
A SESSION is a session id in the store, or the path of a session directory (one that holds
session.json, or a log whose session.json is lost; an argument containing '/' is a path, and so
is the name of a directory in the current directory when the store holds no session of that id).

Exit codes: 0 success, 1 failure (a message on stderr starting with \"error:\"), 2 usage.";

/// Append-only, checksummed logs of LLM agent sessions: import, inspect, follow, search, verify,
/// recover.
#[derive(Debug, Parser)]
#[command(name = "agentlog", version, after_help = AFTER_HELP, max_term_width = 100)]
struct Cli {
    /// The store directory [default: $AGENTLOG_STORE, else ./.agentlog]
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Create(cmd::create::Args),
    Import(cmd::import::Args),
    Export(cmd::export::Args),
    Append(cmd::append::Args),
    Show(cmd::show::ShowArgs),
    Tail(cmd::show::TailArgs),
    Derive(cmd::derive::Args),
    Status(cmd::status::Args),
    Verify(cmd::verify::Args),
    Recover(cmd::recover::Args),
    Close(cmd::close::Args),
    Fork(cmd::fork::Args),
    Replay(cmd::replay::Args),
    Ls(cmd::ls::Args),
    Search(cmd::search::Args),
    Stats(cmd::stats::Args),
    Archive(cmd::manage::ArchiveArgs),
    Unarchive(cmd::manage::UnarchiveArgs),
    Delete(cmd::manage::DeleteArgs),
    Gc(cmd::manage::GcArgs),
    Ship(cmd::ship::Args),
    Restore(cmd::restore::Args),
    View(cmd::view::Args),
    Secrets(cmd::secrets::ScanArgs),
    Redact(cmd::secrets::RedactArgs),
    Purge(cmd::secrets::PurgeArgs),
}

fn main() -> ExitCode {
    // Usage errors print clap's message and exit 2.
    let cli = Cli::parse();
    let ctx = Ctx::new(cli.store);
    let result = match cli.command {
        Command::Create(a) => cmd::create::run(&ctx, a),
        Command::Import(a) => cmd::import::run(&ctx, a),
        Command::Export(a) => cmd::export::run(&ctx, a),
        Command::Append(a) => cmd::append::run(&ctx, a),
        Command::Show(a) => cmd::show::run_show(&ctx, a),
        Command::Tail(a) => cmd::show::run_tail(&ctx, a),
        Command::Derive(a) => cmd::derive::run(&ctx, a),
        Command::Status(a) => cmd::status::run(&ctx, a),
        Command::Verify(a) => cmd::verify::run(&ctx, a),
        Command::Recover(a) => cmd::recover::run(&ctx, a),
        Command::Close(a) => cmd::close::run(&ctx, a),
        Command::Fork(a) => cmd::fork::run(&ctx, a),
        Command::Replay(a) => cmd::replay::run(&ctx, a),
        Command::Ls(a) => cmd::ls::run(&ctx, a),
        Command::Search(a) => cmd::search::run(&ctx, a),
        Command::Stats(a) => cmd::stats::run(&ctx, a),
        Command::Archive(a) => cmd::manage::run_archive(&ctx, a),
        Command::Unarchive(a) => cmd::manage::run_unarchive(&ctx, a),
        Command::Delete(a) => cmd::manage::run_delete(&ctx, a),
        Command::Gc(a) => cmd::manage::run_gc(&ctx, a),
        Command::Ship(a) => cmd::ship::run(&ctx, a),
        Command::Restore(a) => cmd::restore::run(&ctx, a),
        Command::View(a) => cmd::view::run(&ctx, a),
        Command::Secrets(a) => cmd::secrets::run_scan(&ctx, a),
        Command::Redact(a) => cmd::secrets::run_redact(&ctx, a),
        Command::Purge(a) => cmd::secrets::run_purge(&ctx, a),
    };
    match result {
        Ok(code) => code,
        Err(e) if broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// True when the error is a closed standard output (`agentlog show x | head`): not a failure.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
    })
}
