//! A reader (`LogReader::open`) read a segment swapped in from another log and returned that log's payloads as this log's records.

use agentlog::log::{CorruptionKind, Log, LogReader, Options};

fn write(dir: &std::path::Path, fill: u8) {
    let opts = Options::default()
        .segment_size(1 << 10)
        .preallocate(1 << 10);
    let (log, _) = Log::open(dir, opts).unwrap();
    for _ in 0..40 {
        log.append(&[fill; 100]).unwrap();
    }
    log.close().unwrap();
}

#[test]
fn a_reader_refuses_a_segment_of_another_log() {
    let base = tempfile::tempdir().unwrap();
    let (a, b) = (base.path().join("a"), base.path().join("b"));
    write(&a, 1);
    write(&b, 2);
    let mut segs: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".seg"))
        .collect();
    segs.sort();
    assert!(segs.len() >= 3);
    let name = &segs[1];
    std::fs::copy(b.join(name), a.join(name)).unwrap();
    let base1: u64 = name.to_string_lossy()[..20].parse().unwrap();

    let r = LogReader::open(&a).unwrap();
    assert_eq!(r.get(base1 - 1).unwrap().payload, [1u8; 100]);
    let e = r.get(base1).unwrap_err();
    let c = e.corruption().expect("damage, not data");
    assert_eq!((&c.path, c.offset), (&a.join(name), 24));
    assert!(matches!(c.kind, CorruptionKind::ForeignSegment { .. }));
    for rec in r.iter() {
        match rec {
            Ok(rec) => assert_eq!(rec.payload, [1u8; 100], "seq {}", rec.seq),
            Err(e) => assert!(e.corruption().is_some(), "{e}"),
        }
    }
}
