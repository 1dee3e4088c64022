//! `Log::reader()` took the segment list before the published length, so a reader created while the writer rolled to a new segment could see records of a segment missing from its list, and reported the last record as damaged. (A race: this test creates readers during many rolls and fails with good probability when it is back.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use agentlog::log::sim::SimStorage;
use agentlog::log::{Log, Options};

#[test]
fn a_reader_created_during_a_roll_reads_every_record_it_counts() {
    let dir = tempfile::tempdir().unwrap();
    // Two records per segment: nearly every append rolls.
    // (The sim's syncs skip fdatasync: rolls stay cheap.)
    let opts = Options::default()
        .segment_size(1 << 10)
        .max_event_size(400)
        .storage(Arc::new(SimStorage::new()));
    let (log, _) = Log::open(dir.path(), opts).unwrap();
    let log = Arc::new(log);
    let done = Arc::new(AtomicBool::new(false));
    let (log2, done2) = (Arc::clone(&log), Arc::clone(&done));
    let checker = std::thread::spawn(move || {
        let mut checks = 0u64;
        while !done2.load(Ordering::SeqCst) {
            let r = log2.reader();
            if let Some(last) = r.len().checked_sub(1) {
                let rec = r
                    .get(last)
                    .unwrap_or_else(|e| panic!("a new reader of {} records: {e}", r.len()));
                assert_eq!(rec.payload, [last as u8; 400]);
                checks += 1;
            }
        }
        checks
    });
    for i in 0..1000u64 {
        log.append(&[i as u8; 400]).unwrap();
    }
    done.store(true, Ordering::SeqCst);
    assert!(checker.join().unwrap() > 10);
}
