//! The `LASTSEG` hint (issue 14: open + read the last event without listing the directory): a
//! reader opened from it answers exactly what a reader that lists the directory answers, also
//! when the hint is stale, names a removed segment, belongs to another log, is damaged, or a
//! segment was rolled after it; segments before the last one are listed when first needed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentlog::log::sim::{PowerCut, SimStorage};
use agentlog::log::{
    copy_prefix, CorruptionKind, Durability, Log, LogReader, Options, LASTSEG_FILE,
};

const EVENTS: u64 = 400;

fn payload(seq: u64) -> Vec<u8> {
    format!("record {seq:06} {}", "y".repeat((seq % 29) as usize)).into_bytes()
}

fn opts() -> Options {
    Options::default()
        .segment_size(1 << 10)
        .preallocate(1 << 10)
}

/// The segment files of `dir`, in seq order.
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

/// Appends records `from..to` to the log in `dir` (created when missing) and closes it.
fn append(dir: &Path, from: u64, to: u64) {
    let log = Log::open(dir, opts()).unwrap();
    assert_eq!(log.len(), from);
    for seq in from..to {
        assert_eq!(log.append(&payload(seq)).unwrap(), seq);
    }
    log.close().unwrap();
}

/// Every record a reader sees, checked against what was appended.
fn check_all(r: &LogReader, len: u64) {
    assert_eq!(r.len(), len);
    let mut n = 0;
    for rec in r.iter() {
        let rec = rec.unwrap();
        assert_eq!(rec.seq, n);
        assert_eq!(rec.payload, payload(n));
        n += 1;
    }
    assert_eq!(n, len);
}

/// The length a reader that lists the directory sees (the hint moved aside, then back).
fn listed_len(dir: &Path) -> u64 {
    let hint = dir.join(LASTSEG_FILE);
    let aside = dir.join("LASTSEG.aside");
    let had = std::fs::rename(&hint, &aside).is_ok();
    let len = LogReader::open(dir).unwrap().len();
    if had {
        std::fs::rename(&aside, &hint).unwrap();
    }
    len
}

#[test]
fn the_writer_keeps_a_hint_naming_its_last_segment() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, EVENTS);
    let hint = std::fs::read(tmp.path().join(LASTSEG_FILE)).unwrap();
    // 64 bytes, then (after the clean close) the copy of the last segment's header, the
    // segment file's identity and the last record.
    assert!(
        hint.len() > 64 + 64 + 32 && hint.len() <= 4096,
        "{}",
        hint.len()
    );
    assert_eq!(&hint[..8], b"AGLOGTAL");
    let (last, _) = *segments(tmp.path()).last().unwrap();
    assert!(last > 0, "many segments");
    assert_eq!(u64::from_le_bytes(hint[32..40].try_into().unwrap()), last);
}

#[test]
fn opening_from_the_hint_reads_the_last_event_without_the_listing() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, EVENTS);
    let segs = segments(tmp.path());
    // Remove the second segment (its index stays: evidence of a missing segment, which the
    // listing reports). The last event does not need it.
    let (gone, path) = segs[1].clone();
    std::fs::remove_file(&path).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), EVENTS);
    assert_eq!(r.get(EVENTS - 1).unwrap().payload, payload(EVENTS - 1));
    // (Read with pread when the reader opened: no segment mapped.)
    assert_eq!(r.mapped_segments(), 0);
    // An earlier record lists the directory then, and gets the damage the listing finds.
    let e = r.get(gone).unwrap_err();
    let c = e.corruption().expect("damage");
    assert_eq!(c.path, path);
    assert!(matches!(c.kind, CorruptionKind::MissingSegment(_)), "{e}");
    // So does a scan from the start.
    assert!(r.iter().any(|x| x.is_err()));
    // Without the hint, the listing at open reports it.
    std::fs::remove_file(tmp.path().join(LASTSEG_FILE)).unwrap();
    let e = LogReader::open(tmp.path()).unwrap_err();
    assert_eq!(e.corruption().expect("damage").path, path);
}

#[test]
fn a_reader_opened_from_the_hint_lists_the_rest_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, EVENTS);
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.get(0).unwrap().payload, payload(0));
    check_all(&r, EVENTS);
    assert_eq!(r.segment_files().len(), segments(tmp.path()).len());
    let c = LogReader::open(tmp.path()).unwrap();
    let tail: Vec<u64> = c.range(EVENTS - 3..).map(|x| x.unwrap().seq).collect();
    assert_eq!(tail, vec![EVENTS - 3, EVENTS - 2, EVENTS - 1]);
}

#[test]
fn a_stale_hint_is_walked_forward_to_the_last_segment() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, EVENTS / 4);
    let old = std::fs::read(tmp.path().join(LASTSEG_FILE)).unwrap();
    let before = segments(tmp.path()).len();
    append(tmp.path(), EVENTS / 4, EVENTS);
    assert!(segments(tmp.path()).len() > before + 2);
    // A hint older than the segments (a writer that kept none rolled since).
    std::fs::write(tmp.path().join(LASTSEG_FILE), &old).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), EVENTS);
    assert_eq!(r.get(EVENTS - 1).unwrap().payload, payload(EVENTS - 1));
    check_all(&r, EVENTS);
}

#[test]
fn a_hint_naming_a_removed_segment_or_of_another_log_or_damaged_falls_back_to_the_listing() {
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big");
    let small = tmp.path().join("small");
    append(&big, 0, EVENTS);
    append(&small, 0, EVENTS / 8);
    let big_hint = std::fs::read(big.join(LASTSEG_FILE)).unwrap();
    let small_hint = std::fs::read(small.join(LASTSEG_FILE)).unwrap();

    // The big log's hint names a segment the small log does not have.
    std::fs::write(small.join(LASTSEG_FILE), &big_hint).unwrap();
    check_all(&LogReader::open(&small).unwrap(), EVENTS / 8);

    // The small log's hint names a base the big log has, in another log.
    let (small_last, _) = *segments(&small).last().unwrap();
    assert!(segments(&big).iter().any(|(b, _)| *b == small_last));
    std::fs::write(big.join(LASTSEG_FILE), &small_hint).unwrap();
    check_all(&LogReader::open(&big).unwrap(), EVENTS);

    // A damaged hint, and a short one.
    let mut bad = big_hint.clone();
    bad[33] ^= 0x01;
    std::fs::write(big.join(LASTSEG_FILE), &bad).unwrap();
    check_all(&LogReader::open(&big).unwrap(), EVENTS);
    std::fs::write(big.join(LASTSEG_FILE), &big_hint[..40]).unwrap();
    check_all(&LogReader::open(&big).unwrap(), EVENTS);

    // The hint's segment removed by hand: the listing names what is wrong, as without a hint.
    std::fs::write(big.join(LASTSEG_FILE), &big_hint).unwrap();
    let (_, last) = segments(&big).last().unwrap().clone();
    std::fs::remove_file(&last).unwrap();
    let with_hint = LogReader::open(&big).map(|r| r.len());
    std::fs::remove_file(big.join(LASTSEG_FILE)).unwrap();
    let without = LogReader::open(&big).map(|r| r.len());
    assert_eq!(format!("{with_hint:?}"), format!("{without:?}"));
}

#[test]
fn segments_rolled_after_a_reader_opened_from_the_hint_are_seen_on_refresh() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, EVENTS / 2);
    let mut r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), EVENTS / 2);
    let before = segments(tmp.path()).len();
    let log = Log::open(tmp.path(), opts()).unwrap();
    for seq in EVENTS / 2..EVENTS {
        log.append(&payload(seq)).unwrap();
    }
    assert!(segments(tmp.path()).len() > before);
    assert_eq!(r.refresh().unwrap(), EVENTS);
    check_all(&r, EVENTS);
    // A reader opened while the writer is still open reads from its fresh hint.
    let r2 = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r2.len(), EVENTS);
    assert_eq!(r2.get(EVENTS - 1).unwrap().payload, payload(EVENTS - 1));
    log.close().unwrap();
}

#[test]
fn fork_and_recovery_stay_right_with_the_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let from = tmp.path().join("from");
    append(&from, 0, EVENTS);
    // A fork of a prefix ending in a middle segment (copy_prefix opens a reader from the hint).
    let to = tmp.path().join("to");
    std::fs::create_dir(&to).unwrap();
    let n = EVENTS / 2 + 3;
    copy_prefix(&from, &to, n).unwrap();
    check_all(&LogReader::open(&to).unwrap(), n);
    append(&to, n, n + 10);
    assert!(to.join(LASTSEG_FILE).exists());
    check_all(&LogReader::open(&to).unwrap(), n + 10);
    assert_eq!(listed_len(&to), n + 10);

    // Recovery that cuts the log inside an earlier segment (salvage mode, a damaged record):
    // the writer's next open rewrites the hint, and readers see what the writer kept.
    let segs = segments(&from);
    let (base, path) = segs[segs.len() / 2].clone();
    let mut bytes = std::fs::read(&path).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap();
    bytes[end] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let salvage = opts().recovery(agentlog::log::RecoveryMode::Salvage);
    let log = Log::open(&from, salvage).unwrap();
    let kept = log.len();
    assert!(kept > base && kept < EVENTS, "cut at {kept}");
    log.close().unwrap();
    let r = LogReader::open(&from).unwrap();
    assert_eq!(r.len(), kept);
    check_all(&r, kept);
    assert_eq!(listed_len(&from), kept);
}

#[test]
fn after_a_power_cut_the_hint_never_makes_a_reader_answer_short() {
    for cut_after in [5u64, 40, 77, 130, 201] {
        for how in [
            PowerCut::KeepSynced,
            PowerCut::TornPrefix { seed: cut_after },
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let sim = Arc::new(SimStorage::new());
            let o = opts().durability(Durability::Os).storage(sim.clone());
            let log = Log::open(tmp.path(), o).unwrap();
            for seq in 0..cut_after {
                log.append(&payload(seq)).unwrap();
            }
            sim.power_cut(how).unwrap();
            log.abandon();
            // Before any writer repairs it: what a listing reader sees, the hint reader sees.
            let hinted = LogReader::open(tmp.path()).map(|r| r.len());
            std::fs::remove_file(tmp.path().join(LASTSEG_FILE)).ok();
            let listed = LogReader::open(tmp.path()).map(|r| r.len());
            match (&hinted, &listed) {
                (Ok(h), Ok(l)) => assert_eq!(h, l, "cut after {cut_after} ({how:?})"),
                // A listing that reports damage: the hint reader falls back to it, or (the
                // damage being before the last segment) answers the last event and reports
                // the damage when a read reaches it.
                (_, Err(_)) => {}
                (Err(e), Ok(l)) => panic!("hint: {e}, listing: {l} (cut after {cut_after})"),
            }
        }
    }
}
