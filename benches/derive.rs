//! The projection's cost: "apply one more event + messages()" on a projector that has applied
//! 1,000 and 1,000,000 events (it must be about the same), and a full derive of 1,000,000
//! events. The events are the generated session every bench measures (`testkit/src/gen.rs`): turns
//! and steps, user messages, streamed chunks, assistant messages with tool uses, tool calls and
//! their results (resolved by callId, by sourceEventSeqs and by name).
//!
//! `cargo bench -p agentlog-benches --bench derive`

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentlog::event::{Block, Event, EventData, Map, Opt, SurfaceOp, UserMessage};
use agentlog::projection::{self, Projector};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use testkit::gen;

/// A user message appended at `seq`: the event applied in "apply one more event".
fn user_message(seq: u64) -> Event {
    Event {
        seq,
        time: 1_755_000_000_000 + seq as i64 * 7,
        data: EventData::UserMessage(UserMessage {
            content: vec![Block::text("one more question about the parser")],
            envelope: Opt::Absent,
            extra: Map::new(),
        }),
        surface_op: Some(SurfaceOp::Append),
        source_event_seqs: None,
        extra: Map::new(),
    }
}

/// How many events are applied to one copy of the base projector before it is copied again, so
/// the projector measured stays near its nominal size (the copy is not timed).
const CHUNK: u64 = 2_000;

/// Times "apply one event + take `messages()` (and drop it)" for each event of `pool` in turn,
/// on a fresh copy of `base` every [`CHUNK`] events (the copy is not timed).
fn time_appends(base: &Projector, pool: &[Event], iters: u64) -> Duration {
    let mut timed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let k = left.min(pool.len() as u64);
        let mut projector = base.clone();
        let start = Instant::now();
        for event in &pool[..k as usize] {
            black_box(projector.apply(event).is_ok());
            black_box(projector.messages());
        }
        timed += start.elapsed();
        left -= k;
    }
    timed
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("derive");
    for n in [1_000u64, 1_000_000] {
        let mut events: Vec<Event> = gen::SessionGen::new().take((n + CHUNK) as usize).collect();
        let next_events = events.split_off(n as usize);
        let mut base = Projector::new();
        for event in &events {
            base.apply(event).expect("generated events are valid");
        }
        drop(events);
        eprintln!(
            "projector over {n} events: {} messages, {} unanswered calls",
            base.len(),
            base.unanswered_calls().count()
        );
        let user_messages: Vec<Event> = (n..n + CHUNK).map(user_message).collect();
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("append_user_message+messages", n), |b| {
            b.iter_custom(|iters| time_appends(&base, &user_messages, iters));
        });
        group.bench_function(BenchmarkId::new("apply_next_event+messages", n), |b| {
            b.iter_custom(|iters| time_appends(&base, &next_events, iters));
        });
        group.bench_function(BenchmarkId::new("messages", n), |b| {
            b.iter(|| black_box(base.messages()));
        });
    }

    let events: Vec<Event> = gen::SessionGen::new().take(1_000_000).collect();
    group.throughput(Throughput::Elements(events.len() as u64));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("full_derive", events.len()), |b| {
        b.iter(|| projection::messages(black_box(&events)).map(|m| m.len()));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
