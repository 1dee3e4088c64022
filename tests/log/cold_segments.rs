//! Cold (compressed) segments at the storage layer: compressing a closed log keeps every read
//! path equal to the plain log (get, iter, range, a writer reopened after it); damage in a
//! compressed block is named by file, offset and seq; a compression that fails at any step
//! leaves a whole log; `compress_sealed` compresses the sealed segments of a log being written.

use std::path::Path;
use std::sync::Arc;

use agentlog::log::sim::{OpKind, Repeat, SimStorage, EIO};
use agentlog::log::{
    compress_log, compress_segment, verify, CorruptionKind, Error, Log, LogReader, Options,
    OsStorage, RecoveryMode, SalvagedRecords,
};
use testkit::{is_cold, segments};

/// Payloads that look like small events (some repetition, some variety), a few large ones.
fn payload(i: u64) -> Vec<u8> {
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

fn write_log(dir: &Path, n: u64, options: Options) -> Vec<Vec<u8>> {
    let log = Log::open(dir, options).unwrap();
    let all: Vec<Vec<u8>> = (0..n).map(payload).collect();
    for p in &all {
        log.append(p).unwrap();
    }
    log.close().unwrap();
    all
}

fn assert_reads_equal(dir: &Path, all: &[Vec<u8>]) {
    let reader = LogReader::open(dir).unwrap();
    assert_eq!(reader.len(), all.len() as u64);
    // get, in an order that jumps between blocks and segments.
    let n = all.len() as u64;
    for k in 0..n {
        let seq = (k * 7919) % n;
        assert_eq!(
            reader.get(seq).unwrap().payload,
            &all[seq as usize][..],
            "get({seq})"
        );
    }
    // iter, from a fresh reader (nothing decompressed yet).
    let fresh = LogReader::open(dir).unwrap();
    let mut count = 0;
    for (i, r) in fresh.iter().enumerate() {
        let r = r.unwrap();
        assert_eq!(r.seq, i as u64);
        assert_eq!(r.payload, &all[i][..], "iter {i}");
        count += 1;
    }
    assert_eq!(count, all.len());
    // range, starting in the middle of a block.
    let (a, b) = (n / 3 + 1, 2 * n / 3 + 5);
    let fresh = LogReader::open(dir).unwrap();
    let got: Vec<Vec<u8>> = fresh
        .range(a..b)
        .map(|r| r.unwrap().payload.to_vec())
        .collect();
    assert_eq!(got, all[a as usize..b as usize].to_vec());
    // A payload stays 16-byte aligned (the event archives need it).
    assert_eq!(reader.get(n / 2).unwrap().payload.as_ptr() as usize % 16, 0);
}

#[test]
fn a_compressed_log_reads_like_the_plain_one_and_takes_appends_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 4000, Options::default().segment_size(256 << 10));
    let plain_bytes: u64 = segments(&dir)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(segments(&dir).len() >= 3, "{:?}", segments(&dir));
    assert_reads_equal(&dir, &all);

    let done = compress_log(&dir, &OsStorage).unwrap();
    assert_eq!(done.len(), segments(&dir).len());
    assert_eq!(done.iter().map(|c| c.records).sum::<u64>(), 4000);
    for seg in segments(&dir) {
        assert!(is_cold(&seg), "{}", seg.display());
        assert!(!seg.with_extension("idx").exists(), "{}", seg.display());
    }
    let cold_bytes: u64 = segments(&dir)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        cold_bytes * 3 < plain_bytes,
        "{cold_bytes} vs {plain_bytes}"
    );
    // Compressing again finds nothing to do.
    assert!(compress_log(&dir, &OsStorage).unwrap().is_empty());

    assert_reads_equal(&dir, &all);
    let report = verify(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(report.damage.is_none(), "{report:?}");
    assert_eq!(report.events, 4000);

    // A writer opens it and appends to a new plain segment after the cold ones.
    let log = Log::open(&dir, Options::default().segment_size(256 << 10)).unwrap();
    let open = log.recovery_report().clone();
    assert_eq!(open.events, 4000);
    assert!(open.cut.is_none(), "{open:?}");
    let mut all = all;
    for i in 4000..4100 {
        assert_eq!(log.append(&payload(i)).unwrap(), i);
        all.push(payload(i));
    }
    // A reader attached to the writer reads the cold segments too.
    let attached = log.reader();
    assert_eq!(attached.get(5).unwrap().payload, &all[5][..]);
    assert_eq!(attached.iter().count(), 4100);
    log.close().unwrap();
    let last = segments(&dir).pop().unwrap();
    assert!(!is_cold(&last), "appends go to a plain segment");
    assert_reads_equal(&dir, &all);
    assert!(verify(&dir).unwrap().is_clean());

    // Only the new segment is compressed now.
    let again = compress_log(&dir, &OsStorage).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].path, last);
    assert_reads_equal(&dir, &all);
}

#[test]
fn a_flipped_byte_in_a_compressed_block_is_named_by_file_offset_and_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 3000, Options::default().segment_size(1 << 20));
    compress_log(&dir, &OsStorage).unwrap();
    let seg = segments(&dir)[0].clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    // The first block's zstd frame: where its index entry says (byte 128, after the cold header
    // and the plain header, or after the segment's dictionary).
    let index = u64::from_le_bytes(bytes[48..56].try_into().unwrap()) as usize;
    let z0 = u64::from_le_bytes(bytes[index + 16..index + 24].try_into().unwrap());
    bytes[z0 as usize + 40] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();

    let report = verify(&dir).unwrap();
    let d = report.corruption().expect("corruption");
    assert_eq!(d.corruption.path, seg);
    assert_eq!(d.corruption.offset, z0);
    assert_eq!(d.corruption.seq, Some(0));
    assert!(
        matches!(&d.corruption.kind, CorruptionKind::CompressedBlock(w) if w.contains("block 0")),
        "{:?}",
        d.corruption.kind
    );

    // A reader fails the records of that block, naming it, and reads the others.
    let reader = LogReader::open(&dir).unwrap();
    match reader.get(1) {
        Err(Error::Corrupt(c)) => {
            // The block's offset in the cold file, the seq asked for, the block's seqs.
            assert_eq!(c.path, seg);
            assert_eq!(c.offset, z0);
            assert_eq!(c.seq, Some(1));
            assert!(c.to_string().contains("seqs 0 to "), "{c}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(reader.get(2999).unwrap().payload, &all[2999][..]);
    let err = reader.iter().find_map(|r| r.err()).expect("iter fails");
    assert_eq!(err.corruption().map(|c| c.offset), Some(z0));
    // A writer that checks every record refuses to open it.
    assert!(matches!(
        Log::open(&dir, Options::default().recovery(RecoveryMode::Strict)),
        Err(Error::Corrupt(_))
    ));
    // Salvage makes it the plain segment it was compressed from (block 0's bytes zeros, the
    // compressed file kept) and cuts at the damage: the log keeps nothing before it, and every
    // record of the other blocks is found in the copy kept. (It refused, after moving files.)
    let log_id = reader.log_id().unwrap();
    let log = Log::open(&dir, Options::default().recovery(RecoveryMode::Salvage)).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(log.len(), 0);
    assert_eq!(report.cold_rebuilt.len(), 1);
    assert!(is_cold(&report.cold_rebuilt[0]));
    let cut = report.cut.expect("the damage is cut");
    assert_eq!(cut.first_lost_seq, 0);
    let mut found = Vec::new();
    for source in cut.salvage_sources() {
        let records = SalvagedRecords::find(&source, log_id).unwrap();
        found.extend(records.iter().map(|(seq, p)| (seq, p.to_vec())));
    }
    let first = found.first().expect("records after the damaged block").0;
    assert!(first > 1 && first < 2999, "{first}");
    let want: Vec<(u64, Vec<u8>)> = (first..3000)
        .map(|i| (i, all[i as usize].clone()))
        .collect();
    assert!(
        found == want,
        "{} records found from seq {first}",
        found.len()
    );
}

#[test]
fn a_compression_that_fails_at_any_step_leaves_a_whole_log() {
    for (kind, nth) in [
        (OpKind::Open, 1),
        (OpKind::Allocate, 1),
        (OpKind::Write, 1),
        (OpKind::Sync, 1),
        (OpKind::Rename, 1),
        (OpKind::SyncDir, 1),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        let all = write_log(&dir, 1500, Options::default().segment_size(128 << 10));
        let sim = SimStorage::new();
        sim.fail(kind, nth, EIO, Repeat::Sticky);
        let result = compress_segment(&dir, 0, &sim);
        assert!(result.is_err(), "{kind:?}: {result:?}");
        // Whatever the step, the segment is whole: plain (a temporary file beside it) or cold.
        assert_reads_equal(&dir, &all);
        assert!(verify(&dir).unwrap().corruption().is_none(), "{kind:?}");
        // The next writer removes the leftovers and appends.
        let log = Log::open(&dir, Options::default().segment_size(128 << 10)).unwrap();
        let report = log.recovery_report().clone();
        assert_eq!(report.events, 1500, "{kind:?}");
        log.append(b"after").unwrap();
        log.close().unwrap();
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.ends_with(".tmp")),
            "{kind:?}: {names:?}"
        );
        let reader = LogReader::open(&dir).unwrap();
        assert_eq!(reader.len(), 1501);
        assert_eq!(reader.get(1500).unwrap().payload, b"after");
        assert_eq!(reader.get(3).unwrap().payload, &all[3][..]);
    }
}

#[test]
fn an_index_left_beside_a_cold_segment_is_ignored_and_removed_by_the_next_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 2000, Options::default().segment_size(128 << 10));
    let idx = dir.join("00000000000000000000.idx");
    let old_index = std::fs::read(&idx).unwrap();
    compress_log(&dir, &OsStorage).unwrap();
    // A crash between the rename and the removal of the index.
    std::fs::write(&idx, &old_index).unwrap();
    assert_reads_equal(&dir, &all);
    assert!(verify(&dir).unwrap().is_clean());
    let log = Log::open(&dir, Options::default()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.removed.contains(&idx), "{report:?}");
    log.close().unwrap();
    assert!(!idx.exists());
    assert_reads_equal(&dir, &all);
}

#[test]
fn compress_sealed_compresses_the_sealed_segments_of_a_log_being_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let options = Options::default()
        .segment_size(128 << 10)
        .compress_sealed(true)
        .storage(Arc::new(OsStorage));
    let log = Log::open(&dir, options).unwrap();
    let mut all = Vec::new();
    for i in 0..3000 {
        log.append(&payload(i)).unwrap();
        all.push(payload(i));
    }
    // A reader attached before and during the compressions reads every record.
    let reader = log.reader();
    for (i, r) in reader.iter().enumerate() {
        assert_eq!(r.unwrap().payload, &all[i][..]);
    }
    log.close().unwrap();
    let segs = segments(&dir);
    assert!(segs.len() >= 3, "{segs:?}");
    let (last, sealed) = segs.split_last().unwrap();
    for s in sealed {
        assert!(is_cold(s), "{} is sealed: compressed", s.display());
    }
    assert!(!is_cold(last), "the last segment is not sealed");
    assert_reads_equal(&dir, &all);
    let report = verify(&dir).unwrap();
    assert!(report.is_clean() && report.damage.is_none(), "{report:?}");
}

#[test]
fn an_unsealed_segment_is_not_compressed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let log = Log::open(&dir, Options::default()).unwrap();
    log.append(b"open").unwrap();
    // The writer holds the lock: compressing the log is refused.
    assert!(matches!(
        compress_log(&dir, &OsStorage),
        Err(Error::Locked { .. })
    ));
    // The active segment's index says open: never compressed.
    assert!(matches!(
        compress_segment(&dir, 0, &OsStorage),
        Err(Error::NotSealed(_))
    ));
    log.close().unwrap();
    assert_eq!(
        LogReader::open(&dir).unwrap().get(0).unwrap().payload,
        b"open"
    );
}

/// A cold segment cut short (its block index and last block gone) gave nothing to salvage:
/// the blocks are found through the index, so the intact blocks at its start stayed in
/// `damaged/` with no command to get them back (QA pass of 2026-12-08). Salvage now finds the
/// blocks by their zstd frames when the index is lost, and their records as anywhere.
#[test]
fn a_cold_segment_cut_short_gives_the_records_of_its_intact_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_log(&dir, 3000, Options::default().segment_size(1 << 20));
    let log_id = LogReader::open(&dir).unwrap().log_id().unwrap();
    compress_log(&dir, &OsStorage).unwrap();
    let seg = segments(&dir)[0].clone();
    let bytes = std::fs::read(&seg).unwrap();
    let blocks = u32::from_le_bytes(bytes[40..44].try_into().unwrap()) as usize;
    assert!(blocks >= 2, "{blocks} blocks");
    // Cut in the middle of the last block's frame: the index after it goes too.
    let index = u64::from_le_bytes(bytes[48..56].try_into().unwrap()) as usize;
    let last = index + 32 * (blocks - 1);
    let last_first = u32::from_le_bytes(bytes[last..last + 4].try_into().unwrap()) as u64;
    let z_last = u64::from_le_bytes(bytes[last + 16..last + 24].try_into().unwrap());
    let z_len = u32::from_le_bytes(bytes[last + 24..last + 28].try_into().unwrap()) as u64;
    std::fs::write(&seg, &bytes[..(z_last + z_len / 2) as usize]).unwrap();

    let log = Log::open(&dir, Options::default().recovery(RecoveryMode::Salvage)).unwrap();
    let cut = log
        .recovery_report()
        .clone()
        .cut
        .expect("the damage is cut");
    assert_eq!(cut.first_lost_seq, 0);
    let mut found = Vec::new();
    for source in cut.salvage_sources() {
        let records = SalvagedRecords::find(&source, log_id).unwrap();
        found.extend(records.iter().map(|(seq, p)| (seq, p.to_vec())));
    }
    // Every record of the intact blocks of that segment, then those of the later segments.
    let of_segment: Vec<(u64, Vec<u8>)> = found
        .iter()
        .filter(|(seq, _)| *seq < last_first)
        .cloned()
        .collect();
    let want: Vec<(u64, Vec<u8>)> = (0..last_first)
        .map(|i| (i, all[i as usize].clone()))
        .collect();
    assert!(
        of_segment == want,
        "{} of {last_first} records found",
        of_segment.len()
    );
}
