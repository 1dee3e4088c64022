//! Round trips through the storage engine: many records across many segments, batches, reopen.

use testkit as common;

use agentlog::log::{Durability, Error, Log, LogReader, Options};
use common::payload;

fn small_segments() -> Options {
    Options::default()
        .segment_size(4 << 20)
        .preallocate(1 << 20)
}

#[test]
fn a_million_mixed_records_round_trip_across_many_segments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let n = 1_000_000u64;
    {
        let log = Log::open(&path, small_segments()).unwrap();
        let report = log.recovery_report().clone();
        assert!(report.created);
        for seq in 0..n {
            assert_eq!(log.append(&payload(seq)).unwrap(), seq);
        }
        assert_eq!(log.len(), n);
        // Every get from the writer's own reader equals what was appended.
        let reader = log.reader();
        for seq in (0..n).step_by(997) {
            assert_eq!(reader.get(seq).unwrap().payload, payload(seq).as_slice());
        }
        log.close().unwrap();
    }
    let segments = common::segments(&path);
    assert!(segments.len() > 20, "only {} segments", segments.len());
    let log = Log::open(&path, small_segments()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.clean, "{report:?}");
    assert_eq!(report.events, n);
    assert!(report.cut.is_none());
    drop(log);
    let reader = LogReader::open(&path).unwrap();
    assert_eq!(reader.len(), n);
    for seq in 0..n {
        let rec = reader.get(seq).unwrap();
        assert_eq!(rec.seq, seq);
        assert_eq!(rec.payload, payload(seq).as_slice(), "seq {seq}");
    }
    let mut expected = 0;
    for rec in reader.iter() {
        let rec = rec.unwrap();
        assert_eq!(rec.seq, expected);
        assert_eq!(rec.payload, payload(expected).as_slice());
        expected += 1;
    }
    assert_eq!(expected, n);
}

#[test]
fn payloads_are_sixteen_byte_aligned_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), Options::default()).unwrap();
    for len in 0..100usize {
        log.append(&vec![len as u8; len]).unwrap();
    }
    let reader = log.reader();
    for rec in reader.iter() {
        let rec = rec.unwrap();
        assert_eq!(rec.payload.as_ptr() as usize % 16, 0, "seq {}", rec.seq);
        assert_eq!(rec.payload.len() as u64, rec.seq);
    }
}

#[test]
fn batches_get_consecutive_seqs_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    let batch: Vec<Vec<u8>> = (0..1000).map(payload).collect();
    assert_eq!(log.append_batch(&batch).unwrap(), 0..1000);
    let batch: Vec<Vec<u8>> = (1000..1500).map(payload).collect();
    assert_eq!(log.append_batch(&batch).unwrap(), 1000..1500);
    assert_eq!(log.append_batch::<&[u8]>(&[]).unwrap(), 1500..1500);
    drop(log);
    let log = Log::open(dir.path(), small_segments()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.clean);
    assert_eq!(log.len(), 1500);
    let reader = log.reader();
    for seq in 0..1500 {
        assert_eq!(reader.get(seq).unwrap().payload, payload(seq).as_slice());
    }
    // Appending continues at the right seq after reopening.
    assert_eq!(log.append(b"next").unwrap(), 1500);
}

#[test]
fn an_oversized_event_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().max_event_size(1000);
    let log = Log::open(dir.path(), opts).unwrap();
    log.append(b"first").unwrap();
    let err = log.append(&vec![0u8; 1001]).unwrap_err();
    match &err {
        Error::EventTooLarge { size, max } => {
            assert_eq!((*size, *max), (1001, 1000));
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("1001") && msg.contains("1000"), "{msg}");
    // A batch with one oversized member writes nothing.
    let err = log
        .append_batch(&[vec![1u8; 10], vec![2u8; 2000]])
        .unwrap_err();
    assert!(matches!(err, Error::EventTooLarge { size: 2000, .. }));
    assert_eq!(log.len(), 1);
    assert_eq!(log.append(&vec![0u8; 1000]).unwrap(), 1);
    drop(log);
    assert_eq!(LogReader::open(dir.path()).unwrap().len(), 2);
}

#[test]
fn get_beyond_the_end_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), Options::default()).unwrap();
    log.append(b"x").unwrap();
    let reader = log.reader();
    assert!(matches!(
        reader.get(1),
        Err(Error::SeqOutOfRange { seq: 1, len: 1 })
    ));
    assert_eq!(reader.range(5..10).count(), 0);
    assert_eq!(reader.range(0..=0).count(), 1);
}

#[test]
fn every_durability_mode_round_trips() {
    for durability in [
        Durability::Os,
        Durability::Sync,
        Durability::Periodic(std::time::Duration::from_millis(5)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let opts = small_segments().durability(durability);
        let log = Log::open(dir.path(), opts.clone()).unwrap();
        for seq in 0..200 {
            log.append(&payload(seq)).unwrap();
        }
        if durability == Durability::Sync {
            assert_eq!(log.synced_len(), 200);
        }
        log.close().unwrap();
        let log = Log::open(dir.path(), opts).unwrap();
        let report = log.recovery_report().clone();
        assert!(report.clean);
        assert_eq!(log.len(), 200);
    }
}

#[test]
fn a_missing_log_is_not_created_when_create_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let err = Log::open(dir.path().join("nope"), Options::default().create(false)).unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    assert!(matches!(
        LogReader::open(dir.path().join("nope")),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("log");
    let log = Log::open(&path, Options::default()).unwrap();
    log.append(b"secret").unwrap();
    log.close().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o700);
    for entry in std::fs::read_dir(&path).unwrap() {
        let p = entry.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
}
