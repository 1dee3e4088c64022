//! `sync` appends from 1, 4 and 8 threads on ONE session, next to N threads on one JSONL file
//! (issue 14: "`sync` appends, 8 threads on one session ≥ 2× JSONL at 4 and 8 threads"), on the
//! small-event mix (`testkit/src/gen.rs`, `Mix::Small`), in the same run. Throughput is per event,
//! over all threads.
//!
//! A session's events depend on their order (a `step/end` after its `step/start`), so N threads
//! appending one session's events take them in order under a lock of the caller's. The rows:
//!
//! - `agentlog_session_sync_through`: the pattern `Session::sync_through` exists for: under the
//!   caller's lock, take the next event and `append_with(draft, Durability::Os)`; after releasing
//!   it, `sync_through(seq)`. Concurrent waiters share one fdatasync (group commit).
//! - `jsonl_one_file`: the same shape on one JSONL file (serde_json): under the lock, serialize
//!   the next event and `write()` it; after releasing it, `fdatasync` the file. Each thread pays
//!   its own fdatasync (the kernel may overlap them; nothing in user space shares them).
//!
//! Both acknowledge an event only once it is on stable storage.
//!
//! `cargo bench -p agentlog-benches --bench session_sync`

use std::fs::File;
use std::io::Write;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use agentlog::event::Draft;
use agentlog::log::{Durability, Options};
use agentlog::session::{Session, SessionMeta, SessionOptions};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};

use peers::*;
use testkit::gen;
use testkit::peers;

const THREADS: [usize; 3] = [1, 4, 8];

/// Events in the pool. A run of more events is split into runs of at most this many, each on a
/// new store (made untimed) from the pool's start: the session's rules hold from a new session.
const POOL: usize = 20_000;

/// `run(n)` for each part of `iters` split into runs of at most `POOL` events; the sum of the
/// times they return.
fn in_runs(iters: u64, run: impl Fn(usize) -> Duration) -> Duration {
    let mut left = iters as usize;
    let mut total = Duration::ZERO;
    while left > 0 {
        let n = left.min(POOL);
        total += run(n);
        left -= n;
    }
    total
}

/// Runs `per_thread(count)` on `threads` threads, `iters` events in all, and returns the wall
/// time from a common start to the last thread's end.
fn run_threads(threads: usize, iters: u64, per_thread: &(dyn Fn(u64) + Sync)) -> Duration {
    let barrier = Barrier::new(threads + 1);
    let counts: Vec<u64> = (0..threads as u64)
        .map(|t| iters / threads as u64 + u64::from(t < iters % threads as u64))
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = counts
            .iter()
            .map(|&count| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    per_thread(count);
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

/// The next events, in order, for the threads of one store.
struct Feed<T> {
    items: std::vec::IntoIter<T>,
}

impl<T> Feed<T> {
    fn next(&mut self) -> T {
        self.items.next().expect("an event left in the pool")
    }
}

fn new_session(dir: &std::path::Path) -> Session {
    let options = SessionOptions {
        log: Options::default(),
        ..SessionOptions::default()
    };
    Session::create(dir, SessionMeta::new("bench", 0), options).expect("create session")
}

/// One untimed run of `n` events on `threads` threads, in the timed rows' shape: prints how many
/// events each group-commit fdatasync covered.
fn print_events_per_sync(pool: &[Item], threads: usize, n: usize) {
    let dir = scratch();
    let session = new_session(&dir.path().join("s"));
    let feed = Mutex::new(Feed {
        items: pool[..n].iter().collect::<Vec<_>>().into_iter(),
    });
    let took = run_threads(threads, n as u64, &|count| {
        for _ in 0..count {
            let seq = {
                let mut feed = feed.lock().expect("feed");
                let item = feed.next();
                let draft = Draft {
                    event: item.event.clone(),
                    seq: None,
                    time: Some(item.event.time),
                };
                session
                    .append_with(draft, Durability::Os)
                    .expect("append")
                    .expect("a seq")
            };
            session.sync_through(seq).expect("sync");
        }
    });
    let syncs = session.group_syncs();
    eprintln!(
        "session_sync: {threads} thread(s), {n} events: {syncs} fdatasyncs, {:.2} events per \
         fdatasync, {:.1} µs per event",
        n as f64 / syncs.max(1) as f64,
        took.as_secs_f64() * 1e6 / n as f64
    );
}

fn bench(c: &mut Criterion) {
    let pool = mix_items(gen::Mix::Small, POOL);
    for threads in THREADS {
        print_events_per_sync(&pool, threads, 400 * threads);
    }
    let mut g = c.benchmark_group("session_sync");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(1));
    for threads in THREADS {
        g.bench_function(
            BenchmarkId::new("agentlog_session_sync_through", threads),
            |b| {
                b.iter_custom(|iters| {
                    in_runs(iters, |n| {
                        let dir = scratch();
                        let session = new_session(&dir.path().join("s"));
                        // Built outside the timed part, as a caller builds its event.
                        let drafts: Vec<Draft> = pool[..n]
                            .iter()
                            .map(|item| Draft {
                                event: item.event.clone(),
                                seq: None,
                                time: Some(item.event.time),
                            })
                            .collect();
                        let feed = Mutex::new(Feed {
                            items: drafts.into_iter(),
                        });
                        let took = run_threads(threads, n as u64, &|count| {
                            for _ in 0..count {
                                let seq = {
                                    let mut feed = feed.lock().expect("feed");
                                    let draft = feed.next();
                                    session
                                        .append_with(draft, Durability::Os)
                                        .expect("append")
                                        .expect("a seq")
                                };
                                session.sync_through(seq).expect("sync");
                            }
                        });
                        assert_eq!(session.len(), n as u64);
                        took
                    })
                })
            },
        );
        g.bench_function(BenchmarkId::new("jsonl_one_file", threads), |b| {
            b.iter_custom(|iters| {
                in_runs(iters, |n| {
                    let dir = scratch();
                    let file = File::create(dir.path().join("s.jsonl")).expect("create");
                    let feed = Mutex::new((
                        Feed {
                            items: pool[..n].iter().collect::<Vec<_>>().into_iter(),
                        },
                        Vec::new(),
                    ));
                    run_threads(threads, n as u64, &|count| {
                        for _ in 0..count {
                            {
                                let mut guard = feed.lock().expect("feed");
                                let (feed, line) = &mut *guard;
                                let item = feed.next();
                                line.clear();
                                serde_json::to_writer(&mut *line, &item.json).expect("serialize");
                                line.push(b'\n');
                                (&file).write_all(line).expect("write");
                            }
                            file.sync_data().expect("fdatasync");
                        }
                    })
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
        .measurement_time(Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
