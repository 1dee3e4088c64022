//! agentlog side by side with JSONL (serde_json) and SQLite (a row per event), on the same
//! generated events (`testkit/src/gen.rs`), in the same run. One criterion group per measurement:
//!
//! - `append`: one event appended at equal durability (in the page cache when the call returns,
//!   survives `kill -9`): agentlog's engine (`encode_event` + `Log::append`, `Durability::Os`), its
//!   session layer (`Session::append_draft`: lifecycle checks and projection too), JSONL with one
//!   `write()` per event, SQLite in WAL mode with `synchronous=OFF` and a transaction per event.
//!   The rows under `best-case/` are each side's batched best case, not durable per event:
//!   agentlog `append_batch` of 1000 events, JSONL through a `BufWriter`, SQLite one transaction
//!   per 1000 events.
//! - `append_sync`: on stable storage when the call returns: agentlog `Durability::Sync`, JSONL
//!   `write()` + `fdatasync`, SQLite WAL `synchronous=FULL`.
//! - `replay`: every event of a 100,000-event session read and its content touched: agentlog
//!   `LogReader::iter` (checksums) + `access_event` (validation); JSONL `serde_json` per line;
//!   SQLite `SELECT data ORDER BY seq` + `serde_json`; `memcpy`: the same record bytes copied
//!   from memory (the floor, read in the same run).
//! - `get`: one event by a random seq: agentlog `LogReader::get` + `access_event`; SQLite
//!   `SELECT data WHERE seq = ?` + parse; JSONL with an in-memory index of line offsets (its best
//!   case, `best-case/`).
//! - `open`: ready to append (or read) after a clean close: agentlog `Log::open` and
//!   `LogReader::open`; JSONL opens the file and counts its lines (the next seq); SQLite opens and
//!   runs `SELECT max(seq)`.
//!
//! The appended events cycle through the first 100,000 events of the session; every store starts
//! afresh (untimed) when the cycle restarts. `cargo bench -p agentlog-benches --bench compare`

use std::hint::black_box;
use std::time::Duration;

use agentlog::log::{record_size_on_disk, Durability, LogReader};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};

use peers::*;
use testkit::gen;
use testkit::peers;

/// Events in the append pool and in the replay/get/open corpus.
const EVENTS: usize = 100_000;

fn run_cases(c: &mut Criterion, group: &str, pool: &[Item], cases: Vec<(&str, MakeSink, bool)>) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.sampling_mode(SamplingMode::Flat);
    for (label, make, batched) in cases {
        let mut runner = Runner::new(pool, make, batched.then_some(1000));
        g.bench_function(label, |b| b.iter_custom(|iters| runner.run(iters)));
    }
    g.finish();
}

fn append(c: &mut Criterion) {
    let pool = items(EVENTS);
    let json: usize = pool
        .iter()
        .map(|i| serde_json::to_string(&i.json).expect("json").len() + 1)
        .sum();
    eprintln!(
        "append pool: {} events, {} bytes of JSONL ({} per event)",
        pool.len(),
        json,
        json / pool.len()
    );
    run_cases(
        c,
        "append",
        &pool,
        vec![
            ("agentlog", log_sink(Durability::Os), false),
            ("agentlog_session", session_sink(Durability::Os), false),
            ("jsonl", jsonl_sink(JsonlMode::WritePerEvent), false),
            ("sqlite", sqlite_sink(SqliteMode::TxnPerEvent), false),
            (
                "best-case/agentlog_batch_1000",
                log_sink(Durability::Os),
                true,
            ),
            (
                "best-case/jsonl_bufwriter",
                jsonl_sink(JsonlMode::Buffered),
                false,
            ),
            (
                "best-case/sqlite_txn_1000",
                sqlite_sink(SqliteMode::Batched),
                false,
            ),
        ],
    );
    run_cases(
        c,
        "append_sync",
        &pool,
        vec![
            ("agentlog", log_sink(Durability::Sync), false),
            ("jsonl", jsonl_sink(JsonlMode::Sync), false),
            ("sqlite", sqlite_sink(SqliteMode::Full), false),
        ],
    );
}

fn read(c: &mut Criterion) {
    let corpus = build_corpus(EVENTS as u64);
    eprintln!(
        "read corpus: {} events, {} bytes of JSONL",
        corpus.events, corpus.jsonl_bytes
    );

    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    g.throughput(Throughput::Elements(corpus.events));
    let reader = LogReader::open(&corpus.log).expect("open");
    g.bench_function("agentlog", |b| {
        b.iter(|| black_box(replay_agentlog(&reader)))
    });
    g.bench_function("jsonl", |b| {
        b.iter(|| black_box(replay_jsonl(&corpus.jsonl)))
    });
    let conn = sqlite_reader(&corpus.sqlite);
    g.bench_function("sqlite", |b| b.iter(|| black_box(replay_sqlite(&conn))));
    // The floor (issue 14: "aim at >= 0.3x memcpy"): the same bytes the agentlog replay reads
    // (every record's header, payload and padding, segment by segment) copied with memcpy from
    // memory into one buffer.
    let records = record_bytes(&reader);
    let mut dst = vec![0u8; records.iter().map(Vec::len).max().unwrap_or(0)];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            for src in &records {
                dst[..src.len()].copy_from_slice(src);
                black_box(&dst);
            }
        })
    });
    g.finish();

    // The same pseudo-random seqs on every side.
    let mut rng = gen::Rng(7);
    let seqs: Vec<u64> = (0..4096).map(|_| rng.below(corpus.events)).collect();
    let mut g = c.benchmark_group("get");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("agentlog", |b| {
        b.iter(|| {
            i += 1;
            let rec = reader.get(seqs[i % seqs.len()]).expect("get");
            black_box(touch_archived(rec.payload))
        })
    });
    g.bench_function("sqlite", |b| {
        b.iter(|| {
            i += 1;
            black_box(get_sqlite(&conn, seqs[i % seqs.len()]))
        })
    });
    let mut index = JsonlIndex::build(&corpus.jsonl);
    g.bench_function("best-case/jsonl_line_index", |b| {
        b.iter(|| {
            i += 1;
            black_box(index.get(seqs[i % seqs.len()]))
        })
    });
    g.finish();
    drop(reader);
    drop(conn);

    bench_open(c, "open", "100000", &corpus);
}

/// The record bytes of each segment of the log (header, payload, padding; not the segment
/// header or the zeros after the last record), read into memory.
fn record_bytes(reader: &LogReader) -> Vec<Vec<u8>> {
    let files = reader.segment_files();
    let bases: Vec<u64> = files
        .iter()
        .map(|(p, _)| testkit::base_seq(p).expect("base seq"))
        .collect();
    let mut per = vec![0u64; files.len()];
    for rec in reader.iter() {
        let rec = rec.expect("record");
        let k = bases.partition_point(|&b| b <= rec.seq) - 1;
        per[k] += record_size_on_disk(rec.payload.len() as u64);
    }
    files
        .iter()
        .zip(&per)
        .map(|((path, _), &n)| {
            let bytes = std::fs::read(path).expect("read segment");
            bytes[64..64 + n as usize].to_vec()
        })
        .collect()
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = append, read
}
criterion_main!(benches);
