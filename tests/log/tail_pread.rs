//! Opening a reader reads the last record with `pread` (issue 14: open + read the last event as
//! cheaply as a JSONL tail): from the tail a clean close writes in `LASTSEG`, or from the last
//! segment's index. A fast path, never a second truth: whatever the hint says (stale, of another
//! log, missing, naming a segment a roll has passed, a compressed segment) the reader answers
//! what a reader that lists the directory answers, and a damaged last record gets the same error
//! (path, offset, seq).

use std::path::{Path, PathBuf};

use agentlog::log::{compress_log, Log, LogReader, Options, OsStorage, LASTSEG_FILE};

fn payload(seq: u64) -> Vec<u8> {
    format!("tail {seq:06} {}", "z".repeat((seq % 41) as usize)).into_bytes()
}

fn opts() -> Options {
    Options::default()
        .segment_size(1 << 10)
        .preallocate(1 << 10)
}

/// Appends records `from..to` to the log in `dir` (created when missing); the writer is
/// returned open.
fn append_open(dir: &Path, from: u64, to: u64) -> Log {
    let log = Log::open(dir, opts()).unwrap();
    assert_eq!(log.len(), from);
    for seq in from..to {
        assert_eq!(log.append(&payload(seq)).unwrap(), seq);
    }
    log
}

fn append(dir: &Path, from: u64, to: u64) {
    append_open(dir, from, to).close().unwrap();
}

fn segments(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut segs: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .map(|p| (testkit::base_seq(&p).unwrap(), p))
        .collect();
    segs.sort();
    segs
}

/// The hint's flags (bit 0: the tail of a clean close is there; bit 1: the copy of the last
/// record follows).
fn hint_flags(dir: &Path) -> u32 {
    let b = std::fs::read(dir.join(LASTSEG_FILE)).unwrap();
    u32::from_le_bytes(b[12..16].try_into().unwrap())
}

/// What a reader that lists the directory sees (the hint moved aside, then back): its length
/// and its last record's payload (or the error reading it).
fn listed(dir: &Path) -> (u64, Result<Vec<u8>, String>) {
    let hint = dir.join(LASTSEG_FILE);
    let aside = dir.join("LASTSEG.aside");
    let had = std::fs::rename(&hint, &aside).is_ok();
    let r = LogReader::open(dir).unwrap();
    let out = last_of(&r);
    if had {
        std::fs::rename(&aside, &hint).unwrap();
    }
    out
}

fn last_of(r: &LogReader) -> (u64, Result<Vec<u8>, String>) {
    let last = r
        .get(r.len() - 1)
        .map(|x| x.payload.to_vec())
        .map_err(|e| e.to_string());
    (r.len(), last)
}

#[test]
fn a_clean_close_leaves_the_tail_and_open_reads_the_last_record_without_a_map() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 300);
    assert!(segments(tmp.path()).len() > 5);
    assert_eq!(
        hint_flags(tmp.path()),
        3,
        "the close wrote the tail and the copy"
    );
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), 300);
    assert_eq!(r.get(299).unwrap().payload, payload(299));
    assert_eq!(r.get(299).unwrap().payload.as_ptr() as usize % 16, 0);
    assert_eq!(
        r.mapped_segments(),
        0,
        "the last record was read with pread"
    );
    // The record before it maps its segment; everything else still reads right.
    assert_eq!(r.get(298).unwrap().payload, payload(298));
    assert_eq!(r.mapped_segments(), 1);
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, payload(seq as u64));
    }
    assert_eq!(listed(tmp.path()), (300, Ok(payload(299))));
    // A writer that opens the log drops the tail (its appends would make it fail the check).
    let log = append_open(tmp.path(), 300, 301);
    assert_eq!(hint_flags(tmp.path()), 0);
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(last_of(&r), (301, Ok(payload(300))));
    log.close().unwrap();
}

#[test]
fn a_stale_tail_is_never_believed_appends_and_rolls_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 200);
    let stale = std::fs::read(tmp.path().join(LASTSEG_FILE)).unwrap();
    assert_eq!(hint_flags(tmp.path()), 3);

    // Appended in the same segment after the tail: the bytes after the claimed last record are
    // not zero.
    let segs_before = segments(tmp.path()).len();
    append(tmp.path(), 200, 201);
    assert_eq!(segments(tmp.path()).len(), segs_before, "same segment");
    std::fs::write(tmp.path().join(LASTSEG_FILE), &stale).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(last_of(&r), (201, Ok(payload(200))));
    assert_eq!(last_of(&r), listed(tmp.path()));

    // Rolled to new segments after the tail: the segment after the claimed one exists.
    append(tmp.path(), 201, 400);
    assert!(segments(tmp.path()).len() > segs_before);
    std::fs::write(tmp.path().join(LASTSEG_FILE), &stale).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(last_of(&r), (400, Ok(payload(399))));
    assert_eq!(last_of(&r), listed(tmp.path()));
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, payload(seq as u64));
    }
}

#[test]
fn a_hint_of_another_log_or_none_gives_the_listed_answer() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    append(a.path(), 0, 250);
    append(b.path(), 0, 250);
    // The same segment names and record sizes, another log id: its tail names a record whose
    // checksum (seeded by the log id) does not check here.
    std::fs::copy(b.path().join(LASTSEG_FILE), a.path().join(LASTSEG_FILE)).unwrap();
    let r = LogReader::open(a.path()).unwrap();
    assert_eq!(last_of(&r), (250, Ok(payload(249))));
    assert_ne!(r.log_id(), LogReader::open(b.path()).unwrap().log_id());
    std::fs::remove_file(a.path().join(LASTSEG_FILE)).unwrap();
    let r = LogReader::open(a.path()).unwrap();
    assert_eq!(last_of(&r), (250, Ok(payload(249))));
    // A hint that is not whole.
    std::fs::write(a.path().join(LASTSEG_FILE), b"AGLOGTAL").unwrap();
    let r = LogReader::open(a.path()).unwrap();
    assert_eq!(last_of(&r), (250, Ok(payload(249))));
}

#[test]
fn without_the_tail_the_index_finds_the_last_record_of_an_open_or_closed_segment() {
    let tmp = tempfile::tempdir().unwrap();
    // A live writer: the hint names its segment (no tail); the reader counts by the index.
    let log = append_open(tmp.path(), 0, 333);
    assert_eq!(hint_flags(tmp.path()), 0);
    let plain = std::fs::read(tmp.path().join(LASTSEG_FILE)).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(last_of(&r), (333, Ok(payload(332))));
    assert_eq!(r.mapped_segments(), 0);
    // A roll after the reader opened: a refresh walks to the new segments.
    let mut r2 = r.clone();
    for seq in 333..500 {
        log.append(&payload(seq)).unwrap();
    }
    assert_eq!(r2.refresh().unwrap(), 500);
    assert_eq!(r2.get(499).unwrap().payload, payload(499));
    assert_eq!(r2.get(332).unwrap().payload, payload(332));
    assert_eq!(r.len(), 333, "a clone refreshes on its own");
    log.close().unwrap();
    // A closed log whose hint has no tail, naming an earlier segment: walked forward from.
    std::fs::write(tmp.path().join(LASTSEG_FILE), &plain).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(last_of(&r), (500, Ok(payload(499))));
    // Naming the last segment: read through its closed index, with pread. (A writer's hint
    // while it is open has no tail.)
    let log = append_open(tmp.path(), 500, 500);
    let plain = std::fs::read(tmp.path().join(LASTSEG_FILE)).unwrap();
    log.close().unwrap();
    std::fs::write(tmp.path().join(LASTSEG_FILE), &plain).unwrap();
    assert_eq!(hint_flags(tmp.path()), 0);
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(last_of(&r), (500, Ok(payload(499))));
    assert_eq!(r.mapped_segments(), 0);
}

#[test]
fn a_compressed_last_segment_is_read_through_its_map() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 300);
    assert_eq!(hint_flags(tmp.path()), 3);
    let done = compress_log(tmp.path(), &OsStorage).unwrap();
    assert!(!done.is_empty());
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(last_of(&r), (300, Ok(payload(299))));
    assert_eq!(last_of(&r), listed(tmp.path()));
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, payload(seq as u64));
    }
}

#[test]
fn a_damaged_last_record_gets_the_error_the_map_path_gives() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 300);
    let before = LogReader::open(tmp.path()).unwrap();
    let offset = {
        // Find the last record's offset: its payload is unique in the last segment.
        let (_, path) = segments(tmp.path()).last().unwrap().clone();
        let bytes = std::fs::read(&path).unwrap();
        let p = payload(299);
        let at = bytes
            .windows(p.len())
            .position(|w| w == p.as_slice())
            .unwrap();
        (path, at as u64 - 16)
    };
    drop(before);
    let (path, record_at) = offset;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[record_at as usize + 20] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();

    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(
        r.len(),
        300,
        "the index vouches for the record: it counts, reading fails"
    );
    let e = r.get(299).unwrap_err();
    let c = e.corruption().expect("damage");
    assert_eq!(c.path, path);
    assert_eq!(c.seq, Some(299));
    assert_eq!(c.offset, record_at);
    assert_eq!(last_of(&r), listed(tmp.path()));
    // The record before it is fine.
    assert_eq!(r.get(298).unwrap().payload, payload(298));
}

#[test]
fn a_live_writers_large_index_is_read_in_chunks_up_to_its_last_entry() {
    let tmp = tempfile::tempdir().unwrap();
    // One segment of 4,000 small records: their entries go past the index's first 4 KiB.
    let log = Log::open(tmp.path(), Options::default()).unwrap();
    for seq in 0..4000u64 {
        assert_eq!(log.append(&seq.to_le_bytes()).unwrap(), seq);
    }
    assert_eq!(segments(tmp.path()).len(), 1);
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), 4000);
    assert_eq!(r.get(3999).unwrap().payload, 3999u64.to_le_bytes());
    assert_eq!(r.mapped_segments(), 0, "read with pread");
    assert_eq!(r.get(1234).unwrap().payload, 1234u64.to_le_bytes());
    log.close().unwrap();
}
