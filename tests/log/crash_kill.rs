//! `kill -9` at random moments of an append stream: reopening yields exactly a prefix of the
//! stream, holding every acknowledged record, and the next append continues at the right seq.
//!
//! A child process (this test binary, re-executed to run `child_append_stream`) opens the log,
//! appends the deterministic stream `payload(seq)` from wherever the log ends (single appends
//! and batches, under `Durability::Os` or `Durability::Sync`), and prints each acknowledged
//! length. The parent kills it with SIGKILL: most kills after a random delay counted from the
//! child's `START` line (so they land while it appends, however slowly processes start on the
//! machine), some after a random delay counted from the spawn (before or during its open). Then
//! the parent reopens the log, checks it, appends one more record, closes it, and starts the
//! next child. `AGENTLOG_CRASH_KILLS` sets the number of kills (default 200);
//! `AGENTLOG_SEED` replays a run.

use testkit as common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use agentlog::log::{DamageClass, Durability, Log, LogReader, Options};
use common::{payload, Rng};

const CHILD_ENV: &str = "AGENTLOG_TEST_CHILD";

fn opts() -> Options {
    // Small segments and preallocation steps: kills land during rolls and allocations too.
    Options::default()
        .segment_size(32 << 10)
        .preallocate(8 << 10)
}

fn child_env() -> Option<(std::path::PathBuf, bool, u64)> {
    let dir = std::env::var_os(CHILD_ENV)?;
    let sync = std::env::var("AGENTLOG_CRASH_SYNC").ok()? == "1";
    let seed = std::env::var("AGENTLOG_CRASH_SEED").ok()?.parse().ok()?;
    Some((dir.into(), sync, seed))
}

#[test]
#[ignore = "runs as a child process of kill_9_at_random_moments_keeps_an_exact_prefix"]
fn child_append_stream() {
    let Some((dir, sync, seed)) = child_env() else {
        return;
    };
    let durability = if sync {
        Durability::Sync
    } else {
        Durability::Os
    };
    let log = Log::open(&dir, opts().durability(durability)).unwrap();
    let mut out = std::io::stdout().lock();
    let mut rng = Rng(seed);
    let mut next = log.len();
    writeln!(out, "START {next}").unwrap();
    out.flush().unwrap();
    // Bounded, in case the parent never kills (it always does, well before this).
    for _ in 0..200_000 {
        if rng.below(8) == 0 {
            let n = rng.range(2, 9);
            let batch: Vec<Vec<u8>> = (next..next + n).map(payload).collect();
            let range = log.append_batch(&batch).unwrap();
            assert_eq!(range, next..next + n);
            next += n;
        } else {
            assert_eq!(log.append(&payload(next)).unwrap(), next);
            next += 1;
        }
        writeln!(out, "ACK {next}").unwrap();
        out.flush().unwrap();
    }
}

/// When the parent kills a child.
#[derive(Clone, Copy)]
enum KillAt {
    /// This long after the spawn: before, during or just after the child's open.
    AfterSpawn(Duration),
    /// This long after the child printed `START` (it has opened the log and appends).
    AfterStart(Duration),
}

/// How long a child may take to open the log before the test gives up on it.
const START_PATIENCE: Duration = Duration::from_secs(60);

/// Runs one child until killed; returns the largest acknowledged length and whether the child
/// had opened the log.
fn run_child_and_kill(dir: &Path, sync: bool, seed: u64, at: KillAt) -> (u64, bool) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        common::test_name(module_path!(), "child_append_stream").as_str(),
        "--nocapture",
        "--include-ignored",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, dir)
    .env("AGENTLOG_CRASH_SYNC", if sync { "1" } else { "0" })
    .env("AGENTLOG_CRASH_SEED", seed.to_string())
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicU64::new(0));
    let (acked2, started2) = (Arc::clone(&acked), Arc::clone(&started));
    let (start_tx, start_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest prints "test child_append_stream ... " before the child's first line.
            if let Some(n) = line.strip_prefix("ACK ") {
                acked2.fetch_max(n.parse().unwrap(), Ordering::SeqCst);
            } else if line.contains("START ") {
                started2.store(1, Ordering::SeqCst);
                let _ = start_tx.send(());
            }
        }
    });
    match at {
        KillAt::AfterSpawn(delay) => std::thread::sleep(delay),
        KillAt::AfterStart(delay) => {
            if start_rx.recv_timeout(START_PATIENCE).is_err() {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the child did not open the log within {START_PATIENCE:?}");
            }
            std::thread::sleep(delay);
        }
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(
        !status.success(),
        "the child finished before it was killed; give it more to do"
    );
    (
        acked.load(Ordering::SeqCst),
        started.load(Ordering::SeqCst) == 1,
    )
}

#[test]
fn kill_9_at_random_moments_keeps_an_exact_prefix() {
    let kills = common::env_count("AGENTLOG_CRASH_KILLS", 200);
    let mut rng = Rng(common::seed(0x6b69_6c6c));
    let base = tempfile::tempdir().unwrap();
    let started_at = Instant::now();
    let mut dir = base.path().join("log0");
    let mut logs = 0;
    let mut checked = 0u64; // records already compared with the stream
    let (mut torn_tails, mut opened_children, mut max_len) = (0, 0, 0);
    let mut before_open = 0;
    for kill in 0..kills {
        // Start a fresh log now and then so that the log stays small and checks stay cheap.
        if kill > 0 && kill % 50 == 0 {
            logs += 1;
            dir = base.path().join(format!("log{logs}"));
            checked = 0;
        }
        let sync = rng.below(3) == 0;
        // One kill in five is timed from the spawn and lands before, during or just after the
        // child's open (start-up takes a few ms here, far more on a slow machine); the others
        // are timed from the child's START and land in the middle of the stream.
        let at = if rng.below(5) == 0 {
            KillAt::AfterSpawn(Duration::from_micros(rng.range(0, 20_000)))
        } else {
            KillAt::AfterStart(Duration::from_micros(rng.range(0, 20_000)))
        };
        let (acked, started) = run_child_and_kill(&dir, sync, rng.next(), at);
        opened_children += u64::from(started);
        before_open += u64::from(!started);
        if !dir.exists() {
            continue;
        }
        let log = Log::open(&dir, opts()).unwrap_or_else(|e| {
            panic!("kill {kill}: reopening after kill -9 failed: {e}");
        });
        let report = log.recovery_report().clone();
        if let Some(cut) = &report.cut {
            assert_eq!(cut.class, DamageClass::TornTail, "kill {kill}: {report}");
            assert!(cut.dropped_segments.is_empty(), "kill {kill}: {report}");
            torn_tails += 1;
        }
        let len = log.len();
        assert!(
            len >= acked,
            "kill {kill}: the log holds {len} records but {acked} were acknowledged ({report})"
        );
        // Exactly a prefix of the stream: every record equals the expected payload.
        let reader = log.reader();
        for seq in checked.min(len)..len {
            let rec = reader
                .get(seq)
                .unwrap_or_else(|e| panic!("kill {kill}: seq {seq}: {e}"));
            assert_eq!(
                rec.payload,
                payload(seq).as_slice(),
                "kill {kill}: seq {seq}"
            );
        }
        assert_eq!(reader.iter().count() as u64, len);
        // The next append continues at the right seq.
        assert_eq!(log.append(&payload(len)).unwrap(), len, "kill {kill}");
        log.close().unwrap();
        checked = len + 1;
        max_len = max_len.max(len + 1);
    }
    // A full check of the last log by a reader of its own.
    let r = LogReader::open(&dir).unwrap();
    for (seq, rec) in r.iter().enumerate() {
        assert_eq!(rec.unwrap().payload, payload(seq as u64).as_slice());
    }
    eprintln!(
        "{kills} kills in {:.1?}: {opened_children} children had opened the log, \
         {before_open} were killed before, {torn_tails} torn tails cut, up to {max_len} records",
        started_at.elapsed()
    );
    assert!(
        opened_children > kills / 2,
        "most kills should land while appending"
    );
}
