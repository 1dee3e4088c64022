//! With segments sealed by a background thread, a power loss before the seal's fdatasync left a sealed-looking segment that ended early with later segments after it, and the log refused to open (corruption) instead of cutting the torn tail.

use agentlog::log::{DamageClass, Log, LogReader, Options, DAMAGED_DIR};

fn opts() -> Options {
    Options::default()
        .segment_size(4 << 10)
        .preallocate(1 << 10)
}

/// Index header of a segment: state at 12..16, crc of 0..60 at 60..64.
fn mark_index_open(idx: &std::path::Path) {
    let mut b = std::fs::read(idx).unwrap();
    b[12..16].copy_from_slice(&1u32.to_le_bytes());
    // synced end: nothing of the segment's records was synced.
    b[56..60].copy_from_slice(&64u32.to_le_bytes());
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(idx, b).unwrap();
}

#[test]
fn a_segment_whose_seal_never_finished_is_cut_as_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), opts()).unwrap();
    for i in 0..200u32 {
        log.append(&[i as u8; 100]).unwrap();
    }
    log.abandon();
    let mut segs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    assert!(segs.len() >= 4, "{segs:?}");
    // The power failed while the second segment was being sealed: its index still says open,
    // and its last records never reached the disk.
    let second = &segs[1];
    let base: u64 = second
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    mark_index_open(&second.with_extension("idx"));
    let at = 64 + 5 * 128;
    let mut b = std::fs::read(second).unwrap();
    let len = b.len();
    b[at..len].fill(0);
    std::fs::write(second, &b).unwrap();

    let (log, report) = Log::open(dir.path(), opts()).expect("a torn tail is cut, not refused");
    let cut = report.cut.expect("the cut is reported");
    assert_eq!(cut.class, DamageClass::TornTail);
    assert_eq!(cut.first_lost_seq, base + 5);
    assert_eq!(cut.dropped_segments.len(), segs.len() - 2);
    assert_eq!(log.len(), base + 5);
    assert!(dir.path().join(DAMAGED_DIR).is_dir());
    assert_eq!(log.append(b"next").unwrap(), base + 5);
    drop(log);
    let r = LogReader::open(dir.path()).unwrap();
    for seq in 0..base + 5 {
        assert_eq!(r.get(seq).unwrap().payload, &[seq as u8; 100][..]);
    }
}
