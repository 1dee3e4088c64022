//! Search throughput: `Store::search` over a store of generated sessions (a few hundred MB of
//! segments), next to `grep -c` of the same needle over the same sessions exported as JSONL
//! (one file per session, written once; `grep` spawned per iteration), in the same group.
//!
//! - `agentlog_text`: a `--text` needle that rarely matches (case-insensitive, over message
//!   text, tool arguments and output); throughput = the sessions' segment bytes.
//! - `agentlog_type`: a `--type tool/result` filter, no text: the cost of the scan itself
//!   (checksums, archive validation, the filter); throughput = segment bytes.
//! - `grep_c` / `grep_ci`: `grep -c NEEDLE` and `grep -ci NEEDLE` over the JSONL files (in the
//!   environment's locale); throughput = JSONL bytes.
//!
//! The counts differ (grep counts lines holding the text anywhere, streamed chunks and JSON
//! escapes included; the search counts events whose text holds it); the comparison is of the
//! bytes each goes through per second.
//!
//! `cargo bench -p agentlog-benches --bench search` (`AGENTLOG_SEARCH_MB`, default 256: the JSONL size generated;
//! `AGENTLOG_BENCH_DIR`, default /tmp: where).

use std::hint::black_box;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agentlog::store::{ImportOptions, Query, Store};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use testkit::gen;

/// Rare in the generated text (three words in a row out of 28 words); ASCII.
const NEEDLE: &str = "cargo cargo cargo";

/// Turns per generated session (about 30 MB of JSONL).
const TURNS: u64 = 2_500;

struct Corpus {
    _dir: tempfile::TempDir,
    store: Store,
    jsonl: Vec<PathBuf>,
    jsonl_bytes: u64,
    segment_bytes: u64,
}

fn corpus() -> Corpus {
    let target: u64 = std::env::var("AGENTLOG_SEARCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
        << 20;
    let dir = tempfile::Builder::new()
        .prefix("agentlog-bench-search")
        .tempdir_in(std::env::var_os("AGENTLOG_BENCH_DIR").unwrap_or_else(|| "/tmp".into()))
        .expect("temp dir");
    let store = Store::open(dir.path().join("store")).expect("store");
    let mut jsonl = Vec::new();
    let (mut jsonl_bytes, mut segment_bytes) = (0, 0);
    let mut n = 0u64;
    while jsonl_bytes < target {
        // Each session differs: the generator's text comes from its seed (the session number).
        let mut text = String::new();
        for line in session_lines(n) {
            text.push_str(&line);
            text.push('\n');
        }
        let id = format!("s{n:04}");
        store
            .import(
                text.as_bytes(),
                ImportOptions {
                    id: Some(id.clone()),
                    title: None,
                },
                |_| {},
            )
            .expect("import");
        // The export is the JSONL grep reads (the same bytes as imported: canonical).
        let path = dir.path().join(format!("{id}.jsonl"));
        let reader = store.open_reader(&id).expect("reader");
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
        reader
            .export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
            .expect("export");
        drop(out);
        jsonl_bytes += std::fs::metadata(&path).expect("size").len();
        segment_bytes += reader
            .log()
            .segment_files()
            .iter()
            .map(|(_, len)| len)
            .sum::<u64>();
        jsonl.push(path);
        n += 1;
    }
    Corpus {
        _dir: dir,
        store,
        jsonl,
        jsonl_bytes,
        segment_bytes,
    }
}

/// The lines of generated session `n`: the generator's session with its text reshuffled by a
/// per-session seed, so that sessions differ.
fn session_lines(n: u64) -> Vec<String> {
    let mut events = gen::generated_events(TURNS);
    let mut rng = gen::Rng(0x2545_F491 ^ (n + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for e in &mut events {
        if let agentlog::event::EventData::ToolResult(r) = &mut e.data {
            if let agentlog::event::ToolContent::Text(t) = &mut r.message.content {
                let words = t.split(' ').count();
                *t = rng.text(words);
            }
        }
    }
    events.iter().map(|e| e.to_canonical_string()).collect()
}

fn search(c: &mut Criterion) {
    let corpus = corpus();
    let mut matches = 0;
    corpus
        .store
        .search(&Query::new().text(NEEDLE), |_, _| {
            matches += 1;
            ControlFlow::Continue(())
        })
        .expect("search");
    eprintln!(
        "search corpus: {} sessions, {} bytes of segments, {} bytes of JSONL; {matches} events \
         match {NEEDLE:?}",
        corpus.jsonl.len(),
        corpus.segment_bytes,
        corpus.jsonl_bytes
    );

    let mut group = c.benchmark_group("search");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    group.warm_up_time(Duration::from_secs(2));

    group.throughput(Throughput::Bytes(corpus.segment_bytes));
    let text = Query::new().text(NEEDLE);
    group.bench_function("agentlog_text", |b| {
        b.iter(|| {
            let stats = corpus
                .store
                .search(&text, |_, e| {
                    black_box(e);
                    ControlFlow::Continue(())
                })
                .expect("search");
            black_box(stats.matches)
        })
    });
    let types = Query::new().event_type("tool/result");
    group.bench_function("agentlog_type", |b| {
        b.iter(|| {
            let stats = corpus
                .store
                .search(&types, |_, e| {
                    black_box(e);
                    ControlFlow::Continue(())
                })
                .expect("search");
            black_box(stats.matches)
        })
    });

    group.throughput(Throughput::Bytes(corpus.jsonl_bytes));
    for (name, flags) in [("grep_c", "-c"), ("grep_ci", "-ci")] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let out = Command::new("grep")
                    .arg(flags)
                    .arg("--")
                    .arg(NEEDLE)
                    .args(&corpus.jsonl)
                    .output()
                    .expect("grep");
                // grep exits 1 for a file without a match: not an error here.
                assert!(out.status.code().is_some_and(|c| c <= 1), "grep failed");
                black_box(out.stdout.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, search);
criterion_main!(benches);
