//! Importing a JSONL session: all or nothing.
//!
//! The events are written into a hidden folder of the store (`sessions/.import~…`), each checked
//! as a live append would be (lifecycle rules, projection); only when the whole file was accepted
//! is the folder synced and renamed to the session's id. A refused file leaves nothing behind.

use std::io::BufRead;
use std::path::Path;

use crate::error::{Error, Result};
use crate::event::{Draft, JsonlReader, Line, Opt, SessionHeader};
use crate::session::{new_id, Session, SessionMeta};
use crate::util::now_ms;

use super::Store;

/// Where an import is built before it is renamed into place; `~` is not an id character, so
/// such a folder is never taken for a session.
const TEMP_PREFIX: &str = ".import~";

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The session id; else the header's; else a new one.
    pub id: Option<String>,
    /// The title; else the header's.
    pub title: Option<String>,
}

/// How much of its input [`Store::import_limited`] imports: a prefix. Default: all of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportLimit {
    /// At most this many events: the first ones (the rest of the input is not read).
    /// Default: `None`, every event.
    pub events: Option<u64>,
    /// Only the lines that end within the first this-many bytes of the input (a session header
    /// line counts; the rest of the input is not read). Default: `None`, every line.
    pub bytes: Option<u64>,
}

impl ImportLimit {
    /// At most `n` events.
    #[must_use]
    pub fn events(mut self, n: u64) -> Self {
        self.events = Some(n);
        self
    }

    /// Only the lines within the first `n` bytes.
    #[must_use]
    pub fn bytes(mut self, n: u64) -> Self {
        self.bytes = Some(n);
        self
    }
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// The new session's id.
    pub id: String,
    /// Events imported.
    pub events: u64,
    /// True when the file started with a session header.
    pub had_header: bool,
}

/// An import error names the line it happened at.
fn at_line(line: u64, e: Error) -> Error {
    match e {
        Error::Lifecycle(mut l) => {
            l.detail = format!("line {line}: {}", l.detail);
            Error::Lifecycle(l)
        }
        Error::Parse(p) => Error::Parse(p),
        // Refusals of one event's content: the line, with the refusal kept as it is.
        e @ (Error::Invalid(_) | Error::Log(crate::log::Error::EventTooLarge { .. })) => {
            Error::Import {
                line,
                source: Box::new(e),
            }
        }
        other => other,
    }
}

impl Store {
    /// Imports a session from canonical (or any valid) JSONL (docs/events.md §4): the id is
    /// `options.id`, else the header's, else a new one; an existing id is refused. Every event is
    /// checked as a live append would be, keeping its seq and time. A refused file writes
    /// nothing. `progress` is called now and then with the bytes read so far.
    pub fn import(
        &self,
        input: impl BufRead,
        options: ImportOptions,
        progress: impl FnMut(u64),
    ) -> Result<ImportReport> {
        self.import_limited(input, options, ImportLimit::default(), progress)
    }

    /// [`Store::import`] of a prefix of the input: at most `limit.events` events, only the
    /// lines within the first `limit.bytes` bytes. What follows is never read, so a prefix of a
    /// huge file (or of an endless stream) imports in the time its own size takes: nothing is
    /// read past the line that passes the byte limit.
    pub fn import_limited(
        &self,
        input: impl BufRead,
        options: ImportOptions,
        limit: ImportLimit,
        mut progress: impl FnMut(u64),
    ) -> Result<ImportReport> {
        // A line longer than this cannot hold an event of the maximum size, however escaped:
        // refused after reading that much, so a binary file or an endless line never fills memory.
        let max_line = crate::event::max_line_for(self.config().max_event_size);
        let mut lines = JsonlReader::new(input).with_max_line(max_line);
        let within = |read: u64| limit.bytes.is_none_or(|max| read <= max);
        let mut first = lines.next().transpose()?;
        if !within(lines.bytes_read()) {
            first = None;
        }
        let header: Option<SessionHeader> = match first.take() {
            Some(Line::Header(h)) => Some(h),
            Some(Line::Event(e)) => {
                first = Some(Line::Event(e));
                None
            }
            _ => None,
        };
        if let Some(h) = &header {
            if h.version != 1 {
                return Err(Error::Invalid(format!(
                    "line 1: session header version {} is not supported (this build reads version 1)",
                    h.version
                )));
            }
        }
        let id = match options.id.or_else(|| header.as_ref().map(|h| h.id.clone())) {
            Some(id) => id,
            None => new_id(),
        };
        self.session_dir(&id)?;
        let mut meta = match &header {
            Some(h) => SessionMeta::from_header(h),
            None => SessionMeta::new(id.clone(), now_ms()),
        };
        meta.id = id.clone();
        if let Some(title) = options.title {
            meta.title = Opt::Present(title);
        }
        let events = self.build_session(&id, TEMP_PREFIX, |temp| {
            let mut opts = self.config.session_options();
            // The file's seqs are kept: chunks are never dropped on import.
            opts.keep_raw_chunks = true;
            opts.log.durability = crate::log::Durability::Os;
            let session = Session::create(temp, meta, opts)?;
            let mut n = 0u64;
            let header_lines = u64::from(header.is_some());
            let mut pending = first;
            let mut bytes_done = !within(lines.bytes_read());
            loop {
                if limit.events.is_some_and(|max| n >= max) {
                    break;
                }
                let line = match pending.take() {
                    Some(line) => line,
                    None if bytes_done => break,
                    None => match lines.next() {
                        Some(line) => {
                            let line = line?;
                            if !within(lines.bytes_read()) {
                                bytes_done = true;
                                continue;
                            }
                            line
                        }
                        None => break,
                    },
                };
                let Line::Event(event) = line else {
                    continue;
                };
                let (seq, time) = (event.seq, event.time);
                session
                    .append_draft(Draft {
                        event,
                        seq: Some(seq),
                        time: Some(time),
                    })
                    .map_err(|e| at_line(seq + 1 + header_lines, e))?;
                n += 1;
                if n.is_multiple_of(4096) {
                    progress(lines.bytes_read());
                }
            }
            session.sync()?;
            session.close()?;
            Ok(n)
        })?;
        progress(lines.bytes_read());
        Ok(ImportReport {
            id,
            events,
            had_header: header.is_some(),
        })
    }
}

impl Store {
    /// Builds a new session `id` in a hidden folder of the store with `build` (given the folder,
    /// which does not exist yet; `build` makes it durable), then renames it into place, as
    /// [`Store::build_session`] does, for imports of many sessions: neither the sweep of
    /// leftover folders (O(sessions) each time) nor the sync of the sessions folder is made
    /// here. The caller sweeps once before its batch ([`Store::remove_import_leftovers`]) and
    /// syncs the sessions folder once after it ([`Store::sync_sessions_dir`]); until then a
    /// renamed session may be lost by a power loss (whole: its own folder was durable before
    /// the rename), never seen half-written.
    pub(crate) fn build_session_batched<T>(
        &self,
        id: &str,
        build: impl FnOnce(&Path) -> Result<T>,
    ) -> Result<T> {
        let dir = self.session_dir(id)?;
        if dir.exists() {
            return Err(Error::Exists(id.to_string()));
        }
        let value = self.build_and_rename(id, &dir, TEMP_PREFIX, build)?;
        self.subscribers
            .send(&[super::StoreNotice::Created(id.to_string())]);
        Ok(value)
    }

    /// Removes what imports and forks killed half-way left behind (best effort, as before each
    /// [`Store::build_session`]).
    pub(crate) fn remove_import_leftovers(&self) {
        let _ = remove_leftovers(&self.root().join(super::SESSIONS_DIR));
    }

    /// Makes the sessions folder's entries durable (the renames of
    /// [`Store::build_session_batched`]).
    pub(crate) fn sync_sessions_dir(&self) -> Result<()> {
        let sessions = self.root().join(super::SESSIONS_DIR);
        std::fs::File::open(&sessions)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync directory", &sessions, e))
    }
}

/// The name of the folder an import or fork is built in: `PREFIX<pid>~<unique id>`. The pid
/// tells [`remove_leftovers`] whether the builder may still be at work.
pub(crate) fn temp_name(prefix: &str) -> String {
    format!("{prefix}{}~{}", std::process::id(), new_id())
}

/// True when the folder named `rest` (its name after the prefix) was left by a process that is
/// gone. A name that does not parse, or a pid that lives (this process included: another thread
/// may be building), is not a leftover.
fn builder_gone(rest: &str) -> bool {
    let Some(pid) = rest
        .split_once('~')
        .and_then(|(pid, _)| pid.parse::<i32>().ok())
    else {
        return false;
    };
    if pid == std::process::id() as i32 {
        return false;
    }
    match rustix::process::Pid::from_raw(pid) {
        Some(pid) => rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH),
        None => false,
    }
}

/// Removes folders of imports and forks that never finished: those whose builder process is
/// gone (a crash or a kill in the middle). A folder whose builder lives is left alone, whatever
/// stage it is at (it holds no lock while it writes its session.json or is renamed).
pub(crate) fn remove_leftovers(sessions: &Path) -> Result<()> {
    let rd = std::fs::read_dir(sessions).map_err(|e| Error::io("read directory", sessions, e))?;
    for entry in rd.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let rest = name
            .strip_prefix(TEMP_PREFIX)
            .or_else(|| name.strip_prefix(super::fork::FORK_PREFIX))
            .or_else(|| name.strip_prefix(super::rewrite::REWRITE_PREFIX));
        if !rest.is_some_and(builder_gone) {
            continue;
        }
        let p = entry.path();
        // Another process's gc may be removing it too: the lock keeps the two apart.
        let Ok(lock) = crate::log::lock_dir(&p) else {
            continue;
        };
        match std::fs::remove_dir_all(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove", &p, e)),
        }
        drop(lock);
    }
    Ok(())
}
