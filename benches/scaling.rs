//! How each cost grows with the session: agentlog, JSONL and SQLite on the first N events of the
//! generated session, N = 10^3, 10^4, 10^5, 10^6 (`AGENTLOG_BENCH_SCALES=1000,10000` to choose).
//!
//! - `scaling_append`: N events appended into a fresh store (the store's creation is not timed),
//!   at equal durability (as `compare`'s `append`: agentlog `Durability::Os`, JSONL one `write()`
//!   per event, SQLite WAL `synchronous=OFF` with a transaction per event). Throughput is per event.
//! - `scaling_replay`: every event of an N-event store read and touched.
//! - `scaling_get`: one event by a random seq from an N-event store.
//! - `scaling_open`: opening an N-event store after a clean close.
//!
//! `cargo bench -p agentlog-benches --bench scaling`

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentlog::log::{Durability, LogReader};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};

use peers::*;
use testkit::gen;
use testkit::peers;

type MakeSink = Box<dyn Fn(&std::path::Path) -> Box<dyn Sink>>;

fn scales() -> Vec<u64> {
    match std::env::var("AGENTLOG_BENCH_SCALES") {
        Ok(s) => s
            .split(',')
            .map(|n| n.trim().parse().expect("AGENTLOG_BENCH_SCALES: numbers"))
            .collect(),
        Err(_) => vec![1_000, 10_000, 100_000, 1_000_000],
    }
}

/// Appends `items` into a fresh store made by `make`, `iters` times; only the appends are timed.
fn time_fill(
    items: &[Item],
    make: &dyn Fn(&std::path::Path) -> Box<dyn Sink>,
    iters: u64,
) -> Duration {
    let dir = scratch();
    let mut total = Duration::ZERO;
    for k in 0..iters {
        let path = dir.path().join(k.to_string());
        let mut sink = make(&path);
        let start = Instant::now();
        for item in items {
            sink.append(item);
        }
        total += start.elapsed();
        drop(sink);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).expect("remove");
        } else {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(path.with_extension("db-wal"));
            let _ = std::fs::remove_file(path.with_extension("db-shm"));
        }
    }
    total
}

fn append(c: &mut Criterion) {
    let scales = scales();
    let max = scales.iter().copied().max().unwrap_or(0);
    let pool = items(max as usize);
    let mut g = c.benchmark_group("scaling_append");
    g.sampling_mode(SamplingMode::Flat);
    for &n in &scales {
        let items = &pool[..n as usize];
        g.throughput(Throughput::Elements(n));
        let cases: Vec<(&str, MakeSink)> = vec![
            (
                "agentlog",
                Box::new(|p| Box::new(LogSink::create(p, Durability::Os))),
            ),
            (
                "jsonl",
                Box::new(|p| {
                    Box::new(JsonlSink::create(
                        &p.with_extension("jsonl"),
                        JsonlMode::WritePerEvent,
                    ))
                }),
            ),
            (
                "sqlite",
                Box::new(|p| {
                    Box::new(SqliteSink::create(
                        &p.with_extension("db"),
                        SqliteMode::TxnPerEvent,
                    ))
                }),
            ),
        ];
        for (label, make) in cases {
            g.bench_function(BenchmarkId::new(label, n), |b| {
                b.iter_custom(|iters| time_fill(items, &*make, iters))
            });
        }
    }
    g.finish();
}

fn read(c: &mut Criterion) {
    for n in scales() {
        let corpus = build_corpus(n);
        eprintln!(
            "corpus: {} events, {} bytes of JSONL",
            corpus.events, corpus.jsonl_bytes
        );
        let mut g = c.benchmark_group("scaling_replay");
        g.throughput(Throughput::Elements(n));
        let reader = LogReader::open(&corpus.log).expect("open");
        g.bench_function(BenchmarkId::new("agentlog", n), |b| {
            b.iter(|| black_box(replay_agentlog(&reader)))
        });
        g.bench_function(BenchmarkId::new("jsonl", n), |b| {
            b.iter(|| black_box(replay_jsonl(&corpus.jsonl)))
        });
        let conn = sqlite_reader(&corpus.sqlite);
        g.bench_function(BenchmarkId::new("sqlite", n), |b| {
            b.iter(|| black_box(replay_sqlite(&conn)))
        });
        g.finish();

        let mut rng = gen::Rng(7);
        let seqs: Vec<u64> = (0..4096).map(|_| rng.below(n)).collect();
        let mut g = c.benchmark_group("scaling_get");
        g.throughput(Throughput::Elements(1));
        let mut i = 0;
        g.bench_function(BenchmarkId::new("agentlog", n), |b| {
            b.iter(|| {
                i += 1;
                let rec = reader.get(seqs[i % seqs.len()]).expect("get");
                black_box(touch_archived(rec.payload))
            })
        });
        g.bench_function(BenchmarkId::new("sqlite", n), |b| {
            b.iter(|| {
                i += 1;
                black_box(get_sqlite(&conn, seqs[i % seqs.len()]))
            })
        });
        let mut index = JsonlIndex::build(&corpus.jsonl);
        g.bench_function(BenchmarkId::new("best-case/jsonl_line_index", n), |b| {
            b.iter(|| {
                i += 1;
                black_box(index.get(seqs[i % seqs.len()]))
            })
        });
        g.finish();
        drop(reader);
        drop(conn);

        bench_open(c, "scaling_open", &n.to_string(), &corpus);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = append, read
}
criterion_main!(benches);
