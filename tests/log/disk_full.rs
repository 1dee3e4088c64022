//! A full disk (ENOSPC) during appends: a clear error (`is_disk_full`, "the disk is full"),
//! nothing partial visible to readers, the log usable once space comes back, and every
//! acknowledged record there after reopening. Through the sim's failing `allocate` and
//! `write_at`, and on a real 1 MiB tmpfs when this machine lets the test mount one.

use testkit as common;

use std::path::Path;
use std::sync::Arc;

use agentlog::log::sim::{OpKind, Repeat, SimStorage, ENOSPC};
use agentlog::log::{Error, Log, LogReader, Options};
use common::payload;

fn opts() -> Options {
    Options::default()
        .segment_size(16 << 10)
        .preallocate(1 << 10)
}

fn assert_disk_full(e: &Error) {
    assert!(e.is_disk_full(), "not reported as a full disk: {e}");
    assert!(e.to_string().contains("disk is full"), "{e}");
}

/// Readers (in this process and a fresh one) see exactly `expected`.
fn readers_see(log: &Log, dir: &Path, expected: &[Vec<u8>]) {
    let r = log.reader();
    assert_eq!(r.len(), expected.len() as u64);
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, expected[seq].as_slice());
    }
    let r = LogReader::open(dir).unwrap();
    assert_eq!(r.len(), expected.len() as u64);
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, expected[seq].as_slice());
    }
}

/// Fails `kind` with ENOSPC from the `nth` next call on, for singles and batches, many times
/// over a log that rolls segments; checks the promises after each failure.
fn disk_full(kind: OpKind) {
    let dir = tempfile::tempdir().unwrap();
    let sim = Arc::new(SimStorage::new());
    let log = Log::open(dir.path(), opts().storage(sim.clone())).unwrap();
    let mut expected: Vec<Vec<u8>> = Vec::new();
    let mut rng = common::Rng(common::seed(28) ^ kind as u64);
    let mut failures = 0;
    for round in 0..60 {
        sim.fail(kind, rng.range(1, 12), ENOSPC, Repeat::Sticky);
        // Append until the disk is "full".
        loop {
            let next = expected.len() as u64;
            let result = if rng.below(3) == 0 {
                let n = rng.range(2, 8);
                let batch: Vec<Vec<u8>> = (next..next + n).map(payload).collect();
                log.append_batch(&batch).map(|r| (r, batch))
            } else {
                log.append(&payload(next))
                    .map(|s| (s..s + 1, vec![payload(next)]))
            };
            match result {
                Ok((range, batch)) => {
                    assert_eq!(range.start, next);
                    expected.extend(batch);
                }
                Err(e) => {
                    assert_disk_full(&e);
                    failures += 1;
                    break;
                }
            }
        }
        // Nothing partial is visible: exactly the acknowledged records.
        assert_eq!(log.len(), expected.len() as u64, "round {round}");
        readers_see(&log, dir.path(), &expected);
        // Still full: a clear error and nothing written (or, when the record fits in space
        // already reserved, a normal append).
        let next = expected.len() as u64;
        match log.append(&payload(next)) {
            Ok(seq) => {
                assert_eq!(seq, next);
                expected.push(payload(next));
            }
            Err(e) => assert_disk_full(&e),
        }
        assert_eq!(log.len(), expected.len() as u64);
        // Space comes back: the log goes on at the right seq.
        sim.clear_faults();
        let next = expected.len() as u64;
        assert_eq!(log.append(&payload(next)).unwrap(), next, "round {round}");
        expected.push(payload(next));
    }
    assert_eq!(failures, 60);
    assert!(
        common::segments(dir.path()).len() > 2,
        "the log should roll"
    );
    log.close().unwrap();
    // Every acknowledged record is there after reopening, and nothing else.
    let log = Log::open(dir.path(), opts()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.cut.is_none(), "{report}");
    readers_see(&log, dir.path(), &expected);
}

#[test]
fn enospc_from_allocate() {
    disk_full(OpKind::Allocate);
}

#[test]
fn enospc_from_write() {
    disk_full(OpKind::Write);
}

#[test]
fn enospc_after_a_crash_leaves_an_openable_log() {
    // The disk fills, then the process dies: the log reopens with every acknowledged record.
    let dir = tempfile::tempdir().unwrap();
    let sim = Arc::new(SimStorage::new());
    let log = Log::open(dir.path(), opts().storage(sim.clone())).unwrap();
    let mut n = 0;
    sim.fail(OpKind::Allocate, 7, ENOSPC, Repeat::Sticky);
    while log.append(&payload(n)).is_ok() {
        n += 1;
    }
    let batch: Vec<Vec<u8>> = (n..n + 5).map(payload).collect();
    assert!(log.append_batch(&batch).is_err());
    log.abandon();
    // The lock is released with the last descriptor of its open file: a child process another
    // test of this binary spawns at this moment (`mount` below) holds a copy until it execs.
    let mut tries = 0;
    let log = loop {
        match Log::open(dir.path(), opts()) {
            Err(agentlog::log::Error::Locked { .. }) if tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => break other.unwrap(),
        }
    };
    let expected: Vec<Vec<u8>> = (0..n).map(payload).collect();
    readers_see(&log, dir.path(), &expected);
}

/// A real file system of 1 MiB: fill it until append fails.
#[test]
fn a_real_full_tmpfs() {
    let base = tempfile::tempdir().unwrap();
    let mnt = base.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "skipping the real tmpfs test: mount failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipping the real tmpfs test: cannot run mount: {e}");
            return;
        }
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _guard = Unmount(&mnt);
    // Space to give back later.
    std::fs::write(mnt.join("ballast"), vec![1u8; 256 << 10]).unwrap();
    let dir = mnt.join("log");
    let opts = Options::default()
        .segment_size(256 << 10)
        .preallocate(16 << 10);
    let log = Log::open(&dir, opts.clone()).unwrap();
    let mut expected = Vec::new();
    let err = loop {
        let next = expected.len() as u64;
        match log.append(&payload(next)) {
            Ok(seq) => {
                assert_eq!(seq, next);
                expected.push(payload(next));
            }
            Err(e) => break e,
        }
        assert!(next < 1_000_000, "a 1 MiB file system never filled up");
    };
    assert_disk_full(&err);
    assert!(expected.len() > 100, "only {} records fit", expected.len());
    readers_see(&log, &dir, &expected);
    // Still full: a batch fails the same way and leaves nothing behind.
    let batch: Vec<Vec<u8>> = (0..50)
        .map(|i| payload(expected.len() as u64 + i))
        .collect();
    assert_disk_full(&log.append_batch(&batch).unwrap_err());
    readers_see(&log, &dir, &expected);
    // The process dies while the disk is full: readers still see every record ...
    log.abandon();
    readers_see_dir(&dir, &expected);
    // ... the log reopens while the disk is still full, with every record ...
    let log = Log::open(&dir, opts.clone()).unwrap();
    assert_eq!(log.len(), expected.len() as u64);
    drop(log);
    // ... and once space comes back, the writer goes on at the right seq.
    std::fs::remove_file(mnt.join("ballast")).unwrap();
    let log = Log::open(&dir, opts.clone()).unwrap();
    assert_eq!(log.len(), expected.len() as u64);
    let next = expected.len() as u64;
    assert_eq!(log.append(&payload(next)).unwrap(), next);
    expected.push(payload(next));
    log.close().unwrap();
    readers_see_dir(&dir, &expected);
}

fn readers_see_dir(dir: &Path, expected: &[Vec<u8>]) {
    let r = LogReader::open(dir).unwrap();
    assert_eq!(r.len(), expected.len() as u64);
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, expected[seq].as_slice());
    }
}
