//! Parse + validate JSONL lines into typed `Event`s, against `serde_json::from_str::<Value>` on
//! the same lines: the example sessions, and a larger generated session (many lines, a realistic
//! mix of types, some big tool results).
//!
//! `cargo bench -p agentlog-benches --bench jsonl_parse`

use std::hint::black_box;
use std::path::PathBuf;

use agentlog::event::parse_event_line;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use gen::generated_lines;
use testkit::gen;

/// The event lines of the example sessions (the one header line left out).
fn example_lines() -> Vec<String> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/sessions"));
    let mut lines = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("example file");
        lines.extend(
            text.lines()
                .filter(|l| !l.starts_with(r#"{"type":"session""#))
                .map(str::to_owned),
        );
    }
    lines
}

fn bench(c: &mut Criterion) {
    let sets = [
        ("examples", example_lines()),
        ("generated", generated_lines(600)),
    ];
    let mut group = c.benchmark_group("jsonl_parse");
    for (name, lines) in &sets {
        for line in lines {
            // every line must be valid for the comparison to mean anything
            if let Err(e) = parse_event_line(line) {
                panic!("{name}: {e}\n{line}");
            }
        }
        let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
        eprintln!("{name}: {} lines, {} bytes", lines.len(), bytes);
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(format!("agentlog_event/{name}"), |b| {
            b.iter(|| {
                for line in lines {
                    black_box(parse_event_line(black_box(line)).ok());
                }
            })
        });
        group.bench_function(format!("serde_json_value/{name}"), |b| {
            b.iter(|| {
                for line in lines {
                    black_box(serde_json::from_str::<serde_json::Value>(black_box(line)).ok());
                }
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
