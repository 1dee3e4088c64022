//! The two event mixes side by side (`testkit/src/gen.rs`): the current one (a mean canonical line of
//! about 1 KB) and the small-event one of issue 14 (about 221 B: streamed chunks, step and turn
//! markers, short tool calls and results), in the same run.
//!
//! - Before timing anything, the bytes each event takes: its rkyv archive, its record in a segment
//!   (16-byte header, archive, padding to 16 bytes) plus its 4-byte index entry, and its JSONL line
//!   (serde_json, with the newline); overall and by event type. Printed to stderr.
//! - `mix_append/<mix>/...`: one event appended at default durability (`Durability::Os`, in the
//!   page cache when the call returns): agentlog's engine (`encode_event` + `Log::append`), its
//!   session layer (`Session::append_draft`), JSONL with one `write()` per event (serde_json).
//!
//! `cargo bench -p agentlog-benches --bench mixes`

use std::collections::BTreeMap;
use std::time::Duration;

use agentlog::event::access_event;
use agentlog::log::{record_size_on_disk, Durability, LogReader};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};

use gen::Mix;
use peers::*;
use testkit::gen;
use testkit::peers;

/// Events of each mix: the small session had 76,298.
const EVENTS: usize = 76_298;

/// The mixes and their names in the group ids.
const MIXES: [(Mix, &str); 2] = [(Mix::Current, "current"), (Mix::Small, "small")];

/// Per event type: count, archive bytes, record + index bytes, JSONL bytes.
type Sizes = BTreeMap<String, [u64; 4]>;

fn sizes(pool: &[Item]) -> Sizes {
    let dir = scratch();
    let path = dir.path().join("log");
    {
        let mut sink = LogSink::create(&path, Durability::Os);
        for item in pool {
            sink.append(item);
        }
    }
    let reader = LogReader::open(&path).expect("open");
    let mut by_type = Sizes::new();
    for (rec, item) in reader.iter().zip(pool) {
        let rec = rec.expect("record");
        let len = rec.payload.len() as u64;
        let e = access_event(rec.payload).expect("archive");
        let json = serde_json::to_string(&item.json).expect("json").len() as u64 + 1;
        let t = by_type.entry(e.type_name().to_owned()).or_default();
        t[0] += 1;
        t[1] += len;
        t[2] += record_size_on_disk(len) + 4;
        t[3] += json;
    }
    by_type
}

fn print_sizes(name: &str, by_type: &Sizes) {
    let total = by_type.values().fold([0u64; 4], |mut acc, t| {
        for (a, b) in acc.iter_mut().zip(t) {
            *a += b;
        }
        acc
    });
    let n = total[0] as f64;
    eprintln!(
        "\n{name} mix, {} events: bytes per event: archive {:.1}, record + index entry {:.1}, \
         JSONL {:.1}; on disk ÷ JSONL {:.2}\n",
        total[0],
        total[1] as f64 / n,
        total[2] as f64 / n,
        total[3] as f64 / n,
        total[2] as f64 / total[3] as f64
    );
    eprintln!("| type | share | archive | record + index | JSONL line | ÷ JSONL |");
    eprintln!("|---|---:|---:|---:|---:|---:|");
    for (t, [count, arch, rec, json]) in by_type {
        let c = *count as f64;
        eprintln!(
            "| {t} | {:.1}% | {:.0} | {:.0} | {:.0} | {:.2} |",
            c * 100.0 / n,
            *arch as f64 / c,
            *rec as f64 / c,
            *json as f64 / c,
            *rec as f64 / *json as f64
        );
    }
}

fn append(c: &mut Criterion) {
    for (mix, name) in MIXES {
        let pool = mix_items(mix, EVENTS);
        print_sizes(name, &sizes(&pool));
        let mut g = c.benchmark_group(format!("mix_append/{name}"));
        g.throughput(Throughput::Elements(1));
        g.sampling_mode(SamplingMode::Flat);
        let cases: Vec<(&str, MakeSink)> = vec![
            ("agentlog", log_sink(Durability::Os)),
            ("agentlog_session", session_sink(Durability::Os)),
            ("jsonl", jsonl_sink(JsonlMode::WritePerEvent)),
        ];
        for (label, make) in cases {
            let mut runner = Runner::new(&pool, make, None);
            g.bench_function(label, |b| b.iter_custom(|iters| runner.run(iters)));
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = append
}
criterion_main!(benches);
