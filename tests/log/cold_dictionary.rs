//! Cold segments, version 2: a zstd dictionary trained on the segment's records, stored in the
//! cold file and used for every block. A dictionary round trip reads back every record (get,
//! iter, range: the sequential reads decompress ahead on a second thread); a version 1 cold
//! segment (`tests/data/cold_v1`, written by the version 1 writer) and a version 2 one written
//! with the previous zstd settings (`tests/data/cold_v2_level6`) still read and verify;
//! damage in the dictionary is named by file and offset; damage in a later block is reported by
//! a sequential read at that block, whichever thread decompressed it.

use std::path::{Path, PathBuf};

use agentlog::log::{
    compress_log, verify, CorruptionKind, Error, Log, LogReader, Options, OsStorage, COLD_VERSION,
};
use testkit::{is_cold, segments};

/// Events of varied sizes and content, some repetition between them (a dictionary has
/// something to learn).
fn payload(i: u64) -> Vec<u8> {
    let kinds = ["assistant/chunk", "tool/call", "tool/result", "step/end"];
    let mut p = format!(
        r#"{{"seq":{i},"type":"{}","data":{{"turn":{},"delta":"word {} of the answer","n":{}}}}}"#,
        kinds[(i % 4) as usize],
        i / 50,
        i * 7 % 1000,
        i * 2_654_435_761 % 100_003
    )
    .into_bytes();
    if i % 97 == 5 {
        p.extend(std::iter::repeat_n(b'y', 3_000 + (i % 7) as usize * 100));
    }
    p
}

fn write_log(dir: &Path, n: u64, segment_size: u64) -> Vec<Vec<u8>> {
    let log = Log::open(dir, Options::default().segment_size(segment_size)).unwrap();
    let all: Vec<Vec<u8>> = (0..n).map(payload).collect();
    for p in &all {
        log.append(p).unwrap();
    }
    log.close().unwrap();
    all
}

/// (version, dictionary length) from a cold segment's header.
fn cold_header(seg: &Path) -> (u16, u32) {
    let b = std::fs::read(seg).unwrap();
    (
        u16::from_le_bytes([b[8], b[9]]),
        u32::from_le_bytes([b[44], b[45], b[46], b[47]]),
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

/// The damage a read of `seq` meets: opening the reader (which reads the first and last
/// segments' headers) or the `get`.
fn read_error(dir: &Path, seq: u64) -> agentlog::log::Corruption {
    match LogReader::open(dir).and_then(|r| r.get(seq).map(|_| ())) {
        Err(Error::Corrupt(c)) => *c,
        other => panic!("{other:?}"),
    }
}

fn assert_reads(dir: &Path, all: &[Vec<u8>]) {
    let reader = LogReader::open(dir).unwrap();
    assert_eq!(reader.len(), all.len() as u64);
    let n = all.len() as u64;
    for k in 0..n {
        let seq = (k * 7919) % n;
        assert_eq!(reader.get(seq).unwrap().payload, &all[seq as usize][..]);
    }
    // Sequential reads from fresh readers (nothing decompressed before).
    let fresh = LogReader::open(dir).unwrap();
    let got: Vec<Vec<u8>> = fresh.iter().map(|r| r.unwrap().payload.to_vec()).collect();
    assert_eq!(got, all);
    for (a, b) in [(1, n / 3), (n / 2, n - 1), (n / 5, n / 5 + 3), (n - 2, n)] {
        let fresh = LogReader::open(dir).unwrap();
        let got: Vec<Vec<u8>> = fresh
            .range(a..b)
            .map(|r| r.unwrap().payload.to_vec())
            .collect();
        assert_eq!(got, all[a as usize..b as usize].to_vec(), "range {a}..{b}");
    }
    // An iterator dropped in the middle of a segment (its prefetch stops).
    let fresh = LogReader::open(dir).unwrap();
    assert_eq!(fresh.iter().take(100).count(), 100);
}

#[test]
fn a_dictionary_compressed_segment_reads_back_every_record_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 12_000, 2 << 20);
    let plain_len = {
        let r = LogReader::open(&dir).unwrap();
        r.iter().count()
    };
    assert_eq!(plain_len, 12_000);
    compress_log(&dir, &OsStorage).unwrap();
    let segs = segments(&dir);
    assert!(!segs.is_empty());
    for seg in &segs {
        assert!(is_cold(seg));
        let (version, dict) = cold_header(seg);
        assert_eq!(version, COLD_VERSION);
        assert_eq!(version, 2);
        assert!(dict > 0, "{}: no dictionary", seg.display());
    }
    assert_reads(&dir, &all);
    let report = verify(&dir).unwrap();
    assert!(report.is_clean() && report.damage.is_none(), "{report:?}");
    assert_eq!(report.events, 12_000);
    // A writer appends after the cold segments, a reader reads both.
    let log = Log::open(&dir, Options::default()).unwrap();
    assert_eq!(log.recovery_report().events, 12_000);
    assert_eq!(log.append(b"after").unwrap(), 12_000);
    log.close().unwrap();
    let mut all = all;
    all.push(b"after".to_vec());
    assert_reads(&dir, &all);
}

#[test]
fn a_small_segment_gets_no_dictionary_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 300, 64 << 20);
    compress_log(&dir, &OsStorage).unwrap();
    let seg = segments(&dir)[0].clone();
    assert_eq!(cold_header(&seg), (2, 0));
    assert_reads(&dir, &all);
    assert!(verify(&dir).unwrap().is_clean());
}

/// The payloads `tests/data/cold_v1` was written with (the generator of
/// `tests/log/cold_segments.rs`, 700 events, 64 KiB segments), by the version 1 writer.
fn v1_payload(i: u64) -> Vec<u8> {
    let mut p = format!(
        r#"{{"seq":{i},"type":"assistant/chunk","data":{{"turn":{},"delta":"word {} of the answer"}}}}"#,
        i / 50,
        i * 7 % 1000
    )
    .into_bytes();
    if i % 500 == 7 {
        p.extend(std::iter::repeat_n(b'x', 20_000 + i as usize));
    }
    p
}

fn v1_copy(tmp: &Path) -> PathBuf {
    let dir = tmp.join("log");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cold_v1"),
        &dir,
    );
    dir
}

#[test]
fn a_version_1_cold_segment_still_reads_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = v1_copy(tmp.path());
    let segs = segments(&dir);
    assert_eq!(segs.len(), 2);
    for seg in &segs {
        assert!(is_cold(seg));
        assert_eq!(cold_header(seg), (1, 0), "{}", seg.display());
    }
    let all: Vec<Vec<u8>> = (0..700).map(v1_payload).collect();
    assert_reads(&dir, &all);
    let report = verify(&dir).unwrap();
    assert!(report.is_clean() && report.damage.is_none(), "{report:?}");
    assert_eq!(report.events, 700);
    // Compressing again leaves them as they are (they are cold already).
    assert!(compress_log(&dir, &OsStorage).unwrap().is_empty());
    assert_eq!(cold_header(&segs[0]), (1, 0));
    // A writer appends after them; the new segment is written as version 2.
    let log = Log::open(&dir, Options::default()).unwrap();
    assert_eq!(log.append(b"after").unwrap(), 700);
    log.close().unwrap();
    let done = compress_log(&dir, &OsStorage).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(cold_header(&done[0].path), (2, 0));
    let mut all = all;
    all.push(b"after".to_vec());
    assert_reads(&dir, &all);
}

/// `tests/data/cold_v2_level6`: a version 2 cold segment (with a dictionary) written by the
/// writer before the block compressor changed (level 6, literals Huffman-coded; now level 9,
/// matches of at least 6 bytes, literals raw), from [`payload`] 0..2000 in one segment.
#[test]
fn a_version_2_segment_written_with_the_previous_zstd_settings_still_reads_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cold_v2_level6"),
        &dir,
    );
    let old = segments(&dir);
    assert_eq!(old.len(), 1);
    let (version, dict) = cold_header(&old[0]);
    assert_eq!(version, 2);
    assert!(dict > 0);
    let all: Vec<Vec<u8>> = (0..2_000).map(payload).collect();
    assert_reads(&dir, &all);
    let report = verify(&dir).unwrap();
    assert!(report.is_clean() && report.damage.is_none(), "{report:?}");
    assert_eq!(report.events, 2_000);
    // The same records written and compressed now read the same, from a different file.
    let new = tmp.path().join("new");
    assert_eq!(write_log(&new, 2_000, 64 << 20), all);
    compress_log(&new, &OsStorage).unwrap();
    let seg = segments(&new)[0].clone();
    assert_eq!(cold_header(&seg).0, 2);
    assert_ne!(
        std::fs::read(&seg).unwrap(),
        std::fs::read(&old[0]).unwrap()
    );
    assert_reads(&new, &all);
}

#[test]
fn a_version_1_header_with_a_dictionary_length_is_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = v1_copy(tmp.path());
    let seg = segments(&dir)[0].clone();
    let mut b = std::fs::read(&seg).unwrap();
    // Version 1's reserved bytes 44..48 set, the header's CRC made to match.
    b[44] = 1;
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, &b).unwrap();
    let c = read_error(&dir, 0);
    assert_eq!(c.path, seg);
    assert_eq!(c.offset, 0);
    assert!(c.to_string().contains("reserved"), "{c}");
}

#[test]
fn a_flipped_byte_in_the_dictionary_is_named_by_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 12_000, 1 << 20);
    compress_log(&dir, &OsStorage).unwrap();
    let segs = segments(&dir);
    assert!(segs.len() >= 2, "{segs:?}");
    let seg = segs[1].clone();
    let (_, dict) = cold_header(&seg);
    assert!(dict > 100, "{dict}");
    let mut bytes = std::fs::read(&seg).unwrap();
    // The dictionary starts at byte 128 (after the cold header and the plain header).
    bytes[128 + 50] ^= 0x04;
    std::fs::write(&seg, &bytes).unwrap();

    let report = verify(&dir).unwrap();
    let d = report.corruption().expect("corruption");
    assert_eq!(d.corruption.path, seg);
    assert_eq!(d.corruption.offset, 128);
    assert!(
        matches!(&d.corruption.kind, CorruptionKind::CompressedBlock(w) if w.contains("dictionary")),
        "{:?}",
        d.corruption.kind
    );
    // A read in the damaged segment names the file and the offset.
    let in_second = testkit::base_seq(&seg).unwrap();
    let c = read_error(&dir, in_second + 1);
    assert_eq!(c.path, seg);
    assert_eq!(c.offset, 128);
    assert!(c.to_string().contains("dictionary"), "{c}");
    // With the byte restored, every record reads again (the damage was the dictionary's).
    bytes[128 + 50] ^= 0x04;
    std::fs::write(&seg, &bytes).unwrap();
    assert_reads(&dir, &all);
}

#[test]
fn a_damaged_later_block_is_reported_by_a_sequential_read_at_that_block() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 6_000, 64 << 20);
    compress_log(&dir, &OsStorage).unwrap();
    let seg = segments(&dir)[0].clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    // The block index: at the offset in the header (48..56), 32 bytes an entry.
    let index = u64::from_le_bytes(bytes[48..56].try_into().unwrap()) as usize;
    let blocks = u32::from_le_bytes(bytes[40..44].try_into().unwrap()) as usize;
    assert!(blocks >= 8, "{blocks}");
    let k = blocks / 2;
    let e = &bytes[index + 32 * k..index + 32 * (k + 1)];
    let first = u64::from(u32::from_le_bytes(e[0..4].try_into().unwrap()));
    let zoffset = u64::from_le_bytes(e[16..24].try_into().unwrap());
    bytes[zoffset as usize + 20] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();

    // Reading in order: every record before the block, then the block's error (the thread
    // decompressing ahead met it first).
    let reader = LogReader::open(&dir).unwrap();
    let mut read = 0u64;
    let mut err = None;
    for r in reader.iter() {
        match r {
            Ok(rec) => {
                assert_eq!(rec.payload, &all[rec.seq as usize][..]);
                read += 1;
            }
            Err(e) => err = Some(e),
        }
    }
    assert_eq!(read, first);
    let c = err
        .expect("the damaged block")
        .corruption()
        .cloned()
        .unwrap();
    assert_eq!(c.path, seg);
    assert_eq!(c.offset, zoffset);
    assert_eq!(c.seq, Some(first));
    assert!(c.to_string().contains(&format!("block {k}")), "{c}");
}
