//! Rewriting a session: retroactive redaction ([`Store::redact`]) and purging events
//! ([`Store::purge`]), docs/events.md §9.
//!
//! The log is append-only, so both build the whole session again in a hidden folder of the store
//! (`sessions/.rewrite~<pid>~<id>`): the same seqs and times, every event checked as an import
//! checks it. The folder is synced, then exchanged with the session's folder in one atomic
//! `renameat2(RENAME_EXCHANGE)`, and the old files (now in the hidden folder) are removed. A crash
//! at any point leaves the old session or the new one whole under the id; the hidden folder a
//! crash leaves (the new session before the exchange, the old one after) is removed by the next
//! rewrite, import, fork or `gc`. Checkpoints and other derived files are not carried over (they
//! are derived again), nor is a `damaged/` folder of salvaged files.
//!
//! Forks share sealed segments with their parent through hard links: a rewritten session's old
//! segment would stay on disk in every session linking it. So redaction rewrites the sessions
//! that share a file with the session, or were forked from it, with the same rules, and names
//! them in the report. A purge changes one session's history and the histories copied from it:
//! the sessions forked from it (and their forks) get the same seqs purged where their events are
//! the same; the session it was forked from keeps its own (a shared segment stays its file).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::event::{decode_event, Draft, Event, EventData, Map, Opt, UnknownEvent, Value};
use crate::log;
use crate::redact::{ChunkStreams, Finding, Redactor, SplitSecrets};
use crate::session::{Session, SessionMeta, SessionReader, SessionState};
use crate::util::now_ms;

use super::{Store, SESSIONS_DIR};

/// The prefix of the hidden folder a rewrite builds in.
pub(crate) const REWRITE_PREFIX: &str = ".rewrite~";

/// The event type of a purged event's tombstone (an unknown type: never projected, allowed
/// anywhere): `{"type":"purged","seq","time","data":{"type":<the event's type>,"turn"?,"step"?}}`.
pub const TOMBSTONE_TYPE: &str = "purged";

/// The event type of the audit event a purge appends:
/// `{"startSeq","endSeq","events","turn"?}` (an unknown type).
pub const PURGE_AUDIT_TYPE: &str = "audit/purge";

/// What to purge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeRange {
    /// Every event of turn `n`, from its `turn/start` through its `turn/end` (or the end of the
    /// log for a turn still open).
    Turn(u64),
    /// The events with seqs `a..=b`.
    Seqs(u64, u64),
}

/// What a rewrite did to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RewriteReport {
    /// The session.
    pub id: String,
    /// Its events after the rewrite.
    pub events: u64,
    /// Events changed (redacted or made tombstones).
    pub changed: u64,
    /// Matches replaced (redaction) or events purged (purge).
    pub matches: u64,
    /// The session whose rewrite made this one's necessary (it shared a segment with it or was
    /// forked from it), if this is not the session asked for.
    pub shared_with: Option<String>,
}

/// One finding of [`Store::scan_secrets`]: a match in an event or in the metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFinding {
    /// The session.
    pub session: String,
    /// The event's seq; `None` for the session's metadata (`header.title`, …).
    pub seq: Option<u64>,
    /// Where, which rule, a masked preview.
    pub finding: Finding,
}

/// The (device, inode) of every file in `dir` with more than one link.
fn linked_files(dir: &Path) -> Result<HashSet<(u64, u64)>> {
    let mut set = HashSet::new();
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let m = entry
            .metadata()
            .map_err(|e| Error::io("read", entry.path(), e))?;
        if m.is_file() && m.nlink() > 1 {
            set.insert((m.dev(), m.ino()));
        }
    }
    Ok(set)
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync directory", dir, e))
}

/// The turn and step each event of a log is in (`None` outside), in seq order.
struct Position {
    turn: Option<u64>,
    step: Option<u64>,
}

impl Position {
    /// Updates the position for `e` and returns the (turn, step) `e` belongs to.
    fn advance(&mut self, e: &Event) -> (Option<u64>, Option<u64>) {
        match &e.data {
            EventData::TurnStart(d) => {
                self.turn = Some(d.turn);
                self.step = None;
                (self.turn, None)
            }
            EventData::TurnEnd(d) => {
                self.turn = None;
                self.step = None;
                (Some(d.turn), None)
            }
            EventData::StepStart(d) => {
                self.step = Some(d.step);
                (Some(d.turn), Some(d.step))
            }
            EventData::StepEnd(d) => {
                self.step = None;
                (Some(d.turn), Some(d.step))
            }
            _ => (self.turn, self.step),
        }
    }
}

/// Events a purge leaves as they are: tombstones (purging one again would replace its record
/// of the type it was) and the audit events of earlier purges (the record that they happened).
fn kept_by_purge(e: &Event) -> bool {
    matches!(&e.data, EventData::Unknown(u)
        if u.type_name == TOMBSTONE_TYPE || u.type_name == PURGE_AUDIT_TYPE)
}

/// The tombstone of `e` (docs/events.md §9): the structure events keep their type and numbers
/// (so the lifecycle still holds) without content; every other event becomes a `purged` event
/// naming its type, turn and step.
fn tombstone(mut e: Event, turn: Option<u64>, step: Option<u64>) -> Event {
    e.extra = Map::new();
    match &mut e.data {
        EventData::TurnStart(d) => d.extra = Map::new(),
        EventData::TurnEnd(d) => {
            d.reason.error = Opt::Absent;
            d.reason.extra = Map::new();
            d.extra = Map::new();
        }
        EventData::StepStart(d) => {
            d.request = Opt::Absent;
            d.extra = Map::new();
        }
        EventData::StepEnd(d) => d.extra = Map::new(),
        _ => {
            let mut data = Map::new();
            let _ = data.push("type", Value::String(e.data.type_name().to_string()));
            if let Some(t) = turn {
                let _ = data.push("turn", Value::Number(crate::event::Number::from_u64(t)));
            }
            if let Some(s) = step {
                let _ = data.push("step", Value::Number(crate::event::Number::from_u64(s)));
            }
            e.data = EventData::Unknown(UnknownEvent {
                type_name: TOMBSTONE_TYPE.to_string(),
                data,
            });
            e.surface_op = None;
            e.source_event_seqs = None;
        }
    }
    e
}

/// One finding of [`Store::scan_damaged`]: a match in a file of a session's `damaged/` folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedFinding {
    /// The session.
    pub session: String,
    /// The file (in `<store>/sessions/<id>/damaged/`).
    pub file: std::path::PathBuf,
    /// Which rule, a masked preview; `path` is `damaged/<file name>`.
    pub finding: Finding,
}

impl Store {
    /// Every match of `redactor`'s rules in the files of session `id`'s `damaged/` folder (what
    /// a salvage cut: the cut records, the valid events found after the damage, copies of
    /// damaged files), scanned as bytes (docs/events.md §9); a compressed (cold) segment there
    /// as the bytes of its records, every block that decompresses. None when it has no such
    /// folder.
    /// `redact` does not rewrite these files: delete the folder once nothing in it is needed.
    pub fn scan_damaged(&self, id: &str, redactor: &Redactor) -> Result<Vec<DamagedFinding>> {
        let dir = self.existing_dir(id)?.join(log::DAMAGED_DIR);
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("read directory", &dir, e)),
        };
        let mut files = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
            // Not through a link.
            let t = entry
                .file_type()
                .map_err(|e| Error::io("read", entry.path(), e))?;
            if t.is_file() {
                files.push(entry.path());
            }
        }
        files.sort();
        let mut out = Vec::new();
        for file in files {
            // A compressed (cold) segment is scanned as the records it holds: its raw bytes
            // are zstd frames, in which a secret whose words came earlier in its block shows
            // without them. Any other file (or a cold one too damaged to decompress) is
            // scanned as it is.
            let plain = log::cold::plain_of_any(&file);
            let raw;
            let bytes: &[u8] = match &plain {
                Some(plain) => plain,
                None => {
                    raw = std::fs::read(&file).map_err(|e| Error::io("read", &file, e))?;
                    &raw
                }
            };
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let at = format!("{}/{name}", log::DAMAGED_DIR);
            out.extend(
                redactor
                    .scan_bytes(bytes, &at)
                    .into_iter()
                    .map(|finding| DamagedFinding {
                        session: id.to_string(),
                        file: file.clone(),
                        finding,
                    }),
            );
        }
        Ok(out)
    }

    /// The secrets of session `id` split across its streamed chunks (docs/events.md §9): a
    /// pass over its `assistant/chunk` events only.
    fn split_secrets(&self, id: &str, redactor: &Redactor) -> Result<SplitSecrets> {
        let reader = self.open_reader(id)?;
        let mut streams = ChunkStreams::new(redactor);
        for event in reader.events() {
            let event = event?;
            if !matches!(
                &event.data,
                crate::event::archived::ArchivedEventData::AssistantChunk(_)
            ) {
                continue;
            }
            let seq = event.seq();
            let owned = decode_event(event).map_err(|source| Error::Archive {
                seq: Some(seq),
                source,
            })?;
            streams.push(seq, &owned);
        }
        Ok(streams.finish())
    }

    /// Every match of `redactor`'s rules in session `id`: its metadata, then its events in order
    /// (a secret split across streamed chunks reported once, on the chunk it starts in).
    pub fn scan_secrets(&self, id: &str, redactor: &Redactor) -> Result<Vec<SecretFinding>> {
        let split = self.split_secrets(id, redactor)?;
        let reader = self.open_reader(id)?;
        let mut out: Vec<SecretFinding> = redactor
            .scan_meta(reader.meta())
            .into_iter()
            .map(|finding| SecretFinding {
                session: id.to_string(),
                seq: None,
                finding,
            })
            .collect();
        for event in reader.events() {
            let event = event?;
            let seq = event.seq();
            let owned = decode_event(event).map_err(|source| Error::Archive {
                seq: Some(seq),
                source,
            })?;
            out.extend(
                redactor
                    .scan_event_split(&owned, seq, &split)
                    .into_iter()
                    .map(|finding| SecretFinding {
                        session: id.to_string(),
                        seq: Some(seq),
                        finding,
                    }),
            );
        }
        Ok(out)
    }

    /// The other sessions of the store (deleted ones too) that share a file (a hard-linked
    /// segment, from a fork) with session `id`, or were forked from it (their copy of its
    /// first events is theirs, not linked, but holds the same content).
    pub fn sharing_files(&self, id: &str) -> Result<Vec<String>> {
        let dir = self.existing_dir(id)?;
        let mine = linked_files(&dir)?;
        let mut out = Vec::new();
        for other in self.ids(super::Deleted::Include)? {
            if other == id {
                continue;
            }
            let odir = self.root.join(SESSIONS_DIR).join(&other);
            let child = SessionMeta::load(&odir)
                .is_ok_and(|m| m.parent_session.present().is_some_and(|p| p == id));
            if child || (!mine.is_empty() && !linked_files(&odir)?.is_disjoint(&mine)) {
                out.push(other);
            }
        }
        Ok(out)
    }

    /// Redacts session `id` retroactively with `redactor`: rewrites it (and every session
    /// sharing a segment with it) as the module docs say, when the scan finds anything.
    /// Fails while a writer has one of them open. Returns a report per session rewritten (none
    /// when nothing matched).
    pub fn redact(&self, id: &str, redactor: &Redactor) -> Result<Vec<RewriteReport>> {
        // What a killed rewrite left (an old session among them) goes, even when nothing is
        // found now.
        let _ = super::import::remove_leftovers(&self.root.join(SESSIONS_DIR));
        let mut reports = Vec::new();
        let shared = self.sharing_files(id)?;
        for (target, by) in std::iter::once((id.to_string(), None))
            .chain(shared.into_iter().map(|s| (s, Some(id.to_string()))))
        {
            if self.scan_secrets(&target, redactor)?.is_empty() {
                continue;
            }
            let split = self.split_secrets(&target, redactor)?;
            let matches = std::cell::Cell::new(0u64);
            let (events, changed) = self.rewrite(
                &target,
                |meta| matches.set(matches.get() + redactor.redact_meta(meta) as u64),
                |mut e, seq| {
                    let n = redactor.redact_event_split(&mut e, seq, &split) as u64;
                    matches.set(matches.get() + n);
                    Ok((e, n > 0))
                },
                |_| None,
            )?;
            let matches = matches.get();
            reports.push(RewriteReport {
                id: target,
                events,
                changed,
                matches,
                shared_with: by,
            });
        }
        Ok(reports)
    }

    /// Purges `range` of session `id`: each event becomes a tombstone keeping seq, time, type,
    /// turn and step (docs/events.md §9), an `audit/purge` event is appended, and the session is
    /// rewritten as the module docs say (the sessions forked from it get the same seqs purged
    /// where their events are the same; the session it was forked from is never changed).
    /// Tombstones and earlier `audit/purge` events in the range are left as they are; a range
    /// with nothing else to purge rewrites nothing (no report, no audit event). Fails while a
    /// writer has one open, and when the purge would leave the log invalid (a result whose call
    /// was purged, a later replace naming a purged message): nothing changes then.
    pub fn purge(&self, id: &str, range: PurgeRange) -> Result<Vec<RewriteReport>> {
        let reader = self.open_reader(id)?;
        let (a, b) = match range {
            PurgeRange::Seqs(a, b) => {
                if a > b || b >= reader.len() {
                    let holds = match reader.len() {
                        0 => "no event".to_string(),
                        n => format!("seqs 0..{}", n - 1),
                    };
                    return Err(Error::Invalid(format!(
                        "cannot purge seqs {a}..{b}: session {id:?} holds {holds}"
                    )));
                }
                (a, b)
            }
            PurgeRange::Turn(t) => {
                let mut start = None;
                let mut end = None;
                for event in reader.events() {
                    let event = event?;
                    match &event.data {
                        crate::event::archived::ArchivedEventData::TurnStart(s)
                            if s.turn.to_native() == t =>
                        {
                            start = Some(event.seq())
                        }
                        crate::event::archived::ArchivedEventData::TurnEnd(e)
                            if e.turn.to_native() == t && start.is_some() =>
                        {
                            end = Some(event.seq());
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(start) = start else {
                    return Err(Error::Invalid(format!(
                        "session {id:?} has no turn {t} (no turn/start with turn {t})"
                    )));
                };
                (start, end.unwrap_or(reader.len().saturating_sub(1)))
            }
        };
        let turn = match range {
            PurgeRange::Turn(t) => Some(t),
            PurgeRange::Seqs(..) => None,
        };
        // The sessions forked from this one (and forks of those), and how far their events are
        // the same as this one's: found before anything is rewritten. The session it was forked
        // from keeps its own history, shared segment or not: purging a fork never changes it.
        let mut others = Vec::new();
        for other in self.forks_of(id)? {
            let theirs = self.open_reader(&other)?;
            let mut common = 0u64;
            for (x, y) in reader.events().zip(theirs.events()) {
                let (x, y) = (x?, y?);
                // A tombstone on either side (a seq one of them purged before) still stands for
                // the same event.
                let tomb = x.type_name() == TOMBSTONE_TYPE || y.type_name() == TOMBSTONE_TYPE;
                if common > b || (!tomb && x.to_canonical_string() != y.to_canonical_string()) {
                    break;
                }
                common += 1;
            }
            if common > a {
                others.push((other, b.min(common - 1)));
            }
        }
        drop(reader);
        let mut reports: Vec<RewriteReport> =
            self.purge_seqs(id, a, b, turn, None)?.into_iter().collect();
        for (other, end) in others {
            reports.extend(self.purge_seqs(&other, a, end, turn, Some(id.to_string()))?);
        }
        Ok(reports)
    }

    /// The sessions of the store (deleted ones too) forked from session `id`, or from one of
    /// those, and so on: the sessions whose first events are copies of `id`'s.
    fn forks_of(&self, id: &str) -> Result<Vec<String>> {
        let mut parents: Vec<(String, String)> = Vec::new();
        for other in self.ids(super::Deleted::Include)? {
            let dir = self.root.join(SESSIONS_DIR).join(&other);
            if let Some(p) = SessionMeta::load(&dir)
                .ok()
                .and_then(|m| m.parent_session.present().cloned())
            {
                parents.push((other, p));
            }
        }
        let mut out: Vec<String> = Vec::new();
        let mut frontier = vec![id.to_string()];
        while let Some(parent) = frontier.pop() {
            for (child, p) in &parents {
                if *p == parent && child != id && !out.contains(child) {
                    out.push(child.clone());
                    frontier.push(child.clone());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Purges seqs `a..=b` of session `id`; `None` (nothing rewritten, no audit event) when
    /// every event there is purged already.
    fn purge_seqs(
        &self,
        id: &str,
        a: u64,
        b: u64,
        turn: Option<u64>,
        by: Option<String>,
    ) -> Result<Option<RewriteReport>> {
        let purge = |e: Event, pos: &mut Position, seq: u64| -> (Event, bool) {
            let (t, s) = pos.advance(&e);
            if !(a..=b).contains(&seq) || kept_by_purge(&e) {
                return (e, false);
            }
            let stone = tombstone(e.clone(), t, s);
            let changed = stone != e;
            (stone, changed)
        };
        // A dry run first: a range purged already is left as it is (a second purge would
        // replace each tombstone's record of the type it was).
        {
            let reader = self.open_reader(id)?;
            let mut pos = Position {
                turn: None,
                step: None,
            };
            let mut any = false;
            for event in reader.events() {
                let event = event?;
                let seq = event.seq();
                if seq > b {
                    break;
                }
                let owned = decode_event(event).map_err(|source| Error::Archive {
                    seq: Some(seq),
                    source,
                })?;
                if purge(owned, &mut pos, seq).1 {
                    any = true;
                    break;
                }
            }
            if !any {
                return Ok(None);
            }
        }
        let mut pos = Position {
            turn: None,
            step: None,
        };
        let purged = std::cell::Cell::new(0u64);
        let (events, changed) = self.rewrite(
            id,
            |_| {},
            |e, seq| {
                let (e, did) = purge(e, &mut pos, seq);
                purged.set(purged.get() + u64::from(did));
                Ok((e, did))
            },
            |_| {
                let mut data = Map::new();
                let n = |v: u64| Value::Number(crate::event::Number::from_u64(v));
                let _ = data.push("startSeq", n(a));
                let _ = data.push("endSeq", n(b));
                let _ = data.push("events", n(purged.get()));
                if let Some(t) = turn {
                    let _ = data.push("turn", n(t));
                }
                Some(EventData::Unknown(UnknownEvent {
                    type_name: PURGE_AUDIT_TYPE.to_string(),
                    data,
                }))
            },
        )?;
        Ok(Some(RewriteReport {
            id: id.to_string(),
            events,
            changed,
            matches: purged.get(),
            shared_with: by,
        }))
    }

    /// Rewrites session `id`: `meta_fn` changes its metadata, `event_fn` each event (given with
    /// its seq; returns the event and whether it changed), `tail` an event to append at the end.
    /// Builds, syncs and swaps in as the module docs say. Returns (events, events changed).
    fn rewrite(
        &self,
        id: &str,
        meta_fn: impl FnOnce(&mut SessionMeta),
        mut event_fn: impl FnMut(Event, u64) -> Result<(Event, bool)>,
        tail: impl FnOnce(u64) -> Option<EventData>,
    ) -> Result<(u64, u64)> {
        let dir = self.existing_dir(id)?;
        let sessions = self.root.join(SESSIONS_DIR);
        let _ = super::import::remove_leftovers(&sessions);
        // No writer while the session is rewritten (and none can start: the new folder is
        // locked before it takes the id).
        let _old_lock = log::lock_dir(&dir)?;
        let reader = SessionReader::open(&dir)?;
        let mut meta = reader.meta().clone();
        let state = meta.state;
        meta_fn(&mut meta);
        meta.state = SessionState::Active;
        let temp = sessions.join(super::import::temp_name(REWRITE_PREFIX));
        let built = (|| -> Result<(u64, u64)> {
            let mut opts = self.config.session_options();
            opts.redact = None;
            opts.keep_raw_chunks = true;
            opts.log.durability = log::Durability::Os;
            let session = Session::create(&temp, meta.clone(), opts)?;
            let mut changed = 0u64;
            let mut last_time = i64::MIN;
            for event in reader.events() {
                let event = event?;
                let seq = event.seq();
                let owned = decode_event(event).map_err(|source| Error::Archive {
                    seq: Some(seq),
                    source,
                })?;
                let time = owned.time;
                last_time = last_time.max(time);
                let (new, did) = event_fn(owned, seq)?;
                changed += u64::from(did);
                session
                    .append_draft(Draft {
                        event: new,
                        seq: Some(seq),
                        time: Some(time),
                    })
                    .map_err(|e| {
                        Error::Invalid(format!(
                            "the rewritten session {id:?} would be refused at seq {seq}: {e}"
                        ))
                    })?;
            }
            let n = reader.len();
            if let Some(data) = tail(n) {
                session.append_draft(Draft {
                    event: Event {
                        seq: n,
                        time: now_ms().max(last_time),
                        data,
                        surface_op: None,
                        source_event_seqs: None,
                        extra: Map::new(),
                    },
                    seq: Some(n),
                    time: Some(now_ms().max(last_time)),
                })?;
            }
            let len = session.len();
            session.sync()?;
            session.close()?;
            if state != SessionState::Active {
                meta.state = state;
                meta.save(&temp)?;
            }
            if state == SessionState::Archived {
                // Every segment of an archived session is compressed (docs/design.md, "Cold
                // segments"): the rewritten ones too, before they take the session's place.
                let _lock = log::lock_dir(&temp)?;
                log::cold::compress_locked(&temp, &log::OsStorage, false)?;
            }
            sync_dir(&temp)?;
            Ok((len, changed))
        })();
        let (len, changed) = match built {
            Ok(v) => v,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&temp);
                return Err(e);
            }
        };
        drop(reader);
        let new_lock = match log::lock_dir(&temp) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&temp);
                return Err(e.into());
            }
        };
        if let Err(e) = exchange(&temp, &dir) {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(e);
        }
        sync_dir(&sessions)?;
        // The hidden folder now holds the old session.
        std::fs::remove_dir_all(&temp).map_err(|e| Error::io("remove", &temp, e))?;
        sync_dir(&sessions)?;
        drop(new_lock);
        Ok((len, changed))
    }
}

/// Swaps two folders atomically (`renameat2` with `RENAME_EXCHANGE`).
fn exchange(a: &Path, b: &Path) -> Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .map_err(|e| {
        Error::io(
            "exchange (renameat2 RENAME_EXCHANGE; the file system must support it)",
            a,
            e.into(),
        )
    })
}
