//! Reads of cold (compressed) segments after the read path's rework (blocks decompressed
//! straight into the rebuilt segment, one zstd context per thread): threads sharing a reader
//! each get the right records; a block whose checksum holds but which zstd cannot decode fails
//! only its own records, names zstd, and leaves the thread's context usable for the next block.

use std::path::Path;

use agentlog::log::{
    compress_log, verify, CorruptionKind, Error, Log, LogReader, Options, OsStorage,
};
use testkit::segments;

/// Payloads that look like small events, with a few large ones (blocks of one record).
fn payload(i: u64) -> Vec<u8> {
    let mut p = format!(
        r#"{{"seq":{i},"type":"assistant/chunk","data":{{"turn":{},"delta":"word {} of the answer"}}}}"#,
        i / 40,
        i * 13 % 997
    )
    .into_bytes();
    if i % 700 == 3 {
        p.extend(std::iter::repeat_n(b'y', 40_000 + i as usize));
    }
    p
}

fn write_cold_log(dir: &Path, n: u64) -> Vec<Vec<u8>> {
    let log = Log::open(dir, Options::default().segment_size(1 << 20)).unwrap();
    let all: Vec<Vec<u8>> = (0..n).map(payload).collect();
    for p in &all {
        log.append(p).unwrap();
    }
    log.close().unwrap();
    let done = compress_log(dir, &OsStorage).unwrap();
    assert!(done.len() >= 2, "several segments: {}", done.len());
    all
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Every payload of the log in `dir`, read in order (`LogReader::iter`).
fn read_all(dir: &Path) -> Vec<Vec<u8>> {
    LogReader::open(dir)
        .unwrap()
        .iter()
        .map(|r| r.unwrap().payload.to_vec())
        .collect()
}

/// The first cold segment of the log in `dir`: its path and bytes.
fn first_segment(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let seg = segments(dir)[0].clone();
    let b = std::fs::read(&seg).unwrap();
    (seg, b)
}

/// Makes the cold file's block index checksum (in its header) and header checksum agree with
/// its bytes again, after a test changed its index or header.
fn reseal(b: &mut [u8]) {
    let index_offset = u64_at(b, 48) as usize;
    let blocks = u32_at(b, 40) as usize;
    let index_crc = crc32fast::hash(&b[index_offset..index_offset + 32 * blocks]);
    b[56..60].copy_from_slice(&index_crc.to_le_bytes());
    let head_crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&head_crc.to_le_bytes());
}

#[test]
fn threads_sharing_a_reader_each_get_the_right_records_of_a_cold_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_cold_log(&dir, 6000);
    let reader = LogReader::open(&dir).unwrap();
    let n = all.len() as u64;
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (reader, all) = (&reader, &all);
            s.spawn(move || {
                // Each thread jumps between blocks and segments in its own order, so threads
                // race to decompress the same blocks.
                for k in 0..n {
                    let seq = (k * (7919 + 2 * t) + t * 1000) % n;
                    assert_eq!(
                        reader.get(seq).unwrap().payload,
                        &all[seq as usize][..],
                        "seq {seq}"
                    );
                }
            });
        }
    });
    assert_eq!(read_all(&dir), all);
}

#[test]
fn a_block_zstd_cannot_decode_fails_only_its_records_and_the_next_block_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_cold_log(&dir, 6000);
    let (seg, mut b) = first_segment(&dir);
    // Block 0's zstd frame (at the offset its index entry names: 128, or after the segment's
    // dictionary): break its magic, then make every checksum agree (the block's in the index
    // entry, the index's and the header's), so the checksums pass and zstd itself refuses the
    // frame.
    let index_offset = u64_at(&b, 48) as usize;
    let z0 = u64_at(&b, index_offset + 16);
    let at = z0 as usize;
    b[at..at + 4].copy_from_slice(b"XXXX");
    let zlen = u32_at(&b, index_offset + 24) as usize;
    let crc = crc32fast::hash(&b[at..at + zlen]);
    b[index_offset + 28..index_offset + 32].copy_from_slice(&crc.to_le_bytes());
    reseal(&mut b);
    std::fs::write(&seg, &b).unwrap();

    let reader = LogReader::open(&dir).unwrap();
    match reader.get(1) {
        Err(Error::Corrupt(c)) => {
            assert_eq!(c.path, seg);
            assert_eq!(c.offset, z0);
            assert_eq!(c.seq, Some(1));
            assert!(
                matches!(&c.kind, CorruptionKind::CompressedBlock(w) if w.contains("block 0") && w.contains("zstd")),
                "{:?}",
                c.kind
            );
        }
        other => panic!("{other:?}"),
    }
    // The same thread decompresses the next blocks with the same context.
    let first_of_block_1 = (1..all.len() as u64)
        .find(|&s| reader.get(s).is_ok())
        .expect("a later record reads");
    for seq in first_of_block_1..all.len() as u64 {
        assert_eq!(reader.get(seq).unwrap().payload, &all[seq as usize][..]);
    }
    // Asking again gives the same error, not bytes of a half-decoded block.
    assert!(matches!(reader.get(0), Err(Error::Corrupt(c)) if c.offset == z0));
    let report = verify(&dir).unwrap();
    let d = report.corruption().expect("corruption");
    assert_eq!((d.corruption.offset, d.corruption.seq), (z0, Some(0)));
}

/// A sequential read of a cold segment takes each record from a block whose compressed bytes'
/// checksum it has checked, and does not compute the record's own checksum again; `verify`
/// does. Block 0 is rebuilt here with a wrong checksum in its first record's header (every
/// checksum of the cold file made to agree): the read returns the records, `verify` names the
/// record.
#[test]
fn a_sequential_read_trusts_the_block_checksum_and_verify_checks_each_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_cold_log(&dir, 6000);
    let (seg, b) = first_segment(&dir);
    let index_offset = u64_at(&b, 48) as usize;
    let blocks = u32_at(&b, 40) as usize;
    let dict_len = u32_at(&b, 44) as usize;
    assert!(dict_len > 0, "a segment of this size gets a dictionary");
    let dict = &b[128..128 + dict_len];
    let entry = |k: usize| index_offset + 32 * k;
    let (plain_len, z0, zlen) = (
        u32_at(&b, entry(0) + 12) as usize,
        u64_at(&b, entry(0) + 16) as usize,
        u32_at(&b, entry(0) + 24) as usize,
    );
    let mut plain = zstd::bulk::Decompressor::with_dictionary(dict)
        .unwrap()
        .decompress(&b[z0..z0 + zlen], plain_len)
        .unwrap();
    // The first record's stored checksum (header bytes 4..8).
    plain[4] ^= 0xFF;
    let z = zstd::bulk::Compressor::with_dictionary(3, dict)
        .unwrap()
        .compress(&plain)
        .unwrap();
    // The new frame goes where the index was, and the index after it.
    let mut index = b[index_offset..index_offset + 32 * blocks].to_vec();
    index[16..24].copy_from_slice(&(index_offset as u64).to_le_bytes());
    index[24..28].copy_from_slice(&(z.len() as u32).to_le_bytes());
    index[28..32].copy_from_slice(&crc32fast::hash(&z).to_le_bytes());
    let mut out = b[..index_offset].to_vec();
    out.extend_from_slice(&z);
    let new_index_offset = out.len() as u64;
    out.extend_from_slice(&index);
    out[48..56].copy_from_slice(&new_index_offset.to_le_bytes());
    reseal(&mut out);
    std::fs::write(&seg, &out).unwrap();

    assert_eq!(read_all(&dir), all);
    let report = verify(&dir).unwrap();
    let d = report.corruption().expect("verify checks each record");
    assert_eq!(d.corruption.seq, Some(0));
    assert!(
        matches!(d.corruption.kind, CorruptionKind::ChecksumMismatch { .. }),
        "{:?}",
        d.corruption.kind
    );
}
