//! How an imported session is written (plain buffered writes in its hidden folder, no
//! `LASTSEG` hint, no `CHECKPOINT`): the files are an ordinary log that `verify`, readers,
//! writers and export all take as they are, also when the session spans many segments.

use std::path::PathBuf;

use agentlog::event::Event;
use agentlog::import::{export_source, import_paths, Options};
use agentlog::session::CheckpointCheck;
use agentlog::store::Store;
use testkit::import_tree::{make_tree, Which};

/// Imports `tree` into a new store at `root` whose `agentlog.toml` is `config`.
fn import_into(root: &std::path::Path, config: &str, tree: &std::path::Path) -> Store {
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join("agentlog.toml"), config).unwrap();
    let store = Store::open(root).unwrap();
    let options = Options {
        workers: Some(2),
        ..Options::default()
    };
    let summary = import_paths(&store, &[tree.to_path_buf()], &options, |_, _| {}).unwrap();
    assert!(!summary.created.is_empty());
    store
}

fn events(store: &Store, id: &str) -> Vec<Event> {
    let r = store.open_reader(id).unwrap();
    (0..r.len()).map(|s| r.get_owned(s).unwrap()).collect()
}

fn segments(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "seg")
        })
        .count()
}

/// Every session of a tree imported with 64 KiB segments (256 KiB events: the larger sessions
/// span several segments, the batch written record by record, each
/// written through the buffer and flushed at each batch, roll and seal) verifies clean, holds
/// the events of the same import with one segment a session, and exports its source file byte
/// for byte; its folder has no hint, and no checkpoint but one a seal wrote, which matches.
#[test]
fn imported_sessions_are_ordinary_logs_in_small_and_large_segments() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let (files, _) = make_tree(&tree, 1, Which::Both);
    assert!(files > 0);
    let small = import_into(
        &dir.path().join("small"),
        "segment_size = \"64KiB\"\nmax_event_size = \"256KiB\"\n",
        &tree,
    );
    let large = import_into(&dir.path().join("large"), "", &tree);
    let mut ids: Vec<String> = small.list().unwrap().into_iter().map(|s| s.id).collect();
    ids.sort();
    let mut multi = 0;
    for id in &ids {
        let sdir: PathBuf = small.session_dir(id).unwrap();
        let report = agentlog::log::verify(&sdir).unwrap();
        assert!(report.damage.is_none(), "{id}: {:?}", report.damage);
        assert!(report.strays.is_empty(), "{id}: {:?}", report.strays);
        let nseg = segments(&sdir);
        assert_eq!(report.segments.len(), nseg, "{id}");
        if nseg > 1 {
            multi += 1;
        }
        assert!(
            !sdir.join(agentlog::log::LASTSEG_FILE).exists(),
            "{id}: the hint was written"
        );
        // No checkpoint at the close; a session that sealed segments may have one written
        // after a seal (in the background, read from the log being built): it must match.
        let check = small.open_reader(id).unwrap().verify_checkpoint().unwrap();
        if nseg == 1 {
            assert_eq!(check, CheckpointCheck::Missing, "{id}");
        } else {
            assert!(
                matches!(
                    check,
                    CheckpointCheck::Missing | CheckpointCheck::Matches { .. }
                ),
                "{id}: {check:?}"
            );
        }
        let a = events(&small, id);
        let b = events(&large, id);
        assert_eq!(report.events, a.len() as u64, "{id}");
        assert_eq!(a, b, "{id}: the events differ with the segment size");
        if !id.ends_with("-sidechains") {
            let mut out = Vec::new();
            export_source(&small.open_reader(id).unwrap(), &mut out).unwrap();
            let mut again = Vec::new();
            export_source(&large.open_reader(id).unwrap(), &mut again).unwrap();
            assert!(out == again, "{id}: the exports differ");
            assert!(!out.is_empty(), "{id}: nothing exported");
        }
    }
    assert!(
        multi > 0,
        "no session spans several segments: the test tests nothing"
    );
}

/// A writer opening an imported session finds a cleanly closed log (nothing to recover, no
/// index rebuilt), with every event, and on close writes the hint and the checkpoint the import left out.
#[test]
fn a_writer_continues_an_imported_session_and_restores_its_caches() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    make_tree(&tree, 1, Which::Both);
    let store = import_into(
        &dir.path().join("s"),
        "segment_size = \"64KiB\"\nmax_event_size = \"256KiB\"\n",
        &tree,
    );
    let id = store
        .list()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .find(|id| id.starts_with("codex-"))
        .unwrap();
    let sdir = store.session_dir(&id).unwrap();
    let before = events(&store, &id);
    let session = store.open_session(&id).unwrap();
    let report = session.open_report();
    assert!(report.log.clean, "{:?}", report.log);
    assert!(report.log.cut.is_none(), "{:?}", report.log);
    assert!(report.log.indexes_rebuilt.is_empty(), "{:?}", report.log);
    assert!(report.log.junk_cleared.is_empty(), "{:?}", report.log);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(session.len(), before.len() as u64);
    session.close().unwrap();
    for name in [agentlog::log::LASTSEG_FILE, "CHECKPOINT"] {
        assert!(
            sdir.join(name).exists(),
            "{name} was not written by the writer"
        );
    }
    assert_eq!(events(&store, &id), before);
    let report = agentlog::log::verify(&sdir).unwrap();
    assert!(report.damage.is_none(), "{:?}", report.damage);
}
