//! Many machines (issue 19): shipping a session to NATS JetStream and restoring it, next to
//! copying the same session's JSONL file, in the same run on the same data; and the follow lag,
//! from an append on one host to its arrival in the session restored on another.
//!
//! The bench starts its own `nats-server` (from `PATH`, else `/usr/sbin`, `/usr/bin`,
//! `/usr/local/bin`; Debian package `nats-server`) with JetStream on 127.0.0.1, a port the
//! server picks and its files in a temporary directory, and kills it at the end. Without the
//! binary it says so and measures nothing.
//!
//! The session is the generated one (`testkit/src/gen.rs`): `AGENTLOG_SHIP_EVENTS` events
//! (default 100,000) of the mix `AGENTLOG_SHIP_MIX` (`current`, ~1 KB mean canonical line, the
//! default; or `small`, ~221 B).
//!
//! - `ship`: `Remote::ship` of the whole session to the stream (`agentlog::ship`, the library
//!   API, a window of 1024 outstanding acknowledgements); each iteration starts from an empty
//!   stream and no cursor (deleted, untimed), the connection made untimed.
//! - `restore`: `Remote::restore` of the whole session from the stream into an empty store (the
//!   session synced at the end), the connection included.
//! - `cp`: the baseline, `std::fs::copy` of the session's JSONL file (its canonical lines, as
//!   `agentlog export` writes them) and an fsync of the copy.
//! - `follow-lag`: `Remote::follow` (what `ship --follow` runs) of one session, and
//!   `Remote::restore_follow` (what `restore --follow` runs) into another store, both running
//!   all along; an appender appends one event and waits until a reader of the restored session
//!   sees it (polled every 0.2 ms): one iteration is that lag. The appender, the shipper and the
//!   restorer are threads of this process (the mechanisms are the ones of three processes:
//!   the shipper and the reader poll the logs' lengths, the restorer reads an ordered consumer).
//!
//! At the end the bench prints the same-run means, the ratios to `cp`, the lag's percentiles
//! and the load (`/proc/loadavg`): the figures the README quotes.
//!
//! `cargo bench -p agentlog-benches --bench ship`
//! `AGENTLOG_SHIP_MIX=small cargo bench -p agentlog-benches --bench ship`

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use agentlog::event::{parse_draft_line, Draft};
use agentlog::ship::{runtime, Remote, Sessions, ShipOptions, DEFAULT_STREAM};
use agentlog::store::{NewSession, Store};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};

use testkit::gen;

/// Deletes the stream (when it exists): the next ship starts from an empty stream.
fn delete_stream(url: &str) {
    let rt = runtime().expect("runtime");
    rt.block_on(async {
        let client = async_nats::connect(url).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let _ = js.delete_stream(DEFAULT_STREAM).await;
    });
}

/// Builds session `id` of `n` generated events in `store`, and writes its JSONL file (the
/// canonical lines) to `jsonl`.
fn build(store: &Store, id: &str, n: usize, mix: gen::Mix, jsonl: &Path) -> u64 {
    let s = store
        .create(NewSession::default().id(id))
        .expect("create session");
    let mut file = std::io::BufWriter::new(std::fs::File::create(jsonl).expect("jsonl"));
    let mut events = gen::SessionGen::with_mix(mix).take(n).peekable();
    while events.peek().is_some() {
        let drafts: Vec<Draft> = events
            .by_ref()
            .take(1024)
            .map(|e| {
                file.write_all(e.to_canonical_string().as_bytes())
                    .and_then(|()| file.write_all(b"\n"))
                    .expect("write jsonl");
                Draft {
                    time: Some(e.time),
                    event: e,
                    seq: None,
                }
            })
            .collect();
        s.append_drafts(drafts).expect("append");
    }
    file.flush().expect("flush jsonl");
    let len = s.len();
    s.close().expect("close");
    len
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Same-run totals per row: (time, iterations).
type Totals = RefCell<BTreeMap<&'static str, (Duration, u64)>>;

fn add(totals: &Totals, row: &'static str, d: Duration, iters: u64) {
    let mut t = totals.borrow_mut();
    let e = t.entry(row).or_default();
    e.0 += d;
    e.1 += iters;
}

fn mean(totals: &Totals, row: &str) -> Option<Duration> {
    let t = totals.borrow();
    let (d, n) = t.get(row)?;
    (*n > 0).then(|| *d / *n as u32)
}

fn bench(c: &mut Criterion) {
    let Some(bin) = testkit::nats::find_binary() else {
        eprintln!(
            "ship bench: nats-server not found in PATH (Debian package `nats-server`): \
             nothing measured"
        );
        return;
    };
    let n: usize = std::env::var("AGENTLOG_SHIP_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let (mix, mix_name) = match std::env::var("AGENTLOG_SHIP_MIX").as_deref() {
        Ok("small") => (gen::Mix::Small, "small"),
        _ => (gen::Mix::Current, "current"),
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = testkit::nats::NatsServer::start(&bin, &tmp.path().join("nats"));
    let url = server.url();
    let rt = runtime().expect("runtime");

    let store_a = Store::open(tmp.path().join("a")).expect("store a");
    let jsonl = tmp.path().join("gen.jsonl");
    let len = build(&store_a, "gen", n, mix, &jsonl);
    let jsonl_bytes = std::fs::metadata(&jsonl).expect("jsonl").len();
    eprintln!(
        "ship bench: {len} events ({mix_name} mix), {:.1} MB of JSONL, nats-server at {url}, load {}",
        jsonl_bytes as f64 / 1e6,
        load()
    );
    let totals: Totals = RefCell::default();

    let mut group = c.benchmark_group(format!("ship/{mix_name}/{len}"));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(len));

    group.bench_function("ship", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                delete_stream(&url);
                let _ = std::fs::remove_dir_all(store_a.root().join(agentlog::ship::SHIP_DIR));
                let report = rt.block_on(async {
                    let remote = Remote::connect(&url, ShipOptions::default())
                        .await
                        .expect("connect");
                    let start = Instant::now();
                    let report = remote.ship(&store_a, "gen").await.expect("ship");
                    total += start.elapsed();
                    report
                });
                assert_eq!(report.shipped, len, "every event shipped");
            }
            add(&totals, "ship", total, iters);
            total
        })
    });

    // The stream holds the whole session (the last ship).
    group.bench_function("restore", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                let dir = tmp.path().join(format!("b{i}"));
                let store_b = Store::open(&dir).expect("store b");
                let start = Instant::now();
                let report = rt.block_on(async {
                    let remote = Remote::open(&url, ShipOptions::default())
                        .await
                        .expect("open");
                    remote
                        .restore(&store_b, "gen", None)
                        .await
                        .expect("restore")
                });
                total += start.elapsed();
                assert_eq!(report.restored, len, "every event restored");
                drop(store_b);
                std::fs::remove_dir_all(&dir).expect("remove store b");
            }
            add(&totals, "restore", total, iters);
            total
        })
    });

    group.bench_function("cp", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let copy = tmp.path().join("copy.jsonl");
            for _ in 0..iters {
                let start = Instant::now();
                std::fs::copy(&jsonl, &copy).expect("copy");
                std::fs::File::open(&copy)
                    .and_then(|f| f.sync_all())
                    .expect("sync");
                total += start.elapsed();
                std::fs::remove_file(&copy).expect("remove copy");
            }
            add(&totals, "cp", total, iters);
            total
        })
    });
    group.finish();

    let lags = follow_lag(c, &tmp, &url, &totals);

    eprintln!(
        "\nship bench, same-run means ({len} events, {mix_name} mix, load {}):",
        load()
    );
    let cp = mean(&totals, "cp");
    for row in ["ship", "restore", "cp"] {
        if let Some(m) = mean(&totals, row) {
            let rate = len as f64 / m.as_secs_f64();
            let ratio = cp.map_or(f64::NAN, |c| m.as_secs_f64() / c.as_secs_f64());
            eprintln!("  {row:8} {m:>12.3?}  {rate:>12.0} events/s  {ratio:>8.1}x cp");
        }
    }
    if !lags.is_empty() {
        let mut lags = lags;
        // Which appends were the slow ones (the first follows a quiet session).
        let mut slowest: Vec<(usize, Duration)> = lags.iter().copied().enumerate().collect();
        slowest.sort_by_key(|&(_, lag)| std::cmp::Reverse(lag));
        slowest.truncate(3);
        eprintln!("  slowest appends (index from 0, lag): {slowest:.1?}");
        lags.sort();
        let pct = |p: usize| lags[(lags.len() - 1) * p / 100];
        eprintln!(
            "  follow lag over {} appends: p50 {:.1?}, p95 {:.1?}, p99 {:.1?}, max {:.1?}",
            lags.len(),
            pct(50),
            pct(95),
            pct(99),
            lags[lags.len() - 1]
        );
    }
    drop(server);
}

/// `follow-lag`: returns every lag measured (criterion's warm-up included).
fn follow_lag(
    c: &mut Criterion,
    tmp: &tempfile::TempDir,
    url: &str,
    totals: &Totals,
) -> Vec<Duration> {
    const ID: &str = "live";
    let root_a = tmp.path().join("a");
    let root_b = tmp.path().join("lag-b");
    let store_a = Store::open(&root_a).expect("store a");
    let session = store_a
        .create(NewSession::default().id(ID).title("live"))
        .expect("create live");
    // The stream exists before either side starts (`Remote::open`, the restorer's, does not
    // create it; with only this group selected nothing has shipped yet).
    runtime()
        .expect("runtime")
        .block_on(Remote::connect(url, ShipOptions::default()))
        .expect("create the stream");
    let (stop_ship, ship_stopped) = tokio::sync::oneshot::channel::<()>();
    let (stop_restore, restore_stopped) = tokio::sync::oneshot::channel::<()>();
    let shipper = {
        let (url, root) = (url.to_string(), root_a.clone());
        std::thread::spawn(move || {
            let store = Store::open(&root).expect("store a");
            runtime().expect("runtime").block_on(async {
                let remote = Remote::connect(&url, ShipOptions::default()).await?;
                let stop = async {
                    let _ = ship_stopped.await;
                };
                remote
                    .follow(&store, Sessions::Ids(vec![ID.into()]), stop, |_, _| {})
                    .await
            })
        })
    };
    let restorer = {
        let (url, root) = (url.to_string(), root_b.clone());
        std::thread::spawn(move || {
            let store = Store::open(&root).expect("store b");
            runtime().expect("runtime").block_on(async {
                let remote = Remote::open(&url, ShipOptions::default()).await?;
                let stop = async {
                    let _ = restore_stopped.await;
                };
                remote
                    .restore_follow(&store, Sessions::Ids(vec![ID.into()]), stop, |_| {})
                    .await
            })
        })
    };
    let store_b = Store::open(&root_b).expect("store b");
    // The session's metadata arrives first (the session is created there, empty).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reader = loop {
        if let Ok(r) = store_b.open_reader(ID) {
            break r;
        }
        if restorer.is_finished() {
            let r = restorer.join();
            panic!("the restorer stopped before the session reached store b: {r:?}");
        }
        if shipper.is_finished() {
            let r = shipper.join();
            panic!("the shipper stopped before the session reached store b: {r:?}");
        }
        assert!(
            Instant::now() < deadline,
            "the live session never reached store b"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let lags = RefCell::new(Vec::new());
    let mut turn = session.lifecycle().next_turn();
    let mut lines = testkit::session::turn_lines(turn).into_iter();

    let mut group = c.benchmark_group("ship/follow-lag");
    group.sample_size(20);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("append-to-restored", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let line = lines.next().unwrap_or_else(|| {
                    turn += 1;
                    lines = testkit::session::turn_lines(turn).into_iter();
                    lines.next().expect("a turn has lines")
                });
                let draft = parse_draft_line(&line).expect("draft");
                let start = Instant::now();
                let seq = session.append_draft(draft).expect("append").expect("a seq");
                while reader.refresh().expect("refresh") <= seq {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "seq {seq} never arrived"
                    );
                    std::thread::sleep(Duration::from_micros(200));
                }
                let lag = start.elapsed();
                total += lag;
                lags.borrow_mut().push(lag);
            }
            add(totals, "follow-lag", total, iters);
            total
        })
    });
    group.finish();
    let _ = stop_ship.send(());
    let _ = stop_restore.send(());
    shipper.join().expect("shipper").expect("follow");
    restorer.join().expect("restorer").expect("restore_follow");
    session.close().expect("close live");
    lags.into_inner()
}

criterion_group!(benches, bench);
criterion_main!(benches);
