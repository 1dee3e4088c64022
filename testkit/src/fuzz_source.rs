//! The check of the `source_import` fuzz target, shared with `tests/import/fuzz_sources.rs`: a
//! Codex rollout or a Claude Code transcript, real or damaged, imported the way `agentlog
//! import` does (`agentlog::import::import_paths`), in one run or in two (the first cut at a line,
//! with or without `--keep-open`), then once more unchanged.
//!
//! Whatever the bytes: nothing panics; every session in the store is sound (its log verifies,
//! every event keeps the lifecycle rules, its checkpoint equals a full replay); a run without
//! `--keep-open` leaves no turn or call open; the derived history renders as requests both
//! providers accept; a file that imported gives its bytes back (`export --to`); and importing
//! the unchanged file again writes nothing.
//!
//! Input layout: byte 0 holds flags (bit 0: two runs; bit 1: the first run keeps open; bit 2:
//! the format is given, bit 3 saying which, rather than detected), byte 1 where the first run
//! cuts (that share of the lines, in 256ths), the rest is the file.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use agentlog::import::{export_source, import_paths, Format, Options, Summary};
use agentlog::store::Store;
use agentlog::SessionReader;

use crate::project::provider_schema::{check_anthropic, check_openai};

/// Runs the check on one input (see the module's doc for its layout).
pub fn source_import(data: &[u8]) {
    let (flags, cut, file) = match data {
        [flags, cut, file @ ..] => (*flags, *cut, file),
        _ => return,
    };
    let two_runs = flags & 1 != 0;
    let first_keeps_open = flags & 2 != 0;
    let format = (flags & 4 != 0).then_some(if flags & 8 != 0 {
        Format::ClaudeCode
    } else {
        Format::Codex
    });
    // Stores on tmpfs when there is one: the check is about the importer, not the disk.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    let src_dir = dir.path().join("src");
    std::fs::create_dir(&src_dir).expect("source dir");
    let path = src_dir.join("session.jsonl");
    let store = Store::open(dir.path().join("store")).expect("store");

    if two_runs {
        let lines = line_ends(file);
        let take = lines.len() * usize::from(cut) / 256;
        let prefix = take.checked_sub(1).map_or(0, |i| lines[i]);
        std::fs::write(&path, &file[..prefix]).expect("write the first part");
        // An error is a refused file: allowed, as long as the store stays sound.
        let _ = run(&store, &path, format, first_keeps_open);
        check_store(&store, None);
    }
    std::fs::write(&path, file).expect("write the file");
    let last = run(&store, &path, format, false);
    // What `export --to` gives back: the whole file, but a last line without a newline that is
    // not JSON, which the import leaves out until it is complete (with a warning).
    let expected = last.as_ref().ok().map(|summary| {
        let cut_tail = summary
            .warnings
            .iter()
            .any(|w| w.contains("the last line is incomplete"));
        match file.iter().rposition(|&b| b == b'\n') {
            _ if !cut_tail => file,
            Some(at) => &file[..at + 1],
            None => &file[..0],
        }
    });
    check_store(&store, expected);
    if last.is_ok() {
        let again = run(&store, &path, format, false).expect("the unchanged file imports again");
        assert!(
            again.created.is_empty() && again.total_events() == 0,
            "importing the unchanged file again wrote events: {again:?}"
        );
    }
}

/// The offsets just past each line's `\n` (and the end of a last line without one).
fn line_ends(file: &[u8]) -> Vec<usize> {
    let mut ends: Vec<usize> = file
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    if ends.last().copied().unwrap_or(0) < file.len() {
        ends.push(file.len());
    }
    ends
}

/// One `agentlog import` run over the file: the summary, or why the file was not imported.
fn run(
    store: &Store,
    path: &Path,
    format: Option<Format>,
    keep_open: bool,
) -> Result<Summary, String> {
    let options = Options {
        format,
        workers: Some(1),
        keep_open,
    };
    let summary = import_paths(store, &[path.to_path_buf()], &options, |_, _| {})
        .map_err(|e| e.to_string())?;
    if summary.failed > 0 {
        return Err(summary.warnings.join("; "));
    }
    Ok(summary)
}

/// Every session of the store is sound; with `closed_from`, the last run imported the file
/// without `--keep-open`: nothing is left open, and the file's one main session gives back
/// `closed_from` (the file but an incomplete last line).
fn check_store(store: &Store, closed_from: Option<&[u8]>) {
    let sessions = store.list().expect("list the store");
    let mut main: Vec<PathBuf> = Vec::new();
    for info in &sessions {
        let reader = store
            .open_reader(&info.id)
            .unwrap_or_else(|e| panic!("{}: an imported session does not open: {e}", info.id));
        check_session(&reader, &info.id, closed_from.is_some());
        if !info.id.ends_with("-sidechains") {
            main.push(reader.dir().to_path_buf());
        }
    }
    let Some(file) = closed_from else {
        return;
    };
    if let [only] = main.as_slice() {
        let id = sessions
            .iter()
            .find(|s| !s.id.ends_with("-sidechains"))
            .map(|s| s.id.clone())
            .unwrap_or_default();
        let reader = store.open_reader(&id).expect("the main session opens");
        assert_eq!(reader.dir(), only.as_path());
        let mut out = Vec::new();
        export_source(&reader, &mut out).unwrap_or_else(|e| panic!("{id}: export --to: {e}"));
        assert!(
            out == file,
            "{id}: export --to differs from the file ({} bytes against {})",
            out.len(),
            file.len()
        );
    }
}

/// One session: its log verifies, its events keep the lifecycle rules (and with `closed`, leave
/// nothing open), its checkpoint equals a full replay, its history renders for both providers.
fn check_session(reader: &SessionReader, id: &str, closed: bool) {
    let report = agentlog::log::verify(reader.dir()).unwrap_or_else(|e| panic!("{id}: {e}"));
    assert!(
        report.damage.is_none(),
        "{id}: damaged: {:?}",
        report.damage
    );
    let (lifecycle, violations) = reader
        .lifecycle_at(reader.len())
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    assert!(violations.is_empty(), "{id}: {violations:?}");
    if closed {
        let work = lifecycle.open_work();
        assert!(work.turn.is_none(), "{id}: a turn is left open: {work:?}");
        assert!(work.unanswered_calls.is_empty(), "{id}: {work:?}");
    }
    match reader.verify_checkpoint() {
        Ok(agentlog::session::CheckpointCheck::Mismatch { detail, .. }) => {
            panic!("{id}: checkpoint: {detail}")
        }
        Ok(_) => {}
        Err(e) => panic!("{id}: checkpoint check: {e}"),
    }
    let messages = reader
        .messages()
        .unwrap_or_else(|e| panic!("{id}: derive: {e}"));
    let openai = agentlog::projection::render_openai(&messages);
    let anthropic = agentlog::projection::render_anthropic(&messages);
    if !messages.is_empty() {
        check_openai(&openai).unwrap_or_else(|e| panic!("{id}: openai: {e}\n{openai}"));
        check_anthropic(&anthropic).unwrap_or_else(|e| panic!("{id}: anthropic: {e}\n{anthropic}"));
    }
}
