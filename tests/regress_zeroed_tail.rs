//! A cleanly closed log whose last records were zeroed (or the file cut exactly at a record start) opened as a shorter log without any report, even in strict mode.
//! (Since then, records a clean close vouches for are never a torn tail: every mode but salvage
//! refuses to open, naming the damage; salvage cuts and reports it.)

use agentlog::log::{DamageClass, Error, Log, Options, RecoveryMode};

fn opts() -> Options {
    Options::default()
        .segment_size(4 << 10)
        .preallocate(1 << 10)
}

/// Writes 10 records of 100 bytes (128 bytes each on disk, the first at offset 64) and closes.
fn write(dir: &std::path::Path) -> std::path::PathBuf {
    let (log, _) = Log::open(dir, opts()).unwrap();
    for i in 0..10u8 {
        log.append(&[i + 1; 100]).unwrap();
    }
    log.close().unwrap();
    dir.join("00000000000000000000.seg")
}

#[test]
fn zeroed_last_records_of_a_closed_log_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let seg = write(dir.path());
    let at = 64 + 7 * 128;
    let mut b = std::fs::read(&seg).unwrap();
    let len = b.len();
    b[at..len].fill(0);
    std::fs::write(&seg, &b).unwrap();

    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateTornTail] {
        let e = Log::open(dir.path(), opts().recovery(mode)).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e}");
        let c = e.corruption().unwrap();
        assert_eq!((&c.path, c.offset, c.seq), (&seg, at as u64, Some(7)));
    }

    let (log, report) = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
    assert_eq!(log.len(), 7);
    let cut = report.cut.expect("the lost records are reported");
    assert_eq!(cut.class, DamageClass::Corruption);
    assert_eq!((cut.first_lost_seq, cut.at.offset), (7, at as u64));
}

#[test]
fn a_closed_log_cut_exactly_at_a_record_start_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let seg = write(dir.path());
    let at = 64 + 9 * 128;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(at)
        .unwrap();
    let e = Log::open(dir.path(), opts().recovery(RecoveryMode::Strict)).unwrap_err();
    assert_eq!(e.corruption().unwrap().offset, at);
    let e = Log::open(dir.path(), opts()).unwrap_err();
    assert_eq!(e.corruption().unwrap().offset, at);
    let (log, report) = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
    assert_eq!(log.len(), 9);
    assert_eq!(report.cut.expect("reported").first_lost_seq, 9);
}
