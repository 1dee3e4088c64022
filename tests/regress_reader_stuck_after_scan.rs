//! A reader in another process that had found the active segment's records by scanning (no usable index when it opened it, e.g. while the writer was growing the file) kept those offsets forever and never saw a record appended after that (the cross-process stress test's reader got stuck).

use agentlog::log::{Log, LogReader, Options};

#[test]
fn a_reader_that_scanned_the_active_segment_still_sees_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), Options::default()).unwrap();
    for i in 0..5u8 {
        log.append(&[i; 40]).unwrap();
    }
    // No index to read: the reader finds the records by scanning.
    std::fs::remove_file(dir.path().join("00000000000000000000.idx")).unwrap();
    let mut reader = LogReader::open(dir.path()).unwrap();
    assert_eq!(reader.len(), 5);
    for i in 5..9u8 {
        log.append(&[i; 40]).unwrap();
    }
    assert_eq!(reader.refresh().unwrap(), 9);
    for i in 0..9u8 {
        assert_eq!(reader.get(u64::from(i)).unwrap().payload, [i; 40]);
    }
}
