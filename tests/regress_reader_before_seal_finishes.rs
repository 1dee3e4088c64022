//! A reader in another process only moved on to the next segment once the previous one's index said "sealed"; with segments sealed by a background thread, a reader refreshing before that thread finished stopped at the end of the old segment and missed the records after it.

mod common;

use agentlog::log::{Log, LogReader, Options};

/// Index header: state at 12..16 (1: open, the seal not finished).
fn mark_index_open(idx: &std::path::Path) {
    common::rewrite_header(idx, 12, &1u32.to_le_bytes());
}

#[test]
fn a_detached_reader_follows_a_roll_whose_seal_has_not_finished() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(4 << 10)
        .preallocate(4 << 10);
    let (log, _) = Log::open(dir.path(), opts).unwrap();
    for i in 0..10u8 {
        log.append(&[i; 100]).unwrap();
    }
    let mut reader = LogReader::open(dir.path()).unwrap();
    assert_eq!(reader.len(), 10);
    // Roll into a second segment, and make the first look as if its seal were still running.
    let mut n = 10u64;
    let segments = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "seg")
            })
            .count()
    };
    while segments() < 2 || n < 40 {
        log.append(&[n as u8; 100]).unwrap();
        n += 1;
        assert!(n < 1000, "the log never rolled");
    }
    log.sync().unwrap();
    mark_index_open(&dir.path().join("00000000000000000000.idx"));
    assert_eq!(reader.refresh().unwrap(), n);
    for seq in 0..n {
        assert_eq!(reader.get(seq).unwrap().payload, &[seq as u8; 100][..]);
    }
}
