//! Concurrency stress: 8 threads append (mixed sizes, batches), sync and read (`refresh`, `get`,
//! `iter`, fresh readers) on one log at once; readers never see a partial or wrong record and
//! every append's seq maps to its payload. Plus a reader in another process during the writes.
//!
//! `AGENTLOG_STRESS_ITERS` scales the work (default 1: about a second).

use testkit as common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentlog::log::{Durability, Log, LogReader, Options};
use common::Rng;

const CHILD_ENV: &str = "AGENTLOG_TEST_CHILD";

/// A payload that names its writer thread and its counter, so any record can be checked
/// without knowing its seq in advance: `[thread, counter, len]` then bytes derived from them.
fn tagged(thread: u64, counter: u64, len: usize) -> Vec<u8> {
    let len = len.max(24);
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&thread.to_le_bytes());
    v.extend_from_slice(&counter.to_le_bytes());
    v.extend_from_slice(&(len as u64).to_le_bytes());
    let mut x = thread.wrapping_mul(31).wrapping_add(counter) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

/// Checks that `p` is a well-formed tagged payload; returns (thread, counter).
fn check_tagged(p: &[u8]) -> (u64, u64) {
    assert!(p.len() >= 24, "short payload ({} bytes)", p.len());
    let word = |i: usize| u64::from_le_bytes(p[i * 8..i * 8 + 8].try_into().unwrap());
    let (t, c, len) = (word(0), word(1), word(2));
    assert_eq!(len as usize, p.len(), "payload length");
    assert_eq!(p, tagged(t, c, len as usize).as_slice(), "payload bytes");
    (t, c)
}

fn size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0 => rng.range(4_000, 20_000) as usize,
        1..=10 => rng.range(300, 2_000) as usize,
        _ => rng.range(24, 200) as usize,
    }
}

#[test]
fn eight_threads_append_sync_and_read_one_log() {
    let scale = common::env_count("AGENTLOG_STRESS_ITERS", 1);
    let seed = common::seed(0x57e55);
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(64 << 10)
        .preallocate(16 << 10);
    let log = Log::open(dir.path(), opts).unwrap();
    let log = Arc::new(log);
    let stop = Arc::new(AtomicBool::new(false));
    // Every acknowledged append: (seq, thread, counter, len).
    let acked = Arc::new(Mutex::new(Vec::new()));
    let per_writer = 1500 * scale;
    let mut writers = Vec::new();
    for t in 0..5u64 {
        let (log, acked) = (Arc::clone(&log), Arc::clone(&acked));
        writers.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ t);
            let mut counter = 0;
            let mut mine = Vec::new();
            while counter < per_writer {
                match rng.below(10) {
                    0 => {
                        let n = rng.range(2, 10);
                        let batch: Vec<Vec<u8>> = (counter..counter + n)
                            .map(|c| tagged(t, c, size(&mut rng)))
                            .collect();
                        let range = log.append_batch(&batch).unwrap();
                        assert_eq!(range.end - range.start, n);
                        for (k, seq) in range.enumerate() {
                            mine.push((seq, t, counter + k as u64, batch[k].len()));
                        }
                        counter += n;
                    }
                    1 => {
                        let p = tagged(t, counter, size(&mut rng));
                        let seq = log.append_with(&p, Durability::Sync).unwrap();
                        assert!(log.synced_len() > seq);
                        mine.push((seq, t, counter, p.len()));
                        counter += 1;
                    }
                    2 => log.sync().unwrap(),
                    _ => {
                        let p = tagged(t, counter, size(&mut rng));
                        let seq = log.append(&p).unwrap();
                        mine.push((seq, t, counter, p.len()));
                        counter += 1;
                    }
                }
            }
            acked.lock().unwrap().extend(mine);
        }));
    }
    // Three reader threads: a long-lived reader that refreshes, and fresh readers.
    let mut readers = Vec::new();
    for r in 0..3u64 {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        readers.push(std::thread::spawn(move || {
            let mut rng = Rng(seed ^ (100 + r));
            let mut reader = log.reader();
            let mut rounds = 0u64;
            let mut seen = 0u64;
            loop {
                let finished = stop.load(Ordering::SeqCst);
                if rng.below(4) == 0 {
                    // A new reader, taken while appends and segment rolls go on.
                    reader = log.reader();
                }
                let len = reader.refresh().unwrap();
                assert!(len >= seen, "the log shrank from {seen} to {len}");
                seen = len;
                if len > 0 {
                    for _ in 0..20 {
                        let seq = rng.below(len);
                        let rec = reader
                            .get(seq)
                            .unwrap_or_else(|e| panic!("get({seq}) of {len}: {e}"));
                        assert_eq!(rec.seq, seq);
                        check_tagged(rec.payload);
                    }
                    let from = rng.below(len);
                    for (next, rec) in (from..).zip(reader.range(from..).take(200)) {
                        let rec = rec.unwrap_or_else(|e| panic!("iter at {next}: {e}"));
                        assert_eq!(rec.seq, next);
                        check_tagged(rec.payload);
                    }
                }
                rounds += 1;
                if finished {
                    return rounds;
                }
            }
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        assert!(r.join().unwrap() > 1);
    }
    // Every append's seq maps to its payload, and the seqs are exactly 0..len.
    let mut acked = acked.lock().unwrap().clone();
    acked.sort_unstable();
    assert_eq!(acked.len() as u64, log.len());
    let reader = log.reader();
    for (i, &(seq, t, c, len)) in acked.iter().enumerate() {
        assert_eq!(seq, i as u64);
        assert_eq!(
            reader.get(seq).unwrap().payload,
            tagged(t, c, len).as_slice()
        );
    }
    let log = Arc::try_unwrap(log).unwrap();
    log.close().unwrap();
    let r = LogReader::open(dir.path()).unwrap();
    for (i, rec) in r.iter().enumerate() {
        let (seq, t, c, len) = acked[i];
        assert_eq!(
            rec.unwrap().payload,
            tagged(t, c, len).as_slice(),
            "seq {seq}"
        );
    }
    assert!(
        common::segments(dir.path()).len() > 3,
        "the log should roll"
    );
}

#[test]
#[ignore = "runs as a child process of a_reader_in_another_process_during_writes"]
fn child_read_while_written() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let target: u64 = std::env::var("AGENTLOG_STRESS_TARGET")
        .unwrap()
        .parse()
        .unwrap();
    let mut out = std::io::stdout().lock();
    // Wait for the writer to create the log.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reader = loop {
        if let Ok(r) = LogReader::open(&dir) {
            break r;
        }
        assert!(Instant::now() < deadline, "no log appeared");
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut next = 0u64;
    let mut rounds = 0u64;
    while next < target {
        assert!(Instant::now() < deadline, "reader stuck at {next}");
        let len = reader.wait(Duration::from_millis(50)).unwrap();
        for rec in reader.range(next..) {
            let rec = rec.unwrap_or_else(|e| panic!("at {next} of {len}: {e}"));
            assert_eq!(rec.seq, next);
            check_tagged(rec.payload);
            next += 1;
        }
        assert_eq!(next, len);
        if next > 0 && rounds.is_multiple_of(7) {
            // Random access into what is published.
            let seq = (rounds * 7919) % next;
            check_tagged(reader.get(seq).unwrap().payload);
        }
        rounds += 1;
    }
    writeln!(out, "READ {next} IN {rounds} ROUNDS").unwrap();
}

#[test]
fn a_reader_in_another_process_during_writes() {
    let scale = common::env_count("AGENTLOG_STRESS_ITERS", 1);
    let target = 20_000 * scale;
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            common::test_name(module_path!(), "child_read_while_written").as_str(),
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .env("AGENTLOG_STRESS_TARGET", target.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Small segments and index steps: the reader crosses many rolls and seals.
    let opts = Options::default()
        .segment_size(32 << 10)
        .preallocate(4 << 10);
    let log = Log::open(dir.path(), opts).unwrap();
    let mut rng = Rng(common::seed(0x9e4d));
    let mut counter = 0;
    while counter < target {
        if rng.below(10) == 0 {
            let n = rng.range(2, 10).min(target - counter);
            let batch: Vec<Vec<u8>> = (counter..counter + n)
                .map(|c| tagged(0, c, size(&mut rng)))
                .collect();
            log.append_batch(&batch).unwrap();
            counter += n;
        } else {
            log.append(&tagged(0, counter, size(&mut rng))).unwrap();
            counter += 1;
        }
        if counter % 1000 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the reader process failed: {stdout}");
    assert!(
        stdout.contains(&format!("READ {target} ")),
        "the reader process said: {stdout}"
    );
    let _ = std::io::stderr().flush();
}
