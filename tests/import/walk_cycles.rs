//! `import --from` walked a directory tree through its symbolic links without noticing a link
//! back to a parent: one such link read every file about 40 times (until the path grew too
//! long), two made the walk exponential, so it never finished (QA pass of 2026-12-08).

use std::path::PathBuf;

use agentlog::import::{import_paths, Options};
use agentlog::store::Store;

#[test]
fn a_link_back_to_a_parent_directory_is_walked_once() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("src/proj");
    std::fs::create_dir_all(&proj).unwrap();
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import/claude-code/marot__spotter__short.jsonl");
    std::fs::copy(&sample, proj.join("s.jsonl")).unwrap();
    // One link back (two would make the old walk never end rather than fail).
    std::os::unix::fs::symlink(".", proj.join("again")).unwrap();
    let store = Store::open(tmp.path().join("store")).unwrap();
    let summary = import_paths(
        &store,
        &[tmp.path().join("src")],
        &Options::default(),
        |_, _| {},
    )
    .unwrap();
    assert_eq!(summary.files, 1, "{summary:?}");
    assert_eq!(summary.created.len(), 1, "{summary:?}");
    assert_eq!(summary.failed, 0, "{summary:?}");
}
