//! Recovery: torn tails, flipped bits, damaged and missing indexes, foreign segments.

use testkit as common;

use std::path::{Path, PathBuf};

use agentlog::log::{CorruptionKind, DamageClass, Error, Log, LogReader, Options, RecoveryMode};
use common::payload;

fn opts() -> Options {
    Options::default()
        .segment_size(64 << 10)
        .preallocate(16 << 10)
}

fn write_log(dir: &Path, n: u64) {
    let log = Log::open(dir, opts()).unwrap();
    for seq in 0..n {
        log.append(&payload(seq % 50)).unwrap();
    }
    log.close().unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Offset of record `i` of a segment, read from its index file.
fn record_offset(idx: &Path, i: u64) -> u64 {
    let b = std::fs::read(idx).unwrap();
    let at = 64 + 4 * i as usize;
    u64::from(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()))
}

fn record_count(idx: &Path) -> u64 {
    let b = std::fs::read(idx).unwrap();
    u64::from_le_bytes(b[40..48].try_into().unwrap())
}

fn flip(path: &Path, offset: u64, mask: u8) {
    let mut b = std::fs::read(path).unwrap();
    b[offset as usize] ^= mask;
    std::fs::write(path, b).unwrap();
}

fn all_payloads_match(dir: &Path, n: u64) {
    let r = LogReader::open(dir).unwrap();
    assert_eq!(r.len(), n);
    for seq in 0..n {
        assert_eq!(
            r.get(seq).unwrap().payload,
            payload(seq % 50).as_slice(),
            "seq {seq}"
        );
    }
}

#[test]
fn the_last_record_truncated_at_every_byte_offset_is_refused_or_salvaged_and_reported() {
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    let n = 30;
    write_log(&orig, n);
    let seg = common::segments(&orig).pop().unwrap();
    let idx = common::indexes(&orig).pop().unwrap();
    let count = record_count(&idx);
    let last_at = record_offset(&idx, count - 1);
    let seg_len = std::fs::metadata(&seg).unwrap().len();
    let payload_end = last_at + 16 + payload((n - 1) % 50).len() as u64;
    // The file keeps its preallocated length after a clean close (its tail reads as zeros):
    // cut through the last record, its padding, and a little of the zero tail.
    let record_end = payload_end.div_ceil(16) * 16;
    assert!(seg_len >= record_end);
    for cut in last_at..(record_end + 32).min(seg_len) {
        let keeps_last = cut >= payload_end;
        let dir = base.path().join(format!("cut{cut}"));
        copy_dir(&orig, &dir);
        let seg_copy = dir.join(seg.file_name().unwrap());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&seg_copy)
            .unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        if !keeps_last {
            // The clean close vouches for the last record: losing it is damage, refused by the
            // default mode (naming it) and cut by salvage.
            let e = Log::open(&dir, opts()).unwrap_err();
            let c = e
                .corruption()
                .unwrap_or_else(|| panic!("cut at {cut}: {e}"));
            assert_eq!((&c.path, c.offset), (&seg_copy, last_at), "cut at {cut}");
        }
        let mode = if keeps_last {
            RecoveryMode::TolerateTornTail
        } else {
            RecoveryMode::Salvage
        };
        let log = Log::open(&dir, opts().recovery(mode)).unwrap();
        let report = log.recovery_report().clone();
        if keeps_last {
            // Only padding or the zero tail was cut: the record is complete.
            assert_eq!(log.len(), n, "cut at {cut}");
            assert!(report.cut.is_none());
            // A cut through the padding is noticed (the index tail no longer matches the file).
            assert_eq!(report.clean, cut >= record_end, "cut at {cut}");
            continue;
        }
        assert!(!report.clean);
        assert_eq!(log.len(), n - 1, "cut at {cut}");
        // A cut exactly at the record start leaves nothing torn behind: the records simply end.
        if cut > last_at {
            let c = report
                .cut
                .as_ref()
                .unwrap_or_else(|| panic!("no cut reported at {cut}"));
            assert_eq!(c.class, DamageClass::Corruption);
            assert_eq!(c.first_lost_seq, n - 1);
            assert_eq!(c.at.offset, last_at);
            assert_eq!(c.at.path, seg_copy);
            assert_eq!(c.bytes, cut - last_at);
        }
        // The next append continues at the right seq, and everything before is intact.
        assert_eq!(log.append(b"after").unwrap(), n - 1);
        drop(log);
        let r = LogReader::open(&dir).unwrap();
        assert_eq!(r.len(), n);
        for seq in 0..n - 1 {
            assert_eq!(r.get(seq).unwrap().payload, payload(seq % 50).as_slice());
        }
        assert_eq!(r.get(n - 1).unwrap().payload, b"after");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_truncated_closed_log_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 10);
    let seg = common::segments(dir.path()).pop().unwrap();
    let idx = common::indexes(dir.path()).pop().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    // Into the payload of the last record.
    f.set_len(record_offset(&idx, 9) + 20).unwrap();
    drop(f);
    let before = std::fs::read(&seg).unwrap();
    // The log was closed cleanly: its last record is vouched for, so its loss is damage (not a
    // torn tail), refused by strict and default modes alike.
    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateTornTail] {
        let err = Log::open(dir.path(), opts().recovery(mode)).unwrap_err();
        let c = match &err {
            Error::Corrupt(c) => c,
            other => panic!("unexpected {other}"),
        };
        assert_eq!(c.path, seg);
        assert_eq!(c.seq, Some(9));
        assert_eq!(std::fs::read(&seg).unwrap(), before);
    }
    // Salvage cuts it.
    let log = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(log.len(), 9);
    assert_eq!(report.cut.unwrap().class, DamageClass::Corruption);
}

#[test]
fn a_flipped_bit_in_a_sealed_segment_fails_open_and_salvage_keeps_the_prefix() {
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    let n = 2000;
    write_log(&orig, n);
    let segs = common::segments(&orig);
    assert!(segs.len() >= 3, "need sealed segments, got {}", segs.len());
    let idx1 = common::indexes(&orig)[1].clone();
    let base1: u64 = common::base_seq(&segs[1]).unwrap();
    // Damage record 3 of the second (sealed) segment, in its payload.
    let at = record_offset(&idx1, 3);
    let damaged_seq = base1 + 3;
    let dir = base.path().join("strict");
    copy_dir(&orig, &dir);
    let seg = dir.join(segs[1].file_name().unwrap());
    flip(&seg, at + 20, 0x04);
    let err = Log::open(&dir, opts().recovery(RecoveryMode::Strict)).unwrap_err();
    let c = err.corruption().unwrap_or_else(|| panic!("{err}"));
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert_eq!(c.path, seg);
    assert_eq!(c.offset, at);
    assert_eq!(c.seq, Some(damaged_seq));
    assert!(
        matches!(c.kind, CorruptionKind::ChecksumMismatch { .. }),
        "{:?}",
        c.kind
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&seg.display().to_string()) && msg.contains(&at.to_string()),
        "{msg}"
    );
    // Readers report the damage when they reach it, and read everything before it.
    let r = LogReader::open(&dir).unwrap();
    assert!(r.get(damaged_seq - 1).is_ok());
    let e = r.get(damaged_seq).unwrap_err();
    assert_eq!(e.corruption().unwrap().offset, at);
    let read: Vec<_> = r.iter().collect();
    assert_eq!(read.len() as u64, damaged_seq + 1);
    assert!(read.last().unwrap().is_err());
    drop(r);
    // The default mode opens a cleanly closed log from its headers and index tails; the damage
    // shows when the record is read.
    let log = Log::open(&dir, opts()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.clean);
    assert!(log.reader().get(damaged_seq).is_err());
    drop(log);

    let dir = base.path().join("salvage");
    copy_dir(&orig, &dir);
    flip(&dir.join(segs[1].file_name().unwrap()), at + 20, 0x04);
    let log = Log::open(&dir, opts().recovery(RecoveryMode::Salvage)).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(log.len(), damaged_seq);
    let cut = report.cut.unwrap();
    assert_eq!(cut.class, DamageClass::Corruption);
    assert_eq!(cut.first_lost_seq, damaged_seq);
    assert_eq!(cut.dropped_segments.len(), segs.len() - 2);
    assert_eq!(cut.kept_copies.len(), 1);
    assert!(dir.join("damaged").is_dir());
    assert_eq!(log.append(b"x").unwrap(), damaged_seq);
    drop(log);
    let r = LogReader::open(&dir).unwrap();
    assert_eq!(r.len(), damaged_seq + 1);
    for seq in 0..damaged_seq {
        assert_eq!(r.get(seq).unwrap().payload, payload(seq % 50).as_slice());
    }
}

#[test]
fn a_flipped_bit_in_the_middle_of_the_active_segment_is_corruption_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), opts()).unwrap();
    for seq in 0..20 {
        log.append(&payload(seq % 50)).unwrap();
    }
    // After a crash the active segment is checked record by record.
    log.abandon();
    let seg = common::segments(dir.path()).pop().unwrap();
    let idx = common::indexes(dir.path()).pop().unwrap();
    let at = record_offset(&idx, 5);
    flip(&seg, at + 18, 0x80);
    // Valid records follow the damaged one: cutting would lose them, so open refuses.
    let err = Log::open(dir.path(), opts()).unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert_eq!(err.corruption().unwrap().offset, at);
    let log = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(log.len(), 5);
    assert_eq!(report.cut.unwrap().first_lost_seq, 5);
}

#[test]
fn missing_damaged_and_short_indexes_are_rebuilt_with_the_same_records() {
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    let n = 1500;
    write_log(&orig, n);
    let idxs = common::indexes(&orig);
    assert!(idxs.len() >= 2);

    // Deleted.
    let dir = base.path().join("deleted");
    copy_dir(&orig, &dir);
    for i in &idxs {
        std::fs::remove_file(dir.join(i.file_name().unwrap())).unwrap();
    }
    all_payloads_match(&dir, n);
    let log = Log::open(&dir, opts()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.indexes_rebuilt.len(), idxs.len(), "{report:?}");
    assert_eq!(log.len(), n);
    drop(log);
    all_payloads_match(&dir, n);
    let report = Log::open(&dir, opts()).unwrap().recovery_report().clone();
    assert!(report.clean && report.indexes_rebuilt.is_empty());

    // Header damaged.
    let dir = base.path().join("header");
    copy_dir(&orig, &dir);
    flip(&dir.join(idxs[0].file_name().unwrap()), 41, 0xff);
    let log = Log::open(&dir, opts()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(
        report.indexes_rebuilt,
        vec![dir.join(idxs[0].file_name().unwrap())]
    );
    assert_eq!(log.len(), n);
    drop(log);
    all_payloads_match(&dir, n);

    // Short.
    let dir = base.path().join("short");
    copy_dir(&orig, &dir);
    let i0 = dir.join(idxs[0].file_name().unwrap());
    // Three entries short (index files keep their preallocated size: cut into the entries).
    let len = 64 + 4 * record_count(&i0);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&i0)
        .unwrap()
        .set_len(len - 12)
        .unwrap();
    let log = Log::open(&dir, opts()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.indexes_rebuilt.len(), 1);
    drop(log);
    all_payloads_match(&dir, n);

    // Entries in the middle damaged: readers notice at the record and find it by scanning.
    let dir = base.path().join("entries");
    copy_dir(&orig, &dir);
    let i0 = dir.join(idxs[0].file_name().unwrap());
    for k in [3u64, 4, 10] {
        flip(&i0, 64 + 4 * k, 0x30);
    }
    all_payloads_match(&dir, n);
}

#[test]
fn an_unclean_stop_is_recovered_and_appending_continues() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), opts()).unwrap();
    for seq in 0..777 {
        log.append(&payload(seq % 50)).unwrap();
    }
    log.abandon();
    let log = Log::open(dir.path(), opts()).unwrap();
    let report = log.recovery_report().clone();
    assert!(!report.clean);
    assert!(report.cut.is_none(), "{report:?}");
    assert_eq!(log.len(), 777);
    assert_eq!(log.append(&payload(777 % 50)).unwrap(), 777);
    log.close().unwrap();
    all_payloads_match(dir.path(), 778);
}

#[test]
fn garbage_after_the_last_record_of_a_killed_writer_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), opts()).unwrap();
    for seq in 0..10 {
        log.append(&payload(seq % 50)).unwrap();
    }
    log.abandon();
    // A writer killed in the middle of an append: payload bytes written, header still zero.
    let seg = common::segments(dir.path()).pop().unwrap();
    let idx = common::indexes(dir.path()).pop().unwrap();
    let end = record_offset(&idx, 9) + 16 + payload(9).len() as u64;
    let end = end.div_ceil(16) * 16;
    let mut b = std::fs::read(&seg).unwrap();
    b[end as usize + 16..end as usize + 60].fill(0xAB);
    std::fs::write(&seg, &b).unwrap();
    let err = Log::open(dir.path(), opts().recovery(RecoveryMode::Strict)).unwrap_err();
    assert!(matches!(err, Error::TornTail(_)), "{err}");
    let log = Log::open(dir.path(), opts()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(log.len(), 10);
    let cut = report.cut.unwrap();
    assert_eq!(cut.at.offset, end, "{cut:?}");
    assert_eq!(cut.bytes, 60, "{cut:?}");
    // The garbage is gone: a new record at that offset is not mixed with it.
    log.append(b"y").unwrap();
    log.abandon();
    let log = Log::open(dir.path(), opts()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.cut.is_none());
    assert_eq!(log.len(), 11);
}

#[test]
fn a_segment_from_another_log_is_detected() {
    let base = tempfile::tempdir().unwrap();
    let a = base.path().join("a");
    let b = base.path().join("b");
    write_log(&a, 1500);
    write_log(&b, 1500);
    let segs = common::segments(&a);
    let name = segs[1].file_name().unwrap();
    std::fs::copy(b.join(name), a.join(name)).unwrap();
    std::fs::copy(
        b.join(PathBuf::from(name).with_extension("idx")),
        a.join(PathBuf::from(name).with_extension("idx")),
    )
    .unwrap();
    let err = Log::open(&a, opts()).unwrap_err();
    let c = err.corruption().unwrap();
    assert!(
        matches!(c.kind, CorruptionKind::ForeignSegment { .. }),
        "{err}"
    );
    assert_eq!(c.path, a.join(name));
}

#[test]
fn a_zeroed_tail_of_a_sealed_segment_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 1500);
    let segs = common::segments(dir.path());
    let idx0 = common::indexes(dir.path())[0].clone();
    let at = record_offset(&idx0, record_count(&idx0) - 3);
    let mut b = std::fs::read(&segs[0]).unwrap();
    let len = b.len();
    b[at as usize..len].fill(0);
    std::fs::write(&segs[0], &b).unwrap();
    let err = Log::open(dir.path(), opts()).unwrap_err();
    let c = err.corruption().unwrap();
    assert_eq!(c.path, segs[0]);
    assert_eq!(c.offset, at);
    let keep = record_count(&idx0) - 3;
    let log = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
    assert_eq!(log.len(), keep);
}

#[test]
fn a_damaged_segment_header_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 1500);
    let segs = common::segments(dir.path());
    flip(&segs[1], 3, 0x01);
    let err = Log::open(dir.path(), opts()).unwrap_err();
    let c = err.corruption().unwrap();
    assert_eq!(c.path, segs[1]);
    assert_eq!(c.offset, 0);
    let log = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
    let report = log.recovery_report().clone();
    let base1: u64 = common::base_seq(&segs[1]).unwrap();
    assert_eq!(log.len(), base1);
    assert_eq!(report.cut.unwrap().dropped_segments.len(), segs.len() - 1);
}

/// Format version 2 changed the archived event layout: a log written by version 1 is refused,
/// by writers and readers alike, with an error that names both versions (never misread).
#[test]
fn a_log_of_format_version_1_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 3);
    assert_eq!(agentlog::log::FORMAT_VERSION, 2);
    for seg in common::segments(dir.path()) {
        common::rewrite_header(&seg, 8, &1u16.to_le_bytes());
    }
    for idx in common::indexes(dir.path()) {
        common::rewrite_header(&idx, 8, &1u16.to_le_bytes());
    }
    let writer = Log::open(dir.path(), opts()).unwrap_err().to_string();
    let reader = LogReader::open(dir.path()).unwrap_err().to_string();
    for msg in [writer, reader] {
        assert!(
            msg.contains("format version 1") && msg.contains("reads version 2"),
            "{msg}"
        );
    }
}
