//! Importing other agents' session files: OpenAI Codex CLI rollouts and Claude Code transcripts
//! (`docs/import.md` has the mapping, table by table).
//!
//! One source file becomes one session. Every source line is kept byte for byte: in the
//! envelope member `x-source` (`[{"line":N,"raw":TEXT}]`, `rawHex` instead of `raw` for a line
//! that is not UTF-8) of the first event it produced, or, for a line that produced none, on an
//! event of its own, the unknown type `import/line` (`data.kind` names the line's kind). So
//! [`export_source`] writes the original file back, byte-identical.
//!
//! The events are built by a `Builder` that keeps the lifecycle rules of docs/events.md §6: it
//! opens a turn and a step where the source implies one, and closes what the source leaves open
//! as docs/events.md §7 does (a `TOOL_OUTCOME_UNKNOWN` result for each unanswered call, `step/end`,
//! `turn/end` with reason `interrupted`), counting each such repair in the [`Summary`].
//!
//! Re-importing a file appends only what was added since: the store-owned member `import` of
//! `session.json` remembers the source path, its format, the bytes and lines imported and
//! whether the last line had its newline. A last line that is not complete (no newline and not
//! valid JSON: the agents' own crash mode) is left out and reported; it is imported once it is
//! complete.
//!
//! This layer uses `event`, `session` and `store` through their public API only.

mod builder;
pub mod claude_code;
mod claude_queue;
pub mod codex;
mod deferred;
mod sidechains;

pub(crate) use builder::{text_block, Builder, HoldFrom};
use sidechains::Sidechains;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::event::{Draft, Map, Opt, Value};
use crate::session::{Session, SessionMeta};
use crate::store::Store;
use crate::util::now_ms;

/// The envelope member holding the source lines an event was built from.
pub const SOURCE_MEMBER: &str = "x-source";
/// The event type of a source line that produced no typed event.
pub const LINE_EVENT: &str = "import/line";
/// The store-owned member of `session.json` that remembers the source.
pub const META_MEMBER: &str = "import";

/// A source format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI Codex CLI rollout files (`rollout-*.jsonl`), every generation.
    Codex,
    /// Claude Code transcripts (`~/.claude/projects/*/*.jsonl`, subagent files too).
    ClaudeCode,
}

impl Format {
    /// The name used on the command line and in `session.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Codex => "codex",
            Format::ClaudeCode => "claude-code",
        }
    }

    /// The format of that name.
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "codex" => Some(Format::Codex),
            "claude-code" | "claude" => Some(Format::ClaudeCode),
            _ => None,
        }
    }
}

/// Detects the format of a file from its first non-empty line: `None` when it is neither.
pub fn detect(first_line: &[u8]) -> Option<Format> {
    let text = std::str::from_utf8(first_line).ok()?;
    let text = text.trim_start_matches('\u{feff}').trim();
    let Ok(Value::Object(map)) = crate::event::parse_json(text) else {
        return None;
    };
    let ty = map.get("type").and_then(Value::as_str);
    if map.contains_key("payload") {
        return Some(Format::Codex);
    }
    // Codex before rollout items: a meta line `{id, timestamp, instructions, …}`, then bare
    // response items and `{"record_type":"state"}`.
    if ty.is_none() && map.contains_key("id") && map.contains_key("instructions") {
        return Some(Format::Codex);
    }
    if map.contains_key("record_type") {
        return Some(Format::Codex);
    }
    // A Claude Code line names its session, or is one of its kinds that need not (a title
    // line, a snapshot, a queue operation), or is a user or assistant line with its message.
    let message_line = matches!(ty, Some("user" | "assistant"))
        && matches!(map.get("message"), Some(Value::Object(_)));
    if map.contains_key("sessionId")
        || map.contains_key("parentUuid")
        || map.contains_key("leafUuid")
        || message_line
        || matches!(
            ty,
            Some(
                "file-history-snapshot"
                    | "summary"
                    | "queue-operation"
                    | "ai-title"
                    | "custom-title"
            )
        )
    {
        return Some(Format::ClaudeCode);
    }
    None
}

/// What an import did, over all files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files read.
    pub files: u64,
    /// Bytes read (of new lines).
    pub bytes: u64,
    /// Sessions created.
    pub created: Vec<String>,
    /// Sessions that got new events from a file that grew.
    pub updated: Vec<String>,
    /// Files with nothing new since the last import.
    pub unchanged: u64,
    /// Source lines read.
    pub lines: u64,
    /// Events written, by type.
    pub events: BTreeMap<String, u64>,
    /// Source lines kept as `import/line` events (no typed event of their own), by kind.
    pub unmapped: BTreeMap<String, u64>,
    /// Things the source left inconsistent and the importer repaired or skipped, with the file
    /// and line.
    pub warnings: Vec<String>,
    /// Files not imported (an error each, named among `warnings`): nothing of them was written
    /// and nothing of them is counted above but `files`.
    pub failed: u64,
}

impl Summary {
    /// Adds another summary's counts to this one.
    pub fn merge(&mut self, other: Summary) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.created.extend(other.created);
        self.updated.extend(other.updated);
        self.unchanged += other.unchanged;
        self.lines += other.lines;
        for (k, v) in other.events {
            *self.events.entry(k).or_default() += v;
        }
        for (k, v) in other.unmapped {
            *self.unmapped.entry(k).or_default() += v;
        }
        self.warnings.extend(other.warnings);
        self.failed += other.failed;
    }

    /// Total events written.
    pub fn total_events(&self) -> u64 {
        self.events.values().sum()
    }
}

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The format; `None` detects it per file.
    pub format: Option<Format>,
    /// Files imported side by side; `None`: four per processor (4 to 16). A small file's import
    /// mostly waits for the syncs of its new session, so more workers than processors pay.
    pub workers: Option<usize>,
    /// Leave what the source has open at its end (a turn, its step and unanswered calls) open,
    /// for a file still being written (`--follow`, `--keep-open`): the next run continues that
    /// turn. A later run without it closes what was left open (docs/events.md §7). The lines of a
    /// response the file ends inside are held back for the next run while the file was written
    /// within the last 5 seconds, so that a file imported while written gives the events of the
    /// finished file (docs/import.md, "Incremental import"). Default: closed at the end of
    /// every run.
    pub keep_open: bool,
}

/// One source line, as read.
pub(crate) struct SrcLine<'a> {
    /// Its 0-based index in the file.
    pub n: u64,
    /// Its bytes without the `\n` (a `\r` before it is kept).
    pub bytes: &'a [u8],
    /// Its JSON value, when it parses as JSON.
    pub value: Option<Value>,
}

/// The member `name` of an object value, if any.
pub(crate) fn get<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => m.get(name),
        _ => None,
    }
}

/// The string member `name` of an object value.
pub(crate) fn get_str<'v>(v: &'v Value, name: &str) -> Option<&'v str> {
    get(v, name).and_then(Value::as_str)
}

/// The strings of the array member `name` of a format's saved resume state (empty when there
/// is no state, no such member, or it is not an array; other items are passed over).
pub(crate) fn resume_strings(resume: Option<&Value>, name: &str) -> Vec<String> {
    resume
        .and_then(|r| get(r, name))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A JSON string literal.
pub(crate) fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_js(&mut out, s);
    out
}

/// Appends `s` as a JSON string literal (`"`, `\`, and control characters escaped).
pub(crate) fn push_js(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Parses an ISO-8601 UTC time (`2025-09-25T01:22:20.083Z`, also with an offset) to epoch
/// milliseconds.
pub(crate) fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || (b[10] != b'T' && b[10] != b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse::<i64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = s.get(start..i)?;
        let digits: String = frac.chars().chain("000".chars()).take(3).collect();
        ms = digits.parse().ok()?;
    }
    let mut offset = 0i64;
    match b.get(i) {
        Some(b'+') | Some(b'-') => {
            let sign = if b[i] == b'-' { -1 } else { 1 };
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6).unwrap_or(0);
            offset = sign * (oh * 60 + om) * 60_000;
        }
        _ => {}
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + se * 1000 + ms - offset)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The remembered source of an imported session.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SourceState {
    format: Format,
    path: String,
    bytes: u64,
    lines: u64,
    final_newline: bool,
    /// The session's events when this state was written: a session holding more was extended
    /// by a run killed before it wrote its state.
    events: Option<u64>,
    /// The last run left the source's open turn open (the file was still being written).
    open: bool,
    /// The last run left a turn of the `<id>-sidechains` session open (a subagent of the
    /// inline sidechains still running): a later run without `keep_open` closes it.
    sidechains_open: bool,
    /// The format builder's state for the next run (Codex token totals and model, the last
    /// Claude Code response id).
    resume: Option<Value>,
    /// A hash of the file's last bytes imported ([`imported_tail_hash`]): a file whose bytes
    /// there changed is another file at the same path (replaced, not appended to), and is not
    /// continued. `None` in a state written before it was kept.
    tail_hash: Option<String>,
}

impl SourceState {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        let _ = m.push("format", self.format.as_str().into());
        let _ = m.push("source", self.path.as_str().into());
        let _ = m.push("bytes", self.bytes.into());
        let _ = m.push("lines", self.lines.into());
        let _ = m.push("finalNewline", self.final_newline.into());
        if let Some(n) = self.events {
            let _ = m.push("events", n.into());
        }
        if self.open {
            let _ = m.push("open", true.into());
        }
        if self.sidechains_open {
            let _ = m.push("sidechainsOpen", true.into());
        }
        if let Some(r) = &self.resume {
            let _ = m.push("resume", r.clone());
        }
        if let Some(h) = &self.tail_hash {
            let _ = m.push("tailHash", h.as_str().into());
        }
        Value::Object(m)
    }

    fn from_value(v: &Value) -> Option<SourceState> {
        Some(SourceState {
            format: Format::from_name(get_str(v, "format")?)?,
            path: get_str(v, "source")?.to_owned(),
            bytes: get(v, "bytes")?.as_u64()?,
            lines: get(v, "lines")?.as_u64()?,
            final_newline: get(v, "finalNewline")?.as_bool()?,
            events: get(v, "events").and_then(Value::as_u64),
            open: get(v, "open").and_then(Value::as_bool) == Some(true),
            sidechains_open: get(v, "sidechainsOpen").and_then(Value::as_bool) == Some(true),
            resume: get(v, "resume").cloned(),
            tail_hash: get_str(v, "tailHash").map(str::to_owned),
        })
    }
}

/// Splits `data` into lines (without their `\n`). The last piece, when the data does not end
/// with `\n`, is returned apart.
fn split_lines(data: &[u8]) -> (Vec<&[u8]>, Option<&[u8]>) {
    let mut lines = Vec::new();
    let mut start = 0;
    for i in memchr::memchr_iter(b'\n', data) {
        lines.push(&data[start..i]);
        start = i + 1;
    }
    let tail = (start < data.len()).then(|| &data[start..]);
    (lines, tail)
}

/// The session id for a source file: a prefix by format and the source's own id.
fn session_id(format: Format, path: &Path, first: Option<&Value>) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let raw = match format {
        Format::Codex => {
            let from_meta = first.and_then(|v| {
                get(v, "payload")
                    .and_then(|p| get_str(p, "id"))
                    .or_else(|| get_str(v, "id"))
                    .map(str::to_owned)
            });
            // A file whose first line is not written yet (or not a meta line): the thread id
            // in its name (`rollout-<time>-<thread id>.jsonl`), which the meta line will give,
            // so that a later run continues the same session.
            match from_meta.or_else(|| first_uuid(&stem).map(str::to_owned)) {
                Some(id) => format!("codex-{}", codex_rollout_id(&stem, id)),
                None => format!("codex-{stem}"),
            }
        }
        Format::ClaudeCode => match claude_code::parent_session_of(path, first) {
            Some(parent) if stem.starts_with("agent-") => format!("claude-{parent}-{stem}"),
            _ => format!("claude-{stem}"),
        },
    };
    let mut id: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    id.truncate(128);
    id
}

/// The first UUID (`8-4-4-4-12` hexadecimal digits) in `text` (a revert's file name holds the
/// thread's, then the rollout's).
fn first_uuid(text: &str) -> Option<&str> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let is_uuid = |w: &[u8]| {
        let mut at = 0;
        GROUPS.iter().enumerate().all(|(i, &n)| {
            let ok = w[at..at + n].iter().all(u8::is_ascii_hexdigit)
                && (i == GROUPS.len() - 1 || w[at + n] == b'-');
            at += n + 1;
            ok
        })
    };
    let b = text.as_bytes();
    (0..=b.len().checked_sub(36)?)
        .find(|&i| is_uuid(&b[i..i + 36]))
        .map(|i| &text[i..i + 36])
}

/// A Codex thread's id, or the id of one of its rollouts when the file holds another rollout of
/// the thread: a revert (`thread/revert`, Codex 0.146 on) writes the thread's new history to
/// `rollout-<time>-<thread id>_<rollout id>.jsonl`, whose `session_meta` names the same thread
/// (and in `history_base` the prefix it continues), so the file name's `<thread id>_<rollout id>`
/// tells the two files apart.
fn codex_rollout_id(stem: &str, thread: String) -> String {
    let rollout = stem
        .find(&format!("{thread}_"))
        .map(|at| &stem[at + thread.len() + 1..])
        .filter(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    match rollout {
        Some(r) => format!("{thread}_{r}"),
        None => thread,
    }
}

/// The session a source file's session descends from: a Claude Code subagent file's main
/// session, a forked or subagent Codex thread's parent thread.
fn parent_of(format: Format, path: &Path, first: Option<&Value>) -> Option<String> {
    match format {
        Format::ClaudeCode => claude_code::parent_session_of(path, first)
            .map(|p| session_id(Format::ClaudeCode, Path::new(&format!("{p}.jsonl")), None)),
        Format::Codex => {
            let p = first.and_then(|v| get(v, "payload"))?;
            // A subagent's thread (Codex 0.14x) names its parent under
            // `source.subagent.thread_spawn`.
            let spawned = get(p, "source")
                .and_then(|s| get(s, "subagent"))
                .and_then(|s| get(s, "thread_spawn"))
                .and_then(|s| get_str(s, "parent_thread_id"));
            // A rollout that continues a prefix of a thread's history kept in another file
            // (Codex 0.146 on: a fork, a revert) names that thread under `history_base`.
            let base = get(p, "history_base").and_then(|b| get_str(b, "thread_id"));
            let parent = get_str(p, "parent_thread_id")
                .or(spawned)
                .or_else(|| get_str(p, "forked_from_id"))
                .or(base)?;
            let parent = session_id(Format::Codex, Path::new(&format!("{parent}.jsonl")), None);
            (parent != session_id(Format::Codex, path, first)).then_some(parent)
        }
    }
}

/// Imports `paths` (files, or directory trees walked for `*.jsonl`) into `store`. `progress`
/// is called with (bytes done, bytes total). A file that cannot be imported (unreadable, refused)
/// is a warning, never the end of the whole import, and counts in [`Summary::failed`]; a file
/// found in a directory whose format is not recognized is only a warning (a tree may hold other
/// JSONL files), one named in `paths` is also a failure.
pub fn import_paths(
    store: &Store,
    paths: &[PathBuf],
    options: &Options,
    mut progress: impl FnMut(u64, u64),
) -> Result<Summary> {
    let mut files = Vec::new();
    for p in paths {
        collect_files(p, &mut files)?;
    }
    let named: HashSet<&Path> = paths.iter().map(PathBuf::as_path).collect();
    // What killed imports left behind, once for the whole run (new sessions are built in
    // hidden folders of the store and renamed into place).
    store.remove_import_leftovers();
    let total: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    // Files are independent sessions: a few workers import them side by side (most of a small
    // file's time is the syncs of its new session, not the processor).
    let workers = options
        .workers
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get() * 4)
                .clamp(4, 16)
        })
        .clamp(1, files.len().max(1));
    let limit = store.config().max_event_size;
    let (groups, firsts) = by_session(&files, options.format, workers, limit);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, u64, Summary)>();
    let mut results: Vec<Option<Summary>> = vec![None; files.len()];
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (files, groups, firsts, next, named) = (&files, &groups, &firsts, &next, &named);
            scope.spawn(move || 'groups: loop {
                let g = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(group) = groups.get(g) else {
                    break;
                };
                for &i in group {
                    let Some(file) = files.get(i) else {
                        continue;
                    };
                    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
                    let mut one = Summary::default();
                    let walked = !named.contains(file.as_path());
                    let run = |first, one: &mut Summary| {
                        let (format, keep_open) = (options.format, options.keep_open);
                        import_source(store, file, format, keep_open, walked, first, one)
                    };
                    let mut result = run(firsts.get(i).cloned().flatten(), &mut one);
                    if let Err(Error::Exists(_)) = result {
                        // Another process (a second `import` of the same tree, from cron
                        // say) made the session between this run's look and its own: the
                        // file is continued from what that one imported.
                        one = Summary::default();
                        result = run(None, &mut one);
                    }
                    if let Err(e) = result {
                        // Nothing of the file was written: only its warnings and the error count.
                        let mut warnings = std::mem::take(&mut one.warnings);
                        warnings.push(format!("{}: not imported: {e}", file.display()));
                        one = Summary {
                            files: one.files,
                            warnings,
                            failed: 1,
                            ..Summary::default()
                        };
                    }
                    if tx.send((i, size, one)).is_err() {
                        break 'groups;
                    }
                }
            });
        }
        drop(tx);
        let mut done = 0u64;
        for (i, size, one) in rx {
            done += size;
            progress(done, total);
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(one);
            }
        }
    });
    let mut summary = Summary::default();
    for one in results.into_iter().flatten() {
        summary.merge(one);
    }
    // The renames of the new sessions, made durable together.
    if !summary.created.is_empty() {
        store.sync_sessions_dir()?;
    }
    Ok(summary)
}

/// The files of a run in groups to import one after another, in walk order: the files that
/// would make the same session (a copy of a file elsewhere in the tree) in one group, so that
/// the first of them makes it and the others are refused the same way whatever the number of
/// workers and whichever finishes first; every other file alone. Also each file's first line
/// when it is complete JSON (it cannot change in a file that is only appended to), so that
/// [`import_source`] need not read it again.
/// The files' first lines are read by `workers` threads side by side (a rerun over an
/// unchanged tree reads little else).
fn by_session(
    files: &[PathBuf],
    format: Option<Format>,
    workers: usize,
    limit: u64,
) -> (Vec<Vec<usize>>, Vec<Option<Vec<u8>>>) {
    let per = files.len().div_ceil(workers.max(1)).max(1);
    let claims: Vec<(Option<String>, Option<Vec<u8>>)> = std::thread::scope(|scope| {
        let parts: Vec<_> = files
            .chunks(per)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|f| claim(f, format, limit))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // (A part whose thread failed claims nothing: its files are imported alone.)
        parts
            .into_iter()
            .zip(files.chunks(per))
            .flat_map(|(h, part)| h.join().unwrap_or_else(|_| vec![(None, None); part.len()]))
            .collect()
    });
    let mut groups: Vec<Vec<usize>> = Vec::with_capacity(files.len());
    let mut firsts = Vec::with_capacity(files.len());
    let mut group_of: HashMap<String, usize> = HashMap::new();
    for (i, (id, first)) in claims.into_iter().enumerate() {
        firsts.push(first);
        match id {
            Some(id) => match group_of.entry(id) {
                std::collections::hash_map::Entry::Occupied(g) => groups[*g.get()].push(i),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(groups.len());
                    groups.push(vec![i]);
                }
            },
            None => groups.push(vec![i]),
        }
    }
    (groups, firsts)
}

/// The id of the session `path` would be imported into, when its first line tells (as
/// [`import_source`] finds it; `None` when it cannot be read or is in neither format), and
/// that first line when it is complete JSON.
fn claim(path: &Path, format: Option<Format>, limit: u64) -> (Option<String>, Option<Vec<u8>>) {
    let Ok((first_line, _, _)) = read_head(path, limit) else {
        return (None, None);
    };
    let value = first_json(&first_line);
    let id = format
        .or_else(|| detect(&first_line))
        .map(|format| session_id(format, path, value.as_ref()));
    (id, value.is_some().then_some(first_line))
}

/// A file's first line as JSON (a byte-order mark and surrounding blanks ignored).
fn first_json(first_line: &[u8]) -> Option<Value> {
    std::str::from_utf8(first_line)
        .ok()
        .and_then(|t| crate::event::parse_json(t.trim_start_matches('\u{feff}').trim()).ok())
}

/// The `.jsonl` files under `path` (or `path` itself, a file), in name order. Symbolic links
/// are followed, but a directory already walked (by its device and inode) is not walked again:
/// a link back to a parent would otherwise repeat the tree until the path is too long, and two
/// such links made the walk exponential.
fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    collect_under(path, out, &mut std::collections::HashSet::new())
}

fn collect_under(
    path: &Path,
    out: &mut Vec<PathBuf>,
    walked: &mut std::collections::HashSet<(u64, u64)>,
) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| Error::io("read", path, e))?;
    if meta.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    if !walked.insert((meta.dev(), meta.ino())) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::io("read directory", path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for e in entries {
        if e.is_dir() {
            collect_under(&e, out, walked)?;
        } else if e.extension().is_some_and(|x| x == "jsonl") {
            out.push(e);
        }
    }
    Ok(())
}

/// The first non-blank line of a file (at most 16 lines looked at), the file's size and time.
/// A first line longer than `limit` bytes (the store's largest event: its event could never be
/// written) is not kept whole: an error names it, with its length, before the file is read.
fn read_head(path: &Path, limit: u64) -> Result<(Vec<u8>, u64, Option<SystemTime>)> {
    use std::io::{BufRead, Read};
    let file = std::fs::File::open(path).map_err(|e| Error::io("read", path, e))?;
    let metadata = file.metadata().map_err(|e| Error::io("read", path, e))?;
    let (size, modified) = (metadata.len(), metadata.modified().ok());
    let mut reader = std::io::BufReader::new(file);
    let io = |e| Error::io("read", path, e);
    let mut line = Vec::new();
    for n in 1..=16u64 {
        line.clear();
        let read = (&mut reader)
            .take(limit.saturating_add(1))
            .read_until(b'\n', &mut line)
            .map_err(io)?;
        if line.len() as u64 > limit && line.last() != Some(&b'\n') {
            // Too long: its length, read past without keeping it.
            let mut len = line.len() as u64;
            loop {
                let buf = reader.fill_buf().map_err(io)?;
                let (used, done) = match buf.iter().position(|&b| b == b'\n') {
                    Some(at) => (at, true),
                    None => (buf.len(), buf.is_empty()),
                };
                len += used as u64;
                reader.consume(used);
                if done {
                    break;
                }
            }
            return Err(Error::Import {
                line: n,
                source: Box::new(Error::Log(crate::log::Error::EventTooLarge {
                    size: len,
                    max: limit,
                })),
            });
        }
        if read == 0 || !line.iter().all(u8::is_ascii_whitespace) {
            break;
        }
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok((line, size, modified))
}

/// How long a file must have gone unwritten for the lines of a response it ends inside to be
/// imported by a run that keeps the turn open: until then they are held back
/// ([`build_holding`]), their next lines likely on their way.
const HOLD_QUIET: Duration = Duration::from_secs(5);

/// True when a file last modified at `modified` was written within [`HOLD_QUIET`] (or its time
/// is ahead of the clock).
fn written_lately(modified: Option<SystemTime>) -> bool {
    modified.is_some_and(|m| {
        SystemTime::now()
            .duration_since(m)
            .map_or(true, |quiet| quiet < HOLD_QUIET)
    })
}

/// Imports one file: a new session, or the lines added since the last import of it. What the
/// source leaves open at its end is closed (see [`Options::keep_open`] for the other way).
/// A new session is on stable storage when this returns.
pub fn import_file(
    store: &Store,
    path: &Path,
    format: Option<Format>,
    summary: &mut Summary,
) -> Result<()> {
    let created = summary.created.len();
    import_source(store, path, format, false, false, None, summary)?;
    if summary.created.len() > created {
        store.sync_sessions_dir()?;
    }
    Ok(())
}

/// The lines of a file past what an earlier import took, parsed once each.
struct NewLines<'d> {
    /// The whole file.
    data: &'d [u8],
    /// Where the new bytes start in the file.
    start: usize,
    /// The bytes after `start` (an incomplete last line included).
    new_data: &'d [u8],
    /// The new lines.
    src: Vec<SrcLine<'d>>,
    /// The last line has no newline (and is complete JSON).
    tail: bool,
}

impl NewLines<'_> {
    /// Leaves the lines from index `from` on for the next run: they are not built, and the
    /// state does not count them.
    fn hold_back(&mut self, from: usize) {
        let Some(first) = self.src.get(from) else {
            return;
        };
        let at = (first.bytes.as_ptr() as usize).saturating_sub(self.new_data.as_ptr() as usize);
        self.new_data = self.new_data.get(..at).unwrap_or(self.new_data);
        self.src.truncate(from);
        self.tail = false;
    }

    /// Records in `state` what these lines took.
    fn done(&self, state: &mut SourceState) {
        state.lines += self.src.len() as u64;
        let consumed = if self.tail {
            state.final_newline = false;
            self.new_data.len()
        } else {
            memchr::memrchr(b'\n', self.new_data).map_or(0, |i| i + 1)
        };
        state.bytes = (self.start + consumed) as u64;
        state.tail_hash = Some(imported_tail_hash(self.data, state.bytes));
    }
}

/// A hash (BLAKE3, hex) of the (at most) 256 bytes of `data` before `end`.
fn imported_tail_hash(data: &[u8], end: u64) -> String {
    let end = usize::try_from(end).unwrap_or(usize::MAX).min(data.len());
    let tail = &data[end.saturating_sub(256)..end];
    blake3::hash(tail).to_hex().to_string()
}

/// The lines of `data` after what `state` says was imported: `None` (with a warning) when the
/// file cannot be continued (shorter than what was imported, its bytes imported last changed,
/// or its last line, imported without a newline, was changed). A line longer than `max` (the
/// largest event: its event, which keeps the line, could never be written) is an error, before
/// it is parsed (which would take many times its size).
fn new_lines<'d>(
    data: &'d [u8],
    state: &mut SourceState,
    shown: &str,
    summary: &mut Summary,
    max: u64,
) -> Result<Option<NewLines<'d>>> {
    if (data.len() as u64) < state.bytes {
        summary.warnings.push(format!(
            "{shown}: the file is shorter ({} bytes) than what was imported ({} bytes): skipped",
            data.len(),
            state.bytes
        ));
        return Ok(None);
    }
    if state
        .tail_hash
        .as_ref()
        .is_some_and(|h| *h != imported_tail_hash(data, state.bytes))
    {
        summary.warnings.push(format!(
            "{shown}: the bytes imported last are not what the file holds there now: another \
             file replaced it at this path (an import continues a file only appended to): \
             skipped; delete the session to import the new file"
        ));
        return Ok(None);
    }
    let mut start = state.bytes as usize;
    if !state.final_newline && start < data.len() {
        // The last line imported had no newline; the file grew: its newline comes first.
        if data[start] == b'\n' {
            start += 1;
            state.final_newline = true;
        } else {
            summary.warnings.push(format!(
                "{shown}: the last line imported (without a newline) was continued; the new \
                 bytes are not imported"
            ));
            return Ok(None);
        }
    }
    let new_data = &data[start..];
    let (lines, tail) = split_lines(new_data);
    let mut src: Vec<SrcLine<'d>> = Vec::with_capacity(lines.len() + 1);
    let mut n = state.lines;
    // Each line is parsed once; its value serves the format's mapping. A line JSON.parse
    // reads but the strict parser refuses (a lone surrogate escape, a repeated member name:
    // Node writes both) is read leniently, with a warning; its raw text is kept as it is.
    let parse = |l: &[u8], n: u64, warnings: &mut Vec<String>| -> Option<Value> {
        let text = std::str::from_utf8(l).ok()?.trim_end_matches('\r');
        let text = if n == 0 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        if let Ok(v) = crate::event::parse_json(text) {
            return Some(v);
        }
        let (v, read) = crate::event::parse_json_lenient(text).ok()?;
        if read.lone_surrogates > 0 {
            warnings.push(format!(
                "{shown}:{}: {} lone surrogate escape(s) (\\uD800–\\uDFFF without its pair) read \
                 as U+FFFD; the source line is kept as it is",
                n + 1,
                read.lone_surrogates
            ));
        }
        if read.repeated_names > 0 {
            warnings.push(format!(
                "{shown}:{}: {} repeated member name(s): the last value kept, as JSON.parse \
                 does; the source line is kept as it is",
                n + 1,
                read.repeated_names
            ));
        }
        Some(v)
    };
    let overlong = |l: &[u8], n: u64| {
        (l.len() as u64 > max).then(|| Error::Import {
            line: n + 1,
            source: Box::new(Error::Log(crate::log::Error::EventTooLarge {
                size: l.len() as u64,
                max,
            })),
        })
    };
    for l in lines {
        if let Some(e) = overlong(l, n) {
            return Err(e);
        }
        let value = parse(l, n, &mut summary.warnings);
        src.push(SrcLine { n, bytes: l, value });
        n += 1;
    }
    // A tail without a newline is imported when it is complete JSON, else left for later.
    let mut has_tail = false;
    if let Some(t) = tail {
        if let Some(e) = overlong(t, n) {
            return Err(e);
        }
        let value = parse(t, n, &mut summary.warnings);
        if value.is_some() {
            src.push(SrcLine { n, bytes: t, value });
            has_tail = true;
        } else {
            summary.warnings.push(format!(
                "{shown}:{}: the last line is incomplete ({} bytes, no newline): left out until it is complete",
                n + 1,
                t.len()
            ));
        }
    }
    Ok(Some(NewLines {
        data,
        start,
        new_data,
        src,
        tail: has_tail,
    }))
}

/// The time (ms) the file at `path` was last written: the time of a new session none of whose
/// lines has one.
fn file_time(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let ms = modified
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    i64::try_from(ms).ok()
}

/// The time of the first timestamped line: lines of a new session before it take it.
fn first_time(src: &[SrcLine<'_>]) -> Option<i64> {
    src.iter().find_map(|l| {
        l.value
            .as_ref()
            .and_then(|v| get_str(v, "timestamp"))
            .and_then(parse_time)
    })
}

/// What one build of a file's new lines gave.
struct Built {
    drafts: Vec<Draft>,
    sidechains: Vec<usize>,
    open: bool,
    resume: Option<Value>,
    result: Result<()>,
}

/// What a run holds back for the next one ([`build_holding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Nothing: a run that closes what the source leaves open.
    Nothing,
    /// What surely goes on ([`HoldFrom::surely`]): a run that keeps the turn open, of a file
    /// quiet for [`HOLD_QUIET`].
    Surely,
    /// Whatever may go on ([`HoldFrom::maybe`]): a run that keeps the turn open, of a file
    /// written within [`HOLD_QUIET`].
    Maybe,
}

/// Builds `lines` with `build` (which makes a builder over the summary and the lines, builds,
/// and returns what it gave with the builder's hold points). Per `hold`, the lines of a
/// response the source ends inside are held back for the next run ([`Builder::hold`]): the
/// lines before them are built again without them (with the summary as it was), so that a
/// file imported while it is written gives the events the finished file gives (one
/// `assistant/message` per response, with its final usage, Codex's token count after it
/// included).
fn build_holding<'d>(
    summary: &mut Summary,
    lines: &mut NewLines<'d>,
    hold: Hold,
    mut build: impl FnMut(&mut Summary, &[SrcLine<'d>]) -> (Built, HoldFrom),
) -> Built {
    let before = (hold != Hold::Nothing).then(|| summary.clone());
    let (built, from) = build(summary, &lines.src);
    let from = match hold {
        Hold::Nothing => None,
        Hold::Surely => from.surely,
        Hold::Maybe => from.maybe,
    };
    match (before, from) {
        (Some(before), Some(from)) if built.result.is_ok() && from < lines.src.len() => {
            *summary = before;
            lines.hold_back(from);
            // The response before the held one ended where the held one began: this build
            // writes it at the end of the lines, as the first did when the next one began.
            build(summary, &lines.src).0
        }
        _ => built,
    }
}

/// Takes what `builder` built over `src` (`result`: its build's outcome), and its hold point:
/// with `keep_open`, the earlier of its own and that of the inline sidechain lines it set
/// aside (those can end inside a subagent's response too: held back with the main file's
/// lines, the `-sidechains` session gets what the finished file gives).
fn take_built(
    mut builder: Builder<'_>,
    result: Result<()>,
    shown: &str,
    path: &Path,
    src: &[SrcLine<'_>],
) -> (Built, HoldFrom) {
    let built = Built {
        drafts: std::mem::take(&mut builder.out),
        sidechains: std::mem::take(&mut builder.sidechain_lines),
        open: builder.turn_is_open(),
        resume: builder.resume_out.take(),
        result,
    };
    let mut hold = builder.hold;
    if builder.keep_open && !built.sidechains.is_empty() {
        let lines = sidechains::lines_at(src, &built.sidechains);
        let mut scratch = Summary::default();
        let mut side = Builder::fresh(&mut scratch, shown.to_owned());
        side.keep_raw = false;
        side.keep_open = true;
        if claude_code::build(&mut side, &lines, path, true).is_ok() {
            // A sidechain line inside a main response (begun before it, ended after it): the
            // hold takes the response too, which one run writes after that line.
            let at = |i: Option<usize>| {
                let i = i.and_then(|i| built.sidechains.get(i).copied())?;
                let inside = builder.spans.iter().find(|&&(f, e)| f < i && i < e);
                Some(inside.map_or(i, |&(f, _)| f))
            };
            if let Some(i) = at(side.hold.maybe) {
                hold.add(i, false);
            }
            if let Some(i) = at(side.hold.surely) {
                hold.add(i, true);
            }
        }
    }
    (built, hold)
}

/// Runs the format's mapping over `src`.
fn build_format(
    builder: &mut Builder<'_>,
    format: Format,
    src: &[SrcLine<'_>],
    path: &Path,
) -> Result<()> {
    match format {
        Format::Codex => codex::build(builder, src),
        Format::ClaudeCode => claude_code::build(builder, src, path, false),
    }
}

/// [`import_file`], leaving the source's open turn open when `keep_open`. A file found by
/// walking a directory (`walked`) that is in neither format is only a warning (a tree may hold
/// other JSONL files); a file named by the caller is refused. `first`: the file's first line
/// when the caller read it already ([`by_session`]).
fn import_source(
    store: &Store,
    path: &Path,
    format: Option<Format>,
    keep_open: bool,
    walked: bool,
    first: Option<Vec<u8>>,
    summary: &mut Summary,
) -> Result<()> {
    let (first_line, size, modified) = match first {
        Some(line) => {
            let m = std::fs::metadata(path).map_err(|e| Error::io("read", path, e))?;
            (line, m.len(), m.modified().ok())
        }
        None => read_head(path, store.config().max_event_size)?,
    };
    // Lines of a response the file ends inside are held back only by a run that keeps the
    // turn open: while the file is being written, or when the response surely goes on.
    let hold = match (keep_open, written_lately(modified)) {
        (false, _) => Hold::Nothing,
        (true, false) => Hold::Surely,
        (true, true) => Hold::Maybe,
    };
    let first_line = first_line.as_slice();
    summary.files += 1;
    let detected = detect(first_line);
    if let (Some(asked), Some(found)) = (format, detected) {
        if asked != found {
            // Every line would be kept as an `import/line` of the wrong format: a session
            // with nothing in its history, and no sign of why.
            return Err(Error::Invalid(format!(
                "{}: --from {} given, but its first line is a {} file's (use --from {} or auto)",
                path.display(),
                asked.as_str(),
                found.as_str(),
                found.as_str()
            )));
        }
    }
    let format = match format.or(detected) {
        Some(f) => f,
        None if size == 0 => {
            summary.unchanged += 1;
            return Ok(());
        }
        None => {
            let neither = format!(
                "{}: neither a Codex rollout nor a Claude Code transcript (first line)",
                path.display()
            );
            if walked {
                summary
                    .warnings
                    .push(format!("{}: not imported: {neither}", path.display()));
                return Ok(());
            }
            return Err(Error::Invalid(neither));
        }
    };
    let first_value = first_json(first_line);
    let id = session_id(format, path, first_value.as_ref());
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let shown = path.display().to_string();

    // Nothing new since the last import: known from session.json alone, without opening the
    // session or reading the file (what makes a repeated run over a whole tree cheap).
    let dir = store.session_dir(&id)?;
    if dir.join(crate::session::META_FILE).is_file() {
        let meta = SessionMeta::load(&dir)?;
        if let Some(state) = meta
            .store_extra
            .get(META_MEMBER)
            .and_then(SourceState::from_value)
        {
            // (A turn an earlier run left open is closed by a run that does not keep it open.)
            if state.bytes == size
                && state.path == abs.display().to_string()
                && (keep_open || !(state.open || state.sidechains_open))
            {
                summary.unchanged += 1;
                return Ok(());
            }
        }
    }
    let data = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;

    // A session of that id: continue it from where the last import stopped.
    match store.open_session(&id) {
        Ok(session) => {
            let meta = session.meta();
            let Some(state) = meta
                .store_extra
                .get(META_MEMBER)
                .and_then(SourceState::from_value)
            else {
                return Err(Error::Invalid(format!(
                    "{shown}: session {id} exists and was not imported from a file"
                )));
            };
            if state.path != abs.display().to_string() || state.format != format {
                session.close()?;
                return Err(Error::Invalid(format!(
                    "{shown}: session {id} was imported from another file ({}, {}); not imported",
                    state.path,
                    state.format.as_str()
                )));
            }
            if state.events.is_some_and(|n| n != session.len()) {
                if state.lines == 0 {
                    // The first import of this file was killed half-way (a session created in
                    // place by an earlier version): built again.
                    session.close()?;
                    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("remove", &dir, e))?;
                    summary.files -= 1;
                    return import_source(
                        store,
                        path,
                        Some(format),
                        keep_open,
                        walked,
                        None,
                        summary,
                    );
                }
                let held = session.len();
                session.close()?;
                return Err(Error::Invalid(format!(
                    "{shown}: session {id} holds {held} events, its last import recorded {}: \
                     events were written after that import (a killed run, or appends); not \
                     continued (delete the session and import the file again)",
                    state.events.unwrap_or(0)
                )));
            }
            let outcome = continue_session(
                store, path, &shown, &id, &data, &session, state, keep_open, hold, summary,
            );
            let closed = session.close();
            outcome?;
            closed
        }
        Err(Error::NotFound(_)) => {
            if dir.exists() {
                return Err(Error::Exists(id));
            }
            let mut meta = SessionMeta::new(id.clone(), now_ms());
            meta.cwd = first_value
                .as_ref()
                .and_then(|v| {
                    get(v, "payload")
                        .and_then(|p| get_str(p, "cwd"))
                        .or_else(|| get_str(v, "cwd"))
                        .map(str::to_owned)
                })
                .into();
            if let Some(parent) = parent_of(format, path, first_value.as_ref()) {
                meta.parent_session = Opt::Present(parent);
            }
            new_session(
                store, path, &shown, meta, format, &abs, &data, keep_open, hold, summary,
            )
        }
        Err(e) => Err(e),
    }
}

/// Imports a file seen for the first time: its events are built first, then the session is
/// written in a hidden folder of the store with the log's syncs deferred, made durable once
/// (its log files and folder), and renamed into place with its import state already in its
/// `session.json`. A failure, or a kill at any point, leaves no session behind (a hidden
/// folder at most, which the next import or `gc` removes).
#[allow(clippy::too_many_arguments)]
fn new_session(
    store: &Store,
    path: &Path,
    shown: &str,
    mut meta: SessionMeta,
    format: Format,
    abs: &Path,
    data: &[u8],
    keep_open: bool,
    hold: Hold,
    summary: &mut Summary,
) -> Result<()> {
    let id = meta.id.clone();
    let mut state = SourceState {
        format,
        path: abs.display().to_string(),
        bytes: 0,
        lines: 0,
        final_newline: true,
        events: Some(0),
        open: false,
        sidechains_open: false,
        resume: None,
        tail_hash: None,
    };
    let Some(mut lines) = new_lines(
        data,
        &mut state,
        shown,
        summary,
        store.config().max_event_size,
    )?
    else {
        return Ok(());
    };
    let first = first_time(&lines.src);
    if keep_open && first.is_none() {
        // No line has a time yet (a Claude Code file's first lines, summaries and snapshots,
        // have none): the session waits for one rather than starting at time 0.
        summary.unchanged += 1;
        return Ok(());
    }
    let start = first.or_else(|| file_time(path));
    let built = build_holding(summary, &mut lines, hold, |summary, src| {
        let mut builder = Builder::fresh(summary, shown.to_owned());
        builder.keep_open = keep_open;
        if let Some(t) = first_time(src).or(start) {
            builder.time = t;
        }
        let result = build_format(&mut builder, format, src, path);
        take_built(builder, result, shown, path, src)
    });
    built.result?;
    let (drafts, sidechains) = (built.drafts, built.sidechains);
    state.open = built.open;
    state.resume = built.resume;
    lines.done(&mut state);
    // (Not while lines are held back: the first lines of a file being written may all be
    // title and snapshot lines.)
    if state.bytes == data.len() as u64
        && !drafts.is_empty()
        && sidechains.is_empty()
        && drafts.iter().all(|d| d.event.type_name() == LINE_EVENT)
    {
        // Detected by its first line, yet no line maps to anything (another tool's file
        // whose lines look alike: Gemini CLI's name their `sessionId` too).
        summary.warnings.push(format!(
            "{shown}: none of its {} line(s) is one the {} importer maps (each is kept as an \
             import/line, and the history is empty): another tool's file?",
            drafts.len(),
            format.as_str()
        ));
    }
    state.events = Some(drafts.len() as u64);
    // The title of the lines this run took (a later run's new title lines retitle it).
    let taken = usize::try_from(state.bytes).map_or(data, |n| data.get(..n).unwrap_or(data));
    meta.title = claude_code::title_hint(format, taken).into();
    let _ = meta.store_extra.push(META_MEMBER, state.to_value());
    store.build_session_batched(&id, |temp| {
        let mut options = store.config().session_options();
        options.log.durability = crate::log::Durability::Os;
        options.log.storage = std::sync::Arc::new(deferred::ImportStorage);
        let session = Session::create(temp, meta, options)?;
        let appended = session.append_drafts(drafts);
        let closed = session.close_without_checkpoint();
        appended?;
        closed?;
        deferred::sync_built(temp)
    })?;
    summary.created.push(id.clone());
    summary.bytes += lines.new_data.len() as u64;
    let side = Sidechains {
        main: &id,
        path,
        shown,
        keep_open,
        left_open: false,
    };
    if side.import(store, &lines.src, &sidechains, summary)? {
        state.sidechains_open = true;
        save_state(&store.open_session(&id)?, &state)?;
    }
    Ok(())
}

/// Appends the lines a file got since its last import to its session. The events are synced
/// before the import state that counts them is written, so the state never vouches for events
/// that a power loss could take.
#[allow(clippy::too_many_arguments)]
fn continue_session(
    store: &Store,
    path: &Path,
    shown: &str,
    id: &str,
    data: &[u8],
    session: &Session,
    mut state: SourceState,
    keep_open: bool,
    hold: Hold,
    summary: &mut Summary,
) -> Result<()> {
    let Some(mut lines) = new_lines(
        data,
        &mut state,
        shown,
        summary,
        store.config().max_event_size,
    )?
    else {
        return Ok(());
    };
    let close_left_open = (state.open || state.sidechains_open) && !keep_open;
    if lines.src.is_empty() && !close_left_open {
        summary.unchanged += 1;
        return Ok(());
    }
    let resume_in = state.resume.take();
    let format = state.format;
    let built = build_holding(summary, &mut lines, hold, |summary, src| {
        let mut builder = Builder::new(summary, shown.to_owned(), session);
        builder.keep_open = keep_open;
        builder.resume_in = resume_in.clone();
        if session.is_empty() {
            if let Some(t) = first_time(src).or_else(|| file_time(path)) {
                builder.time = t;
            }
        }
        let result = build_format(&mut builder, format, src, path);
        take_built(builder, result, shown, path, src)
    });
    state.resume = resume_in;
    built.result?;
    if lines.src.is_empty() && built.drafts.is_empty() && !close_left_open {
        // Every new line belongs to a response not finished yet: held back.
        summary.unchanged += 1;
        return Ok(());
    }
    let (drafts, sidechains) = (built.drafts, built.sidechains);
    state.open = built.open;
    state.resume = built.resume;
    // One batch: a refusal writes nothing (the state stays where it was).
    session.append_drafts(drafts)?;
    session.sync()?;
    lines.done(&mut state);
    save_state(session, &state)?;
    retitle(session, format, data, &lines)?;
    summary.updated.push(id.to_owned());
    let side = Sidechains {
        main: id,
        path,
        shown,
        keep_open,
        left_open: state.sidechains_open,
    };
    let open = side.import(store, &lines.src, &sidechains, summary)?;
    if open != state.sidechains_open {
        state.sidechains_open = open;
        save_state(session, &state)?;
    }
    summary.bytes += lines.new_data.len() as u64;
    Ok(())
}

/// Gives `session` the title Claude Code gave it in the new `lines` of `data` (an `ai-title`
/// or `custom-title` line: [`claude_code::named_title`]), unless the session's title is not the
/// one the file gave before (set by hand: kept).
fn retitle(session: &Session, format: Format, data: &[u8], lines: &NewLines<'_>) -> Result<()> {
    if format != Format::ClaudeCode || !claude_code::may_name(lines.new_data) {
        return Ok(());
    }
    let end = lines.start + lines.new_data.len();
    let (Some(before), Some(through)) = (data.get(..lines.start), data.get(..end)) else {
        return Ok(());
    };
    let (old, new) = (
        claude_code::title_hint(format, before),
        claude_code::title_hint(format, through),
    );
    let current = session.meta().title.present().cloned();
    if new == old || current != old {
        return Ok(());
    }
    session.update_meta(|m| m.title = new.into())
}

fn save_state(session: &Session, state: &SourceState) -> Result<()> {
    let mut state = state.clone();
    state.events = Some(session.len());
    session.update_meta(|m| {
        let _ = m.store_extra.remove(META_MEMBER);
        let _ = m.store_extra.push(META_MEMBER, state.to_value());
    })
}

/// Writes the source file an imported session was built from, byte for byte: every kept source
/// line in its order, each with its newline (but the last when the source had none). Returns the
/// number of lines written.
pub fn export_source(reader: &crate::session::SessionReader, out: &mut impl Write) -> Result<u64> {
    let meta = reader.meta();
    let state = meta
        .store_extra
        .get(META_MEMBER)
        .and_then(SourceState::from_value)
        .ok_or_else(|| {
            let sidechains_of = meta
                .store_extra
                .get(META_MEMBER)
                .and_then(|m| get_str(m, "sidechainsOf"));
            Error::Invalid(match sidechains_of {
                Some(main) => format!(
                    "session {} holds the inline sidechains of session {main}: their source \
                     lines are in that session's file (export it)",
                    meta.id
                ),
                None => format!(
                    "session {} was not imported from a Codex or Claude Code file",
                    meta.id
                ),
            })
        })?;
    let mut lines: Vec<(u64, Vec<u8>)> = Vec::new();
    for ev in reader.events() {
        let ev = ev?;
        let Some(src) = ev.extra.get(SOURCE_MEMBER) else {
            continue;
        };
        let Some(entries) = src.as_array() else {
            continue;
        };
        for entry in entries {
            let Some(n) = entry
                .get("line")
                .and_then(|v| v.as_number())
                .and_then(|n| n.as_u64())
            else {
                continue;
            };
            if let Some(raw) = entry.get("raw").and_then(|v| v.as_str()) {
                lines.push((n, raw.as_bytes().to_vec()));
            } else if let Some(hex) = entry.get("rawHex").and_then(|v| v.as_str()) {
                lines.push((n, unhex(hex)));
            }
        }
    }
    lines.sort_by_key(|(n, _)| *n);
    let count = lines.len() as u64;
    if count != state.lines {
        return Err(Error::Invalid(format!(
            "session {} holds {count} source lines of the {} imported",
            meta.id, state.lines
        )));
    }
    let io = |e| Error::io("write", Path::new("export"), e);
    for (i, (_, bytes)) in lines.iter().enumerate() {
        out.write_all(bytes).map_err(io)?;
        if i + 1 < lines.len() || state.final_newline {
            out.write_all(b"\n").map_err(io)?;
        }
    }
    out.flush().map_err(io)?;
    Ok(count)
}

/// The format a session was imported from, if it was.
pub fn source_format(meta: &crate::session::SessionMeta) -> Option<Format> {
    meta.store_extra
        .get(META_MEMBER)
        .and_then(SourceState::from_value)
        .map(|s| s.format)
}

fn unhex(hex: &str) -> Vec<u8> {
    hex.as_bytes()
        .chunks(2)
        .filter_map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Protects the time conversion every imported event's `time` comes from.
    #[test]
    fn iso_times_convert_to_epoch_ms() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_time("2025-09-25T01:22:20.083Z"),
            Some(1_758_763_340_083)
        );
        assert_eq!(
            parse_time("2025-09-25T03:22:20.083+02:00"),
            Some(1_758_763_340_083)
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    /// Protects the rewind replacement: the nodes after a mark are replaced by the new message
    /// (a valid surface op, so the batch appends), nothing is replaced when no node follows the
    /// mark, and `None` as the mark (a new root) replaces every node of the run.
    #[test]
    fn user_after_replaces_the_nodes_after_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let session = Session::create(
            dir.path().join("s"),
            SessionMeta::new("s".to_owned(), 0),
            crate::session::SessionOptions::default(),
        )
        .unwrap();
        let mut summary = Summary::default();
        let mut b = Builder::new(&mut summary, "f".to_owned(), &session);
        let kind = "{\"source\":\"claude-code\",\"kind\":\"prompt\"}";
        b.start_turn();
        b.user(&[text_block("one")], kind);
        b.assistant(&[text_block("two")], None, "anthropic", None, &[]);
        let mark = b.surface_mark();
        assert!(!b.has_nodes_after(mark));
        b.user(&[text_block("three")], kind);
        b.assistant(&[text_block("four")], None, "anthropic", None, &[]);
        assert!(b.has_nodes_after(mark));
        assert_eq!(b.user_after(&[text_block("three again")], kind, mark), 2);
        let last = b.surface_mark();
        assert_eq!(b.user_after(&[text_block("five")], kind, last), 0);
        assert_eq!(b.user_after(&[text_block("root")], kind, None), 4);
        b.finish(true);
        let drafts = std::mem::take(&mut b.out);
        drop(b);
        session.append_drafts(drafts).unwrap();
        let history = session.messages().to_value().to_string();
        assert!(history.contains("root"), "{history}");
        for gone in ["one", "two", "three", "four", "five"] {
            assert!(!history.contains(&format!("\"{gone}")), "{gone}: {history}");
        }
    }

    /// Protects detection: each format's first lines, and a line of neither.
    #[test]
    fn detects_formats_from_the_first_line() {
        assert_eq!(
            detect(br#"{"timestamp":"x","type":"session_meta","payload":{}}"#),
            Some(Format::Codex)
        );
        assert_eq!(
            detect(br#"{"id":"a","timestamp":"x","instructions":null}"#),
            Some(Format::Codex)
        );
        assert_eq!(
            detect(br#"{"type":"summary","summary":"t","leafUuid":"u"}"#),
            Some(Format::ClaudeCode)
        );
        assert_eq!(
            detect(br#"{"parentUuid":null,"type":"user","sessionId":"s"}"#),
            Some(Format::ClaudeCode)
        );
        assert_eq!(detect(br#"{"type":"turn/start","seq":0}"#), None);
        // Claude Code lines that name no session (a title line first; a user line written
        // without its envelope ids): `--from auto` refused files that `--from claude-code`
        // imports.
        assert_eq!(
            detect(br#"{"type":"ai-title","title":"Fix the build"}"#),
            Some(Format::ClaudeCode)
        );
        assert_eq!(
            detect(br#"{"type":"custom-title","customTitle":"x"}"#),
            Some(Format::ClaudeCode)
        );
        assert_eq!(
            detect(br#"{"type":"user","cwd":"/w","message":{"role":"user","content":"hi"}}"#),
            Some(Format::ClaudeCode)
        );
        assert_eq!(detect(br#"{"type":"user","message":"hi"}"#), None);
    }
}
