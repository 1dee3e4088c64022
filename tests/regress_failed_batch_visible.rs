//! An `append_batch` that failed part-way (ENOSPC from a write) returned an error but left its first records published to readers and in the log, under seqs the caller never got.

use std::sync::Arc;

use agentlog::log::sim::{OpKind, SimStorage, ENOSPC};
use agentlog::log::{Log, LogReader, Options};

#[test]
fn a_failed_batch_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Arc::new(SimStorage::new());
    let (log, _) = Log::open(dir.path(), Options::default().storage(sim.clone())).unwrap();
    log.append(b"before").unwrap();
    // Each record takes two writes (payload, header): fail the third record's payload.
    sim.fail(OpKind::Write, 5, ENOSPC, false);
    let batch = [b"a".as_slice(), b"b", b"c", b"d"];
    let e = log.append_batch(&batch).unwrap_err();
    assert!(e.is_disk_full(), "{e}");
    assert_eq!(log.len(), 1);
    assert_eq!(log.reader().len(), 1);
    assert_eq!(LogReader::open(dir.path()).unwrap().len(), 1);
    // The seqs were not used: the retry gets them, and nothing of the failed batch reappears.
    assert_eq!(log.append_batch(&batch).unwrap(), 1..5);
    log.abandon();
    let (log, _) = Log::open(dir.path(), Options::default()).unwrap();
    let got: Vec<Vec<u8>> = log
        .reader()
        .iter()
        .map(|r| r.unwrap().payload.to_vec())
        .collect();
    assert_eq!(
        got,
        [
            b"before".to_vec(),
            b"a".to_vec(),
            b"b".to_vec(),
            b"c".to_vec(),
            b"d".to_vec()
        ]
    );
}
