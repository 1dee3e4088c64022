//! Checkpoints: opening a session for writing (resume), its turn state from a reader (`status`),
//! its statistics (`stats`) and its history (`derive_messages`), each starting from the
//! checkpoint a clean close wrote and, in the same run on the same session, by a full replay
//! (the checkpoint moved aside). The session is the generated one every bench measures
//! (`testkit/src/gen.rs`); its size is `AGENTLOG_CKPT_EVENTS` events (default 100,000) and its mix
//! `AGENTLOG_CKPT_MIX` (`current`, ~1 KB mean events, the default; or `small`, ~221 B, issue
//! 14's harness). The session is generated and appended in chunks (memory stays flat); at
//! 1,000,000 events of the current mix it is about 1 GB on disk (the "1 GB resume" row) and
//! takes a few minutes to build on a loaded machine.
//!
//! `cargo bench -p agentlog-benches --bench checkpoint`
//! `AGENTLOG_CKPT_EVENTS=1000000 cargo bench -p agentlog-benches --bench checkpoint`
//! `AGENTLOG_CKPT_MIX=small AGENTLOG_CKPT_EVENTS=1000000 cargo bench -p agentlog-benches --bench checkpoint`

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use agentlog::event::Draft;
use agentlog::session::{Session, SessionMeta, SessionOptions, SessionReader, CHECKPOINT_FILE};
use criterion::{criterion_group, criterion_main, Criterion};

use testkit::gen;

/// Builds the session and returns the bytes the same events take as JSONL (each event's
/// canonical line and its newline): the baseline of the bytes-per-event row.
fn build(dir: &Path, n: usize, mix: gen::Mix) -> u64 {
    let s =
        Session::create(dir, SessionMeta::new("s", 0), SessionOptions::default()).expect("create");
    let mut events = gen::SessionGen::with_mix(mix).take(n).peekable();
    let mut jsonl_bytes = 0u64;
    while events.peek().is_some() {
        let drafts = events
            .by_ref()
            .take(1024)
            .map(|e| {
                jsonl_bytes += e.to_canonical_string().len() as u64 + 1;
                Draft {
                    time: Some(e.time),
                    event: e,
                    seq: None,
                }
            })
            .collect();
        s.append_drafts(drafts).expect("append");
    }
    s.close().expect("close");
    jsonl_bytes
}

fn bench(c: &mut Criterion) {
    let n: usize = std::env::var("AGENTLOG_CKPT_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let (mix, mix_name) = match std::env::var("AGENTLOG_CKPT_MIX").as_deref() {
        Ok("small") => (gen::Mix::Small, "small"),
        _ => (gen::Mix::Current, "current"),
    };
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("s");
    let jsonl_bytes = build(&dir, n, mix);
    let bytes = SessionReader::open(&dir).expect("reader").bytes_on_disk();
    eprintln!(
        "checkpoint bench: {n} events ({mix_name} mix), {:.1} MB on disk; bytes per event \
         {:.1}, JSONL {:.1}: {:.2}x JSONL",
        bytes as f64 / 1e6,
        bytes as f64 / n as f64,
        jsonl_bytes as f64 / n as f64,
        bytes as f64 / jsonl_bytes as f64
    );
    let ckpt = dir.join(CHECKPOINT_FILE);
    let aside = root.path().join("CHECKPOINT.aside");
    let mut group = c.benchmark_group(format!("checkpoint/{mix_name}/{n}"));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for with in [true, false] {
        // The checkpoint in place, or moved aside (every call is a full replay).
        if with {
            if aside.exists() {
                std::fs::rename(&aside, &ckpt).expect("restore");
            }
        } else {
            std::fs::rename(&ckpt, &aside).expect("move aside");
        }
        let tag = if with { "checkpoint" } else { "full-replay" };
        group.bench_function(format!("open-for-writing/{tag}"), |b| {
            b.iter(|| {
                let s = Session::open(&dir, SessionOptions::default()).expect("open");
                let report = s.open_report().clone();
                black_box(report.state);
                // Dropped, not closed: a close would write a checkpoint.
                drop(s);
            })
        });
        group.bench_function(format!("status/{tag}"), |b| {
            b.iter(|| {
                let r = SessionReader::open(&dir).expect("reader");
                black_box(r.lifecycle().expect("lifecycle").state())
            })
        });
        group.bench_function(format!("stats/{tag}"), |b| {
            b.iter(|| {
                let r = SessionReader::open(&dir).expect("reader");
                black_box(r.stats().expect("stats").events)
            })
        });
        group.bench_function(format!("derive_messages/{tag}"), |b| {
            b.iter(|| {
                let r = SessionReader::open(&dir).expect("reader");
                black_box(r.messages().expect("derive").len())
            })
        });
        // The history read through once (every message built): what a caller that renders
        // the whole history pays on top of derive_messages.
        group.bench_function(format!("derive_messages+read-all/{tag}"), |b| {
            b.iter(|| {
                let r = SessionReader::open(&dir).expect("reader");
                let m = r.messages().expect("derive");
                black_box(m.iter().map(|m| m.content.len()).sum::<usize>())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
