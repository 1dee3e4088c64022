//! Cold (compressed) segments, on both event mixes (`testkit/src/gen.rs`: the current one, about
//! 1 KB a line, and the small-event one of issue 14, about 221 B), in the same run:
//!
//! - Sizes, printed to stderr before anything is timed: bytes per event of the plain segments
//!   (records + index entries), of the cold segments, of the JSONL file, and of the JSONL file
//!   compressed whole with `zstd -3` (the target: cold ≤ 1.5× JSONL+zstd).
//! - `cold_replay/<mix>/...`: every event read (checksum, archive validated, content touched)
//!   by a reader opened for the run: `agentlog_cold` (every block decompressed on the way),
//!   `agentlog_plain` (the same log before compression), `jsonl` (serde_json per line). The
//!   target: cold ≥ 5× JSONL.
//! - `cold_get/<mix>/...`: `get(seq)` of a random seq and its content touched: `uncached` (a
//!   reader that has decompressed few blocks yet: it is replaced, untimed, every 32 gets, so
//!   nearly every get decompresses its block), `cached` (the block decompressed before),
//!   `plain` (the plain log). The target: ≤ 50 µs.
//!
//! `cargo bench -p agentlog-benches --bench cold`

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use agentlog::log::{compress_log, LogReader, OsStorage};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};

use gen::{Mix, Rng};
use peers::*;
use testkit::gen;
use testkit::peers;

/// Events of each mix: the small session had 76,298.
const EVENTS: usize = 76_298;

const MIXES: [(Mix, &str); 2] = [(Mix::Current, "current"), (Mix::Small, "small")];

fn dir_bytes(dir: &Path, ext: &str) -> u64 {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| std::fs::metadata(p).expect("stat").len())
        .sum()
}

/// The plain bytes of a log: each record's bytes and index entry (the segment files keep their
/// preallocated length with a hole, so their length says nothing).
fn plain_bytes(reader: &LogReader) -> u64 {
    reader
        .iter()
        .map(|r| agentlog::log::record_size_on_disk(r.expect("record").payload.len() as u64) + 4)
        .sum::<u64>()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("list") {
        let p = e.expect("entry").path();
        if p.is_file() && p.file_name().is_some_and(|n| n != "LOCK") {
            std::fs::copy(&p, to.join(p.file_name().expect("name"))).expect("copy");
        }
    }
}

fn cold(c: &mut Criterion) {
    for (mix, name) in MIXES {
        let dir = scratch();
        let plain = dir.path().join("plain");
        let cold = dir.path().join("cold");
        let jsonl = dir.path().join("events.jsonl");
        let pool = mix_items(mix, EVENTS);
        let touch: usize = pool.iter().map(|i| touch_json(&i.json)).sum();
        {
            let mut a = LogSink::create(&plain, agentlog::log::Durability::Os);
            let mut j = JsonlSink::create(&jsonl, JsonlMode::Buffered);
            for chunk in pool.chunks(10_000) {
                a.append_many(chunk);
                for item in chunk {
                    j.append(item);
                }
            }
            j.flush();
            a.log.close().expect("close");
        }
        drop(pool);
        copy_dir(&plain, &cold);
        let t = Instant::now();
        let done = compress_log(&cold, &OsStorage).expect("compress");
        let took = t.elapsed();
        let plain_reader = LogReader::open(&plain).expect("open");
        let n = plain_reader.len() as f64;
        let plain_b = plain_bytes(&plain_reader);
        let cold_b = dir_bytes(&cold, "seg");
        let json = std::fs::read(&jsonl).expect("read jsonl");
        let json_z = zstd::bulk::compress(&json, 3).expect("zstd").len() as u64;
        eprintln!(
            "\n{name} mix, {} events in {} segment(s): bytes per event: plain {:.1}, cold {:.1}, \
             JSONL {:.1}, JSONL + zstd -3 {:.1}; cold ÷ (JSONL+zstd) {:.2}, cold ÷ JSONL {:.3}, \
             plain ÷ cold {:.1}; compressing took {:.0} ms ({:.0} MB/s of plain bytes)\n",
            n,
            done.len(),
            plain_b as f64 / n,
            cold_b as f64 / n,
            json.len() as f64 / n,
            json_z as f64 / n,
            cold_b as f64 / json_z as f64,
            cold_b as f64 / json.len() as f64,
            plain_b as f64 / cold_b as f64,
            took.as_secs_f64() * 1e3,
            plain_b as f64 / took.as_secs_f64() / 1e6,
        );
        // Every side sees the same events.
        assert_eq!(
            replay_agentlog(&LogReader::open(&cold).expect("open")),
            touch
        );
        assert_eq!(replay_agentlog(&plain_reader), touch);
        assert_eq!(replay_jsonl(&jsonl), touch);

        let mut g = c.benchmark_group(format!("cold_replay/{name}"));
        g.throughput(Throughput::Elements(EVENTS as u64));
        g.sampling_mode(SamplingMode::Flat);
        g.bench_function("agentlog_cold", |b| {
            b.iter(|| replay_agentlog(&LogReader::open(&cold).expect("open")))
        });
        g.bench_function("agentlog_plain", |b| {
            b.iter(|| replay_agentlog(&LogReader::open(&plain).expect("open")))
        });
        g.bench_function("jsonl", |b| b.iter(|| replay_jsonl(&jsonl)));
        g.finish();

        let mut g = c.benchmark_group(format!("cold_get/{name}"));
        g.throughput(Throughput::Elements(1));
        let len = plain_reader.len();
        g.bench_function("uncached", |b| {
            b.iter_custom(|iters| {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
                let mut total = Duration::ZERO;
                let mut reader = LogReader::open(&cold).expect("open");
                for i in 0..iters {
                    if i % 32 == 31 {
                        // (A reader maps a segment at its first get there: with a segment or
                        // two per mix, one or two of each 32 gets pay that too.)
                        reader = LogReader::open(&cold).expect("open");
                    }
                    let seq = rng.below(len);
                    let t = Instant::now();
                    black_box(touch_archived(reader.get(seq).expect("get").payload));
                    total += t.elapsed();
                }
                total
            })
        });
        let warm = LogReader::open(&cold).expect("open");
        black_box(replay_agentlog(&warm));
        g.bench_function("cached", |b| {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            b.iter(|| touch_archived(warm.get(rng.below(len)).expect("get").payload))
        });
        g.bench_function("plain", |b| {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            b.iter(|| touch_archived(plain_reader.get(rng.below(len)).expect("get").payload))
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = cold
}
criterion_main!(benches);
