//! Damaged files: bit flips anywhere (segment headers, record headers, payloads, padding, index
//! files), truncation at every offset of the last record, zeroed tails, a segment of another
//! log swapped in. Over a log with several sealed segments and an active one, closed cleanly and
//! abandoned (as a crash leaves it). For every case:
//!
//! - nothing panics;
//! - `RecoveryMode::Strict` refuses damaged data with an error naming the segment and offset;
//! - `RecoveryMode::Salvage` keeps every valid record before the damage and nothing after;
//! - the default mode refuses, or cuts and reports, or (a cleanly closed log, damage inside a
//!   sealed segment) opens and the damage shows when a reader reaches the record;
//! - readers never return a wrong payload: each item is the right payload or an error naming
//!   the segment and offset.
//!
//! `AGENTLOG_CORRUPTION_ITERS` sets the number of random flips per log (default 80);
//! `AGENTLOG_SEED` replays a run.

use testkit as common;

use std::path::{Path, PathBuf};

use agentlog::log::{DamageClass, Error, Log, LogReader, Options, RecoveryMode};
use common::{copy_dir, payload, Rng};

fn opts() -> Options {
    Options::default()
        .segment_size(16 << 10)
        .preallocate(4 << 10)
}

/// A log of `n` records `payload(seq)` with several sealed segments and an active one. With
/// `abandon`, the writer syncs after `n - 20` records and is then abandoned (as a crash leaves
/// it: the active segment's index is open, its last records beyond the synced end).
fn make_log(dir: &Path, n: u64, abandon: bool, f: impl Fn(u64) -> Vec<u8>) -> Vec<Vec<u8>> {
    let log = Log::open(dir, opts()).unwrap();
    let expected: Vec<Vec<u8>> = (0..n).map(f).collect();
    for (i, p) in expected.iter().enumerate() {
        log.append(p).unwrap();
        if abandon && i as u64 == n - 21 {
            log.sync().unwrap();
        }
    }
    if abandon {
        log.abandon();
    } else {
        log.close().unwrap();
    }
    assert!(common::segments(dir).len() >= 4);
    expected
}

/// One record's place in a segment file.
#[derive(Debug, Clone)]
struct Place {
    seg: PathBuf,
    seq: u64,
    offset: u64,
    len: u64,
}

/// Every record of the log, found by walking the segments from their headers (independent of
/// the engine's index).
fn places(dir: &Path, expected: &[Vec<u8>]) -> Vec<Place> {
    let mut out = Vec::new();
    let mut seq = 0u64;
    for seg in common::segments(dir) {
        let base: u64 = common::base_seq(&seg).unwrap();
        assert_eq!(base, seq);
        let bytes = std::fs::read(&seg).unwrap();
        let mut at = 64u64;
        while at + 16 <= bytes.len() as u64 && (seq as usize) < expected.len() {
            let len = u32::from_le_bytes(bytes[at as usize..at as usize + 4].try_into().unwrap());
            if len == 0 && bytes[at as usize + 12] == 0 {
                break;
            }
            assert_eq!(len as usize, expected[seq as usize].len());
            out.push(Place {
                seg: seg.clone(),
                seq,
                offset: at,
                len: u64::from(len),
            });
            at += 16 + u64::from(len).div_ceil(16) * 16;
            seq += 1;
        }
    }
    assert_eq!(out.len(), expected.len());
    out
}

/// What a damaged byte is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hit {
    /// A segment header: the whole segment is unusable from here.
    SegmentHeader { seg: PathBuf, base: u64 },
    /// A record's header or payload.
    Record { seg: PathBuf, seq: u64, offset: u64 },
    /// Padding after a payload: covered by no checksum, harmless.
    Padding,
    /// Zero bytes after the last record of the active segment (a crash leaves them).
    AfterRecords { seg: PathBuf, offset: u64 },
    /// Derived data: rebuilt.
    Index,
}

fn classify(places: &[Place], file: &Path, offset: u64) -> Hit {
    if file.extension().is_some_and(|e| e == "idx") {
        return Hit::Index;
    }
    if offset < 64 {
        let base = common::base_seq(file).unwrap();
        return Hit::SegmentHeader {
            seg: file.to_path_buf(),
            base,
        };
    }
    for p in places.iter().filter(|p| p.seg == file) {
        if offset >= p.offset && offset < p.offset + 16 + p.len {
            return Hit::Record {
                seg: file.to_path_buf(),
                seq: p.seq,
                offset: p.offset,
            };
        }
        if offset >= p.offset + 16 + p.len && offset < p.offset + 16 + p.len.div_ceil(16) * 16 {
            return Hit::Padding;
        }
    }
    let end = places
        .iter()
        .filter(|p| p.seg == file)
        .map(|p| p.offset + 16 + p.len.div_ceil(16) * 16)
        .max()
        .unwrap_or(64);
    Hit::AfterRecords {
        seg: file.to_path_buf(),
        offset: end,
    }
}

/// Where damage starts: the file, the offset and the first seq it costs.
#[derive(Debug, Clone)]
struct Where {
    seg: PathBuf,
    offset: u64,
    seq: u64,
}

/// Readers never return a wrong payload: each item is the right payload, or an error naming a
/// segment and offset. With `damage`, the damaged record (when the reader sees that far) is an
/// error naming exactly that place, and every record before it reads correctly.
fn check_reader(dir: &Path, expected: &[Vec<u8>], damage: Option<&Where>, what: &str) {
    let r = match LogReader::open(dir) {
        Ok(r) => r,
        Err(e) => {
            let c = e
                .corruption()
                .unwrap_or_else(|| panic!("{what}: reader open: {e}"));
            if let Some(d) = damage {
                assert_eq!(c.path, d.seg, "{what}: {e}");
            }
            return;
        }
    };
    assert!(
        r.len() <= expected.len() as u64,
        "{what}: reader len {}",
        r.len()
    );
    if let Some(d) = damage {
        assert!(
            r.len() >= d.seq,
            "{what}: the reader hides valid records ({} < {})",
            r.len(),
            d.seq
        );
    }
    for seq in 0..r.len() {
        match r.get(seq) {
            Ok(rec) => assert_eq!(
                rec.payload,
                expected[seq as usize].as_slice(),
                "{what}: the reader returned a wrong payload for seq {seq}"
            ),
            Err(e) => {
                let c = e
                    .corruption()
                    .unwrap_or_else(|| panic!("{what}: get({seq}): {e}"));
                let d = damage.unwrap_or_else(|| panic!("{what}: get({seq}) on a sound log: {e}"));
                assert!(seq >= d.seq, "{what}: get({seq}) before the damage: {e}");
                if seq == d.seq {
                    assert_eq!((&c.path, c.offset), (&d.seg, d.offset), "{what}: {e}");
                }
            }
        }
    }
    if let Some(d) = damage.filter(|d| d.seq < r.len()) {
        let e = r
            .get(d.seq)
            .err()
            .unwrap_or_else(|| panic!("{what}: the damaged seq {} reads fine", d.seq));
        assert!(e.corruption().is_some(), "{what}: {e}");
    }
    let mut n = 0u64;
    for item in r.iter() {
        match item {
            Ok(rec) => {
                assert_eq!(rec.seq, n);
                assert_eq!(rec.payload, expected[n as usize].as_slice(), "{what}: iter");
                n += 1;
            }
            Err(e) => {
                assert!(e.corruption().is_some(), "{what}: iter: {e}");
                if let Some(d) = damage {
                    assert!(n >= d.seq, "{what}: iter stopped early at {n}: {e}");
                }
            }
        }
    }
}

/// Opens a copy of `src` in `mode`.
fn open_copy(src: &Path, dst: &Path, mode: RecoveryMode) -> agentlog::log::Result<(Log, u64)> {
    let _ = std::fs::remove_dir_all(dst);
    copy_dir(src, dst);
    Log::open(dst, opts().recovery(mode)).map(|log| {
        let len = log.len();
        (log, len)
    })
}

fn rel(p: &Path, from: &Path, to: &Path) -> PathBuf {
    to.join(p.strip_prefix(from).unwrap())
}

/// Checks every mode and the readers on the damaged log in `src`.
fn check_all_modes(
    src: &Path,
    work: &Path,
    expected: &[Vec<u8>],
    damage: Option<&Where>,
    what: &str,
) {
    check_reader(src, expected, damage, what);
    let dst = work.join("open");
    let moved = |d: &Where| Where {
        seg: rel(&d.seg, src, &dst),
        ..d.clone()
    };
    let damage_here = damage.map(moved);

    // Strict: damaged data is an error naming the segment and offset.
    match open_copy(src, &dst, RecoveryMode::Strict) {
        Ok((log, len)) => {
            assert!(damage.is_none(), "{what}: strict opened a damaged log");
            assert_eq!(len, expected.len() as u64, "{what}: strict");
            drop(log);
            common::assert_log_holds(&dst, expected);
        }
        Err(e) => {
            let d = damage_here
                .as_ref()
                .unwrap_or_else(|| panic!("{what}: strict refused a sound log: {e}"));
            let c = e
                .corruption()
                .unwrap_or_else(|| panic!("{what}: strict: {e}"));
            assert_eq!(
                (&c.path, c.offset),
                (&d.seg, d.offset),
                "{what}: strict: {e}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains(&d.seg.display().to_string()) && msg.contains(&d.offset.to_string()),
                "{what}: {msg}"
            );
        }
    }

    // Salvage: every valid record before the damage, nothing after; appending continues.
    let (log, len) = open_copy(src, &dst, RecoveryMode::Salvage)
        .unwrap_or_else(|e| panic!("{what}: salvage failed: {e}"));
    let keep = damage.map_or(expected.len() as u64, |d| d.seq);
    assert_eq!(
        len, keep,
        "{what}: salvage kept {len} records, expected {keep}"
    );
    assert_eq!(log.append(b"after salvage").unwrap(), keep, "{what}");
    drop(log);
    let mut after = expected[..keep as usize].to_vec();
    after.push(b"after salvage".to_vec());
    common::assert_log_holds(&dst, &after);

    // The default mode: refuses naming the place, cuts and reports it, or (a cleanly closed
    // log) opens from the index tails, and readers report the damage when they reach it.
    match open_copy(src, &dst, RecoveryMode::TolerateTornTail) {
        Err(e) => {
            let d = damage_here
                .as_ref()
                .unwrap_or_else(|| panic!("{what}: default refused a sound log: {e}"));
            let c = e
                .corruption()
                .unwrap_or_else(|| panic!("{what}: default: {e}"));
            assert_eq!(
                (&c.path, c.offset),
                (&d.seg, d.offset),
                "{what}: default: {e}"
            );
        }
        Ok((log, len)) => {
            let Some(d) = damage_here.as_ref() else {
                assert_eq!(len, expected.len() as u64, "{what}");
                return;
            };
            // Either cut there (a torn tail; `default_cut_is_reported` checks the report), or
            // kept, with the damage showing when a reader reaches it.
            if len != d.seq {
                assert_eq!(len, expected.len() as u64, "{what}: default kept {len}");
                let r = log.reader();
                let e = r
                    .get(d.seq)
                    .err()
                    .unwrap_or_else(|| panic!("{what}: default: damaged seq {} reads", d.seq));
                let c = e.corruption().unwrap_or_else(|| panic!("{what}: {e}"));
                assert_eq!((&c.path, c.offset), (&d.seg, d.offset), "{what}: {e}");
                for seq in 0..d.seq {
                    assert_eq!(
                        r.get(seq).unwrap().payload,
                        expected[seq as usize].as_slice()
                    );
                }
            }
        }
    }
}

/// The default mode's report when it cut damage: the place and the first lost seq.
fn default_cut_is_reported(src: &Path, work: &Path, d: &Where, what: &str) {
    let dst = work.join("report");
    let _ = std::fs::remove_dir_all(&dst);
    copy_dir(src, &dst);
    if let Ok(log) = Log::open(&dst, opts()) {
        if log.len() == d.seq {
            let cut = log
                .recovery_report()
                .cut
                .clone()
                .unwrap_or_else(|| panic!("{what}: records were cut without a report"));
            assert_eq!(cut.first_lost_seq, d.seq, "{what}");
            assert_eq!(cut.at.path, rel(&d.seg, src, &dst), "{what}");
            assert_eq!(cut.at.offset, d.offset, "{what}");
        }
    }
}

fn flip_bits(variant: &str, abandon: bool) {
    let iters = common::env_count("AGENTLOG_CORRUPTION_ITERS", 80);
    let mut rng = Rng(common::seed(0xf11b) ^ u64::from(abandon));
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    let expected = make_log(&orig, 400, abandon, payload);
    let places = places(&orig, &expected);
    let mut files: Vec<PathBuf> = common::segments(&orig);
    files.extend(common::indexes(&orig));
    let mut hits = std::collections::BTreeMap::<&str, u64>::new();
    for i in 0..iters {
        // Pick a file, then an offset; half of the segment flips go to headers.
        let file = &files[rng.below(files.len() as u64) as usize];
        let len = std::fs::metadata(file).unwrap().len();
        let offset = if rng.below(4) == 0 {
            rng.below(len.min(64 + 16))
        } else {
            rng.below(len)
        };
        let bit = 1u8 << rng.below(8);
        let hit = classify(&places, file, offset);
        let damaged = base.path().join("damaged");
        let _ = std::fs::remove_dir_all(&damaged);
        copy_dir(&orig, &damaged);
        let target = rel(file, &orig, &damaged);
        let mut bytes = std::fs::read(&target).unwrap();
        bytes[offset as usize] ^= bit;
        std::fs::write(&target, &bytes).unwrap();
        let what = format!(
            "{variant} #{i}: bit {bit:#04x} at {}:{offset} ({hit:?})",
            file.file_name().unwrap().to_string_lossy()
        );
        let damage = match &hit {
            Hit::SegmentHeader { base: b, .. } => Some(Where {
                seg: target.clone(),
                offset: 0,
                seq: *b,
            }),
            Hit::Record { seq, offset, .. } => Some(Where {
                seg: target.clone(),
                offset: *offset,
                seq: *seq,
            }),
            Hit::AfterRecords { .. } | Hit::Padding | Hit::Index => None,
        };
        *hits
            .entry(match hit {
                Hit::SegmentHeader { .. } => "segment header",
                Hit::Record { .. } => "record",
                Hit::Padding => "padding",
                Hit::AfterRecords { .. } => "after the records",
                Hit::Index => "index",
            })
            .or_default() += 1;
        if let Hit::AfterRecords { seg, offset } = &hit {
            // Garbage after the last record of a crashed writer: strict refuses it as a torn
            // tail, the other modes cut it and keep every record.
            let e = open_copy(&damaged, &base.path().join("open"), RecoveryMode::Strict)
                .err()
                .unwrap_or_else(|| panic!("{what}: strict accepted garbage"));
            let c = e.corruption().unwrap();
            assert!(matches!(e, Error::TornTail(_)), "{what}: {e}");
            assert_eq!(c.path, rel(seg, &orig, &base.path().join("open")), "{what}");
            assert_eq!(c.offset, *offset, "{what}");
            check_reader(&damaged, &expected, None, &what);
            for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::Salvage] {
                let (_, len) = open_copy(&damaged, &base.path().join("open"), mode).unwrap();
                assert_eq!(len, expected.len() as u64, "{what}");
            }
            continue;
        }
        check_all_modes(&damaged, base.path(), &expected, damage.as_ref(), &what);
        if let Some(d) = &damage {
            default_cut_is_reported(&damaged, base.path(), d, &what);
        }
    }
    eprintln!("{variant}: {iters} flips: {hits:?}");
    assert!(hits.get("record").copied().unwrap_or(0) > iters / 4);
}

#[test]
fn flipped_bits_in_a_cleanly_closed_log() {
    flip_bits("closed", false);
}

#[test]
fn flipped_bits_in_an_abandoned_log() {
    flip_bits("abandoned", true);
}

fn truncate_last_record(abandon: bool) {
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    let expected = make_log(&orig, 300, abandon, payload);
    let places = places(&orig, &expected);
    let last = places.last().unwrap().clone();
    let seg_len = std::fs::metadata(&last.seg).unwrap().len();
    let payload_end = last.offset + 16 + last.len;
    let n = expected.len() as u64;
    let dir = base.path().join("cut");
    for cut in last.offset..seg_len.min(payload_end + 16) {
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&orig, &dir);
        let seg = rel(&last.seg, &orig, &dir);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let what = format!("abandoned={abandon} cut at {cut}");
        let lost = cut < payload_end;
        // A crashed writer's last record lies beyond its synced end: a file that ends exactly
        // where it starts looks like a crash before it, which is not damage.
        if abandon && cut == last.offset {
            let log = Log::open(&dir, opts()).unwrap();
            assert_eq!(log.len(), n - 1, "{what}");
            continue;
        }
        let damage = lost.then(|| Where {
            seg: seg.clone(),
            offset: last.offset,
            seq: last.seq,
        });
        check_reader(&dir, &expected, damage.as_ref(), &what);
        // Strict refuses a cut record, naming the segment and offset.
        let strict = Log::open(&dir, opts().recovery(RecoveryMode::Strict));
        match (&strict, lost) {
            (Ok(_), false) => {}
            (Err(e), true) => {
                let c = e.corruption().unwrap_or_else(|| panic!("{what}: {e}"));
                assert_eq!((&c.path, c.offset), (&seg, last.offset), "{what}: {e}");
            }
            (Ok(_), true) => panic!("{what}: strict opened a truncated log"),
            (Err(e), false) => panic!("{what}: strict refused: {e}"),
        }
        drop(strict);
        // A cleanly closed log vouches for its last record: losing it is damage, which the
        // default mode refuses (naming it) and salvage cuts. A crashed writer's unsynced last
        // record is a torn tail, which the default mode cuts.
        if lost && !abandon {
            let e = Log::open(&dir, opts()).unwrap_err();
            let c = e.corruption().unwrap_or_else(|| panic!("{what}: {e}"));
            assert_eq!((&c.path, c.offset), (&seg, last.offset), "{what}: {e}");
        }
        let mode = if lost && !abandon {
            RecoveryMode::Salvage
        } else {
            RecoveryMode::TolerateTornTail
        };
        let log = Log::open(&dir, opts().recovery(mode)).unwrap();
        let report = log.recovery_report().clone();
        if lost {
            assert_eq!(log.len(), n - 1, "{what}");
            let c = report
                .cut
                .unwrap_or_else(|| panic!("{what}: a record was cut without a report"));
            let class = if abandon {
                DamageClass::TornTail
            } else {
                DamageClass::Corruption
            };
            assert_eq!(c.class, class, "{what}");
            assert_eq!((&c.at.path, c.at.offset), (&seg, last.offset), "{what}");
            assert_eq!(c.first_lost_seq, n - 1, "{what}");
        } else {
            assert_eq!(log.len(), n, "{what}");
            assert!(report.cut.is_none(), "{what}");
        }
        let len = log.len();
        assert_eq!(log.append(b"next").unwrap(), len, "{what}");
        drop(log);
    }
}

#[test]
fn truncation_at_every_offset_of_the_last_record_of_a_closed_log() {
    truncate_last_record(false);
}

#[test]
fn truncation_at_every_offset_of_the_last_record_of_an_abandoned_log() {
    truncate_last_record(true);
}

/// Zeroes a segment from the start of record `k` to its end.
fn zero_tail(abandon: bool, pick: impl Fn(&[Place]) -> usize) {
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    let expected = make_log(&orig, 400, abandon, payload);
    let places = places(&orig, &expected);
    let k = pick(&places);
    let p = places[k].clone();
    let dir = base.path().join("zeroed");
    copy_dir(&orig, &dir);
    let seg = rel(&p.seg, &orig, &dir);
    let mut b = std::fs::read(&seg).unwrap();
    let len = b.len();
    b[p.offset as usize..len].fill(0);
    std::fs::write(&seg, &b).unwrap();
    let what = format!(
        "abandoned={abandon}: zeroed from seq {} ({}:{})",
        p.seq,
        seg.display(),
        p.offset
    );
    let d = Where {
        seg: seg.clone(),
        offset: p.offset,
        seq: p.seq,
    };
    check_all_modes(&dir, base.path(), &expected, Some(&d), &what);
    default_cut_is_reported(&dir, base.path(), &d, &what);
}

#[test]
fn a_zeroed_tail_of_the_active_segment_of_a_closed_log_is_detected() {
    zero_tail(false, |p| p.len() - 5);
}

#[test]
fn a_zeroed_tail_of_a_sealed_segment_is_detected() {
    zero_tail(false, |p| {
        let last_seg = &p.last().unwrap().seg;
        p.iter().rposition(|x| &x.seg != last_seg).unwrap() - 3
    });
    zero_tail(true, |p| {
        let last_seg = &p.last().unwrap().seg;
        p.iter().rposition(|x| &x.seg != last_seg).unwrap() - 3
    });
}

#[test]
fn a_zeroed_synced_tail_of_the_active_segment_of_an_abandoned_log_is_detected() {
    // The writer synced through record n - 21: zeroing records before that is not a crash.
    zero_tail(true, |p| {
        let last_seg = &p.last().unwrap().seg;
        let first_active = p.iter().position(|x| &x.seg == last_seg).unwrap();
        let k = first_active + 2;
        assert!(k < p.len() - 21, "the pick must lie in the synced part");
        k
    });
}

fn swap_in_foreign_segment(which: impl Fn(usize) -> usize, with_index: bool) {
    let base = tempfile::tempdir().unwrap();
    let a = base.path().join("a");
    let b = base.path().join("b");
    let expected = make_log(&a, 400, false, payload);
    // Same sizes (so the same segment boundaries), other bytes.
    let other = make_log(&b, 400, false, |s| {
        payload(s).iter().map(|x| x ^ 0x5a).collect()
    });
    assert_ne!(expected, other);
    let segs = common::segments(&a);
    let k = which(segs.len());
    let name = segs[k].file_name().unwrap().to_owned();
    std::fs::copy(b.join(&name), a.join(&name)).unwrap();
    let idx = PathBuf::from(&name).with_extension("idx");
    if with_index {
        std::fs::copy(b.join(&idx), a.join(&idx)).unwrap();
    }
    let base_seq: u64 = common::base_seq(&segs[k]).unwrap();
    let what = format!(
        "segment {k} of {} from another log (index too: {with_index})",
        segs.len()
    );
    let d = Where {
        seg: a.join(&name),
        offset: 24,
        seq: base_seq,
    };
    // (The first segment defines the log's id, so the swapped segment is a later one.)
    assert!(k > 0);
    check_all_modes(&a, base.path(), &expected, Some(&d), &what);
}

#[test]
fn a_segment_from_another_log_is_refused_and_never_read_as_ours() {
    swap_in_foreign_segment(|n| n / 2, true);
    swap_in_foreign_segment(|n| n / 2, false);
    swap_in_foreign_segment(|n| n - 1, true);
    swap_in_foreign_segment(|n| n - 1, false);
}
