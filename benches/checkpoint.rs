//! Checkpoints: opening a session for writing (resume), its turn state from a reader (`status`),
//! and its history (`derive_messages`), each starting from the checkpoint a clean
//! close wrote and, in the same run on the same session, by a full replay (the checkpoint moved
//! aside). The session is the generated one every bench measures (`testkit/src/gen.rs`, ~1 KB mean
//! events); its size is `AGENTLOG_CKPT_EVENTS` events (default 200,000).
//!
//! `cargo bench -p agentlog-benches --bench checkpoint`
//! `AGENTLOG_CKPT_EVENTS=1000000 cargo bench -p agentlog-benches --bench checkpoint`

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use agentlog::event::Draft;
use agentlog::session::{Session, SessionMeta, SessionOptions, SessionReader, CHECKPOINT_FILE};
use criterion::{criterion_group, criterion_main, Criterion};

use testkit::gen;

fn build(dir: &Path, n: usize) {
    let s =
        Session::create(dir, SessionMeta::new("s", 0), SessionOptions::default()).expect("create");
    let events = gen::events(n);
    for chunk in events.chunks(1024) {
        let drafts = chunk
            .iter()
            .map(|e| Draft {
                time: Some(e.time),
                event: e.clone(),
                seq: None,
            })
            .collect();
        s.append_drafts(drafts).expect("append");
    }
    s.close().expect("close");
}

fn bench(c: &mut Criterion) {
    let n: usize = std::env::var("AGENTLOG_CKPT_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("s");
    build(&dir, n);
    let ckpt = dir.join(CHECKPOINT_FILE);
    let aside = root.path().join("CHECKPOINT.aside");
    let mut group = c.benchmark_group(format!("checkpoint/{n}"));
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
                let (s, report) = Session::open(&dir, SessionOptions::default()).expect("open");
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
        group.bench_function(format!("derive_messages/{tag}"), |b| {
            b.iter(|| {
                let r = SessionReader::open(&dir).expect("reader");
                black_box(r.derive_messages().expect("derive").len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
