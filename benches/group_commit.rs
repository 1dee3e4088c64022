//! Appends under `sync` durability (each append returns once its event is on stable storage) from
//! 1, 2, 4 and 8 threads, on the generated session's events. Throughput is per event, over all
//! threads: it must grow with the threads, not stay capped at one fdatasync per event.
//!
//! - `agentlog_one_log`: N threads appending to ONE log (`Durability::Sync`): concurrent appends
//!   share one fdatasync (group commit).
//! - `agentlog_n_logs`: N threads, each appending to its own log (docs/design.md: 8 threads to 8
//!   sessions).
//! - `jsonl_n_files`: N threads, each with its own JSONL file, `write()` + `fdatasync` per event.
//! - `sqlite_n_dbs`: N threads, each with its own SQLite database, WAL `synchronous=FULL`, a
//!   transaction per event.
//!
//! `cargo bench -p agentlog-benches --bench group_commit`

use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use agentlog::event::encode_event;
use agentlog::log::{Durability, Log, Options};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use rkyv::util::AlignedVec;

use peers::*;
use testkit::peers;

const THREADS: [usize; 4] = [1, 2, 4, 8];

/// Runs `per_thread(thread, count)` on `threads` threads, `iters` events in all, and returns the
/// wall time from a common start to the last thread's end.
fn run_threads(threads: usize, iters: u64, per_thread: &(dyn Fn(usize, u64) + Sync)) -> Duration {
    let barrier = Barrier::new(threads + 1);
    let counts: Vec<u64> = (0..threads as u64)
        .map(|t| iters / threads as u64 + u64::from(t < iters % threads as u64))
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = counts
            .iter()
            .enumerate()
            .map(|(t, &count)| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    per_thread(t, count);
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for h in handles {
            h.join().expect("thread");
        }
        start.elapsed()
    })
}

fn append_log(log: &Log, pool: &[Item], from: usize, count: u64) {
    let mut buf = AlignedVec::new();
    for k in 0..count as usize {
        let item = &pool[(from + k) % pool.len()];
        buf.clear();
        let start = encode_event(&item.event, &mut buf).expect("encode");
        log.append(&buf[start..]).expect("append");
    }
}

fn open_log(dir: &Path) -> Log {
    Log::open(dir, Options::default().durability(Durability::Sync)).expect("open")
}

fn bench(c: &mut Criterion) {
    let pool = Arc::new(items(10_000));
    let mut g = c.benchmark_group("group_commit");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(1));
    for threads in THREADS {
        g.bench_function(BenchmarkId::new("agentlog_one_log", threads), |b| {
            b.iter_custom(|iters| {
                let dir = scratch();
                let log = open_log(&dir.path().join("log"));
                let took = run_threads(threads, iters, &|t, count| {
                    append_log(&log, &pool, t * 1000, count)
                });
                log.close().expect("close");
                took
            })
        });
        g.bench_function(BenchmarkId::new("agentlog_n_logs", threads), |b| {
            b.iter_custom(|iters| {
                let dir = scratch();
                let logs: Vec<Log> = (0..threads)
                    .map(|t| open_log(&dir.path().join(t.to_string())))
                    .collect();
                let took = run_threads(threads, iters, &|t, count| {
                    append_log(&logs[t], &pool, t * 1000, count)
                });
                for log in logs {
                    log.close().expect("close");
                }
                took
            })
        });
        g.bench_function(BenchmarkId::new("jsonl_n_files", threads), |b| {
            b.iter_custom(|iters| {
                let dir = scratch();
                let sinks: Vec<Mutex<JsonlSink>> = (0..threads)
                    .map(|t| {
                        let path = dir.path().join(format!("{t}.jsonl"));
                        Mutex::new(JsonlSink::create(&path, JsonlMode::Sync))
                    })
                    .collect();
                run_threads(threads, iters, &|t, count| {
                    let mut sink = sinks[t].lock().expect("sink");
                    for k in 0..count as usize {
                        sink.append(&pool[(t * 1000 + k) % pool.len()]);
                    }
                })
            })
        });
        g.bench_function(BenchmarkId::new("sqlite_n_dbs", threads), |b| {
            b.iter_custom(|iters| {
                let dir = scratch();
                let sinks: Vec<Mutex<SqliteSink>> = (0..threads)
                    .map(|t| {
                        let path = dir.path().join(format!("{t}.db"));
                        Mutex::new(SqliteSink::create(&path, SqliteMode::Full))
                    })
                    .collect();
                run_threads(threads, iters, &|t, count| {
                    let mut sink = sinks[t].lock().expect("sink");
                    for k in 0..count as usize {
                        sink.append(&pool[(t * 1000 + k) % pool.len()]);
                    }
                })
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
