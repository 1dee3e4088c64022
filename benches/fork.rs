//! Forking a large session: a ~1 GB session (sealed 64 MiB segments) forked near its end, so
//! every sealed segment is shared and the last one copied up to the fork point. The target
//! (issue 7): well under a second, whatever the parent's size.
//!
//! `cargo bench -p agentlog-benches --bench fork` (set `AGENTLOG_FORK_MB` for another size)

use std::time::{Duration, Instant};

use agentlog::event::{encode_event, parse_event_line};
use agentlog::log::{Log, Options};
use agentlog::session::{SessionMeta, PAYLOAD_SCHEMA};
use agentlog::store::{ForkPoint, Store};
use criterion::{criterion_group, criterion_main, Criterion};
use rkyv::util::AlignedVec;

fn bench(c: &mut Criterion) {
    let mb: u64 = std::env::var("AGENTLOG_FORK_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path()).expect("store");
    let session = dir.path().join("sessions/big");
    std::fs::create_dir_all(&session).expect("session dir");
    SessionMeta::new("big", 0)
        .save(&session)
        .expect("session.json");
    let log = Log::open(&session, Options::default().payload_schema(PAYLOAD_SCHEMA)).expect("log");
    let text = "x".repeat(2000);
    let mut buf = AlignedVec::new();
    let mut seq = 0u64;
    let mut bytes = 0u64;
    while bytes < mb << 20 {
        let line =
            format!(r#"{{"type":"error","seq":{seq},"time":1,"data":{{"message":"{text}"}}}}"#);
        let event = parse_event_line(&line).expect("event");
        buf.clear();
        let start = encode_event(&event, &mut buf).expect("encode");
        log.append(&buf[start..]).expect("append");
        bytes += (buf.len() - start) as u64 + 16;
        seq += 1;
    }
    log.close().expect("close");
    eprintln!("parent: {seq} events, {} MiB of records", bytes >> 20);
    let mut group = c.benchmark_group("fork");
    group.sample_size(10);
    let mut n = 0u64;
    group.bench_function(format!("{mb}MiB_session_near_its_end"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let id = format!("f{n}");
                let start = Instant::now();
                let report = store
                    .fork("big", ForkPoint::At(seq - n % 1000 - 1), Some(id.clone()))
                    .expect("fork");
                total += start.elapsed();
                assert!(report.copy.linked_segments > 0 || mb < 64);
                std::fs::remove_dir_all(dir.path().join("sessions").join(&id)).expect("remove");
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
