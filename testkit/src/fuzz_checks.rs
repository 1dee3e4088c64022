//! The checks the fuzz targets run (`fuzz/fuzz_targets/*.rs`), also replayed over the committed
//! corpus by `tests/log/fuzz_corpus.rs`.
//!
//! - [`segment_decode`]: arbitrary bytes as a segment file (and optionally its index file):
//!   readers and every recovery mode must never panic (errors are fine), and a log that opens
//!   for writing must take an append at seq = len.
//! - [`engine_model`]: an arbitrary sequence of operations on a log, checked against a
//!   `Vec<Vec<u8>>` model after every operation.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use agentlog::log::sim::SimStorage;
use agentlog::log::{Durability, Log, LogReader, Options, RecoveryMode};

/// The normal file I/O without fdatasync (the simulation only records what a sync would make
/// durable): these checks are about what opening and reading do, and fuzzing needs speed.
fn fast_storage() -> Arc<SimStorage> {
    Arc::new(SimStorage::new())
}

/// Reads at most this many records per check (inputs are small; this bounds the run time).
const READ_LIMIT: u64 = 4096;

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Splits a `segment_decode` input: a flags byte (bit 0: an index file follows; bit 1: name
/// the segment after the base seq in its header, else 0), then, with an index, the segment's
/// length (u16 LE), the segment bytes and the index bytes.
/// A `segment_decode` input: flags, segment bytes, index bytes.
pub type SegmentInput<'a> = (u8, &'a [u8], Option<&'a [u8]>);

/// Splits a `segment_decode` input (see [`split_segment_input`]'s format above).
pub fn split_segment_input(data: &[u8]) -> Option<SegmentInput<'_>> {
    let (&flags, rest) = data.split_first()?;
    if flags & 1 == 0 {
        return Some((flags, rest, None));
    }
    let len = usize::from(u16::from_le_bytes(rest.get(..2)?.try_into().ok()?));
    let rest = &rest[2..];
    let len = len.min(rest.len());
    Some((flags, &rest[..len], Some(&rest[len..])))
}

/// Builds a `segment_decode` input from real files (for seed corpora).
pub fn join_segment_input(segment: &[u8], index: Option<&[u8]>, name_from_header: bool) -> Vec<u8> {
    let mut out = vec![u8::from(index.is_some()) | (u8::from(name_from_header) << 1)];
    if let Some(idx) = index {
        out.extend_from_slice(&(segment.len() as u16).to_le_bytes());
        out.extend_from_slice(segment);
        out.extend_from_slice(idx);
    } else {
        out.extend_from_slice(segment);
    }
    out
}

fn write_segment_files(dir: &Path, flags: u8, seg: &[u8], idx: Option<&[u8]>) {
    let base = if flags & 2 != 0 {
        u64_at(seg, 16).unwrap_or(0)
    } else {
        0
    };
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{base:020}.seg")), seg).unwrap();
    if let Some(idx) = idx {
        std::fs::write(dir.join(format!("{base:020}.idx")), idx).unwrap();
    }
}

fn read_everything(r: &LogReader) {
    let n = r.len().min(READ_LIMIT);
    for seq in 0..n {
        if let Ok(rec) = r.get(seq) {
            assert_eq!(rec.seq, seq);
        }
    }
    let _ = r.get(r.len());
    let _ = r.get(u64::MAX);
    for (i, item) in r.iter().take(READ_LIMIT as usize).enumerate() {
        if let Ok(rec) = item {
            assert_eq!(rec.seq, i as u64);
        }
    }
}

/// Arbitrary bytes as a segment (and index) file: nothing may panic.
pub fn segment_decode(data: &[u8]) {
    let Some((flags, seg, idx)) = split_segment_input(data) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    write_segment_files(&dir, flags, seg, idx);
    if let Ok(mut r) = LogReader::open(&dir) {
        read_everything(&r);
        let _ = r.refresh();
        read_everything(&r);
    }
    // The payload schema of the header, so that opening goes past the schema check.
    let schema = u32_at(seg, 48).unwrap_or(0);
    for (k, mode) in [
        RecoveryMode::Strict,
        RecoveryMode::TolerateTornTail,
        RecoveryMode::Salvage,
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tmp.path().join(format!("w{k}"));
        write_segment_files(&dir, flags, seg, idx);
        let opts = Options::default()
            .segment_size(4 << 10)
            .preallocate(4 << 10)
            .max_event_size(4 << 10)
            .payload_schema(schema)
            .recovery(mode)
            .storage(fast_storage());
        if let Ok(log) = Log::open(&dir, opts) {
            let len = log.len();
            read_everything(&log.reader());
            // A log that opens for writing takes appends at the right seq.
            if let Ok(seq) = log.append(b"fuzz") {
                assert_eq!(seq, len);
                assert_eq!(log.reader().get(seq).unwrap().payload, b"fuzz");
            }
            drop(log);
            if let Ok(r) = LogReader::open(&dir) {
                read_everything(&r);
            }
        }
    }
}

/// Reads operation bytes.
struct Ops<'a> {
    data: &'a [u8],
    at: usize,
}

impl Ops<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn payload(&mut self, counter: &mut u64) -> Vec<u8> {
        let len = match self.byte().unwrap_or(0) {
            255 => 1500,
            b => usize::from(b % 200),
        };
        *counter += 1;
        let mut x = counter.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }
}

fn model_opts() -> Options {
    Options::default()
        .segment_size(2 << 10)
        .preallocate(1 << 10)
        .max_event_size(2 << 10)
        .storage(fast_storage())
}

fn check_equal(log: &Log, model: &[Vec<u8>], full: bool) {
    assert_eq!(log.len(), model.len() as u64, "length");
    let r = log.reader();
    assert_eq!(r.len(), model.len() as u64);
    if full {
        let mut n = 0;
        for rec in r.iter() {
            let rec = rec.unwrap();
            assert_eq!(rec.payload, model[n].as_slice(), "seq {n}");
            n += 1;
        }
        assert_eq!(n, model.len());
    } else if let Some(last) = model.len().checked_sub(1) {
        assert_eq!(r.get(last as u64).unwrap().payload, model[last].as_slice());
    }
}

/// The last segment file of a log and the synced end its index header records.
fn active_segment(dir: &Path) -> Option<(std::path::PathBuf, u64)> {
    let seg = crate::segments(dir).pop()?;
    let idx = std::fs::read(seg.with_extension("idx")).ok()?;
    let synced_end = u64::from(u32_at(&idx, 56)?);
    Some((seg, synced_end))
}

/// An arbitrary sequence of operations checked against a model.
pub fn engine_model(data: &[u8]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut log = Log::open(&dir, model_opts()).unwrap();
    let mut model: Vec<Vec<u8>> = Vec::new();
    // Records that must survive anything but damage: synced ones.
    let mut synced = 0u64;
    let mut counter = 0u64;
    let mut ops = Ops { data, at: 0 };
    let mut steps = 0;
    while let Some(op) = ops.byte() {
        steps += 1;
        if steps > 200 {
            break;
        }
        match op % 9 {
            0 | 1 => {
                let p = ops.payload(&mut counter);
                assert_eq!(log.append(&p).unwrap(), model.len() as u64);
                model.push(p);
            }
            2 => {
                let n = u64::from(ops.byte().unwrap_or(0) % 5);
                let batch: Vec<Vec<u8>> = (0..n).map(|_| ops.payload(&mut counter)).collect();
                let start = model.len() as u64;
                assert_eq!(log.append_batch(&batch).unwrap(), start..start + n);
                model.extend(batch);
            }
            3 => {
                log.sync().unwrap();
                synced = model.len() as u64;
                assert!(log.synced_len() >= synced);
            }
            4 => {
                let p = ops.payload(&mut counter);
                assert_eq!(
                    log.append_with(&p, Durability::Sync).unwrap(),
                    model.len() as u64
                );
                model.push(p);
                synced = model.len() as u64;
            }
            5 => {
                // A crash (kill -9): everything appended is in the page cache and survives.
                log.abandon();
                let l = Log::open(&dir, model_opts()).unwrap();
                let report = l.recovery_report().clone();
                assert!(report.cut.is_none(), "{report}");
                log = l;
            }
            6 => {
                log.close().unwrap();
                let l = Log::open(&dir, model_opts()).unwrap();
                let report = l.recovery_report().clone();
                assert!(report.clean, "{report}");
                log = l;
            }
            7 => {
                if let Some(last) = model.len().checked_sub(1) {
                    let seq = u64::from(ops.byte().unwrap_or(0)) % (last as u64 + 1);
                    let r = log.reader();
                    assert_eq!(r.get(seq).unwrap().payload, model[seq as usize].as_slice());
                }
            }
            _ => {
                // A torn tail: a crash, then the active segment cut somewhere after its synced
                // end (what a power loss can do to unsynced bytes).
                log.abandon();
                if let Some((seg, synced_end)) = active_segment(&dir) {
                    let len = std::fs::metadata(&seg).unwrap().len();
                    if len > synced_end {
                        let pick = u64::from(u16::from_le_bytes([
                            ops.byte().unwrap_or(0),
                            ops.byte().unwrap_or(0),
                        ]));
                        let cut = synced_end + pick % (len - synced_end + 1);
                        std::fs::OpenOptions::new()
                            .write(true)
                            .open(&seg)
                            .unwrap()
                            .set_len(cut)
                            .unwrap();
                    }
                }
                let l = Log::open(&dir, model_opts()).unwrap();
                let report = l.recovery_report().clone();
                let len = l.len();
                assert!(len <= model.len() as u64, "{report}");
                assert!(
                    len >= synced,
                    "synced records lost: {len} < {synced} ({report})"
                );
                // A cut exactly at a record start beyond the synced end looks like a crash
                // before that record: no report. Anything else cut is reported.
                if let Some(cut) = &report.cut {
                    assert_eq!(cut.first_lost_seq, len, "{report}");
                }
                model.truncate(len as usize);
                log = l;
            }
        }
        check_equal(&log, &model, false);
    }
    check_equal(&log, &model, true);
    log.close().unwrap();
    let r = LogReader::open(&dir).unwrap();
    assert_eq!(r.len(), model.len() as u64);
    for (i, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, model[i].as_slice());
    }
}
