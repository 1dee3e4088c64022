//! A reader in another process than the writer (`LogReader::open`) read the index entry after the last record of a segment that the writer had just sealed: the seal trims the index file, and when the trimmed size was a multiple of the page size the read touched a page beyond the end of the file (SIGBUS, the reader's process died).

use agentlog::log::{Log, LogReader, Options};

#[test]
fn a_detached_reader_survives_a_seal_that_trims_the_index_to_a_page_boundary() {
    let dir = tempfile::tempdir().unwrap();
    // 16-byte payloads take 32 bytes: 1008 records end at 64 + 1008 * 32, and the 1009th
    // rolls. The sealed index then holds 64 + 1008 * 4 = 4096 bytes.
    let opts = Options::default()
        .segment_size(64 + 1008 * 32)
        .preallocate(4096);
    let (log, _) = Log::open(dir.path(), opts).unwrap();
    for i in 0..1000u32 {
        log.append(&[i as u8; 16]).unwrap();
    }
    let mut reader = LogReader::open(dir.path()).unwrap();
    assert_eq!(reader.len(), 1000);
    for i in 1000..1009u32 {
        log.append(&[i as u8; 16]).unwrap();
    }
    assert_eq!(
        std::fs::metadata(dir.path().join("00000000000000000000.idx"))
            .unwrap()
            .len()
            % 4096,
        0,
        "the test needs an index trimmed to a page boundary"
    );
    assert_eq!(reader.refresh().unwrap(), 1009);
    for i in 0..1009u64 {
        assert_eq!(reader.get(i).unwrap().payload, [i as u8; 16]);
    }
}
