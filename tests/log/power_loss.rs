//! Power loss through the I/O seam (`agentlog::log::sim`): after the plug is pulled at a random
//! moment, keeping only what was synced and a torn part of the rest, every record acknowledged
//! under `Durability::Sync` (and everything before the last explicit `sync()`) survives, nothing
//! that was never appended appears, the log reopens in the default mode (a torn tail is cut and
//! reported), and appends continue at the right seq. Also: a failed fdatasync poisons the writer.
//!
//! `AGENTLOG_POWER_ITERS` sets the number of power cuts per test (default 30 for torn prefixes, fewer for the other kinds); `AGENTLOG_SEED`
//! replays a run.

use testkit as common;

use std::path::Path;
use std::sync::Arc;

use agentlog::log::sim::{OpKind, PowerCut, Repeat, SimStorage, EIO};
use agentlog::log::{DamageClass, Durability, Error, Log, Options, RecoveryMode};
use common::{payload, Rng};

fn opts() -> Options {
    Options::default()
        .segment_size(8 << 10)
        .preallocate(2 << 10)
}

/// Appends a random mix (single appends under `Os` and `Sync`, batches, explicit syncs) of the
/// stream `expected` continues with; returns how many records must survive a power loss.
fn random_appends(log: &Log, rng: &mut Rng, expected: &mut Vec<Vec<u8>>, ops: u64) -> u64 {
    let mut must_survive = log.synced_len();
    for _ in 0..ops {
        let next = expected.len() as u64;
        match rng.below(10) {
            0 => {
                log.sync().unwrap();
                must_survive = expected.len() as u64;
            }
            1 | 2 => {
                let seq = log.append_with(&payload(next), Durability::Sync).unwrap();
                assert_eq!(seq, next);
                expected.push(payload(next));
                must_survive = next + 1;
            }
            3 => {
                let n = rng.range(2, 6);
                let batch: Vec<Vec<u8>> = (next..next + n).map(payload).collect();
                assert_eq!(log.append_batch(&batch).unwrap(), next..next + n);
                expected.extend(batch);
            }
            _ => {
                assert_eq!(log.append(&payload(next)).unwrap(), next);
                expected.push(payload(next));
            }
        }
    }
    must_survive
}

/// Reopens after a power cut and checks the promises; returns the reopened log.
fn reopen_and_check(dir: &Path, expected: &mut Vec<Vec<u8>>, must_survive: u64, what: &str) -> Log {
    let log = Log::open(dir, opts())
        .unwrap_or_else(|e| panic!("{what}: the log does not reopen after a power loss: {e}"));
    let report = log.recovery_report().clone();
    if let Some(cut) = &report.cut {
        assert_eq!(cut.class, DamageClass::TornTail, "{what}: {report}");
    }
    let len = log.len();
    assert!(
        len >= must_survive,
        "{what}: {len} records survived, {must_survive} were synced ({report})"
    );
    assert!(
        len <= expected.len() as u64,
        "{what}: {len} records, only {} appended",
        expected.len()
    );
    let r = log.reader();
    for seq in 0..len {
        let rec = r
            .get(seq)
            .unwrap_or_else(|e| panic!("{what}: seq {seq}: {e}"));
        assert_eq!(
            rec.payload,
            expected[seq as usize].as_slice(),
            "{what}: seq {seq}"
        );
    }
    expected.truncate(len as usize);
    // Appends continue at the right seq.
    assert_eq!(log.append(&payload(len)).unwrap(), len, "{what}");
    expected.push(payload(len));
    log
}

fn power_cuts(name: &str, default_iters: u64, cut: impl Fn(u64) -> PowerCut) {
    let iters = common::env_count("AGENTLOG_POWER_ITERS", default_iters);
    let mut rng = Rng(common::seed(0x0b0e) ^ name.len() as u64);
    let mut torn = 0;
    for i in 0..iters {
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Vec::new();
        // Several rounds on one log: power cut, reopen, check, append more, cut again.
        for round in 0..3 {
            let sim = Arc::new(SimStorage::new());
            let log = Log::open(dir.path(), opts().storage(sim.clone())).unwrap();
            assert_eq!(log.len(), expected.len() as u64);
            let ops = rng.range(1, 120);
            let must_survive = random_appends(&log, &mut rng, &mut expected, ops);
            let how = cut(rng.next());
            let report = sim.power_cut(how).unwrap();
            log.abandon();
            let what = format!("{name} #{i} round {round} ({how:?}, {ops} ops)");
            let log = reopen_and_check(dir.path(), &mut expected, must_survive, &what);
            torn += usize::from(report.files.iter().any(|f| f.2 > 0 && f.2 < f.1));
            log.close().unwrap();
        }
    }
    eprintln!("{name}: {iters}x3 power cuts, {torn} with torn operations");
}

#[test]
fn power_loss_keeping_a_torn_prefix_of_the_unsynced_writes() {
    power_cuts("torn prefix", 30, |seed| PowerCut::TornPrefix { seed });
}

#[test]
fn power_loss_keeping_only_what_was_synced() {
    power_cuts("synced only", 8, |_| PowerCut::KeepSynced);
}

#[test]
fn power_loss_after_the_page_cache_reached_the_disk() {
    power_cuts("everything", 8, |_| PowerCut::KeepAll);
}

/// A disk that writes back pages in any order can leave a valid unsynced record after a torn
/// one; what was synced still survives (the salvage mode keeps it when the default refuses).
#[test]
fn power_loss_with_writes_reaching_the_disk_in_any_order() {
    let iters = common::env_count("AGENTLOG_POWER_ITERS", 20);
    let mut rng = Rng(common::seed(0x0a0e));
    for i in 0..iters {
        let dir = tempfile::tempdir().unwrap();
        let sim = Arc::new(SimStorage::new());
        let log = Log::open(dir.path(), opts().storage(sim.clone())).unwrap();
        let mut expected = Vec::new();
        let ops = rng.range(1, 120);
        let must_survive = random_appends(&log, &mut rng, &mut expected, ops);
        sim.power_cut(PowerCut::TornAnyOrder { seed: rng.next() })
            .unwrap();
        log.abandon();
        let what = format!("any order #{i}");
        let synced_end_ok = match Log::open(dir.path(), opts()) {
            Ok(log) => {
                drop(log);
                true
            }
            Err(e) => {
                // Refused only for damage beyond what was synced.
                let c = e.corruption().unwrap_or_else(|| panic!("{what}: {e}"));
                assert!(c.seq.unwrap_or(0) >= must_survive, "{what}: {e}");
                false
            }
        };
        let mode = if synced_end_ok {
            RecoveryMode::TolerateTornTail
        } else {
            RecoveryMode::Salvage
        };
        let log = Log::open(dir.path(), opts().recovery(mode)).unwrap();
        assert!(log.len() >= must_survive, "{what}");
        let r = log.reader();
        for seq in 0..log.len() {
            assert_eq!(
                r.get(seq).unwrap().payload,
                expected[seq as usize].as_slice(),
                "{what}"
            );
        }
    }
}

#[test]
fn a_failed_fdatasync_poisons_the_writer_and_reopening_recovers_what_is_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Arc::new(SimStorage::new());
    let log = Log::open(
        dir.path(),
        opts().storage(sim.clone()).durability(Durability::Sync),
    )
    .unwrap();
    for seq in 0..20 {
        log.append(&payload(seq)).unwrap();
    }
    sim.fail(OpKind::Sync, 1, EIO, Repeat::Once);
    let e = log.append(&payload(20)).unwrap_err();
    assert!(
        matches!(&e, Error::Io { op: "fdatasync", source, .. } if source.raw_os_error() == Some(EIO)),
        "{e}"
    );
    assert!(log.is_poisoned());
    // Every later append fails, even though the next sync would succeed.
    let e = log.append(&payload(21)).unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    assert!(e.to_string().contains("reopen"), "{e}");
    assert!(matches!(
        log.append_batch(&[payload(21)]).unwrap_err(),
        Error::Poisoned { .. }
    ));
    assert!(log.sync().is_err());
    assert_eq!(log.synced_len(), 20);
    drop(log);
    // Reopening recovers what is on disk: the 20 synced records, and the one whose sync failed
    // (it reached the file), nothing else.
    let log = Log::open(dir.path(), opts()).unwrap();
    assert!((20..=21).contains(&log.len()), "{}", log.len());
    let r = log.reader();
    for seq in 0..log.len() {
        assert_eq!(r.get(seq).unwrap().payload, payload(seq).as_slice());
    }
    assert_eq!(log.append(b"after").unwrap(), r.len());
}

#[test]
fn a_failed_fdatasync_while_sealing_a_segment_poisons_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Arc::new(SimStorage::new());
    let log = Log::open(dir.path(), opts().storage(sim.clone())).unwrap();
    // Fill the first segment (8 KiB) without syncing, then fail the seal's sync.
    let mut seq = 0;
    while common::segments(dir.path()).len() < 2 {
        if seq == 20 {
            sim.fail(OpKind::Sync, 1, EIO, Repeat::Sticky);
        }
        match log.append(&payload(seq)) {
            Ok(s) => assert_eq!(s, seq),
            Err(e) => {
                assert!(seq > 20, "{e}");
                assert!(log.is_poisoned(), "{e}");
                break;
            }
        }
        seq += 1;
    }
    assert!(log.is_poisoned());
    assert!(matches!(
        log.append(b"x").unwrap_err(),
        Error::Poisoned { .. }
    ));
    let acked = log.len();
    drop(log);
    sim.clear_faults();
    let log = Log::open(dir.path(), opts()).unwrap();
    assert_eq!(log.len(), acked);
    let r = log.reader();
    for s in 0..acked {
        assert_eq!(r.get(s).unwrap().payload, payload(s).as_slice());
    }
}

/// A session's per-call durability and `sync_through`: an event appended with
/// `Durability::Sync` under a session whose default is `Os`, and the events up to a seq passed
/// to `sync_through`, survive a power loss; an event appended after them with the default does
/// not (what the simulation keeps is only what was synced).
#[test]
fn session_per_call_durability_and_sync_through_survive_a_power_loss() {
    use agentlog::event::parse_draft_line;
    use agentlog::session::{Session, SessionMeta, SessionOptions};
    let line = |i: u32| {
        parse_draft_line(&format!(
            r#"{{"type":"system/message","data":{{"role":"system","content":[{{"type":"text","text":"{i}"}}]}}}}"#
        ))
        .unwrap()
    };
    for via_sync_through in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let sim = Arc::new(SimStorage::new());
        let options = SessionOptions {
            log: opts().storage(sim.clone()),
            ..SessionOptions::default()
        };
        let s = Session::create(&dir, SessionMeta::new("s", 1), options).unwrap();
        s.append_draft(line(0)).unwrap();
        s.append_draft(line(1)).unwrap();
        if via_sync_through {
            s.append_draft(line(2)).unwrap();
            s.sync_through(2).unwrap();
        } else {
            assert_eq!(s.append_with(line(2), Durability::Sync).unwrap(), Some(2));
        }
        s.append_draft(line(3)).unwrap();
        sim.power_cut(PowerCut::KeepSynced).unwrap();
        drop(s);
        let s = Session::open(&dir, SessionOptions::default()).unwrap();
        assert_eq!(s.len(), 3, "via_sync_through={via_sync_through}");
        s.close().unwrap();
    }
}
