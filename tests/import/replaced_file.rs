//! A source file replaced by another at the same path (a new file, longer than what was
//! imported) was continued from the byte where the last import stopped: the session got a
//! fragment of a line and the other file's later lines, and `export --to` gave back neither
//! file (QA pass of 2026-12-08). The bytes imported last are now checked first.

use agentlog::import::{export_source, import_paths, Options};
use agentlog::store::Store;

#[test]
fn a_file_replaced_at_its_path_is_not_continued() {
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import/claude-code/marot__spotter__short.jsonl");
    let text = std::fs::read_to_string(sample).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.jsonl");
    let first: String = lines[..6].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &first).unwrap();
    let store = Store::open(tmp.path().join("store")).unwrap();
    let one = |store: &Store| {
        import_paths(
            store,
            std::slice::from_ref(&file),
            &Options::default(),
            |_, _| {},
        )
        .unwrap()
    };
    let before = one(&store);
    assert_eq!(before.created, ["claude-s"], "{before:?}");
    let exported = |store: &Store| {
        let mut out = Vec::new();
        export_source(&store.open_reader("claude-s").unwrap(), &mut out).unwrap();
        out
    };
    assert!(exported(&store) == first.as_bytes());

    // Another file, longer, in its place: lines 2.. of the sample, then more.
    let other: String = lines[1..].iter().map(|l| format!("{l}\n")).collect();
    assert!(other.len() > first.len());
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, &other).unwrap();
    let after = one(&store);
    assert!(after.updated.is_empty(), "{after:?}");
    assert!(
        after
            .warnings
            .iter()
            .any(|w| w.contains("another file replaced it")),
        "{:?}",
        after.warnings
    );
    assert!(
        exported(&store) == first.as_bytes(),
        "the session is as it was"
    );

    // The file only appended to goes on as before.
    let grown: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &grown).unwrap();
    let grew = one(&store);
    assert_eq!(grew.updated, ["claude-s"], "{grew:?}");
    assert!(exported(&store) == grown.as_bytes());
}
