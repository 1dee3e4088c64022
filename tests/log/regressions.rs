//! Regressions of the log layer: one module per bug that was fixed (each was a
//! `tests/regress_*.rs` file of its own); every test's doc comment says what went wrong.

mod failed_batch_visible {
    use std::sync::Arc;

    use agentlog::log::sim::{OpKind, Repeat, SimStorage, ENOSPC};
    use agentlog::log::{Log, LogReader, Options};

    /// An `append_batch` that failed part-way (ENOSPC from a write) returned an error but left its first records published to readers and in the log, under seqs the caller never got.
    #[test]
    fn a_failed_batch_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let sim = Arc::new(SimStorage::new());
        let log = Log::open(dir.path(), Options::default().storage(sim.clone())).unwrap();
        log.append(b"before").unwrap();
        // Each record takes two writes (payload, header): fail the third record's payload.
        sim.fail(OpKind::Write, 5, ENOSPC, Repeat::Once);
        let batch = [b"a".as_slice(), b"b", b"c", b"d"];
        let e = log.append_batch(&batch).unwrap_err();
        assert!(e.is_disk_full(), "{e}");
        assert_eq!(log.len(), 1);
        assert_eq!(log.reader().len(), 1);
        assert_eq!(LogReader::open(dir.path()).unwrap().len(), 1);
        // The seqs were not used: the retry gets them, and nothing of the failed batch reappears.
        assert_eq!(log.append_batch(&batch).unwrap(), 1..5);
        log.abandon();
        let log = Log::open(dir.path(), Options::default()).unwrap();
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
}

mod foreign_segment_reader {
    use agentlog::log::{CorruptionKind, Log, LogReader, Options};

    fn write(dir: &std::path::Path, fill: u8) {
        let opts = Options::default()
            .segment_size(1 << 10)
            .preallocate(1 << 10);
        let log = Log::open(dir, opts).unwrap();
        for _ in 0..40 {
            log.append(&[fill; 100]).unwrap();
        }
        log.close().unwrap();
    }

    /// A reader (`LogReader::open`) read a segment swapped in from another log and returned that log's payloads as this log's records.
    #[test]
    fn a_reader_refuses_a_segment_of_another_log() {
        let base = tempfile::tempdir().unwrap();
        let (a, b) = (base.path().join("a"), base.path().join("b"));
        write(&a, 1);
        write(&b, 2);
        let mut segs: Vec<_> = std::fs::read_dir(&a)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".seg"))
            .collect();
        segs.sort();
        assert!(segs.len() >= 3);
        let name = &segs[1];
        std::fs::copy(b.join(name), a.join(name)).unwrap();
        let base1: u64 = name.to_string_lossy()[..20].parse().unwrap();

        let r = LogReader::open(&a).unwrap();
        assert_eq!(r.get(base1 - 1).unwrap().payload, [1u8; 100]);
        let e = r.get(base1).unwrap_err();
        let c = e.corruption().expect("damage, not data");
        assert_eq!((&c.path, c.offset), (&a.join(name), 24));
        assert!(matches!(c.kind, CorruptionKind::ForeignSegment { .. }));
        for rec in r.iter() {
            match rec {
                Ok(rec) => assert_eq!(rec.payload, [1u8; 100], "seq {}", rec.seq),
                Err(e) => assert!(e.corruption().is_some(), "{e}"),
            }
        }
    }
}

mod new_reader_during_roll {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use agentlog::log::sim::SimStorage;
    use agentlog::log::{Log, Options};

    /// `Log::reader()` took the segment list before the published length, so a reader created while the writer rolled to a new segment could see records of a segment missing from its list, and reported the last record as damaged. (A race: this test creates readers during many rolls and fails with good probability when it is back.)
    #[test]
    fn a_reader_created_during_a_roll_reads_every_record_it_counts() {
        let dir = tempfile::tempdir().unwrap();
        // Two records per segment: nearly every append rolls.
        // (The sim's syncs skip fdatasync: rolls stay cheap.)
        let opts = Options::default()
            .segment_size(1 << 10)
            .max_event_size(400)
            .storage(Arc::new(SimStorage::new()));
        let log = Log::open(dir.path(), opts).unwrap();
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
}

mod padding_cut_close {
    use agentlog::log::{Log, Options};

    /// A torn tail that cut only the last record's padding kept the record, but a clean close then left the file shorter than the end its index recorded (closing no longer truncates, so nothing extended it), and the next open was not clean: it rescanned and rebuilt the index (found by the engine_model fuzzer in CI).
    #[test]
    fn a_log_whose_last_padding_was_cut_closes_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), Options::default()).unwrap();
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
        let log = Log::open(dir.path(), Options::default()).unwrap();
        let report = log.recovery_report().clone();
        assert_eq!(log.len(), 2, "{report}");
        assert!(report.cut.is_none(), "{report}");
        log.close().unwrap();
        let log = Log::open(dir.path(), Options::default()).unwrap();
        let report = log.recovery_report().clone();
        assert!(report.clean, "{report}");
        assert!(report.indexes_rebuilt.is_empty(), "{report}");
        assert_eq!(log.len(), 2);
        assert_eq!(log.reader().get(1).unwrap().payload, &[2u8; 100][..]);
    }
}

mod reader_before_seal_finishes {
    use testkit as common;

    use agentlog::log::{Log, LogReader, Options};

    /// Index header: state at 12..16 (1: open, the seal not finished).
    fn mark_index_open(idx: &std::path::Path) {
        common::rewrite_header(idx, 12, &1u32.to_le_bytes());
    }

    /// A reader in another process only moved on to the next segment once the previous one's index said "sealed"; with segments sealed by a background thread, a reader refreshing before that thread finished stopped at the end of the old segment and missed the records after it.
    #[test]
    fn a_detached_reader_follows_a_roll_whose_seal_has_not_finished() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default()
            .segment_size(4 << 10)
            .preallocate(4 << 10);
        let log = Log::open(dir.path(), opts).unwrap();
        for i in 0..10u8 {
            log.append(&[i; 100]).unwrap();
        }
        let mut reader = LogReader::open(dir.path()).unwrap();
        assert_eq!(reader.len(), 10);
        // Roll into a second segment, and make the first look as if its seal were still running.
        let mut n = 10u64;
        let segments = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|x| x == "seg")
                })
                .count()
        };
        while segments() < 2 || n < 40 {
            log.append(&[n as u8; 100]).unwrap();
            n += 1;
            assert!(n < 1000, "the log never rolled");
        }
        log.sync().unwrap();
        mark_index_open(&dir.path().join("00000000000000000000.idx"));
        assert_eq!(reader.refresh().unwrap(), n);
        for seq in 0..n {
            assert_eq!(reader.get(seq).unwrap().payload, &[seq as u8; 100][..]);
        }
    }
}

mod reader_index_sigbus {
    use agentlog::log::{Log, LogReader, Options};

    /// A reader in another process than the writer (`LogReader::open`) read the index entry after the last record of a segment that the writer had just sealed: the seal trims the index file, and when the trimmed size was a multiple of the page size the read touched a page beyond the end of the file (SIGBUS, the reader's process died).
    #[test]
    fn a_detached_reader_survives_a_seal_that_trims_the_index_to_a_page_boundary() {
        let dir = tempfile::tempdir().unwrap();
        // 16-byte payloads take 32 bytes: 1008 records end at 64 + 1008 * 32, and the 1009th
        // rolls. The sealed index then holds 64 + 1008 * 4 = 4096 bytes.
        let opts = Options::default()
            .segment_size(64 + 1008 * 32)
            .preallocate(4096);
        let log = Log::open(dir.path(), opts).unwrap();
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
}

mod reader_stuck_after_scan {
    use agentlog::log::{Log, LogReader, Options};

    /// A reader in another process that had found the active segment's records by scanning (no usable index when it opened it, e.g. while the writer was growing the file) kept those offsets forever and never saw a record appended after that (the cross-process stress test's reader got stuck).
    #[test]
    fn a_reader_that_scanned_the_active_segment_still_sees_new_records() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), Options::default()).unwrap();
        for i in 0..5u8 {
            log.append(&[i; 40]).unwrap();
        }
        // No index to read: the reader finds the records by scanning.
        std::fs::remove_file(dir.path().join("00000000000000000000.idx")).unwrap();
        let mut reader = LogReader::open(dir.path()).unwrap();
        assert_eq!(reader.len(), 5);
        for i in 5..9u8 {
            log.append(&[i; 40]).unwrap();
        }
        assert_eq!(reader.refresh().unwrap(), 9);
        for i in 0..9u8 {
            assert_eq!(reader.get(u64::from(i)).unwrap().payload, [i; 40]);
        }
    }
}

mod scanned_offsets_hide_appends {
    use testkit::fuzz_checks;

    use agentlog::log::{Log, Options, RecoveryMode};

    /// After a reader had found a damaged index entry of the active segment and fallen back to offsets found by scanning, records appended later to that segment could not be read with `get` (the scanned offsets were used for every seq; the new records are past them), and a full check (strict, salvage) kept an index whose middle entries were wrong. Found by the segment_decode fuzz target (input in tests/data/).
    #[test]
    fn the_fuzz_input_passes() {
        fuzz_checks::segment_decode(include_bytes!(
            "../data/fuzz-segment-decode-wrong-index-entry.bin"
        ));
    }

    /// After a reader had found a damaged index entry of the active segment and fallen back to offsets found by scanning, records appended later to that segment could not be read with `get` (the scanned offsets were used for every seq; the new records are past them), and a full check (strict, salvage) kept an index whose middle entries were wrong. Found by the segment_decode fuzz target (input in tests/data/).
    #[test]
    fn appends_after_a_damaged_index_entry_are_readable() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), Options::default()).unwrap();
        for i in 0..6u8 {
            log.append(&[i; 40]).unwrap();
        }
        log.close().unwrap();
        // Entry 2 of the index points into the middle of a record.
        let idx = dir.path().join("00000000000000000000.idx");
        let mut b = std::fs::read(&idx).unwrap();
        b[64 + 8] ^= 0x08;
        std::fs::write(&idx, &b).unwrap();
        for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::Strict] {
            let log = Log::open(dir.path(), Options::default().recovery(mode)).unwrap();
            let report = log.recovery_report().clone();
            let r = log.reader();
            assert_eq!(r.get(2).unwrap().payload, [2u8; 40]);
            let seq = log.append(&[9; 40]).unwrap();
            assert_eq!(
                log.reader().get(seq).unwrap().payload,
                [9u8; 40],
                "{mode:?}"
            );
            // The reader taken before the append does not see it (a snapshot), and says so.
            assert!(r.get(seq).unwrap_err().to_string().contains("out of range"));
            if mode == RecoveryMode::Strict {
                assert_eq!(report.indexes_rebuilt, vec![idx.clone()], "{mode:?}");
            }
            log.close().unwrap();
        }
    }
}

mod short_index_sigbus {
    use agentlog::log::{Log, LogReader, Options};

    /// An index file shorter than its 64-byte header (empty after a crash or a power loss, or damaged) killed the reader's process with SIGBUS: its header was read through a map larger than the file. Found by the segment_decode fuzz checks.
    #[test]
    fn an_empty_or_short_index_file_is_rebuilt_not_a_crash() {
        for len in [0u64, 10, 63] {
            let dir = tempfile::tempdir().unwrap();
            let log = Log::open(dir.path(), Options::default()).unwrap();
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
            let log = Log::open(dir.path(), Options::default()).unwrap();
            let report = log.recovery_report().clone();
            assert_eq!(log.len(), 5);
            assert_eq!(report.indexes_rebuilt, vec![idx]);
        }
    }
}

mod unfinished_seal {
    use agentlog::log::{DamageClass, Log, LogReader, Options, DAMAGED_DIR};

    fn opts() -> Options {
        Options::default()
            .segment_size(4 << 10)
            .preallocate(1 << 10)
    }

    /// Index header of a segment: state at 12..16, crc of 0..60 at 60..64.
    fn mark_index_open(idx: &std::path::Path) {
        let mut b = std::fs::read(idx).unwrap();
        b[12..16].copy_from_slice(&1u32.to_le_bytes());
        // synced end: nothing of the segment's records was synced.
        b[56..60].copy_from_slice(&64u32.to_le_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(idx, b).unwrap();
    }

    /// With segments sealed by a background thread, a power loss before the seal's fdatasync left a sealed-looking segment that ended early with later segments after it, and the log refused to open (corruption) instead of cutting the torn tail.
    #[test]
    fn a_segment_whose_seal_never_finished_is_cut_as_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), opts()).unwrap();
        for i in 0..200u32 {
            log.append(&[i as u8; 100]).unwrap();
        }
        log.abandon();
        let mut segs: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "seg"))
            .collect();
        segs.sort();
        assert!(segs.len() >= 4, "{segs:?}");
        // The power failed while the second segment was being sealed: its index still says open,
        // and its last records never reached the disk.
        let second = &segs[1];
        let base: u64 = testkit::base_seq(second).unwrap();
        mark_index_open(&second.with_extension("idx"));
        let at = 64 + 5 * 128;
        let mut b = std::fs::read(second).unwrap();
        let len = b.len();
        b[at..len].fill(0);
        std::fs::write(second, &b).unwrap();

        let log = Log::open(dir.path(), opts()).expect("a torn tail is cut, not refused");
        let report = log.recovery_report().clone();
        let cut = report.cut.expect("the cut is reported");
        assert_eq!(cut.class, DamageClass::TornTail);
        assert_eq!(cut.first_lost_seq, base + 5);
        assert_eq!(cut.dropped_segments.len(), segs.len() - 2);
        assert_eq!(log.len(), base + 5);
        assert!(dir.path().join(DAMAGED_DIR).is_dir());
        assert_eq!(log.append(b"next").unwrap(), base + 5);
        drop(log);
        let r = LogReader::open(dir.path()).unwrap();
        for seq in 0..base + 5 {
            assert_eq!(r.get(seq).unwrap().payload, &[seq as u8; 100][..]);
        }
    }
}

mod zeroed_tail {
    use agentlog::log::{DamageClass, Error, Log, Options, RecoveryMode};

    fn opts() -> Options {
        Options::default()
            .segment_size(4 << 10)
            .preallocate(1 << 10)
    }

    /// Writes 10 records of 100 bytes (128 bytes each on disk, the first at offset 64) and closes.
    fn write(dir: &std::path::Path) -> std::path::PathBuf {
        let log = Log::open(dir, opts()).unwrap();
        for i in 0..10u8 {
            log.append(&[i + 1; 100]).unwrap();
        }
        log.close().unwrap();
        dir.join("00000000000000000000.seg")
    }

    /// A cleanly closed log whose last records were zeroed (or the file cut exactly at a record start) opened as a shorter log without any report, even in strict mode.
    /// (Since then, records a clean close vouches for are never a torn tail: every mode but salvage
    /// refuses to open, naming the damage; salvage cuts and reports it.)
    #[test]
    fn zeroed_last_records_of_a_closed_log_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let seg = write(dir.path());
        let at = 64 + 7 * 128;
        let mut b = std::fs::read(&seg).unwrap();
        let len = b.len();
        b[at..len].fill(0);
        std::fs::write(&seg, &b).unwrap();

        for mode in [RecoveryMode::Strict, RecoveryMode::TolerateTornTail] {
            let e = Log::open(dir.path(), opts().recovery(mode)).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "{e}");
            let c = e.corruption().unwrap();
            assert_eq!((&c.path, c.offset, c.seq), (&seg, at as u64, Some(7)));
        }

        let log = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
        let report = log.recovery_report().clone();
        assert_eq!(log.len(), 7);
        let cut = report.cut.expect("the lost records are reported");
        assert_eq!(cut.class, DamageClass::Corruption);
        assert_eq!((cut.first_lost_seq, cut.at.offset), (7, at as u64));
    }

    /// A cleanly closed log whose last records were zeroed (or the file cut exactly at a record start) opened as a shorter log without any report, even in strict mode.
    /// (Since then, records a clean close vouches for are never a torn tail: every mode but salvage
    /// refuses to open, naming the damage; salvage cuts and reports it.)
    #[test]
    fn a_closed_log_cut_exactly_at_a_record_start_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let seg = write(dir.path());
        let at = 64 + 9 * 128;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(at)
            .unwrap();
        let e = Log::open(dir.path(), opts().recovery(RecoveryMode::Strict)).unwrap_err();
        assert_eq!(e.corruption().unwrap().offset, at);
        let e = Log::open(dir.path(), opts()).unwrap_err();
        assert_eq!(e.corruption().unwrap().offset, at);
        let log = Log::open(dir.path(), opts().recovery(RecoveryMode::Salvage)).unwrap();
        let report = log.recovery_report().clone();
        assert_eq!(log.len(), 9);
        assert_eq!(report.cut.expect("reported").first_lost_seq, 9);
    }
}

mod stale_closed_index {
    use agentlog::log::{Log, LogReader, Options, LASTSEG_FILE};

    /// A closed index older than its segment (the `.idx` of a backup taken before the last
    /// appends, restored over the newer one): a reader without the `LASTSEG` hint counted the
    /// records the index named and silently served a shorter log (`export`, `stats`, `ls` with
    /// 60 of 107 events) while the writer's open found them all. A record past the index's end
    /// now makes the reader scan the segment.
    #[test]
    fn a_reader_counts_the_records_past_an_older_closed_index() {
        let dir = tempfile::tempdir().unwrap();
        let payload = |i: u64| format!("record {i} {}", "x".repeat((i % 37) as usize));
        let log = Log::open(dir.path(), Options::default()).unwrap();
        for i in 0..60 {
            log.append(payload(i).as_bytes()).unwrap();
        }
        log.close().unwrap();
        let idx = dir.path().join("00000000000000000000.idx");
        let old = std::fs::read(&idx).unwrap();
        let log = Log::open(dir.path(), Options::default()).unwrap();
        for i in 60..107 {
            log.append(payload(i).as_bytes()).unwrap();
        }
        log.close().unwrap();
        std::fs::write(&idx, old).unwrap();
        let _ = std::fs::remove_file(dir.path().join(LASTSEG_FILE));

        let r = LogReader::open(dir.path()).unwrap();
        assert_eq!(r.len(), 107);
        let got: Vec<Vec<u8>> = r.iter().map(|rec| rec.unwrap().payload.to_vec()).collect();
        let want: Vec<Vec<u8>> = (0..107).map(|i| payload(i).into_bytes()).collect();
        assert!(got == want, "{} records read", got.len());
        assert_eq!(r.get(106).unwrap().payload, payload(106).as_bytes());
    }

    /// The same restore with the `LASTSEG` hint of the same moment: the reader's quick path
    /// (`pread`s from the hint) believed the closed index and served 2 of 4 events in every
    /// command while `verify` counted 4. It now reads the 16 bytes after the record the index
    /// ends with, as the mapping path does, and goes the mapping path when a record starts
    /// there.
    #[test]
    fn a_reader_with_the_hint_of_the_backup_counts_the_records_past_it() {
        for (first, total) in [(1u64, 2u64), (2, 4), (60, 107)] {
            let dir = tempfile::tempdir().unwrap();
            let payload = |i: u64| format!("record {i} {}", "x".repeat((i % 37) as usize));
            let log = Log::open(dir.path(), Options::default()).unwrap();
            for i in 0..first {
                log.append(payload(i).as_bytes()).unwrap();
            }
            log.close().unwrap();
            let idx = dir.path().join("00000000000000000000.idx");
            let hint = dir.path().join(LASTSEG_FILE);
            let (old_idx, old_hint) = (std::fs::read(&idx).unwrap(), std::fs::read(&hint).unwrap());
            let log = Log::open(dir.path(), Options::default()).unwrap();
            for i in first..total {
                log.append(payload(i).as_bytes()).unwrap();
            }
            log.close().unwrap();
            std::fs::write(&idx, old_idx).unwrap();
            std::fs::write(&hint, old_hint).unwrap();

            let r = LogReader::open(dir.path()).unwrap();
            assert_eq!(r.len(), total, "{first} then {total}");
            let got: Vec<Vec<u8>> = r.iter().map(|rec| rec.unwrap().payload.to_vec()).collect();
            let want: Vec<Vec<u8>> = (0..total).map(|i| payload(i).into_bytes()).collect();
            assert!(got == want, "{} records read", got.len());
        }
    }
}

mod stray_bytes_after_a_clean_close {
    use agentlog::log::{Log, LogReader, Options, LASTSEG_FILE};

    /// Bytes that are no record after the last record of a cleanly closed segment: `verify`
    /// called the log sound (nothing is lost; the next writer open zeroes them), but every
    /// reader took them for a damaged record vouched for by nothing and failed (`export`,
    /// `status`, `ls`: "bad record header" at the seq after the last). A reader now reads the
    /// records the closed index names, and counts more only when a valid record follows.
    #[test]
    fn a_reader_reads_every_record_before_stray_bytes() {
        for keep_hint in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let payload = |i: u64| format!("record {i} {}", "y".repeat((i % 29) as usize));
            let log = Log::open(dir.path(), Options::default()).unwrap();
            for i in 0..10 {
                log.append(payload(i).as_bytes()).unwrap();
            }
            log.close().unwrap();
            let seg = dir.path().join("00000000000000000000.seg");
            let mut data = std::fs::read(&seg).unwrap();
            let used = data.iter().rposition(|&b| b != 0).unwrap() + 1;
            let end = used.div_ceil(16) * 16;
            data[end..end + 16].copy_from_slice(b"GARBAGE!GARBAGE!");
            std::fs::write(&seg, &data).unwrap();
            if !keep_hint {
                let _ = std::fs::remove_file(dir.path().join(LASTSEG_FILE));
            }

            let r = LogReader::open(dir.path()).unwrap();
            assert_eq!(r.len(), 10, "hint kept: {keep_hint}");
            let got: Vec<Vec<u8>> = r.iter().map(|rec| rec.unwrap().payload.to_vec()).collect();
            let want: Vec<Vec<u8>> = (0..10).map(|i| payload(i).into_bytes()).collect();
            assert!(got == want, "{} records read", got.len());
        }
    }
}

mod fork_without_an_index {
    use agentlog::log::{copy_prefix, Log, LogReader, Options};

    /// A fork (`copy_prefix`) of a log whose segment index is missing or scrambled (derived
    /// data: readers find the records by scanning, and `verify` calls the log sound) failed
    /// with a damage error at offset 0 ("the records end early") and advised `--salvage`. It
    /// now finds the records by scanning too.
    #[test]
    fn a_prefix_is_copied_when_an_index_is_missing_or_scrambled() {
        for scramble in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let from = dir.path().join("from");
            let payload = |i: u64| format!("record {i} {}", "z".repeat((i % 31) as usize));
            let log = Log::open(&from, Options::default().segment_size(1 << 12)).unwrap();
            for i in 0..200 {
                log.append(payload(i).as_bytes()).unwrap();
            }
            log.close().unwrap();
            let idx = from.join("00000000000000000000.idx");
            if scramble {
                let mut bytes = std::fs::read(&idx).unwrap();
                for (i, b) in bytes.iter_mut().enumerate().skip(64) {
                    *b = (i * 7 % 251) as u8;
                }
                std::fs::write(&idx, bytes).unwrap();
            } else {
                std::fs::remove_file(&idx).unwrap();
            }
            // The base seq of the second segment, from its file name.
            let mut segs: Vec<String> = std::fs::read_dir(&from)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".seg"))
                .collect();
            segs.sort();
            let first_segment: u64 = segs[1].trim_end_matches(".seg").parse().unwrap();
            for n in [first_segment / 2, 150] {
                let to = dir.path().join(format!("to-{n}"));
                std::fs::create_dir(&to).unwrap();
                copy_prefix(&from, &to, n).unwrap();
                let r = LogReader::open(&to).unwrap();
                assert_eq!(r.len(), n, "scrambled: {scramble}");
                let got: Vec<Vec<u8>> = r.iter().map(|rec| rec.unwrap().payload.to_vec()).collect();
                let want: Vec<Vec<u8>> = (0..n).map(|i| payload(i).into_bytes()).collect();
                assert!(got == want, "{} records read", got.len());
            }
        }
    }
}
