//! agentlog for Python: the crate's store, sessions and readers as a native module (PyO3).
//!
//! Every call goes to the crate's public API; nothing is re-implemented here but the conversion
//! of values ([`convert`]) and of errors ([`errors`]). The GIL is released while the crate does
//! I/O or scans (appends, syncs, closes, imports, forks, searches, statistics, derivations,
//! exports, rendering batches of events, waiting for new events).

use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyStopIteration, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use agentlog_core::event::Block;
use agentlog_core::event::{parse_draft_line, parse_json, Draft, ReasonKind, Value};
use agentlog_core::log::Durability;
use agentlog_core::projection::{render, Format, Messages, Role};
use agentlog_core::session::{HeaderLine, Session as CoreSession, SessionReader};
use agentlog_core::store::{ForkPoint, ImportOptions, NewSession, Query, Store as CoreStore};
use agentlog_core::Error as CoreError;

mod convert;
mod errors;

use convert::{from_json, str_of, to_json, value_to_py, Keys};
use errors::{to_py, Error};

type CoreResult<T> = agentlog_core::Result<T>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` without the GIL and turns its error into the Python exception.
fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> CoreResult<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(|e| to_py(py, e))
}

/// An event given as a dict or as one JSONL line (str or bytes), parsed into a draft.
fn draft_of(event: &Bound<'_, PyAny>, buf: &mut String) -> PyResult<Draft> {
    let py = event.py();
    let parsed = if let Ok(s) = event.cast::<PyString>() {
        parse_draft_line(str_of(s)?)
    } else if let Ok(b) = event.cast::<PyBytes>() {
        let text = std::str::from_utf8(b.as_bytes()).map_err(|e| {
            PyValueError::new_err(format!(
                "the line is not valid UTF-8 (at byte {})",
                e.valid_up_to()
            ))
        })?;
        parse_draft_line(text)
    } else if event.cast::<PyDict>().is_ok() {
        buf.clear();
        to_json(event, buf)?;
        parse_draft_line(buf)
    } else {
        return Err(PyTypeError::new_err(
            "an event is a dict, or one JSONL line as str or bytes",
        ));
    };
    parsed.map_err(|e| to_py(py, CoreError::Parse(e)))
}

/// How the crate's stand-in for a message whose event can no longer be read starts (a log
/// damaged after its checkpoint was written; docs/design.md, "Checkpoints").
const STAND_IN: &str = "agentlog: the message of the event at seq ";

/// A history holding a stand-in is damage: the error of reading that event (as `agentlog
/// derive` fails), never a made-up system message handed to a model.
fn refuse_stand_ins(reader: &SessionReader, messages: &Messages) -> CoreResult<()> {
    for m in messages.iter() {
        let stand_in = m.role == Role::System
            && matches!(m.content.first(), Some(Block::Text { text, .. }) if text.starts_with(STAND_IN));
        if stand_in {
            reader.get(m.source_seq)?;
        }
    }
    Ok(())
}

/// `at=N` of `messages`: at most the events the log holds (as `agentlog derive --at`).
fn check_at(at: Option<u64>, len: u64) -> PyResult<u64> {
    match at {
        Some(n) if n > len => Err(PyValueError::new_err(format!(
            "at={n}: the session holds {len} events"
        ))),
        Some(n) => Ok(n),
        None => Ok(len),
    }
}

/// One `RuntimeWarning` per message (sessions a store-wide call left out).
fn warn_all(py: Python<'_>, messages: &[String]) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
    for m in messages {
        let text = std::ffi::CString::new(m.replace('\0', " "))
            .map_err(|e| errors::internal(e.to_string()))?;
        PyErr::warn(py, &category, &text, 1)?;
    }
    Ok(())
}

fn format_of(name: &str) -> PyResult<Format> {
    Format::from_str(name).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn value_out<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    gc_paused(py, || value_to_py(py, v, &mut Keys::default()))
}

/// Runs `f` (which builds new Python objects) with the cyclic garbage collector held off: the
/// objects are new and reachable, there is nothing to collect, and otherwise it runs every 700
/// allocations, scanning every object alive (most of the time of a large conversion). It runs
/// as usual afterwards; a collector the caller disabled stays disabled.
fn gc_paused<'py, T>(py: Python<'py>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    let gc = py.import("gc")?;
    let was_enabled = gc.call_method0("isenabled")?.is_truthy()?;
    if was_enabled {
        gc.call_method0("disable")?;
    }
    let result = f();
    if was_enabled {
        gc.call_method0("enable")?;
    }
    result
}

/// A JSON value given from Python, as the crate's lossless value.
fn value_in(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let mut text = String::new();
    to_json(obj, &mut text)?;
    parse_json(&text).map_err(|e| to_py(obj.py(), CoreError::Parse(e)))
}

fn closed() -> PyErr {
    Error::new_err("the session is closed")
}

/// A store: a directory of sessions (created when missing; its `agentlog.toml` is honoured).
///
/// `Store(path)` opens or creates the store in `path`.
#[pyclass(module = "agentlog", frozen)]
struct Store {
    store: CoreStore,
}

#[pymethods]
impl Store {
    /// Opens the store in `path`, creating its folders when missing, and reads its
    /// `agentlog.toml`.
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let store = detached(py, || CoreStore::open(&path))?;
        Ok(Store { store })
    }

    /// The store's root directory.
    #[getter]
    fn path(&self) -> std::path::PathBuf {
        self.store.root().to_path_buf()
    }

    /// Creates a session and opens it for writing: `id` (a new time-sortable one when None),
    /// `title`, and `header`, a dict of session header members: `cwd` (str) and `config` (any
    /// JSON value, kept verbatim), and `id` / `title` when not given as arguments (`type` and
    /// `version` of an exported header line are accepted and ignored). Raises `agentlog.Error`
    /// when the id exists or is invalid.
    #[pyo3(signature = (id=None, title=None, header=None))]
    fn create(
        &self,
        py: Python<'_>,
        id: Option<String>,
        title: Option<String>,
        header: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Session> {
        let mut new = NewSession {
            id,
            title,
            ..NewSession::default()
        };
        if let Some(h) = header {
            for (k, v) in h.iter() {
                let key: String = k.extract()?;
                match key.as_str() {
                    "cwd" => new.cwd = Some(v.extract()?),
                    "config" => new.config = Some(value_in(&v)?),
                    "id" if new.id.is_none() => new.id = Some(v.extract()?),
                    "title" if new.title.is_none() => new.title = v.extract()?,
                    "id" | "title" | "type" | "version" => {}
                    other => {
                        return Err(PyValueError::new_err(format!(
                            "unknown header member {other:?} (accepted: cwd, config, id, title)"
                        )))
                    }
                }
            }
        }
        let session = detached(py, || self.store.create(new))?;
        Ok(Session::new(session, &self.store))
    }

    /// Opens session `id` for writing (after a crash it is recovered as the store's
    /// configuration allows: a torn tail is cut). Raises `LockError` when another writer holds
    /// it, `agentlog.Error` when there is no such session.
    fn open(&self, py: Python<'_>, id: &str) -> PyResult<Session> {
        let session = detached(py, || self.store.open_session(id))?;
        Ok(Session::new(session, &self.store))
    }

    /// Opens session `id` for reading: any number of readers, in any process, also while a
    /// writer appends.
    fn reader(&self, py: Python<'_>, id: &str) -> PyResult<Reader> {
        let r = detached(py, || self.store.open_reader(id))?;
        Ok(Reader::new(r))
    }

    /// The sessions that are not deleted, sorted by id, as `agentlog ls --json` prints them:
    /// dicts of `id`, `title`, `state`, `events`, `bytes`, `createdAt`, `lastEventTime`,
    /// `parentSession`, `seedLength` (times in epoch milliseconds, None for what is absent;
    /// `seedLength`: the events a fork copied from its parent).
    fn sessions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let infos = detached(py, || self.store.list())?;
        let mut keys = Keys::default();
        let items = infos
            .iter()
            .map(|i| value_to_py(py, &i.to_json(), &mut keys))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Imports a JSONL file as a new session, as `agentlog import` does (all or nothing: a
    /// refused line raises `ParseError` or `LifecycleError` naming it, and nothing is written).
    /// The id is `id`, else the file header's, else a new one. Returns the new session's id.
    #[pyo3(signature = (path, id=None))]
    fn import_jsonl(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        id: Option<String>,
    ) -> PyResult<String> {
        let report = detached(py, || {
            let file = std::fs::File::open(&path).map_err(|e| CoreError::Io {
                op: "open",
                path: path.clone(),
                source: e,
            })?;
            if file.metadata().is_ok_and(|m| m.is_dir()) {
                // Read as a file, it fails on its first line: an I/O error, not a refused line.
                return Err(CoreError::Io {
                    op: "read",
                    path: path.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::IsADirectory,
                        "it is a directory, not a JSONL file",
                    ),
                });
            }
            self.store.import(
                std::io::BufReader::with_capacity(1 << 20, file),
                ImportOptions { id, title: None },
                |_| {},
            )
        })?;
        Ok(report.id)
    }

    /// Creates a new session holding the first events of session `id`: `at=N` the first N
    /// events, or `turn=T` the events through the `turn/end` of turn T (exactly one of them).
    /// `new_id` is the new session's id (a new one when None). Returns the new id.
    #[pyo3(signature = (id, at=None, turn=None, new_id=None))]
    fn fork(
        &self,
        py: Python<'_>,
        id: &str,
        at: Option<u64>,
        turn: Option<u64>,
        new_id: Option<String>,
    ) -> PyResult<String> {
        let point = match (at, turn) {
            (Some(n), None) => ForkPoint::At(n),
            (None, Some(t)) => ForkPoint::Turn(t),
            _ => return Err(PyValueError::new_err("give exactly one of at= and turn=")),
        };
        let report = detached(py, || self.store.fork(id, point, new_id))?;
        Ok(report.id)
    }

    /// The events that match every filter given, as `agentlog search --json`: a list of
    /// `{"session": id, "event": dict}`, sessions in id order, events in seq order. `session`
    /// and `type` take a str or a list of str (`type`: a type such as "tool/call", a domain
    /// "tool" or "tool/*", or "*"); `tool`: the calls, results and approvals of that tool;
    /// `turn`: the events of that turn; `since` (inclusive) and `until` (exclusive): epoch
    /// milliseconds; `text`: a case-insensitive substring of the events' text; `limit`: at most
    /// that many. Over the whole store (no `session`), a session that cannot be read (damaged)
    /// is left out with a `RuntimeWarning` naming it and its error, as the command line names
    /// it on stderr; a session named in `session` raises its error.
    #[pyo3(
        signature = (session=None, r#type=None, tool=None, turn=None, since=None, until=None, text=None, limit=None),
        text_signature = "($self, session=None, type=None, tool=None, turn=None, since=None, until=None, text=None, limit=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        session: Option<&Bound<'py, PyAny>>,
        r#type: Option<&Bound<'py, PyAny>>,
        tool: Option<String>,
        turn: Option<u64>,
        since: Option<i64>,
        until: Option<i64>,
        text: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let strings = |v: Option<&Bound<'py, PyAny>>| -> PyResult<Vec<String>> {
            match v {
                None => Ok(Vec::new()),
                Some(v) if v.cast::<PyString>().is_ok() => Ok(vec![v.extract()?]),
                Some(v) => v.extract(),
            }
        };
        let mut q = Query::new();
        let named = strings(session)?;
        let whole_store = named.is_empty();
        for s in named {
            q = q.session(s);
        }
        for t in strings(r#type)? {
            q = q.event_type(&t);
        }
        if let Some(t) = tool {
            q = q.tool(t);
        }
        if let Some(t) = turn {
            q = q.turn(t);
        }
        if let Some(t) = since {
            q = q.since(t);
        }
        if let Some(t) = until {
            q = q.until(t);
        }
        if let Some(t) = text {
            q = q.text(&t);
        }
        if let Some(n) = limit {
            q = q.limit(n);
        }
        let (found, skipped) = detached(py, || {
            let mut found: Vec<(String, Vec<u8>)> = Vec::new();
            let mut skipped: Vec<String> = Vec::new();
            self.store.search_skipping(
                &q,
                |id, e| {
                    let mut buf = Vec::with_capacity(256);
                    e.write_canonical(&mut buf);
                    found.push((id.to_string(), buf));
                    std::ops::ControlFlow::Continue(())
                },
                |id, e| {
                    if !whole_store {
                        return Err(e);
                    }
                    skipped.push(format!("session {id} left out of the search: {e}"));
                    Ok(())
                },
            )?;
            Ok((found, skipped))
        })?;
        warn_all(py, &skipped)?;
        let mut keys = Keys::default();
        gc_paused(py, || {
            let out = PyList::empty(py);
            for (id, text) in found {
                let d = PyDict::new(py);
                d.set_item("session", id)?;
                d.set_item("event", from_json(py, &text, &mut keys)?)?;
                out.append(d)?;
            }
            Ok(out)
        })
    }

    /// Statistics as `agentlog stats --json` prints them: of session `id`, or (None) summed
    /// over the store's sessions, with a last member `sessions`. Summed over the store, a
    /// session that cannot be read (damaged) is left out with a `RuntimeWarning` naming it.
    #[pyo3(signature = (id=None))]
    fn stats<'py>(&self, py: Python<'py>, id: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        let mut skipped: Vec<String> = Vec::new();
        let v = detached(py, || match id {
            Some(id) => Ok(self.store.open_reader(id)?.stats()?.to_json()),
            None => Ok(self
                .store
                .stats_skipping(|id, e| {
                    skipped.push(format!("session {id} left out of the statistics: {e}"));
                    Ok(())
                })?
                .to_json()),
        })?;
        warn_all(py, &skipped)?;
        value_out(py, &v)
    }

    fn __repr__(&self) -> String {
        format!(
            "agentlog.Store({:?})",
            self.store.root().display().to_string()
        )
    }
}

/// A session opened for writing (one writer per session at a time, across processes). Every
/// append is checked against the lifecycle rules first: a refused event raises and writes
/// nothing. A context manager: `with store.create() as s:` closes it at the end.
#[pyclass(module = "agentlog", frozen)]
struct Session {
    inner: RwLock<Option<CoreSession>>,
    id: String,
    /// The store's durability is `sync`: each append waits for the disk.
    sync_appends: bool,
}

impl Session {
    fn new(s: CoreSession, store: &CoreStore) -> Self {
        Session {
            id: s.id(),
            inner: RwLock::new(Some(s)),
            sync_appends: store.config().durability == Durability::Sync,
        }
    }

    /// Runs `f` on the open session keeping the GIL (for calls that do no I/O).
    fn with_gil<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&CoreSession) -> CoreResult<T>,
    ) -> PyResult<T> {
        let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            None => Err(closed()),
            Some(s) => f(s).map_err(|e| to_py(py, e)),
        }
    }

    /// Runs `f` on the open session without the GIL.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&CoreSession) -> CoreResult<T> + Send,
    ) -> PyResult<T> {
        let r = py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
            guard.as_ref().map(f)
        });
        match r {
            None => Err(closed()),
            Some(r) => r.map_err(|e| to_py(py, e)),
        }
    }
}

#[pymethods]
impl Session {
    /// The session's id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// Appends one event: a dict (`{"type": ..., "data": {...}}`), or one JSONL line as str or
    /// bytes. `seq` and `time` may be left out (the log assigns them; a given `seq` must be the
    /// next one, a given `time` is kept). Returns the seq, or None for an `assistant/chunk` the
    /// store is configured not to keep. Raises `LifecycleError` or `ParseError` (nothing
    /// written); a dict holding a non-JSON value raises `TypeError` (a set, a tuple, bytes, a
    /// non-str key, any other object) or `ValueError` (NaN or infinity, nesting too deep).
    /// The GIL is released while an append waits for the disk (the store's durability is
    /// `sync`); otherwise an append is a write into the page cache and keeps it.
    fn append(&self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let draft = draft_of(event, &mut String::with_capacity(512))?;
        if self.sync_appends {
            self.with(py, move |s| s.append_draft(draft))
        } else {
            // A write into the page cache: releasing the GIL would cost
            // more than the append itself.
            self.with_gil(py, move |s| s.append_draft(draft))
        }
    }

    /// Appends several events (dicts or lines) in one call: each is checked against the state
    /// the earlier ones leave, and if any is refused none is written. Returns their seqs.
    fn append_many(&self, py: Python<'_>, events: &Bound<'_, PyAny>) -> PyResult<Vec<Option<u64>>> {
        // One event where a list of them is expected: a dict would be iterated as its keys and
        // a str as its characters, each refused as a line of its own.
        if events.cast::<PyDict>().is_ok()
            || events.cast::<PyString>().is_ok()
            || events.cast::<PyBytes>().is_ok()
        {
            return Err(PyTypeError::new_err(
                "append_many takes an iterable of events (dicts or JSONL lines), not one event: \
                 use append(event), or append_many([event])",
            ));
        }
        let mut buf = String::new();
        let mut drafts = Vec::new();
        for (i, ev) in events.try_iter()?.enumerate() {
            let ev = ev?;
            match draft_of(&ev, &mut buf) {
                Ok(d) => drafts.push(d),
                Err(e) if e.is_instance_of::<errors::ParseError>(py) => {
                    // The line in the error is the event's place in the batch.
                    let _ = e.value(py).setattr("line", i + 1);
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        self.with(py, move |s| s.append_drafts(drafts))
    }

    /// Makes every appended event durable (fdatasync).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.sync())
    }

    /// Closes the session cleanly (synced, marked closed, its lock released). Closing a closed
    /// session does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = py.detach(|| self.inner.write().unwrap_or_else(|e| e.into_inner()).take());
        match taken {
            Some(s) => detached(py, || s.close()),
            None => Ok(()),
        }
    }

    /// The turn state and what is open, as `agentlog status --json` prints it: a dict of
    /// `state`, `openTurn`, `openStep`, `unansweredCalls`, `pendingApprovals`, `closedUnanswered`
    /// (calls whose step ended without a result), `events`, `lastTurnEnd` (`{"turn","reason"}`
    /// of the last turn that ended, None before one has).
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.with_gil(py, |s| Ok(s.lifecycle().status_json(s.len())))?;
        value_out(py, &v)
    }

    /// The model-visible history derived from the log: `format` "neutral" (a list of
    /// `{"role","content"}`), "openai" (chat-completions `messages`) or "anthropic"
    /// (`{"system","messages"}`); `at=N`: as it was when the log held N events.
    #[pyo3(signature = (format="neutral", at=None))]
    fn messages<'py>(
        &self,
        py: Python<'py>,
        format: &str,
        at: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let format = format_of(format)?;
        let len = self.with(py, |s| Ok(s.len()))?;
        let at = at.map(|n| check_at(Some(n), len)).transpose()?;
        let v = self.with(py, |s| {
            let reader = s.reader();
            let messages = match at {
                None => s.messages(),
                Some(n) => reader.messages_at(n)?,
            };
            refuse_stand_ins(&reader, &messages)?;
            Ok(render(format, &messages))
        })?;
        value_out(py, &v)
    }

    /// Appends the closers of what a crash left open, as `agentlog close` does (an error
    /// `tool/result` for each unanswered call, then `step/end` and `turn/end` with `reason`:
    /// completed, aborted, blocked, error, max-tokens or interrupted). Returns the seqs
    /// appended (empty when nothing was open).
    #[pyo3(signature = (reason="interrupted"))]
    fn close_open_work(&self, py: Python<'_>, reason: &str) -> PyResult<Vec<u64>> {
        let kind = ReasonKind::from_name(reason).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown reason {reason:?}: one of {}",
                ReasonKind::NAMES.join(", ")
            ))
        })?;
        self.with(py, move |s| s.close_open_work(kind))
    }

    /// A reader of this session that sees its appends as they happen.
    fn reader(&self, py: Python<'_>) -> PyResult<Reader> {
        let r = self.with(py, |s| Ok(s.reader()))?;
        Ok(Reader::new(r))
    }

    /// True once the session is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// The number of events in the session.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_gil(py, |s| Ok(s.len() as usize))
    }

    /// The session itself: `with store.create() as s:` closes it at the end of the block.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the session; exceptions are not suppressed.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("agentlog.Session({:?})", self.id)
    }
}

/// A reader of one session (any number, in any process, also while a writer appends). Each
/// call sees the events appended until then.
#[pyclass(module = "agentlog", frozen)]
struct Reader {
    reader: Mutex<SessionReader>,
    id: String,
}

impl Reader {
    fn new(r: SessionReader) -> Self {
        Reader {
            id: r.meta().id.clone(),
            reader: Mutex::new(r),
        }
    }

    /// A refreshed copy of the reader (sees every event appended until now).
    fn fresh(&self, py: Python<'_>) -> PyResult<SessionReader> {
        detached(py, || {
            let mut r = lock(&self.reader);
            r.refresh()?;
            Ok(r.clone())
        })
    }
}

#[pymethods]
impl Reader {
    /// The session's id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The number of events in the session now.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        detached(py, || lock(&self.reader).refresh().map(|n| n as usize))
    }

    /// An iterator of the events with seqs `start` to `stop` (excluded; None: the end of the log
    /// now), as dicts of canonical JSON objects. Events are rendered in batches without the GIL.
    #[pyo3(signature = (start=0, stop=None))]
    fn events(&self, py: Python<'_>, start: u64, stop: Option<u64>) -> PyResult<Events> {
        let r = self.fresh(py)?;
        let len = r.len();
        let stop = stop.map_or(len, |s| s.min(len));
        Ok(Events {
            reader: r,
            next: start,
            stop: Some(stop),
            timeout: None,
            batch: Batch::default(),
            batch_size: FIRST_BATCH_EVENTS,
            keys: Keys::default(),
            folder: None,
        })
    }

    /// The event `seq` as a dict. Raises `agentlog.Error` when it is beyond the end,
    /// `CorruptionError` when its record is damaged.
    fn get<'py>(&self, py: Python<'py>, seq: u64) -> PyResult<Bound<'py, PyAny>> {
        let text = detached(py, || {
            let mut r = lock(&self.reader);
            if seq >= r.len() {
                r.refresh()?;
            }
            let mut buf = Vec::with_capacity(256);
            r.get(seq)?.write_canonical(&mut buf);
            Ok(buf)
        })?;
        from_json(py, &text, &mut Keys::default())
    }

    /// An iterator that yields the events from `start` (None: the end of the log now, so only
    /// new events) and then waits for new ones, like `tail -f`. It stops when `timeout`
    /// seconds pass without a new event (None: waits for ever; Ctrl-C interrupts it). A
    /// session `redact` or `purge` rewrites meanwhile is followed in its new files.
    #[pyo3(signature = (start=None, timeout=None))]
    fn follow(&self, py: Python<'_>, start: Option<u64>, timeout: Option<f64>) -> PyResult<Events> {
        let r = self.fresh(py)?;
        let timeout = match timeout {
            None => None,
            // Longer than a Duration holds (about 5.8e11 years): no timeout.
            Some(t) if t.is_finite() && t >= 0.0 => Duration::try_from_secs_f64(t).ok(),
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "timeout {t} is not a number of seconds >= 0"
                )))
            }
        };
        Ok(Events {
            next: start.unwrap_or(r.len()),
            folder: folder_id(r.dir()),
            reader: r,
            stop: None,
            timeout,
            batch: Batch::default(),
            batch_size: FIRST_BATCH_EVENTS,
            keys: Keys::default(),
        })
    }

    /// Writes the session as canonical JSONL (the session header line first when `header`):
    /// to the file `path` (written to a temporary file, then renamed; returns the number of
    /// events written), or, when `path` is None, returned as a str.
    #[pyo3(signature = (path=None, header=false))]
    fn export<'py>(
        &self,
        py: Python<'py>,
        path: Option<std::path::PathBuf>,
        header: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = self.fresh(py)?;
        match path {
            None => {
                let text = detached(py, || {
                    let mut out = Vec::new();
                    r.export(&mut out, header_line(header), |_| {})?;
                    Ok(out)
                })?;
                let text = String::from_utf8(text)
                    .map_err(|_| errors::internal("export wrote invalid UTF-8".into()))?;
                Ok(PyString::new(py, &text).into_any())
            }
            Some(path) => {
                let n = detached(py, || export_file(&r, &path, header))?;
                Ok(n.into_pyobject(py)?.into_any())
            }
        }
    }

    /// The model-visible history derived from the log, as `Session.messages` (the crate
    /// replays the log; nothing is replayed in Python).
    #[pyo3(signature = (format="neutral", at=None))]
    fn messages<'py>(
        &self,
        py: Python<'py>,
        format: &str,
        at: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let format = format_of(format)?;
        let r = self.fresh(py)?;
        let n = check_at(at, r.len())?;
        let v = detached(py, || {
            let messages = r.messages_at(n)?;
            refuse_stand_ins(&r, &messages)?;
            Ok(render(format, &messages))
        })?;
        value_out(py, &v)
    }

    /// The turn state and what is open, as `agentlog status --json` prints it.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = self.fresh(py)?;
        let v = detached(py, || Ok(r.lifecycle()?.status_json(r.len())))?;
        value_out(py, &v)
    }

    fn __repr__(&self) -> String {
        format!("agentlog.Reader({:?})", self.id)
    }
}

/// The Python `header=` flag as the crate's [`HeaderLine`].
fn header_line(header: bool) -> HeaderLine {
    if header {
        HeaderLine::Include
    } else {
        HeaderLine::Omit
    }
}

fn export_file(r: &SessionReader, path: &std::path::Path, header: bool) -> CoreResult<u64> {
    let io = |op: &'static str, p: &std::path::Path, e| CoreError::Io {
        op,
        path: p.to_path_buf(),
        source: e,
    };
    // A device, a pipe or a link into /proc or /dev (`/dev/stdout`, `/dev/null`) is written in
    // place: a rename would replace it with a regular file (as root, the machine's own).
    let special = |p: &std::path::Path| p.starts_with("/proc") || p.starts_with("/dev");
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
        || special(path)
        || std::fs::read_link(path).is_ok_and(|t| special(&path.with_file_name(t)))
    {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(std::fs::metadata(path).is_ok_and(|m| m.is_file()))
            .open(path)
            .map_err(|e| io("open", path, e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        let n = r.export(&mut w, header_line(header), |_| {})?;
        w.into_inner()
            .map_err(|e| io("write", path, e.into_error()))?;
        return Ok(n);
    }
    // Another link: its target is replaced, not the link.
    if path.is_dir() {
        return Err(io(
            "write",
            path,
            std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "it is a directory; give a file name",
            ),
        ));
    }
    let resolved = std::fs::canonicalize(path)
        .or_else(|_| std::fs::read_link(path).map(|t| path.with_file_name(t)));
    let path = match (std::fs::symlink_metadata(path), &resolved) {
        (Ok(m), Ok(target)) if m.file_type().is_symlink() => target.as_path(),
        _ => path,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        // Readable by its owner only, as the CLI's `export -o`: a session may hold secrets.
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)
                .map_err(|e| io("create", &temp, e))?
        };
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        let n = r.export(&mut w, header_line(header), |_| {})?;
        let file = w
            .into_inner()
            .map_err(|e| io("write", &temp, e.into_error()))?;
        file.sync_all().map_err(|e| io("sync", &temp, e))?;
        std::fs::rename(&temp, path).map_err(|e| io("rename", &temp, e))?;
        // The rename is durable once the directory is synced.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(n)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Events rendered as canonical lines, then converted to dicts, waiting to be handed out.
#[derive(Default)]
struct Batch {
    text: Vec<u8>,
    ends: Vec<usize>,
    items: std::collections::VecDeque<Py<PyAny>>,
    error: Option<CoreError>,
}

/// Events rendered per batch: the first batch is small (a quick first item, little work for a
/// short read), each next one twice as large, up to this.
const MAX_BATCH_EVENTS: u64 = 4096;
const FIRST_BATCH_EVENTS: u64 = 64;

/// An iterator of events as dicts (from `Reader.events` or `Reader.follow`).
#[pyclass(module = "agentlog")]
struct Events {
    reader: SessionReader,
    next: u64,
    /// The end (excluded); None: follow.
    stop: Option<u64>,
    timeout: Option<Duration>,
    batch: Batch,
    batch_size: u64,
    keys: Keys,
    /// When following: the (device, inode) of the session's folder. `redact` and `purge`
    /// rewrite a session into a new folder swapped in under its name; a reader of the old
    /// files would wait for nothing, so the new ones are opened.
    folder: Option<(u64, u64)>,
}

/// The (device, inode) of a folder, if it can be read.
fn folder_id(dir: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
}

impl Events {
    /// Renders the next events (up to the end the reader sees, or `stop`) without the GIL, then
    /// turns them into dicts.
    fn fill(&mut self, py: Python<'_>) -> PyResult<()> {
        let end = self
            .stop
            .unwrap_or(u64::MAX)
            .min(self.reader.len())
            .min(self.next.saturating_add(self.batch_size));
        self.batch_size = (self.batch_size * 2).min(MAX_BATCH_EVENTS);
        let (reader, next, batch) = (&self.reader, self.next, &mut self.batch);
        py.detach(|| {
            batch.text.clear();
            batch.ends.clear();
            for e in reader.range(next..end) {
                match e {
                    Ok(e) => {
                        e.write_canonical(&mut batch.text);
                        batch.ends.push(batch.text.len());
                    }
                    Err(e) => {
                        batch.error = Some(e);
                        break;
                    }
                }
            }
        });
        let (batch, keys) = (&mut self.batch, &mut self.keys);
        gc_paused(py, || {
            let mut start = 0;
            for &end in &batch.ends {
                batch
                    .items
                    .push_back(from_json(py, &batch.text[start..end], keys)?.unbind());
                start = end;
            }
            Ok(())
        })
    }

    /// Waits (without the GIL, checking for Ctrl-C) until the reader sees events past `next`;
    /// false when the timeout passed first.
    fn wait(&mut self, py: Python<'_>) -> PyResult<bool> {
        let started = Instant::now();
        loop {
            let slice = match self.timeout {
                Some(t) => {
                    let left = t.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        return Ok(false);
                    }
                    left.min(Duration::from_millis(100))
                }
                None => Duration::from_millis(100),
            };
            let reader = &mut self.reader;
            let mut len = detached(py, || reader.wait(slice))?;
            let now = folder_id(self.reader.dir());
            if self.folder.is_some() && now.is_some() && now != self.folder {
                let dir = self.reader.dir().to_path_buf();
                self.reader = detached(py, || SessionReader::open(&dir))?;
                self.folder = now;
                len = self.reader.len();
            }
            if len > self.next {
                return Ok(true);
            }
            py.check_signals()?;
        }
    }
}

#[pymethods]
impl Events {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.batch.items.is_empty() {
            if let Some(e) = self.batch.error.take() {
                return Err(to_py(py, e));
            }
            if self.stop.is_some_and(|s| self.next >= s) {
                return Err(PyStopIteration::new_err(()));
            }
            if self.stop.is_none() && self.next >= self.reader.len() && !self.wait(py)? {
                return Err(PyStopIteration::new_err(()));
            }
            self.fill(py)?;
        }
        match self.batch.items.pop_front() {
            Some(v) => {
                self.next += 1;
                Ok(v.into_bound(py))
            }
            None => match self.batch.error.take() {
                Some(e) => Err(to_py(py, e)),
                None => Err(PyStopIteration::new_err(())),
            },
        }
    }
}

/// agentlog: append-only, checksummed, memory-mapped logs of LLM agent sessions.
///
/// `Store(path)` opens a store; `store.create()` a session to write, `store.reader(id)` one to
/// read. Events are dicts (or JSONL lines); errors are `agentlog.Error` and its subclasses.
#[pymodule]
fn agentlog(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Store>()?;
    m.add_class::<Session>()?;
    m.add_class::<Reader>()?;
    m.add_class::<Events>()?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The package's __init__ star-imports this module: list what it exports.
    m.add(
        "__all__",
        [
            "Store",
            "Session",
            "Reader",
            "Events",
            "Error",
            "LifecycleError",
            "ParseError",
            "CorruptionError",
            "LockError",
            "DiskFullError",
            "__version__",
        ],
    )?;
    Ok(())
}
