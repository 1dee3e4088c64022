//! The storage engine next to a JSONL baseline (serde_json, one `write` per event), on the same
//! events, in the same run:
//!
//! - `append_150B` / `append_20KB`: encode + append one event, in each durability mode; the
//!   baseline serializes the same event with serde_json and writes it with one `write` (plus an
//!   fdatasync for the `sync` line).
//! - `replay`: every event of a generated session read, checked (checksums, archive validation) and
//!   touched (type and content); the baseline parses each line with `serde_json::from_str`.
//! - `get`: random reads by seq; the baseline reads the line at a known offset (an in-memory line
//!   index: the best case for JSONL) and parses it.
//! - `open`: opening after a clean close and after a crash; the baseline opens the file and counts
//!   its lines to learn the next seq.
//!
//! `cargo bench -p agentlog-benches --bench log`

use std::fs::File;
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentlog::event::archived::{ArchivedBlock, ArchivedEventData};
use agentlog::event::{access_event, encode_event, Event};
use agentlog::log::{Durability, Log, LogReader, Options};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use rkyv::util::AlignedVec;

use testkit::gen;

/// Logs and files are started afresh once they hold this much, outside the timed part.
const CAP: u64 = 256 << 20;

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("agentlog-bench")
        .tempdir_in(std::env::var_os("AGENTLOG_BENCH_DIR").unwrap_or_else(|| "/tmp".into()))
        .expect("temp dir")
}

/// Something events are appended to, restartable when it grows too big.
trait Sink {
    fn append(&mut self, event: &Event, json: &serde_json::Value) -> u64;
    fn reset(&mut self);
}

struct LogSink {
    dir: tempfile::TempDir,
    n: u32,
    log: Option<Log>,
    durability: Durability,
    buf: AlignedVec,
    written: u64,
}

impl LogSink {
    fn new(durability: Durability) -> Self {
        let mut s = LogSink {
            dir: scratch(),
            n: 0,
            log: None,
            durability,
            buf: AlignedVec::new(),
            written: 0,
        };
        s.reset();
        s
    }
}

impl Sink for LogSink {
    fn append(&mut self, event: &Event, _json: &serde_json::Value) -> u64 {
        self.buf.clear();
        let start = encode_event(event, &mut self.buf).expect("encode");
        let log = self.log.as_ref().expect("open log");
        log.append(&self.buf[start..]).expect("append");
        self.written += self.buf.len() as u64;
        self.written
    }

    fn reset(&mut self) {
        if let Some(log) = self.log.take() {
            let dir = log.dir().to_path_buf();
            log.close().expect("close");
            std::fs::remove_dir_all(dir).expect("remove");
        }
        self.n += 1;
        let opts = Options::default().durability(self.durability);
        let log = Log::open(self.dir.path().join(self.n.to_string()), opts).expect("open");
        self.log = Some(log);
        self.written = 0;
    }
}

struct JsonlSink {
    dir: tempfile::TempDir,
    file: File,
    sync: bool,
    line: Vec<u8>,
    written: u64,
}

impl JsonlSink {
    fn new(sync: bool) -> Self {
        let dir = scratch();
        let file = File::create(dir.path().join("log.jsonl")).expect("create");
        JsonlSink {
            dir,
            file,
            sync,
            line: Vec::new(),
            written: 0,
        }
    }
}

impl Sink for JsonlSink {
    fn append(&mut self, _event: &Event, json: &serde_json::Value) -> u64 {
        self.line.clear();
        serde_json::to_writer(&mut self.line, json).expect("serialize");
        self.line.push(b'\n');
        self.file.write_all(&self.line).expect("write");
        if self.sync {
            self.file.sync_data().expect("fdatasync");
        }
        self.written += self.line.len() as u64;
        self.written
    }

    fn reset(&mut self) {
        self.file = File::create(self.dir.path().join("log.jsonl")).expect("create");
        self.written = 0;
    }
}

fn to_json(event: &Event) -> serde_json::Value {
    serde_json::from_str(&event.to_canonical_string()).expect("canonical JSON")
}

fn bench_append(c: &mut Criterion, name: &str, bytes: usize) {
    let mut rng = gen::Rng(42);
    let events: Vec<Event> = (0..64)
        .map(|i| gen::sized_event(i, bytes, &mut rng))
        .collect();
    let jsons: Vec<serde_json::Value> = events.iter().map(to_json).collect();
    let line_len = events[0].to_canonical_string().len();
    eprintln!("{name}: events of {line_len} bytes as JSON");
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group.sampling_mode(SamplingMode::Flat);
    type MakeSink = Box<dyn Fn() -> Box<dyn Sink>>;
    let cases: Vec<(&str, MakeSink)> = vec![
        (
            "agentlog/os",
            Box::new(|| Box::new(LogSink::new(Durability::Os))),
        ),
        (
            "agentlog/periodic-100ms",
            Box::new(|| {
                Box::new(LogSink::new(Durability::Periodic(Duration::from_millis(
                    100,
                ))))
            }),
        ),
        (
            "agentlog/sync",
            Box::new(|| Box::new(LogSink::new(Durability::Sync))),
        ),
        ("jsonl/os", Box::new(|| Box::new(JsonlSink::new(false)))),
        ("jsonl/sync", Box::new(|| Box::new(JsonlSink::new(true)))),
    ];
    for (label, make) in cases {
        let mut sink = make();
        let mut i = 0usize;
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut start = Instant::now();
                for _ in 0..iters {
                    let k = i % events.len();
                    i += 1;
                    if sink.append(&events[k], &jsons[k]) > CAP {
                        total += start.elapsed();
                        sink.reset();
                        start = Instant::now();
                    }
                }
                total + start.elapsed()
            })
        });
    }
    group.finish();
}

fn append(c: &mut Criterion) {
    bench_append(c, "append_150B", 150);
    bench_append(c, "append_20KB", 20_000);
}

/// A session written both ways: a log and a JSONL file of the same events.
struct Corpus {
    _dir: tempfile::TempDir,
    log: PathBuf,
    jsonl: PathBuf,
    events: u64,
    bytes: u64,
}

fn corpus(turns: u64) -> Corpus {
    let dir = scratch();
    let log_dir = dir.path().join("log");
    let jsonl = dir.path().join("log.jsonl");
    let events = gen::generated_events(turns);
    let log = Log::open(&log_dir, Options::default()).expect("open");
    let mut out = std::io::BufWriter::new(File::create(&jsonl).expect("create"));
    let mut buf = AlignedVec::new();
    let mut bytes = 0;
    for e in &events {
        buf.clear();
        let start = encode_event(e, &mut buf).expect("encode");
        log.append(&buf[start..]).expect("append");
        let line = e.to_canonical_string();
        bytes += line.len() as u64 + 1;
        out.write_all(line.as_bytes()).expect("write");
        out.write_all(b"\n").expect("write");
    }
    out.flush().expect("flush");
    log.close().expect("close");
    Corpus {
        _dir: dir,
        log: log_dir,
        jsonl,
        events: events.len() as u64,
        bytes,
    }
}

/// Touches an archived event's type and content the way a consumer would.
fn touch_archived(payload: &[u8]) -> usize {
    let e = access_event(payload).expect("valid archive");
    let mut n = e.type_name().len();
    match &e.data {
        ArchivedEventData::AssistantMessage(m) => {
            for b in m.message.content.iter() {
                if let ArchivedBlock::Text { text, .. } = b {
                    n += text.len();
                }
            }
        }
        ArchivedEventData::ToolResult(r) => n += r.message.tool_name.len(),
        ArchivedEventData::AssistantChunk(_) => n += 1,
        _ => {}
    }
    n
}

/// The same for a serde_json value.
fn touch_json(v: &serde_json::Value) -> usize {
    let ty = v["type"].as_str().unwrap_or("");
    let mut n = ty.len();
    match ty {
        "assistant/message" => {
            if let Some(blocks) = v["data"]["message"]["content"].as_array() {
                for b in blocks {
                    if let Some(t) = b["text"].as_str() {
                        n += t.len();
                    }
                }
            }
        }
        "tool/result" => {
            n += v["data"]["message"]["toolName"]
                .as_str()
                .map_or(0, str::len)
        }
        "assistant/chunk" => n += 1,
        _ => {}
    }
    n
}

fn replay_and_get(c: &mut Criterion) {
    let corpus = corpus(3_000);
    eprintln!(
        "replay corpus: {} events, {} bytes of JSONL",
        corpus.events, corpus.bytes
    );
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.throughput(Throughput::Elements(corpus.events));
    group.bench_function("agentlog", |b| {
        let reader = LogReader::open(&corpus.log).expect("open");
        b.iter(|| {
            let mut n = 0;
            for rec in reader.iter() {
                n += touch_archived(rec.expect("record").payload);
            }
            black_box(n)
        })
    });
    group.bench_function("jsonl_serde_json", |b| {
        b.iter(|| {
            let mut n = 0;
            let f = BufReader::new(File::open(&corpus.jsonl).expect("open"));
            for line in f.lines() {
                let v: serde_json::Value =
                    serde_json::from_str(&line.expect("line")).expect("json");
                n += touch_json(&v);
            }
            black_box(n)
        })
    });
    group.finish();

    // Random reads: the same pseudo-random seqs for both.
    let mut rng = gen::Rng(7);
    let seqs: Vec<u64> = (0..4096).map(|_| rng.below(corpus.events)).collect();
    let mut offsets = Vec::new();
    let mut at = 0u64;
    for line in BufReader::new(File::open(&corpus.jsonl).expect("open")).split(b'\n') {
        let len = line.expect("line").len() as u64;
        offsets.push((at, len));
        at += len + 1;
    }
    let mut group = c.benchmark_group("get");
    group.throughput(Throughput::Elements(1));
    group.bench_function("agentlog", |b| {
        let reader = LogReader::open(&corpus.log).expect("open");
        let mut i = 0;
        b.iter(|| {
            let seq = seqs[i % seqs.len()];
            i += 1;
            black_box(touch_archived(reader.get(seq).expect("get").payload))
        })
    });
    group.bench_function("jsonl_line_index", |b| {
        let f = File::open(&corpus.jsonl).expect("open");
        let mut buf = Vec::new();
        let mut i = 0;
        b.iter(|| {
            let seq = seqs[i % seqs.len()];
            i += 1;
            let (at, len) = offsets[seq as usize];
            buf.resize(len as usize, 0);
            f.read_exact_at(&mut buf, at).expect("read");
            let v: serde_json::Value = serde_json::from_slice(&buf).expect("json");
            black_box(touch_json(&v))
        })
    });
    group.finish();

    let mut group = c.benchmark_group("open");
    group.sample_size(10);
    group.bench_with_input(
        BenchmarkId::new("agentlog_writer", "clean"),
        &corpus.log,
        |b, p| {
            b.iter(|| {
                let log = Log::open(p, Options::default()).expect("open");
                let report = log.recovery_report().clone();
                assert!(report.clean);
                black_box(log.len());
                log.close().expect("close");
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("agentlog_reader", "clean"),
        &corpus.log,
        |b, p| b.iter(|| black_box(LogReader::open(p).expect("open").len())),
    );
    group.bench_with_input(
        BenchmarkId::new("agentlog_writer", "after_crash"),
        &corpus.log,
        |b, p| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let log = Log::open(p, Options::default()).expect("open");
                    log.abandon();
                    let start = Instant::now();
                    let log = Log::open(p, Options::default()).expect("open");
                    let report = log.recovery_report().clone();
                    total += start.elapsed();
                    assert!(!report.clean);
                    black_box(log.len());
                    log.close().expect("close");
                }
                total
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("jsonl_count_lines", "clean"),
        &corpus.jsonl,
        |b, p| {
            b.iter(|| {
                let f = BufReader::new(File::open(p).expect("open"));
                black_box(f.split(b'\n').count())
            })
        },
    );
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = append, replay_and_get
}
criterion_main!(benches);
