//! Readers opened from a directory map a segment only when they first read from it (issue 14):
//! opening costs the same for one segment or thousands, and every damage check still holds for
//! the segments that are read.

use std::path::{Path, PathBuf};

use agentlog::log::{CorruptionKind, Error, Log, LogReader, Options};

const EVENTS: u64 = 400;

fn payload(seq: u64) -> Vec<u8> {
    format!("record {seq:06} {}", "x".repeat((seq % 37) as usize)).into_bytes()
}

/// A closed log of `EVENTS` records in many small segments; the segment files, in seq order.
fn many_segments(dir: &Path) -> Vec<(u64, PathBuf)> {
    let opts = Options::default()
        .segment_size(1 << 10)
        .preallocate(1 << 10);
    let log = Log::open(dir, opts).unwrap();
    for seq in 0..EVENTS {
        assert_eq!(log.append(&payload(seq)).unwrap(), seq);
    }
    log.close().unwrap();
    let mut segs: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .map(|p| {
            let base = testkit::base_seq(&p).unwrap();
            (base, p)
        })
        .collect();
    segs.sort();
    assert!(segs.len() >= 10, "many segments: {}", segs.len());
    segs
}

#[test]
fn opening_maps_only_the_last_segment_and_reads_map_what_they_touch() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = many_segments(tmp.path());
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), EVENTS);
    assert_eq!(r.segment_files().len(), segs.len());
    // The last record was read with pread (tests/log/tail_pread.rs): nothing is mapped.
    assert_eq!(r.mapped_segments(), 0, "open maps no segment");

    // The last event is the one open read: nothing more is mapped.
    assert_eq!(r.get(EVENTS - 1).unwrap().payload, payload(EVENTS - 1));
    assert_eq!(r.mapped_segments(), 0);

    // A record of the first segment maps it, and only it; a clone shares what is mapped.
    assert_eq!(r.get(0).unwrap().payload, payload(0));
    assert_eq!(r.mapped_segments(), 1);
    let c = r.clone();
    assert_eq!(c.mapped_segments(), 1);

    // A range inside one middle segment maps that one.
    let (base, _) = segs[segs.len() / 2];
    let got: Vec<u64> = r.range(base..base + 1).map(|x| x.unwrap().seq).collect();
    assert_eq!(got, vec![base]);
    assert_eq!(r.mapped_segments(), 2);

    // Iterating over everything maps everything, and reads every record.
    for (seq, rec) in c.iter().enumerate() {
        let rec = rec.unwrap();
        assert_eq!(
            (rec.seq, rec.payload),
            (seq as u64, payload(seq as u64).as_slice())
        );
    }
    assert_eq!(r.mapped_segments(), segs.len());
}

#[test]
fn a_damaged_earlier_segment_is_named_when_read_and_does_not_hide_the_last_event() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = many_segments(tmp.path());
    // Break the header (its magic) of a middle segment: an eager reader refused to open.
    let (base, path) = segs[segs.len() / 2].clone();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), EVENTS);
    assert_eq!(r.get(EVENTS - 1).unwrap().payload, payload(EVENTS - 1));
    assert_eq!(r.get(base - 1).unwrap().payload, payload(base - 1));

    // Reading it names the file.
    let e = r.get(base).unwrap_err();
    let c = e.corruption().expect("damage");
    assert_eq!(c.path, path);
    assert!(matches!(c.kind, CorruptionKind::BadHeader(_)), "{e}");
    // So does iterating across it: the records before it, then the error.
    let mut seen = 0;
    let mut failed = None;
    for rec in r.iter() {
        match rec {
            Ok(rec) => {
                assert_eq!(rec.seq, seen);
                seen += 1;
            }
            Err(e) => failed = Some(e),
        }
    }
    assert_eq!(seen, base);
    let e = failed.expect("the iteration reports the damage");
    assert_eq!(e.corruption().expect("damage").path, path);
}

#[test]
fn a_segment_removed_after_open_is_named_when_read() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = many_segments(tmp.path());
    let r = LogReader::open(tmp.path()).unwrap();
    let (base, path) = segs[1].clone();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.get(EVENTS - 1).unwrap().payload, payload(EVENTS - 1));
    // A reader opened from the LASTSEG hint lists the segments before the last one on this
    // read: the listing names the segment whose index is left (damage); one that listed them
    // at open fails to map it (an I/O error). Either names the file.
    match r.get(base).unwrap_err() {
        Error::Io { path: p, .. } => assert_eq!(p, path),
        e @ Error::Corrupt(_) => assert_eq!(e.corruption().expect("damage").path, path),
        other => panic!("expected an error naming {}, got {other}", path.display()),
    }
}

#[test]
fn damage_in_the_last_record_is_named_with_its_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = many_segments(tmp.path());
    // The last segment's index names its records: a flipped payload byte of its last record
    // fails reading it, naming the segment, the offset and the seq.
    let (base, path) = segs.last().unwrap().clone();
    let r = LogReader::open(tmp.path()).unwrap();
    let n = r.len() - base;
    assert!(n > 0);
    drop(r);
    let mut bytes = std::fs::read(&path).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap();
    bytes[end] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    assert_eq!(r.len(), EVENTS, "the index vouches for every record");
    let e = r.get(EVENTS - 1).unwrap_err();
    let c = e.corruption().expect("damage");
    assert_eq!(
        (c.path.as_path(), c.seq),
        (path.as_path(), Some(EVENTS - 1))
    );
    assert!(c.offset > 0);
}

#[test]
fn a_writers_reader_shares_the_writers_maps() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(1 << 10)
        .preallocate(1 << 10);
    let log = Log::open(tmp.path(), opts).unwrap();
    for seq in 0..EVENTS {
        log.append(&payload(seq)).unwrap();
    }
    let r = log.reader();
    let n = r.segment_files().len();
    assert!(n >= 10);
    assert_eq!(r.mapped_segments(), n);
    assert_eq!(r.get(3).unwrap().payload, payload(3));
    log.close().unwrap();
}

#[test]
fn a_session_reader_opens_mapping_the_last_segment_only() {
    use agentlog::event::parse_draft_line;
    use agentlog::session::{Session, SessionMeta, SessionOptions, SessionReader};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let options = SessionOptions {
        log: Options::default()
            .segment_size(1 << 10)
            .preallocate(1 << 10),
        ..SessionOptions::default()
    };
    let session = Session::create(&dir, SessionMeta::new("s", 0), options).unwrap();
    for i in 0..60 {
        let line = format!(
            r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"message {i}"}}]}}}}"#
        );
        session
            .append_draft(parse_draft_line(&line).unwrap())
            .unwrap();
    }
    session.close().unwrap();

    let r = SessionReader::open(&dir).unwrap();
    let segments = r.log().segment_files().len();
    assert!(segments >= 5, "{segments} segments");
    // The last event was read with pread when the reader opened: nothing is mapped.
    assert_eq!(r.log().mapped_segments(), 0);
    let last = r.get_owned(r.len() - 1).unwrap();
    assert!(format!("{last:?}").contains("message 59"), "{last:?}");
    assert_eq!(r.log().mapped_segments(), 0);
    assert_eq!(r.events().count() as u64, r.len());
    assert_eq!(r.log().mapped_segments(), segments);
}

/// A middle segment (with its index) removed before the reader opened: `get` of a seq that was
/// in it named a record at byte offset 0 of the segment before, with that seq, "the records
/// end early"; reading through it named the earlier segment's end as a truncated record. Both
/// now name what is wrong: seqs missing between two segments, from where the earlier one ends
/// to where the next one starts.
#[test]
fn a_missing_middle_segment_is_named_as_missing_seqs() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = many_segments(tmp.path());
    let k = segs.len() / 2;
    let (gone, path) = &segs[k];
    let next = segs[k + 1].0;
    std::fs::remove_file(path).unwrap();
    std::fs::remove_file(path.with_extension("idx")).unwrap();
    let r = LogReader::open(tmp.path()).unwrap();
    let expect = |e: Error| match e.corruption() {
        Some(c) => {
            assert_eq!(c.path, segs[k - 1].1, "{c}");
            assert_eq!(c.seq, Some(*gone), "{c}");
            assert_eq!(
                c.kind,
                CorruptionKind::MissingSeqs {
                    from: *gone,
                    to: next
                },
                "{c}"
            );
        }
        None => panic!("{e}"),
    };
    expect(r.get(gone + 1).map(|_| ()).unwrap_err());
    let read: Result<Vec<_>, _> = r.iter().collect();
    expect(read.map(|_| ()).unwrap_err());
}
