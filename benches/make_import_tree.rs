//! Writes a tree of Codex rollouts and Claude Code transcripts to measure `agentlog import
//! --from` on (`testkit/src/import_tree.rs`: copies of the six real samples, each a session of its
//! own). The tree is generated, never committed.
//!
//! `cargo run --release -p agentlog-benches --bin make_import_tree -- DIR MB [both|codex|claude-code]`
//! writes at least MB megabytes (10^6 bytes) of copies under DIR (which must not exist yet).

use testkit::import_tree;

use std::path::PathBuf;
use std::process::ExitCode;

use import_tree::{copy_bytes, make_tree, Which};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: make_import_tree DIR MB [both|codex|claude-code]";
    let (Some(dir), Some(mb)) = (
        args.first(),
        args.get(1).and_then(|s| s.parse::<u64>().ok()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let Some(which) = Which::from_name(args.get(2).map_or("both", String::as_str)) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let dir = PathBuf::from(dir);
    if dir.exists() {
        eprintln!("{} exists: give a new directory", dir.display());
        return ExitCode::FAILURE;
    }
    let per_copy = copy_bytes(which).max(1);
    let copies = (mb * 1_000_000).div_ceil(per_copy) as usize;
    let (files, bytes) = make_tree(&dir, copies.max(1), which);
    println!(
        "{}: {copies} copies, {files} files, {bytes} bytes",
        dir.display()
    );
    ExitCode::SUCCESS
}
