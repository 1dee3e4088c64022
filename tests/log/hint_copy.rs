//! The copy of the last record a clean close writes into `LASTSEG` (issue 14: open + read the
//! last event, cold, as cheaply as a JSONL tail): a reader answers from it without reading the
//! segment, but only while the segment file is the one it was copied from, unchanged; a writer
//! drops it before it changes anything; a damaged, foreign or oversized copy is never believed.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use agentlog::log::{Log, LogReader, Options, LASTSEG_FILE};

/// Record `seq`'s payload: `big` ones are larger than the copy may hold (3,936 bytes).
fn payload(seq: u64, big: bool) -> Vec<u8> {
    let n = if big { 5000 } else { (seq % 97) as usize };
    format!("copy {seq:06} {}", "q".repeat(n)).into_bytes()
}

fn opts() -> Options {
    Options::default()
        .segment_size(1 << 14)
        .preallocate(1 << 14)
}

fn append_open(dir: &Path, from: u64, to: u64, big: bool) -> Log {
    let log = Log::open(dir, opts()).unwrap();
    assert_eq!(log.len(), from);
    for seq in from..to {
        assert_eq!(log.append(&payload(seq, big)).unwrap(), seq);
    }
    log
}

fn append(dir: &Path, from: u64, to: u64, big: bool) {
    append_open(dir, from, to, big).close().unwrap();
}

fn hint(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(LASTSEG_FILE)).unwrap()
}

fn flags(dir: &Path) -> u32 {
    u32::from_le_bytes(hint(dir)[12..16].try_into().unwrap())
}

/// The last segment file (named by the hint).
fn last_segment(dir: &Path) -> PathBuf {
    let base = u64::from_le_bytes(hint(dir)[32..40].try_into().unwrap());
    dir.join(format!("{base:020}.seg"))
}

/// `f` run with the hint moved aside (a reader then lists the directory), then put back.
fn without_hint<T>(dir: &Path, f: impl FnOnce() -> T) -> T {
    let (h, aside) = (dir.join(LASTSEG_FILE), dir.join("LASTSEG.aside"));
    std::fs::rename(&h, &aside).unwrap();
    let out = f();
    std::fs::rename(&aside, &h).unwrap();
    out
}

/// What a reader that lists the directory sees.
fn listed(dir: &Path) -> (u64, Vec<u8>) {
    without_hint(dir, || opened(dir))
}

fn opened(dir: &Path) -> (u64, Vec<u8>) {
    let r = LogReader::open(dir).unwrap();
    let out = (r.len(), r.get(r.len() - 1).unwrap().payload.to_vec());
    out
}

#[test]
fn a_clean_close_copies_a_small_last_record_and_the_reader_answers_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 500, false);
    let last = payload(499, false);
    let h = hint(tmp.path());
    assert_eq!(flags(tmp.path()), 3, "tail and copy");
    // 64 bytes of hint, the segment header (64), the file's identity (32), the record: its
    // 16-byte header and the payload padded to 16.
    assert_eq!(h.len(), 64 + 64 + 32 + 16 + last.len().next_multiple_of(16));
    assert_eq!(&h[64..72], b"AGLOGSEG");
    assert_eq!(&h[176..176 + last.len()], &last[..]);
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), 500);
    let rec = r.get(499).unwrap();
    assert_eq!(rec.payload, &last[..]);
    assert_eq!(rec.payload.as_ptr() as usize % 16, 0, "aligned as in a map");
    assert_eq!(r.mapped_segments(), 0);
    // Everything else reads through the segments.
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, payload(seq as u64, false));
    }
    assert_eq!(opened(tmp.path()), listed(tmp.path()));
}

#[test]
fn a_writer_that_opens_the_log_drops_the_copy_before_it_appends_anything() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 300, false);
    assert_eq!(flags(tmp.path()), 3);
    let log = Log::open(tmp.path(), opts()).unwrap();
    // Dropped (and synced) by the open itself: 64 bytes, no tail, no copy.
    assert_eq!(hint(tmp.path()).len(), 64);
    assert_eq!(flags(tmp.path()), 0);
    log.append(&payload(300, false)).unwrap();
    assert_eq!(opened(tmp.path()), (301, payload(300, false)));
    log.close().unwrap();
    assert_eq!(flags(tmp.path()), 3);
    assert_eq!(opened(tmp.path()), (301, payload(300, false)));
    assert_eq!(opened(tmp.path()), listed(tmp.path()));
}

#[test]
fn a_stale_copy_put_back_is_not_believed_once_the_segment_changed() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 200, false);
    let stale = hint(tmp.path());
    // One more record in the same segment, then the old hint (and its copy) put back.
    let seg = last_segment(tmp.path());
    append(tmp.path(), 200, 201, false);
    assert_eq!(last_segment(tmp.path()), seg, "the same segment");
    std::fs::write(tmp.path().join(LASTSEG_FILE), &stale).unwrap();
    assert_eq!(opened(tmp.path()), (201, payload(200, false)));
    assert_eq!(opened(tmp.path()), listed(tmp.path()));
}

#[test]
fn a_segment_replaced_touched_or_cut_is_read_again_not_answered_from_the_copy() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 400, false);
    let seg = last_segment(tmp.path());
    let want = (400, payload(399, false));

    // The same bytes in a new file (another inode): read through the segment, same answer.
    let copy = seg.with_extension("seg.copy");
    std::fs::copy(&seg, &copy).unwrap();
    std::fs::rename(&copy, &seg).unwrap();
    assert_eq!(opened(tmp.path()), want);

    // Only its modification time changed: read again, same answer.
    let f = std::fs::File::options().write(true).open(&seg).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    drop(f);
    assert_eq!(opened(tmp.path()), want);

    // Its last record damaged in place: the copy is not believed, the damage is named.
    let end = std::fs::metadata(&seg).unwrap().len();
    let bytes = std::fs::read(&seg).unwrap();
    let at = bytes
        .windows(11)
        .rposition(|w| w == b"copy 000399")
        .unwrap();
    let mut damaged = bytes.clone();
    damaged[at] ^= 0x20;
    std::fs::write(&seg, &damaged).unwrap();
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), end);
    let err = LogReader::open(tmp.path())
        .and_then(|r| r.get(399).map(|_| ()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("399"), "{err}");

    // Cut inside the last record: the reader sees what the listing sees.
    std::fs::write(&seg, &bytes[..at]).unwrap();
    let listed_len = without_hint(tmp.path(), || {
        LogReader::open(tmp.path()).map(|r| r.len()).ok()
    });
    let n = LogReader::open(tmp.path()).map(|r| r.len()).ok();
    assert_eq!(n, listed_len);
    let read = LogReader::open(tmp.path()).and_then(|r| r.get(399).map(|_| ()));
    assert!(
        read.is_err(),
        "the cut record is not answered from the copy"
    );
}

#[test]
fn a_damaged_or_foreign_copy_falls_back_to_the_segment() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    append(a.path(), 0, 250, false);
    append(b.path(), 0, 250, false);
    let want = (250, payload(249, false));
    let good = hint(a.path());

    // Every byte of the copy (header, identity, record) flipped in turn: never a wrong answer.
    for i in 64..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x04;
        std::fs::write(a.path().join(LASTSEG_FILE), &bad).unwrap();
        let r = LogReader::open(a.path()).unwrap();
        assert_eq!(
            (r.len(), r.get(249).unwrap().payload.to_vec()),
            want,
            "byte {i}"
        );
    }
    // Cut short or grown: the length no longer matches the tail.
    for len in [good.len() - 1, 64 + 64] {
        std::fs::write(a.path().join(LASTSEG_FILE), &good[..len]).unwrap();
        assert_eq!(opened(a.path()), want);
    }
    let mut longer = good.clone();
    longer.extend_from_slice(&[0; 16]);
    std::fs::write(a.path().join(LASTSEG_FILE), &longer).unwrap();
    assert_eq!(opened(a.path()), want);

    // Another log's hint, with the same segment names and record sizes.
    std::fs::copy(b.path().join(LASTSEG_FILE), a.path().join(LASTSEG_FILE)).unwrap();
    let r = LogReader::open(a.path()).unwrap();
    assert_eq!((r.len(), r.get(249).unwrap().payload.to_vec()), want);
    assert_ne!(r.log_id(), LogReader::open(b.path()).unwrap().log_id());
}

#[test]
fn a_large_last_record_is_not_copied_and_read_from_the_segment_with_pread() {
    let tmp = tempfile::tempdir().unwrap();
    append(tmp.path(), 0, 20, true);
    assert_eq!(flags(tmp.path()), 1, "the tail alone");
    assert_eq!(hint(tmp.path()).len(), 64);
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.get(19).unwrap().payload, payload(19, true));
    assert_eq!(r.mapped_segments(), 0);
    // A small record after it: copied at the next close.
    append(tmp.path(), 20, 21, false);
    assert_eq!(flags(tmp.path()), 3);
    assert_eq!(opened(tmp.path()), (21, payload(20, false)));
    assert_eq!(opened(tmp.path()), listed(tmp.path()));
}
