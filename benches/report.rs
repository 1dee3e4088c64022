//! Measurements that are not timings, and the table of ratios:
//!
//! 1. the machine and its load;
//! 2. disk: bytes per event of agentlog, JSONL and SQLite holding the same generated sessions,
//!    where agentlog's bytes go, and what zstd would make of each file;
//! 3. memory: peak heap (a counting global allocator) and RSS (`/proc/self/status`) while
//!    replaying a ~1 GB session on each side, and opening it;
//! 4. the ratios agentlog ÷ peer of the criterion results found in `target/criterion` (run the
//!    `compare`, `scaling` and `group_commit` benches first), with their absolute figures.
//!
//! `cargo bench -p agentlog-benches --bench report` (`AGENTLOG_REPORT_GB=0.25` for a smaller memory session,
//! `AGENTLOG_REPORT_ONLY_RATIOS=1` for the ratio table alone).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentlog::event::access_event;
use agentlog::log::{Log, LogReader, Options};

use peers::*;
use testkit::peers;

// ---------------------------------------------------------------------------------------------
// Heap accounting.

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let now = CURRENT.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

// ---------------------------------------------------------------------------------------------
// Small helpers.

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A `kB` field of `/proc/self/status`, in bytes.
fn status_field(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

#[derive(Clone, Copy, Debug, Default)]
struct Mem {
    rss: u64,
    hwm: u64,
    anon: u64,
    file: u64,
}

fn mem() -> Mem {
    let s = read("/proc/self/status");
    Mem {
        rss: status_field(&s, "VmRSS"),
        hwm: status_field(&s, "VmHWM"),
        anon: status_field(&s, "RssAnon"),
        file: status_field(&s, "RssFile"),
    }
}

/// Resets the peak RSS (VmHWM) to the current RSS.
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

fn kib(b: u64) -> String {
    format!("{:.1} KiB", b as f64 / 1024.0)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Compressed size of `path` with `zstd -3` (the command line), if zstd is installed.
fn zstd_size(path: &Path) -> Option<u64> {
    let out = std::process::Command::new("zstd")
        .args(["-3", "-q", "-c", "-T1"])
        .arg(path)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout.len() as u64)
}

// ---------------------------------------------------------------------------------------------
// 1. The machine.

fn machine() {
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let meminfo = read("/proc/meminfo");
    let dir = std::env::var("AGENTLOG_BENCH_DIR").unwrap_or_else(|_| "/tmp".into());
    let fs = read("/proc/mounts")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && dir.starts_with(f[1]))
                .then(|| (f[1].len(), format!("{} on {}", f[2], f[1])))
        })
        .max()
        .map(|(_, s)| s)
        .unwrap_or_default();
    println!("## Machine\n");
    println!(
        "- {} cores ({}), {} of memory",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu,
        mib(status_field(&meminfo, "MemTotal"))
    );
    println!("- kernel {}", read("/proc/sys/kernel/osrelease").trim());
    println!("- scratch directory {dir}: {fs}");
    println!("- load average (1, 5, 15 min): {}", load());
    println!();
}

fn load() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// 2. Disk.

struct DiskRow {
    events: u64,
    seg: u64,
    idx: u64,
    jsonl: u64,
    sqlite: u64,
}

fn disk(corpus: &Corpus) -> DiskRow {
    let n = corpus.events;
    let seg = dir_bytes(&corpus.log, &["seg"]);
    let idx = dir_bytes(&corpus.log, &["idx"]);
    let jsonl = corpus.jsonl_bytes;
    let sqlite = std::fs::metadata(&corpus.sqlite).expect("stat").len();
    DiskRow {
        events: n,
        seg,
        idx,
        jsonl,
        sqlite,
    }
}

fn disk_section(corpus: &Corpus) {
    let r = disk(corpus);
    let n = r.events as f64;
    println!(
        "## Disk: the first {} events of the generated session\n",
        r.events
    );
    println!("| store | bytes | bytes per event | ÷ JSONL |");
    println!("|---|---:|---:|---:|");
    for (name, b) in [
        ("agentlog (segments + indexes)", r.seg + r.idx),
        ("JSONL", r.jsonl),
        ("SQLite (after a checkpoint)", r.sqlite),
    ] {
        println!(
            "| {name} | {} | {:.0} | {:.2} |",
            b,
            b as f64 / n,
            b as f64 / r.jsonl as f64
        );
    }
    println!();

    // Where agentlog's bytes go.
    let reader = LogReader::open(&corpus.log).expect("open");
    let segments = reader.segment_files().len() as u64;
    let mut payload = 0u64;
    let mut padding = 0u64;
    let mut by_type: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    let mut json_total = 0u64;
    for rec in reader.iter() {
        let rec = rec.expect("record");
        let len = rec.payload.len() as u64;
        payload += len;
        padding += len.next_multiple_of(16) - len;
        let e = access_event(rec.payload).expect("archive");
        let json = e.to_canonical_string().len() as u64 + 1;
        json_total += json;
        let t = by_type.entry(e.type_name().to_owned()).or_default();
        t.0 += 1;
        t.1 += len;
        t.2 += json;
    }
    let headers = 16 * r.events;
    let seg_headers = 64 * segments;
    let slack = r.seg - payload - padding - headers - seg_headers;
    println!(
        "Where agentlog's {} bytes per event go:\n",
        (r.seg + r.idx) / r.events
    );
    println!("| part | bytes per event |");
    println!("|---|---:|");
    for (part, b) in [
        ("rkyv archive of the event", payload),
        ("record header (length, seq, crc, flags)", headers),
        ("padding to 16 bytes", padding),
        ("index (4 B per record, grown in 64 KiB steps)", r.idx),
        ("segment headers and unused tail", seg_headers + slack),
    ] {
        println!("| {part} | {:.1} |", b as f64 / n);
    }
    println!(
        "| (the canonical JSON line, for comparison) | {:.1} |",
        json_total as f64 / n
    );
    println!();
    println!("By event type (mean bytes):\n");
    println!("| type | share of events | rkyv archive | canonical JSON line | archive ÷ JSON |");
    println!("|---|---:|---:|---:|---:|");
    for (t, (count, arch, json)) in &by_type {
        println!(
            "| {t} | {:.1}% | {:.0} | {:.0} | {:.2} |",
            *count as f64 * 100.0 / n,
            *arch as f64 / *count as f64,
            *json as f64 / *count as f64,
            *arch as f64 / *json as f64
        );
    }
    println!();

    // What compression of sealed segments would give (zstd -3 of the whole files).
    let segs: Vec<PathBuf> = reader.segment_files().into_iter().map(|(p, _)| p).collect();
    let seg_z: Option<u64> = segs.iter().map(|p| zstd_size(p)).sum();
    if let (Some(seg_z), Some(jsonl_z), Some(sqlite_z)) =
        (seg_z, zstd_size(&corpus.jsonl), zstd_size(&corpus.sqlite))
    {
        println!("The same files through `zstd -3` (what compressing sealed segments could give; the generator's vocabulary is small, so real transcripts compress less):\n");
        println!("| store | compressed bytes per event | ratio |");
        println!("|---|---:|---:|");
        for (name, raw, z) in [
            ("agentlog segments", r.seg, seg_z),
            ("JSONL", r.jsonl, jsonl_z),
            ("SQLite", r.sqlite, sqlite_z),
        ] {
            println!(
                "| {name} | {:.0} | {:.2} |",
                z as f64 / n,
                raw as f64 / z as f64
            );
        }
        println!();
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Memory and open on a ~1 GB session.

struct MemRow {
    what: &'static str,
    took: Duration,
    heap_peak: u64,
    before: Mem,
    during: Mem,
    after: Mem,
}

/// Runs `f` with the peak heap and peak RSS reset; `f` returns the memory figures read while it
/// still holds what it reads (the map, for agentlog).
fn measure(what: &'static str, f: impl FnOnce() -> Mem) -> MemRow {
    reset_hwm();
    let base = CURRENT.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let before = mem();
    let start = Instant::now();
    let during = f();
    let took = start.elapsed();
    let after = mem();
    MemRow {
        what,
        took,
        heap_peak: (PEAK.load(Ordering::SeqCst) - base) as u64,
        before,
        during,
        after,
    }
}

fn memory_section(corpus: &Corpus) {
    let bytes = dir_bytes(&corpus.log, &["seg", "idx"]);
    println!(
        "## Memory: replaying a {} session ({} events; JSONL {}, SQLite {})\n",
        mib(bytes),
        corpus.events,
        mib(corpus.jsonl_bytes),
        mib(std::fs::metadata(&corpus.sqlite).expect("stat").len())
    );
    let rows = [
        measure("agentlog (LogReader::iter + access_event)", || {
            let reader = LogReader::open(&corpus.log).expect("open");
            assert_eq!(replay_agentlog(&reader), corpus.touch);
            mem()
        }),
        measure("JSONL (BufReader + serde_json per line)", || {
            assert_eq!(replay_jsonl(&corpus.jsonl), corpus.touch);
            mem()
        }),
        measure("SQLite (SELECT … ORDER BY seq + serde_json)", || {
            let conn = sqlite_reader(&corpus.sqlite);
            assert_eq!(replay_sqlite(&conn), corpus.touch);
            mem()
        }),
    ];
    println!("| replay | time | peak heap | peak RSS (VmHWM) | RSS at the end (VmRSS) | of which anonymous | of which file pages | RSS before: anonymous, file |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {}, {} |",
            r.what,
            ms(r.took),
            kib(r.heap_peak),
            mib(r.during.hwm.max(r.after.hwm)),
            mib(r.during.rss),
            mib(r.during.anon),
            mib(r.during.file),
            mib(r.before.anon),
            mib(r.before.file)
        );
    }
    println!();
    println!("Peak heap is what the replay allocated above what the process held before it (a counting global allocator). RSS counts the mapped file pages a process has touched (RssFile): agentlog reads the session through its map, so its RSS grows by the file's size while the heap stays flat; those pages belong to the page cache, are shared with every other reader and are dropped first under memory pressure. \"At the end\" is read while the reader is still open.\n");

    // Opening, ready to append: median of 5 (warm page cache).
    let time = |f: &dyn Fn()| -> Duration {
        median(
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    f();
                    start.elapsed()
                })
                .collect(),
        )
    };
    let log = &corpus.log;
    let writer = median(
        (0..5)
            .map(|_| {
                let start = Instant::now();
                let l = Log::open(log, Options::default()).expect("open");
                let report = l.recovery_report().clone();
                let took = start.elapsed();
                assert!(report.clean);
                l.close().expect("close");
                took
            })
            .collect(),
    );
    let reader = time(&|| {
        std::hint::black_box(LogReader::open(log).expect("open").len());
    });
    let jsonl = time(&|| {
        std::hint::black_box(open_jsonl(&corpus.jsonl));
    });
    let sqlite = time(&|| {
        std::hint::black_box(open_sqlite(&corpus.sqlite));
    });
    println!("Opening it after a clean close (median of 5, warm page cache):\n");
    println!("| open | time |");
    println!("|---|---:|");
    println!(
        "| agentlog `Log::open` (ready to append) | {} |",
        ms(writer)
    );
    println!("| agentlog `LogReader::open` | {} |", ms(reader));
    println!("| JSONL: open and count the lines | {} |", ms(jsonl));
    println!("| SQLite: open and `SELECT max(seq)` | {} |", ms(sqlite));
    println!();
}

// ---------------------------------------------------------------------------------------------
// 4. Ratios from the criterion results.

/// Median time per element, in ns, of every benchmark found, by full id.
fn criterion_results() -> BTreeMap<String, f64> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let mut out = BTreeMap::new();
    let mut stack = vec![target.join("criterion")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "report" && n != "base") {
                stack.push(p);
            }
        }
        if dir.file_name().is_some_and(|n| n == "new") {
            let (Ok(b), Ok(est)) = (
                std::fs::read_to_string(dir.join("benchmark.json")),
                std::fs::read_to_string(dir.join("estimates.json")),
            ) else {
                continue;
            };
            let b: serde_json::Value = serde_json::from_str(&b).expect("benchmark.json");
            let est: serde_json::Value = serde_json::from_str(&est).expect("estimates.json");
            let per = b["throughput"]["Elements"].as_f64().unwrap_or(1.0);
            let t = est["median"]["point_estimate"].as_f64().unwrap_or(f64::NAN);
            out.insert(b["full_id"].as_str().unwrap_or("").to_owned(), t / per);
        }
    }
    out
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A row of the ratio table: what, agentlog's benchmark id, and each peer's (label, id).
type Row = (String, String, Vec<(&'static str, String)>);

fn ratio_section() {
    let r = criterion_results();
    if r.is_empty() {
        println!("(no criterion results in target/criterion: run `cargo bench -p agentlog-benches --bench compare --bench scaling --bench group_commit` first)\n");
        return;
    }
    // (measurement, agentlog id, [(peer label, peer id)])
    let mut rows: Vec<Row> = Vec::new();
    let mut add =
        |what: String, a: String, peers: Vec<(&'static str, String)>| rows.push((what, a, peers));
    let eq = |g: &str, a: &str| -> Row {
        (
            String::new(),
            format!("{g}/{a}"),
            vec![
                ("JSONL", format!("{g}/jsonl")),
                ("SQLite", format!("{g}/sqlite")),
            ],
        )
    };
    let (_, a, p) = eq("append", "agentlog");
    add(
        "append, equal durability (engine: encode + `Log::append`)".into(),
        a,
        p,
    );
    let (_, a, p) = eq("append", "agentlog_session");
    add(
        "append, equal durability (session layer: `Session::append_draft`)".into(),
        a,
        p,
    );
    add(
        "append, each one's best case (batch of 1000 / BufWriter / transaction per 1000)".into(),
        "append/best-case/agentlog_batch_1000".into(),
        vec![
            ("JSONL", "append/best-case/jsonl_bufwriter".into()),
            ("SQLite", "append/best-case/sqlite_txn_1000".into()),
        ],
    );
    let (_, a, p) = eq("append_sync", "agentlog");
    add(
        "append, `sync` (fdatasync per event), one thread".into(),
        a,
        p,
    );
    let (_, a, p) = eq("replay", "agentlog");
    add("full replay, 100,000 events".into(), a, p);
    add(
        "read one event by seq, 100,000 events".into(),
        "get/agentlog".into(),
        vec![
            (
                "JSONL (line index)",
                "get/best-case/jsonl_line_index".into(),
            ),
            ("SQLite", "get/sqlite".into()),
        ],
    );
    add(
        "open after a clean close, 100,000 events (writer)".into(),
        "open/agentlog/100000".into(),
        vec![
            ("JSONL", "open/jsonl/100000".into()),
            ("SQLite", "open/sqlite/100000".into()),
        ],
    );
    for n in ["1000", "10000", "100000", "1000000"] {
        for (g, what) in [
            ("scaling_append", "append"),
            ("scaling_replay", "replay"),
            ("scaling_get", "get"),
            ("scaling_open", "open"),
        ] {
            let jsonl = if g == "scaling_get" {
                format!("{g}/best-case/jsonl_line_index/{n}")
            } else {
                format!("{g}/jsonl/{n}")
            };
            add(
                format!("{what} at {n} events"),
                format!("{g}/agentlog/{n}"),
                vec![("JSONL", jsonl), ("SQLite", format!("{g}/sqlite/{n}"))],
            );
        }
    }
    for t in [1, 2, 4, 8] {
        for (a, what) in [
            ("agentlog_one_log", "to one log"),
            ("agentlog_n_logs", "to one log each"),
        ] {
            add(
                format!("`sync` appends, {t} thread(s) {what} (peers: a file / database each)"),
                format!("group_commit/{a}/{t}"),
                vec![
                    ("JSONL", format!("group_commit/jsonl_n_files/{t}")),
                    ("SQLite", format!("group_commit/sqlite_n_dbs/{t}")),
                ],
            );
        }
    }

    let mut table = String::new();
    let _ = writeln!(
        table,
        "| measurement | agentlog ÷ JSONL | agentlog ÷ SQLite | agentlog | JSONL | SQLite |"
    );
    let _ = writeln!(table, "|---|---:|---:|---:|---:|---:|");
    for (what, a, peers) in &rows {
        let Some(&ta) = r.get(a) else { continue };
        let mut line = format!("| {what} |");
        let mut abs = format!(" {} |", fmt_ns(ta));
        for (_, p) in peers {
            match r.get(p) {
                Some(&tp) => {
                    let _ = write!(line, " {:.2}× |", tp / ta);
                    let _ = write!(abs, " {} |", fmt_ns(tp));
                }
                None => {
                    line.push_str(" – |");
                    abs.push_str(" – |");
                }
            }
        }
        let _ = writeln!(table, "{line}{abs}");
    }
    println!("## Ratios (criterion medians)\n");
    println!("agentlog ÷ peer is the peer's time divided by agentlog's (agentlog's throughput over the peer's): **higher is better for agentlog**, above 1 agentlog is faster. Absolute figures are the median time per event (per operation for get and open).\n");
    print!("{table}");
    println!();
    println!("<details><summary>Every criterion result (median per element)</summary>\n");
    println!("| benchmark | median |");
    println!("|---|---:|");
    for (id, t) in &r {
        println!("| {id} | {} |", fmt_ns(*t));
    }
    println!("\n</details>\n");
}

fn main() {
    machine();
    if std::env::var_os("AGENTLOG_REPORT_ONLY_RATIOS").is_none() {
        let small = build_corpus(100_000);
        disk_section(&small);
        let per_event = dir_bytes(&small.log, &["seg", "idx"]) as f64 / small.events as f64;
        drop(small);
        let gb: f64 = std::env::var("AGENTLOG_REPORT_GB")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1.0);
        let n = ((gb * (1u64 << 30) as f64) / per_event) as u64;
        let start = Instant::now();
        let big = build_corpus(n);
        eprintln!("built the {n}-event session in {:?}", start.elapsed());
        memory_section(&big);
        disk_section(&big);
        drop(big);
    }
    println!("load average after the measurements: {}\n", load());
    ratio_section();
}
