//! The cost of redaction at append (docs/events.md §9), on the small-event mix of
//! `testkit/src/gen.rs` (issue 14's: streamed chunks, markers, short tool calls and results).
//!
//! `redact_append/<rules>`: the same events appended through `Session::append_draft` (default
//! durability, `Durability::Os`) to a session without redaction (`off`, the baseline), with the
//! `credentials` rules, and with `credentials` and `pii`; throughput in events. The ratio
//! `credentials ÷ off` is the figure issue 20 asks for (≥ 50%).
//! `redact_event/<rules>`: the redaction pass alone (`Redactor::redact_event`), per event.
//!
//! `cargo bench -p agentlog-benches --bench redact`

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentlog::event::{Draft, Event};
use agentlog::log::Options;
use agentlog::redact::{Mode, Redactor};
use agentlog::session::{Session, SessionMeta, SessionOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use testkit::gen;
use testkit::peers;

/// Events appended per timed run.
const EVENTS: usize = 20_000;

fn redactor(rules: &[&str]) -> Option<Arc<Redactor>> {
    if rules.is_empty() {
        return None;
    }
    let names: Vec<String> = rules.iter().map(|s| s.to_string()).collect();
    Some(Arc::new(
        Redactor::new(&names, &[], Mode::Replace, None).expect("rules"),
    ))
}

const CASES: [(&str, &[&str]); 3] = [
    ("off", &[]),
    ("credentials", &["credentials"]),
    ("credentials+pii", &["credentials", "pii"]),
];

fn append(c: &mut Criterion) {
    let events: Vec<Event> = gen::mix_events(gen::Mix::Small, EVENTS);
    let mut g = c.benchmark_group("redact_append");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    for (name, rules) in CASES {
        let redact = redactor(rules);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = peers::scratch();
                    let options = SessionOptions {
                        log: Options::default(),
                        redact: redact.clone(),
                        ..SessionOptions::default()
                    };
                    let session = Session::create(
                        dir.path().join("s"),
                        SessionMeta::new("bench", 0),
                        options,
                    )
                    .expect("create");
                    let drafts: Vec<Draft> = events
                        .iter()
                        .map(|e| Draft {
                            event: e.clone(),
                            seq: None,
                            time: Some(e.time),
                        })
                        .collect();
                    let start = Instant::now();
                    for d in drafts {
                        session.append_draft(d).expect("append");
                    }
                    total += start.elapsed();
                    session.close().expect("close");
                }
                total
            });
        });
    }
    g.finish();
}

fn pass(c: &mut Criterion) {
    let events: Vec<Event> = gen::mix_events(gen::Mix::Small, EVENTS);
    let mut g = c.benchmark_group("redact_event");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.sample_size(10);
    for (name, rules) in &CASES[1..] {
        let Some(r) = redactor(rules) else { continue };
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut copy = events.clone();
                    let start = Instant::now();
                    for e in &mut copy {
                        std::hint::black_box(r.redact_event(e));
                    }
                    total += start.elapsed();
                }
                total
            });
        });
    }
    g.finish();
}

criterion_group!(benches, append, pass);
criterion_main!(benches);
