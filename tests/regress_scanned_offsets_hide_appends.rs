//! After a reader had found a damaged index entry of the active segment and fallen back to offsets found by scanning, records appended later to that segment could not be read with `get` (the scanned offsets were used for every seq; the new records are past them), and a full check (strict, salvage) kept an index whose middle entries were wrong. Found by the segment_decode fuzz target (input in tests/data/).

#[path = "common/fuzz_checks.rs"]
mod fuzz_checks;

use agentlog::log::{Log, Options, RecoveryMode};

#[test]
fn the_fuzz_input_passes() {
    fuzz_checks::segment_decode(include_bytes!(
        "data/fuzz-segment-decode-wrong-index-entry.bin"
    ));
}

#[test]
fn appends_after_a_damaged_index_entry_are_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), Options::default()).unwrap();
    for i in 0..6u8 {
        log.append(&[i; 40]).unwrap();
    }
    log.close().unwrap();
    // Entry 2 of the index points into the middle of a record.
    let idx = dir.path().join("00000000000000000000.idx");
    let mut b = std::fs::read(&idx).unwrap();
    b[64 + 8] ^= 0x08;
    std::fs::write(&idx, &b).unwrap();
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::Strict] {
        let (log, report) = Log::open(dir.path(), Options::default().recovery(mode)).unwrap();
        let r = log.reader();
        assert_eq!(r.get(2).unwrap().payload, [2u8; 40]);
        let seq = log.append(&[9; 40]).unwrap();
        assert_eq!(
            log.reader().get(seq).unwrap().payload,
            [9u8; 40],
            "{mode:?}"
        );
        // The reader taken before the append does not see it (a snapshot), and says so.
        assert!(r.get(seq).unwrap_err().to_string().contains("out of range"));
        if mode == RecoveryMode::Strict {
            assert_eq!(report.indexes_rebuilt, vec![idx.clone()], "{mode:?}");
        }
        log.close().unwrap();
    }
}
