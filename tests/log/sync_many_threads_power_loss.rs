//! Group commit under a power loss (`agentlog::log::sim`): eight threads append to one log in
//! small segments (so that segments roll and are sealed in the background while syncs run),
//! half of them under a lock of their own followed by `sync_through` outside it (the pattern of
//! `Session::sync_through`), half with `append_with(.., Durability::Sync)`. The plug is pulled
//! while they run, keeping only what was synced: every record some thread was told is durable
//! survives, with its payload, whatever segment it was in. The fdatasyncs may run two at a
//! time and a sync does not wait for a seal to start, so this is what keeps them honest.
//!
//! `AGENTLOG_POWER_ITERS` sets the number of power cuts (default 12); `AGENTLOG_SEED` replays
//! a run.

use testkit as common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentlog::log::sim::{PowerCut, SimStorage};
use agentlog::log::{Durability, Log, LogReader, Options};
use common::{env_count, seed, Rng};

const THREADS: u64 = 8;

fn payload(thread: u64, i: u64) -> Vec<u8> {
    format!(
        "thread {thread} record {i:05} {}",
        "p".repeat((i % 97) as usize)
    )
    .into_bytes()
}

/// One run: appends until the plug is pulled after `cut_after` acknowledged syncs; returns the
/// records acknowledged as durable (seq → payload).
fn run(dir: &std::path::Path, cut_after: u64) -> BTreeMap<u64, Vec<u8>> {
    let sim = Arc::new(SimStorage::new());
    let opts = Options::default()
        .segment_size(8 << 10)
        .preallocate(2 << 10)
        .storage(sim.clone());
    let log = Log::open(dir, opts).unwrap();
    let log = Arc::new(log);
    let caller_lock = Arc::new(Mutex::new(()));
    let acked = Arc::new(Mutex::new(BTreeMap::new()));
    let acks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (log, caller_lock, acked, acks, stop) = (
                Arc::clone(&log),
                Arc::clone(&caller_lock),
                Arc::clone(&acked),
                Arc::clone(&acks),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let p = payload(t, i);
                    i += 1;
                    let seq = if t % 2 == 0 {
                        let appended = {
                            let _order = caller_lock.lock().unwrap();
                            log.append_with(&p, Durability::Os)
                        };
                        let Ok(seq) = appended else { break };
                        if log.sync_through(seq + 1).is_err() {
                            break;
                        }
                        seq
                    } else {
                        match log.append_with(&p, Durability::Sync) {
                            Ok(seq) => seq,
                            Err(_) => break,
                        }
                    };
                    acked.lock().unwrap().insert(seq, p);
                    acks.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    while acks.load(Ordering::SeqCst) < cut_after {
        std::thread::yield_now();
    }
    // What is acknowledged before the cut must survive it; an ack racing with the cut may
    // come from a sync that completed before it, so it is taken too, but only after the cut.
    sim.power_cut(PowerCut::KeepSynced).unwrap();
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let log = Arc::try_unwrap(log).unwrap_or_else(|_| panic!("a thread still holds the log"));
    log.abandon();
    let acked = acked.lock().unwrap().clone();
    acked
}

#[test]
fn every_acknowledged_record_survives_a_power_loss() {
    let iters = env_count("AGENTLOG_POWER_ITERS", 12);
    let mut rng = Rng(seed(0x5eed_0014));
    for round in 0..iters {
        let dir = tempfile::tempdir().unwrap();
        let cut_after = rng.range(150, 600);
        let acked = run(dir.path(), cut_after);
        assert!(acked.len() as u64 >= cut_after, "round {round}");
        let log = Log::open(dir.path(), Options::default()).unwrap();
        let report = log.recovery_report().clone();
        let reader: LogReader = log.reader();
        let last = *acked.keys().next_back().unwrap();
        assert!(
            reader.len() > last,
            "round {round} (cut after {cut_after} acks): seq {last} was acknowledged durable, \
             the log holds {} records after the power loss ({report:?})",
            reader.len()
        );
        for (&seq, p) in &acked {
            assert_eq!(
                reader.get(seq).unwrap().payload,
                &p[..],
                "round {round}: seq {seq}"
            );
        }
        assert!(
            reader.segment_files().len() > 1,
            "round {round}: the run should span several segments"
        );
        log.close().unwrap();
    }
}
