//! agentlog and its two peers on the same events: JSONL written with serde_json (what most agent
//! CLIs write) and SQLite with a row per event. Writers ("sinks"), prebuilt corpora, and the
//! readers' "touch" of each event, which does the same work on every side.
//!
//! What each side stores, for every event:
//! - agentlog: the event's rkyv archive (`encode_event`) appended with `Log::append` (the engine),
//!   or the event given to `Session::append_draft` (the session layer: lifecycle checks and the
//!   incremental projection on top of the engine);
//! - JSONL: `serde_json::to_writer` of the event as a `serde_json::Value` (built once from its
//!   canonical JSON), and a newline;
//! - SQLite: a row of `events(seq INTEGER PRIMARY KEY, type TEXT NOT NULL, time INTEGER NOT NULL,
//!   data TEXT NOT NULL)`, `data` the same JSON text as the JSONL line (serialized the same way, on
//!   every append), through a prepared statement.
#![allow(dead_code)]

use std::fs::File;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentlog::event::archived::{
    ArchivedBlock, ArchivedChunk, ArchivedEventData, ArchivedToolContent,
};
use agentlog::event::{access_event, encode_event, Draft, Event};
use agentlog::log::{Durability, Log, LogReader, Options};
use agentlog::session::{Session, SessionMeta, SessionOptions};
use rkyv::util::AlignedVec;
use rusqlite::{params, Connection};

/// A scratch directory under `$AGENTLOG_BENCH_DIR` (default `/tmp`), removed when dropped.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("agentlog-bench")
        .tempdir_in(std::env::var_os("AGENTLOG_BENCH_DIR").unwrap_or_else(|| "/tmp".into()))
        .expect("temp dir")
}

/// One event as each side is handed it: the typed event (agentlog) and its JSON value (JSONL,
/// SQLite).
pub struct Item {
    pub event: Event,
    pub json: serde_json::Value,
}

impl Item {
    pub fn new(event: Event) -> Item {
        let json = serde_json::from_str(&event.to_canonical_string()).expect("canonical JSON");
        Item { event, json }
    }
}

/// The first `n` events of the generated session, ready for every side.
pub fn items(n: usize) -> Vec<Item> {
    mix_items(crate::gen::Mix::Current, n)
}

/// The first `n` events of the generated session of `mix`, ready for every side.
pub fn mix_items(mix: crate::gen::Mix, n: usize) -> Vec<Item> {
    super::gen::SessionGen::with_mix(mix)
        .take(n)
        .map(Item::new)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Touching an event: the type name's length plus the length of every text it carries (user and
// assistant text blocks, a streamed text delta, a tool's output). The same sum on every side, which
// the benches check before they time anything.

/// Touches an archived event (agentlog).
pub fn touch_archived(payload: &[u8]) -> usize {
    let e = access_event(payload).expect("valid archive");
    let mut n = e.type_name().len();
    let texts = |blocks: &rkyv::vec::ArchivedVec<ArchivedBlock>| -> usize {
        blocks
            .iter()
            .map(|b| match b {
                ArchivedBlock::Text { text, .. } => text.len(),
                _ => 0,
            })
            .sum()
    };
    match &e.data {
        ArchivedEventData::UserMessage(m) => n += texts(&m.content),
        ArchivedEventData::AssistantMessage(m) => n += texts(&m.message.content),
        ArchivedEventData::AssistantChunk(c) => {
            if let ArchivedChunk::TextDelta { text, .. } = &c.chunk {
                n += text.len();
            }
        }
        ArchivedEventData::ToolResult(r) => match &r.message.content {
            ArchivedToolContent::Text(t) => n += t.len(),
            ArchivedToolContent::Blocks(b) => n += texts(b),
        },
        _ => {}
    }
    n
}

/// Touches an event parsed by serde_json (JSONL, SQLite).
pub fn touch_json(v: &serde_json::Value) -> usize {
    let ty = v["type"].as_str().unwrap_or("");
    let texts = |blocks: &serde_json::Value| -> usize {
        blocks.as_array().map_or(0, |a| {
            a.iter()
                .filter(|b| b["type"] == "text")
                .map(|b| b["text"].as_str().map_or(0, str::len))
                .sum()
        })
    };
    let d = &v["data"];
    ty.len()
        + match ty {
            "user/message" => texts(&d["content"]),
            "assistant/message" => texts(&d["message"]["content"]),
            "assistant/chunk" if d["chunk"]["type"] == "text-delta" => {
                d["chunk"]["text"].as_str().map_or(0, str::len)
            }
            "tool/result" => match &d["message"]["content"] {
                serde_json::Value::String(s) => s.len(),
                blocks => texts(blocks),
            },
            _ => 0,
        }
}

/// Parses one JSON text and touches it.
pub fn parse_touch(text: &[u8]) -> usize {
    let v: serde_json::Value = serde_json::from_slice(text).expect("json");
    touch_json(&v)
}

// ---------------------------------------------------------------------------------------------
// Writers.

/// Something events are appended to. `append` returns once the event is as durable as the sink
/// promises; `append_many` is the sink's batched best case (the default appends one by one).
pub trait Sink {
    /// Work done before the timed appends of `items` (not timed).
    fn prepare(&mut self, _items: &[Item]) {}
    fn append(&mut self, item: &Item);
    fn append_many(&mut self, items: &[Item]) {
        for item in items {
            self.append(item);
        }
    }
    /// Makes what was appended durable to the OS (flushes a buffer), e.g. before a reset.
    fn flush(&mut self) {}
}

/// The agentlog engine: `encode_event` + `Log::append` (or `append_batch` for `append_many`).
pub struct LogSink {
    pub log: Log,
    buf: AlignedVec,
    batch: AlignedVec,
    spans: Vec<std::ops::Range<usize>>,
}

impl LogSink {
    pub fn create(dir: &Path, durability: Durability) -> LogSink {
        let log = Log::open(dir, Options::default().durability(durability)).expect("open log");
        LogSink {
            log,
            buf: AlignedVec::new(),
            batch: AlignedVec::new(),
            spans: Vec::new(),
        }
    }
}

impl Sink for LogSink {
    fn append(&mut self, item: &Item) {
        self.buf.clear();
        let start = encode_event(&item.event, &mut self.buf).expect("encode");
        self.log.append(&self.buf[start..]).expect("append");
    }

    fn append_many(&mut self, items: &[Item]) {
        self.batch.clear();
        self.spans.clear();
        for item in items {
            let start = encode_event(&item.event, &mut self.batch).expect("encode");
            self.spans.push(start..self.batch.len());
        }
        let payloads: Vec<&[u8]> = self.spans.iter().map(|r| &self.batch[r.clone()]).collect();
        self.log.append_batch(&payloads).expect("append batch");
    }
}

/// The agentlog session layer: `Session::append_draft` (lifecycle checks, projection, encode,
/// append). The events must be the generated session from its start, in order. The drafts are
/// built by [`Sink::prepare`], outside the timed part (a caller builds its event; the JSONL side
/// gets its value ready-made too).
pub struct SessionSink {
    pub session: Session,
    drafts: std::collections::VecDeque<Draft>,
}

impl SessionSink {
    pub fn create(dir: &Path, durability: Durability) -> SessionSink {
        let options = SessionOptions {
            log: Options::default().durability(durability),
            ..SessionOptions::default()
        };
        let meta = SessionMeta::new("bench", 0);
        let session = Session::create(dir, meta, options).expect("create session");
        SessionSink {
            session,
            drafts: Default::default(),
        }
    }
}

impl Sink for SessionSink {
    fn prepare(&mut self, items: &[Item]) {
        self.drafts.extend(items.iter().map(|item| Draft {
            event: item.event.clone(),
            seq: None,
            time: Some(item.event.time),
        }));
    }

    fn append(&mut self, _item: &Item) {
        let draft = self.drafts.pop_front().expect("a prepared draft");
        self.session.append_draft(draft).expect("session append");
    }
}

/// How a JSONL file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonlMode {
    /// One `write()` per event: in the page cache when `append` returns.
    WritePerEvent,
    /// `write()` then `fdatasync` per event.
    Sync,
    /// Through a 64 KiB `BufWriter`: not durable per event (the best case).
    Buffered,
}

pub struct JsonlSink {
    file: BufWriter<File>,
    mode: JsonlMode,
    line: Vec<u8>,
}

impl JsonlSink {
    pub fn create(path: &Path, mode: JsonlMode) -> JsonlSink {
        let file = File::create(path).expect("create jsonl");
        let cap = if mode == JsonlMode::Buffered {
            64 << 10
        } else {
            0
        };
        JsonlSink {
            file: BufWriter::with_capacity(cap, file),
            mode,
            line: Vec::new(),
        }
    }
}

impl Sink for JsonlSink {
    fn append(&mut self, item: &Item) {
        match self.mode {
            JsonlMode::Buffered => {
                serde_json::to_writer(&mut self.file, &item.json).expect("serialize");
                self.file.write_all(b"\n").expect("write");
            }
            JsonlMode::WritePerEvent | JsonlMode::Sync => {
                self.line.clear();
                serde_json::to_writer(&mut self.line, &item.json).expect("serialize");
                self.line.push(b'\n');
                let f = self.file.get_mut();
                f.write_all(&self.line).expect("write");
                if self.mode == JsonlMode::Sync {
                    f.sync_data().expect("fdatasync");
                }
            }
        }
    }

    fn flush(&mut self) {
        self.file.flush().expect("flush");
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        let _ = self.file.flush();
    }
}

/// How SQLite is written (always WAL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqliteMode {
    /// `synchronous=OFF`, one transaction per event: in the page cache at commit.
    TxnPerEvent,
    /// `synchronous=FULL`, one transaction per event: on stable storage at commit.
    Full,
    /// `synchronous=OFF`, one transaction per 1000 events (the best case).
    Batched,
}

pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, \
    type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL)";
pub const INSERT: &str = "INSERT INTO events(seq, type, time, data) VALUES (?1, ?2, ?3, ?4)";

pub fn sqlite_open(path: &Path, synchronous: &str) -> Connection {
    let conn = Connection::open(path).expect("open sqlite");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("WAL");
    conn.pragma_update(None, "synchronous", synchronous)
        .expect("synchronous");
    conn.execute_batch(SCHEMA).expect("schema");
    conn
}

pub struct SqliteSink {
    pub conn: Connection,
    mode: SqliteMode,
    next_seq: i64,
    in_txn: usize,
    data: Vec<u8>,
}

impl SqliteSink {
    pub fn create(path: &Path, mode: SqliteMode) -> SqliteSink {
        let sync = if mode == SqliteMode::Full {
            "FULL"
        } else {
            "OFF"
        };
        SqliteSink {
            conn: sqlite_open(path, sync),
            mode,
            next_seq: 0,
            in_txn: 0,
            data: Vec::new(),
        }
    }

    fn insert(&mut self, item: &Item) {
        self.data.clear();
        serde_json::to_writer(&mut self.data, &item.json).expect("serialize");
        let data = std::str::from_utf8(&self.data).expect("utf-8");
        let mut stmt = self.conn.prepare_cached(INSERT).expect("prepare");
        stmt.execute(params![
            self.next_seq,
            item.event.type_name(),
            item.event.time,
            data
        ])
        .expect("insert");
        self.next_seq += 1;
    }
}

impl Sink for SqliteSink {
    fn append(&mut self, item: &Item) {
        match self.mode {
            // autocommit: each INSERT is its own transaction
            SqliteMode::TxnPerEvent | SqliteMode::Full => self.insert(item),
            SqliteMode::Batched => {
                if self.in_txn == 0 {
                    self.conn.execute_batch("BEGIN").expect("begin");
                }
                self.insert(item);
                self.in_txn += 1;
                if self.in_txn == 1000 {
                    self.conn.execute_batch("COMMIT").expect("commit");
                    self.in_txn = 0;
                }
            }
        }
    }

    fn flush(&mut self) {
        if self.in_txn > 0 {
            self.conn.execute_batch("COMMIT").expect("commit");
            self.in_txn = 0;
        }
    }
}

impl Drop for SqliteSink {
    fn drop(&mut self) {
        self.flush();
    }
}

// ---------------------------------------------------------------------------------------------
// A corpus: the same events in all three stores, written with each side's fastest path.

pub struct Corpus {
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    pub jsonl: PathBuf,
    pub sqlite: PathBuf,
    pub events: u64,
    /// The touch sum over all events (the same on every side).
    pub touch: usize,
    /// Bytes of the JSONL file.
    pub jsonl_bytes: u64,
}

/// Writes the first `n` generated events into a fresh log, JSONL file and SQLite database
/// (generating them chunk by chunk, so a large corpus never sits in memory whole).
pub fn build_corpus(n: u64) -> Corpus {
    let dir = scratch();
    let log = dir.path().join("log");
    let jsonl = dir.path().join("events.jsonl");
    let sqlite = dir.path().join("events.db");
    let mut touch = 0;
    {
        let mut a = LogSink::create(&log, Durability::Os);
        let mut j = JsonlSink::create(&jsonl, JsonlMode::Buffered);
        let mut s = SqliteSink::create(&sqlite, SqliteMode::Batched);
        let mut gen = super::gen::SessionGen::new();
        let mut left = n;
        while left > 0 {
            let k = left.min(10_000);
            let chunk: Vec<Item> = gen.by_ref().take(k as usize).map(Item::new).collect();
            touch += chunk.iter().map(|i| touch_json(&i.json)).sum::<usize>();
            a.append_many(&chunk);
            for item in &chunk {
                j.append(item);
                s.append(item);
            }
            left -= k;
        }
        j.flush();
        s.flush();
        s.conn
            .pragma_update(None, "wal_checkpoint", "TRUNCATE")
            .expect("checkpoint");
        a.log.close().expect("close");
    }
    let jsonl_bytes = std::fs::metadata(&jsonl).expect("stat").len();
    let corpus = Corpus {
        dir,
        log,
        jsonl,
        sqlite,
        events: n,
        touch,
        jsonl_bytes,
    };
    // Every side must see the same events.
    assert_eq!(
        replay_agentlog(&LogReader::open(&corpus.log).expect("open")),
        touch
    );
    assert_eq!(replay_jsonl(&corpus.jsonl), touch);
    assert_eq!(replay_sqlite(&sqlite_reader(&corpus.sqlite)), touch);
    corpus
}

// ---------------------------------------------------------------------------------------------
// Readers.

/// Every record read (checksums), its archive validated, its content touched.
pub fn replay_agentlog(reader: &LogReader) -> usize {
    let mut n = 0;
    for rec in reader.iter() {
        n += touch_archived(rec.expect("record").payload);
    }
    n
}

/// Every line parsed with serde_json and touched (a reused line buffer: JSONL's best case).
pub fn replay_jsonl(path: &Path) -> usize {
    let mut f = BufReader::with_capacity(256 << 10, File::open(path).expect("open"));
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        if f.read_until(b'\n', &mut line).expect("read") == 0 {
            return n;
        }
        n += parse_touch(&line);
    }
}

pub fn sqlite_reader(path: &Path) -> Connection {
    Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open sqlite")
}

/// Every row read in seq order, its `data` parsed with serde_json and touched.
pub fn replay_sqlite(conn: &Connection) -> usize {
    let mut stmt = conn
        .prepare_cached("SELECT data FROM events ORDER BY seq")
        .expect("prepare");
    let mut rows = stmt.query([]).expect("query");
    let mut n = 0;
    while let Some(row) = rows.next().expect("row") {
        n += parse_touch(row.get_ref(0).expect("data").as_bytes().expect("text"));
    }
    n
}

/// One event by seq from SQLite: `SELECT data WHERE seq = ?`, parsed and touched.
pub fn get_sqlite(conn: &Connection, seq: u64) -> usize {
    let mut stmt = conn
        .prepare_cached("SELECT data FROM events WHERE seq = ?1")
        .expect("prepare");
    stmt.query_row([seq as i64], |row| {
        Ok(parse_touch(row.get_ref(0)?.as_bytes()?))
    })
    .expect("row")
}

/// JSONL's best case for reads by seq: an in-memory index of line offsets (built by a full pass).
pub struct JsonlIndex {
    file: File,
    lines: Vec<(u64, u32)>,
    buf: Vec<u8>,
}

impl JsonlIndex {
    pub fn build(path: &Path) -> JsonlIndex {
        let mut lines = Vec::new();
        let mut at = 0u64;
        let mut f = BufReader::new(File::open(path).expect("open"));
        let mut line = Vec::new();
        loop {
            line.clear();
            let len = f.read_until(b'\n', &mut line).expect("read") as u64;
            if len == 0 {
                break;
            }
            lines.push((at, len as u32));
            at += len;
        }
        JsonlIndex {
            file: File::open(path).expect("open"),
            lines,
            buf: Vec::new(),
        }
    }

    pub fn get(&mut self, seq: u64) -> usize {
        let (at, len) = self.lines[seq as usize];
        self.buf.resize(len as usize, 0);
        self.file.read_exact_at(&mut self.buf, at).expect("read");
        parse_touch(&self.buf)
    }
}

/// JSONL's open: the file opened and its lines counted (the next seq), 256 KiB reads.
pub fn open_jsonl(path: &Path) -> u64 {
    let mut f = File::open(path).expect("open");
    let mut buf = vec![0u8; 256 << 10];
    let mut lines = 0u64;
    loop {
        let n = f.read(&mut buf).expect("read");
        if n == 0 {
            return lines;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

/// SQLite's open: a connection and `SELECT max(seq)` (the next seq).
pub fn open_sqlite(path: &Path) -> u64 {
    let conn = Connection::open(path).expect("open sqlite");
    let max: i64 = conn
        .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
        .expect("max");
    max as u64 + 1
}

/// The bytes of the files under `dir` whose name ends with one of `exts`.
pub fn dir_bytes(dir: &Path, exts: &[&str]) -> u64 {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| exts.iter().any(|x| e == *x)))
        .map(|p| std::fs::metadata(p).expect("stat").len())
        .sum()
}

/// Opening the corpus, ready to append (agentlog_writer, jsonl, sqlite) or read.
pub fn bench_open(c: &mut criterion::Criterion, group: &str, id: &str, corpus: &Corpus) {
    let mut g = c.benchmark_group(group);
    g.sample_size(10);
    let log: PathBuf = corpus.log.clone();
    g.bench_function(criterion::BenchmarkId::new("agentlog", id), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let log = Log::open(&log, Options::default()).expect("open");
                let report = log.recovery_report().clone();
                total += start.elapsed();
                assert!(report.clean);
                black_box(log.len());
                log.close().expect("close");
            }
            total
        })
    });
    g.bench_function(criterion::BenchmarkId::new("agentlog_reader", id), |b| {
        b.iter(|| black_box(LogReader::open(&log).expect("open").len()))
    });
    g.bench_function(criterion::BenchmarkId::new("jsonl", id), |b| {
        b.iter(|| black_box(open_jsonl(&corpus.jsonl)))
    });
    g.bench_function(criterion::BenchmarkId::new("sqlite", id), |b| {
        b.iter(|| black_box(open_sqlite(&corpus.sqlite)))
    });
    g.finish();
}

// ---------------------------------------------------------------------------------------------
// Timed appends of a pool of events, cycling through it.

pub type MakeSink = Box<dyn Fn(&std::path::Path) -> Box<dyn Sink>>;

/// Appends the pool's events in order, forever, into a store made by `make`; a new store (untimed)
/// each time the pool starts over.
pub struct Runner<'a> {
    pool: &'a [Item],
    make: MakeSink,
    batch: Option<usize>,
    dir: tempfile::TempDir,
    n: u32,
    sink: Option<Box<dyn Sink>>,
    pos: usize,
}

impl<'a> Runner<'a> {
    pub fn new(pool: &'a [Item], make: MakeSink, batch: Option<usize>) -> Self {
        Runner {
            pool,
            make,
            batch,
            dir: scratch(),
            n: 0,
            sink: None,
            pos: 0,
        }
    }

    fn reset(&mut self) {
        if let Some(mut sink) = self.sink.take() {
            sink.flush();
        }
        let old = self.dir.path().join(self.n.to_string());
        if old.exists() {
            std::fs::remove_dir_all(&old).expect("remove");
        }
        self.n += 1;
        let dir = self.dir.path().join(self.n.to_string());
        std::fs::create_dir(&dir).expect("mkdir");
        self.sink = Some((self.make)(&dir.join("store")));
        self.pos = 0;
    }

    pub fn run(&mut self, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = iters as usize;
        let step = self.batch.unwrap_or(256);
        while left > 0 {
            if self.sink.is_none() || self.pos == self.pool.len() {
                self.reset();
            }
            let k = left.min(step).min(self.pool.len() - self.pos);
            let chunk = &self.pool[self.pos..self.pos + k];
            let sink = self.sink.as_mut().expect("sink");
            sink.prepare(chunk);
            let start = Instant::now();
            if self.batch.is_some() {
                sink.append_many(chunk);
            } else {
                for item in chunk {
                    sink.append(item);
                }
            }
            total += start.elapsed();
            self.pos += k;
            left -= k;
        }
        total
    }
}

pub fn log_sink(d: Durability) -> MakeSink {
    Box::new(move |p| Box::new(LogSink::create(p, d)))
}

pub fn session_sink(d: Durability) -> MakeSink {
    Box::new(move |p| Box::new(SessionSink::create(p, d)))
}

pub fn jsonl_sink(m: JsonlMode) -> MakeSink {
    Box::new(move |p| Box::new(JsonlSink::create(p, m)))
}

pub fn sqlite_sink(m: SqliteMode) -> MakeSink {
    Box::new(move |p| Box::new(SqliteSink::create(p, m)))
}
