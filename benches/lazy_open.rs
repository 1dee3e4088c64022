//! Open a log and read its last event, next to a JSONL tail, on the same events in the same run
//! (issue 14: "open + read the last event ≤ JSONL tail").
//!
//! The log is written with 1 MiB segments, so that 26 and 260 segments hold a corpus that is
//! quick to build (the cost measured is per segment, not per byte). Rows of the `lazy_open`
//! group, per segment count:
//!
//! - `agentlog_last_event`: `LogReader::open` + `get(len - 1)` + `access_event` and the touch of
//!   `testkit/src/peers.rs` (the reader answers the last record from the copy the clean close
//!   left in `LASTSEG`, and reads and maps nothing of the segment; a last record too large for
//!   the copy is read with `pread`);
//! - `agentlog_every_segment_mapped`: the same, after one `get` in every segment, so that every
//!   segment is mapped as `LogReader::open` did before readers mapped lazily: the same-run
//!   baseline of the change;
//! - `jsonl_tail`: the JSONL file opened, its last 64 KiB read (more while no line starts in it),
//!   the last line parsed with serde_json and touched.
//!
//! The `cold/` rows evict the files of each side from the page cache (`posix_fadvise(DONTNEED)`,
//! after an fsync at build time) before each timed run: the data is read from the disk again
//! (the directory entries and inodes stay cached).
//!
//! `cargo bench -p agentlog-benches --bench lazy_open`

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentlog::event::encode_event;
use agentlog::log::{Log, LogReader, Options};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rkyv::util::AlignedVec;

use peers::{parse_touch, scratch, touch_archived, Item};
use testkit::gen;
use testkit::peers;

const SEGMENT: u64 = 1 << 20;

struct Corpus {
    _dir: tempfile::TempDir,
    log: PathBuf,
    jsonl: PathBuf,
    last_touch: usize,
}

/// A log of at least `segments` segments and the same events as JSONL.
fn build(segments: usize) -> Corpus {
    let dir = scratch();
    let log_dir = dir.path().join("log");
    let jsonl = dir.path().join("events.jsonl");
    let opts = Options::default()
        .segment_size(SEGMENT)
        .preallocate(SEGMENT);
    let log = Log::open(&log_dir, opts).expect("open log");
    let mut out = std::io::BufWriter::new(File::create(&jsonl).expect("create jsonl"));
    let mut gen = gen::SessionGen::new();
    let mut buf = AlignedVec::new();
    let mut last_touch = 0;
    loop {
        let chunk: Vec<Item> = gen.by_ref().take(1000).map(Item::new).collect();
        for item in &chunk {
            buf.clear();
            let start = encode_event(&item.event, &mut buf).expect("encode");
            log.append(&buf[start..]).expect("append");
            serde_json::to_writer(&mut out, &item.json).expect("serialize");
            out.write_all(b"\n").expect("write");
            last_touch = peers::touch_json(&item.json);
        }
        if LogReader::open(&log_dir)
            .expect("open")
            .segment_files()
            .len()
            > segments
        {
            break;
        }
    }
    out.flush().expect("flush");
    log.close().expect("close");
    drop(out);
    File::open(&jsonl).expect("open").sync_all().expect("sync");
    for f in files(&log_dir) {
        File::open(&f).expect("open").sync_all().expect("sync");
    }
    Corpus {
        _dir: dir,
        log: log_dir,
        jsonl,
        last_touch,
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect()
}

/// Drops the pages of `files` from the page cache.
fn evict(files: &[PathBuf]) {
    for f in files {
        let file = File::open(f).expect("open");
        // SAFETY: a valid descriptor; fadvise only advises the kernel.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise");
    }
}

fn last_event(log: &Path) -> usize {
    let r = LogReader::open(log).expect("open");
    let rec = r.get(r.len() - 1).expect("get");
    touch_archived(rec.payload)
}

/// The base seqs of the segments of a log (from the file names).
fn bases(log: &Path) -> Vec<u64> {
    let mut out: Vec<u64> = files(log)
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .map(|p| testkit::base_seq(p).expect("base seq"))
        .collect();
    out.sort();
    out
}

/// `last_event`, with the first record of every segment read first: every segment mapped.
fn last_event_every_segment_mapped(log: &Path, bases: &[u64]) -> usize {
    let r = LogReader::open(log).expect("open");
    for &base in bases {
        black_box(r.get(base).expect("get"));
    }
    debug_assert_eq!(r.mapped_segments(), bases.len());
    let rec = r.get(r.len() - 1).expect("get");
    touch_archived(rec.payload)
}

/// The last line of a JSONL file, read from its end, parsed and touched.
fn jsonl_tail(path: &Path) -> usize {
    let f = File::open(path).expect("open");
    let len = f.metadata().expect("stat").len();
    let mut want = 64u64 << 10;
    loop {
        let from = len.saturating_sub(want);
        let mut buf = vec![0u8; (len - from) as usize];
        f.read_exact_at(&mut buf, from).expect("read");
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        match body.iter().rposition(|&b| b == b'\n') {
            Some(nl) => return parse_touch(&body[nl + 1..]),
            None if from == 0 => return parse_touch(body),
            None => want *= 2,
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("lazy_open");
    for segments in [26usize, 260] {
        let corpus = build(segments);
        // The same last event on every side.
        assert_eq!(last_event(&corpus.log), corpus.last_touch);
        let bases = bases(&corpus.log);
        assert_eq!(
            last_event_every_segment_mapped(&corpus.log, &bases),
            corpus.last_touch
        );
        assert_eq!(jsonl_tail(&corpus.jsonl), corpus.last_touch);
        let r = LogReader::open(&corpus.log).expect("open");
        let n = r.segment_files().len();
        black_box(r.get(r.len() - 1).expect("get"));
        assert_eq!(
            r.mapped_segments(),
            0,
            "the last record is read with pread, nothing mapped"
        );
        drop(r);
        let p = n.to_string();
        let log = corpus.log.clone();
        let jsonl = corpus.jsonl.clone();
        g.bench_function(BenchmarkId::new("agentlog_last_event", &p), |b| {
            b.iter(|| black_box(last_event(&log)))
        });
        g.bench_function(BenchmarkId::new("agentlog_every_segment_mapped", &p), |b| {
            b.iter(|| black_box(last_event_every_segment_mapped(&log, &bases)))
        });
        g.bench_function(BenchmarkId::new("jsonl_tail", &p), |b| {
            b.iter(|| black_box(jsonl_tail(&jsonl)))
        });
        let log_files = files(&log);
        let cold = |f: &dyn Fn() -> usize, evicted: &[PathBuf], iters: u64| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                evict(evicted);
                let t = Instant::now();
                black_box(f());
                total += t.elapsed();
            }
            total
        };
        g.bench_function(BenchmarkId::new("cold/agentlog_last_event", &p), |b| {
            b.iter_custom(|iters| cold(&|| last_event(&log), &log_files, iters))
        });
        g.bench_function(
            BenchmarkId::new("cold/agentlog_every_segment_mapped", &p),
            |b| {
                b.iter_custom(|iters| {
                    cold(
                        &|| last_event_every_segment_mapped(&log, &bases),
                        &log_files,
                        iters,
                    )
                })
            },
        );
        let jsonl_files = [jsonl.clone()];
        g.bench_function(BenchmarkId::new("cold/jsonl_tail", &p), |b| {
            b.iter_custom(|iters| cold(&|| jsonl_tail(&jsonl), &jsonl_files, iters))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
