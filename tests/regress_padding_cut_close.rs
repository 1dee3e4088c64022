//! A torn tail that cut only the last record's padding kept the record, but a clean close then left the file shorter than the end its index recorded (closing no longer truncates, so nothing extended it), and the next open was not clean: it rescanned and rebuilt the index (found by the engine_model fuzzer in CI).

use agentlog::log::{Log, Options};

#[test]
fn a_log_whose_last_padding_was_cut_closes_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), Options::default()).unwrap();
    log.append(&[1u8; 31]).unwrap();
    // 100 bytes of payload: 12 bytes of padding follow it.
    log.append(&[2u8; 100]).unwrap();
    log.abandon();
    let seg = dir.path().join("00000000000000000000.seg");
    let end = 64 + (16 + 32) + (16 + 112);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(end - 3)
        .unwrap();
    let (log, report) = Log::open(dir.path(), Options::default()).unwrap();
    assert_eq!(log.len(), 2, "{report}");
    assert!(report.cut.is_none(), "{report}");
    log.close().unwrap();
    let (log, report) = Log::open(dir.path(), Options::default()).unwrap();
    assert!(report.clean, "{report}");
    assert!(report.indexes_rebuilt.is_empty(), "{report}");
    assert_eq!(log.len(), 2);
    assert_eq!(log.reader().get(1).unwrap().payload, &[2u8; 100][..]);
}
