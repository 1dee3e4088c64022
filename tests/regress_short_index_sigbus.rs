//! An index file shorter than its 64-byte header (empty after a crash or a power loss, or damaged) killed the reader's process with SIGBUS: its header was read through a map larger than the file. Found by the segment_decode fuzz checks.

use agentlog::log::{Log, LogReader, Options};

#[test]
fn an_empty_or_short_index_file_is_rebuilt_not_a_crash() {
    for len in [0u64, 10, 63] {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), Options::default()).unwrap();
        for i in 0..5u8 {
            log.append(&[i; 40]).unwrap();
        }
        log.close().unwrap();
        let idx = dir.path().join("00000000000000000000.idx");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&idx)
            .unwrap()
            .set_len(len)
            .unwrap();
        let r = LogReader::open(dir.path()).unwrap();
        assert_eq!(r.len(), 5, "index of {len} bytes");
        for i in 0..5u8 {
            assert_eq!(r.get(u64::from(i)).unwrap().payload, [i; 40]);
        }
        drop(r);
        let (log, report) = Log::open(dir.path(), Options::default()).unwrap();
        assert_eq!(log.len(), 5);
        assert_eq!(report.indexes_rebuilt, vec![idx]);
    }
}
