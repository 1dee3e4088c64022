//! Checkpoints: everything the session layer derives from a log (lifecycle bookkeeping and turn
//! state, statistics counters, the projection's frozen messages and call tables), written to
//! `CHECKPOINT` beside the segments at segment seals and clean closes, so that opening a session,
//! `status`, `derive` and `stats` replay only the events after it (`stats` still checks the
//! checksum of every record it covers, so damage is named). A restored projection reads no
//! message: its frozen prefix builds each message from the log on first use (docs/design.md).
//!
//! A checkpoint is a cache, never the truth: it names the log it was derived from (the log id),
//! the number of events it covers and the crc32 of the payload of the last one. One whose log id,
//! length or crc does not match the log (a truncated or replaced log), or whose checksums fail,
//! is ignored and everything is derived from the log again. `verify` compares it with a full
//! replay ([`SessionReader::verify_checkpoint`]).
//!
//! The file (all integers little-endian; the layout is in docs/format.md):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `AGLOGCKP` |
//! | 8 | 2 | format version (3) |
//! | 10 | 2 | header size (64) |
//! | 12 | 4 | reserved, zero |
//! | 16 | 16 | log id |
//! | 32 | 8 | events covered (`n`: seqs `0..n`) |
//! | 40 | 4 | crc32 of the payload of event `n - 1` (0 when `n` = 0) |
//! | 44 | 4 | reserved, zero |
//! | 48 | 8 | body length |
//! | 56 | 4 | crc32 of the body |
//! | 60 | 4 | crc32 of bytes 0..60 |
//! | 64 | … | body: three sections, each a u64 length then its bytes: lifecycle, statistics, projection |

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::event::archived::ArchivedEvent;
use crate::event::Block;
use crate::event::{access_event, decode_event, ReasonKind};
use crate::log::{LogId, LogReader};
use crate::projection::{
    projector_wants, Frozen, FrozenSource, Message, NodeTable, ProjectError, Projector, Role,
    NODE_ENTRY,
};

use super::facts::Facts;
use super::lifecycle::{Lifecycle, LifecycleError};
use super::reader::SessionReader;
use super::stats::StatsCollector;

/// The name of the checkpoint file in a session directory.
pub const CHECKPOINT_FILE: &str = "CHECKPOINT";
/// The prefix of the temporary files a checkpoint is written to before the rename (a crash may
/// leave one; it is never read, and the next writer removes it).
pub const CHECKPOINT_TMP_PREFIX: &str = "CHECKPOINT.tmp";

const MAGIC: [u8; 8] = *b"AGLOGCKP";
/// Version 2: the projection's nodes in a table of fixed-size entries (read lazily); version 3:
/// the projection also keeps the seq of the last `step/end` or `turn/end`. A checkpoint of
/// another version is ignored (rebuilt by the next writer): it is a cache.
const VERSION: u16 = 3;
const HEADER: usize = 64;
/// A checkpoint larger than this is not read (it is derived state, not data).
const MAX_BODY: u64 = 1 << 32;

/// What a stored checkpoint is worth, as [`SessionReader::verify_checkpoint`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckpointCheck {
    /// The session has no checkpoint (everything is derived from the log).
    Missing,
    /// The checkpoint cannot be used: damaged, of another log, or stale (the log no longer holds
    /// the events it covers). Readers ignore it; the next writer replaces it.
    Unusable {
        /// Why.
        reason: String,
    },
    /// The checkpoint equals a full replay of the events it covers.
    Matches {
        /// The events it covers.
        covers: u64,
    },
    /// The checkpoint is valid as a file but differs from a full replay of the events it covers.
    Mismatch {
        /// The events it covers.
        covers: u64,
        /// Which part differs.
        detail: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// A growing byte buffer for the checkpoint body.
#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.u64(v);
            }
        }
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// A reader of a checkpoint body; every error is a damaged checkpoint.
pub(crate) struct Dec<'a> {
    b: &'a [u8],
    at: usize,
}

/// Why a checkpoint body cannot be read.
pub(crate) type Bad = String;

impl<'a> Dec<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Dec { b, at: 0 }
    }
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], Bad> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("the body ends early (at byte {})", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub(crate) fn u8(&mut self) -> std::result::Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn bool(&mut self) -> std::result::Result<bool, Bad> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("a flag of {b}")),
        }
    }
    pub(crate) fn u64(&mut self) -> std::result::Result<u64, Bad> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub(crate) fn i64(&mut self) -> std::result::Result<i64, Bad> {
        Ok(self.u64()? as i64)
    }
    pub(crate) fn opt_u64(&mut self) -> std::result::Result<Option<u64>, Bad> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.u64()?)),
            b => Err(format!("an option tag of {b}")),
        }
    }
    /// A count of items, each at least `min` bytes: never more than the bytes left allow.
    pub(crate) fn count(&mut self, min: usize) -> std::result::Result<usize, Bad> {
        let n = self.u64()?;
        let left = (self.b.len() - self.at) as u64;
        if n.saturating_mul(min.max(1) as u64) > left {
            return Err(format!("a count of {n} with {left} bytes left"));
        }
        Ok(n as usize)
    }
    pub(crate) fn str(&mut self) -> std::result::Result<&'a str, Bad> {
        let n = self.count(1)?;
        std::str::from_utf8(self.take(n)?).map_err(|_| "a string that is not UTF-8".to_string())
    }
    pub(crate) fn string(&mut self) -> std::result::Result<String, Bad> {
        self.str().map(str::to_string)
    }
    /// The position in the bytes.
    pub(crate) fn pos(&self) -> usize {
        self.at
    }
    /// Skips `n` bytes.
    pub(crate) fn skip(&mut self, n: usize) -> std::result::Result<(), Bad> {
        self.take(n).map(drop)
    }
    pub(crate) fn end(&self) -> std::result::Result<(), Bad> {
        if self.at == self.b.len() {
            Ok(())
        } else {
            Err(format!("{} bytes left over", self.b.len() - self.at))
        }
    }
}

pub(crate) fn reason_code(r: ReasonKind) -> u8 {
    match r {
        ReasonKind::Completed => 0,
        ReasonKind::Aborted => 1,
        ReasonKind::Blocked => 2,
        ReasonKind::Error => 3,
        ReasonKind::MaxTokens => 4,
        ReasonKind::Interrupted => 5,
    }
}

pub(crate) fn reason_of(code: u8) -> std::result::Result<ReasonKind, Bad> {
    Ok(match code {
        0 => ReasonKind::Completed,
        1 => ReasonKind::Aborted,
        2 => ReasonKind::Blocked,
        3 => ReasonKind::Error,
        4 => ReasonKind::MaxTokens,
        5 => ReasonKind::Interrupted,
        c => return Err(format!("an end reason of {c}")),
    })
}

// ---------------------------------------------------------------------------------------------
// What is derived

/// Everything derived from the first `len` events of a session.
#[derive(Clone, Default)]
pub(crate) struct Derived {
    /// Events applied.
    pub len: u64,
    /// The latest event time seen (`i64::MIN` before any).
    pub last_time: i64,
    /// Statistics counters and, inside, the lifecycle bookkeeping.
    pub stats: StatsCollector,
    /// The projection.
    pub projector: Projector,
    /// The first event the projection refused (a log written without the rules): what
    /// `messages_at` reports.
    pub projection_error: Option<Refused>,
    /// The first lifecycle violations (at most [`MAX_VIOLATIONS`]).
    pub violations: Vec<LifecycleError>,
    /// False when only the lifecycle and statistics are wanted: the projection is neither
    /// restored nor advanced (such a `Derived` is never written).
    pub skip_projection: bool,
}

/// The first event the projection refused, as a replay found it or as a checkpoint restored it.
#[derive(Clone, Debug)]
pub(crate) enum Refused {
    /// Found by this replay: the typed error, with the seq of the stored event.
    Typed { seq: u64, error: ProjectError },
    /// Restored from a checkpoint, which keeps only the text (the format stays as it is; the
    /// typed error is rebuilt by a replay from the start, see
    /// [`SessionReader::projection_refusal`]).
    Text(String),
}

impl Refused {
    /// The text a checkpoint stores (the same words as the error's message).
    fn text(&self) -> String {
        match self {
            Refused::Typed { seq, error } => crate::error::stored_event_refused(*seq, error),
            Refused::Text(s) => s.clone(),
        }
    }
}

/// Violations kept (an open reports the first few).
pub(crate) const MAX_VIOLATIONS: usize = 16;

impl Derived {
    /// Nothing derived yet, from `log`: the lifecycle reads the calls of closed turns from it
    /// instead of keeping them.
    pub(crate) fn new(log: &LogReader) -> Self {
        let mut d = Derived {
            last_time: i64::MIN,
            ..Derived::default()
        };
        d.attach(log);
        d
    }

    fn attach(&mut self, log: &LogReader) {
        let lifecycle = self.stats.lifecycle_mut();
        lifecycle.read_past_calls_from(log.clone(), false);
        let ended = lifecycle.last_end().map(|(turn, _)| turn);
        self.projector.forget_answered_calls_of_closed_turns(ended);
    }

    /// Applies the events `self.len..to` of `log`.
    pub(crate) fn advance(&mut self, log: &LogReader, to: u64) -> Result<()> {
        for rec in log.range(self.len..to) {
            let rec = rec?;
            let event = access_event(rec.payload).map_err(|source| Error::Archive {
                seq: Some(rec.seq),
                source,
            })?;
            self.apply(event)?;
        }
        Ok(())
    }

    /// Applies one event (the next in seq order).
    pub(crate) fn apply(&mut self, event: &ArchivedEvent) -> Result<()> {
        let facts = Facts::of_archived(event);
        if self.violations.len() < MAX_VIOLATIONS {
            if let Err(v) = self.stats.lifecycle().check(&facts) {
                self.violations.push(v);
            }
        }
        // Applies the lifecycle too.
        self.stats.add(event);
        self.last_time = self.last_time.max(event.time());
        if !self.skip_projection && projector_wants(event.event_type()) {
            let owned = decode_event(event).map_err(|source| Error::Archive {
                seq: Some(event.seq()),
                source,
            })?;
            if let Err(e) = self.projector.apply(&owned) {
                if self.projection_error.is_none() {
                    self.projection_error = Some(Refused::Typed {
                        seq: owned.seq,
                        error: e,
                    });
                }
            }
        }
        self.len = event.seq().saturating_add(1).max(self.len);
        Ok(())
    }

    /// The three sections' bytes (`None`: the projection does not fit the format's 32-bit
    /// offsets; no checkpoint is written).
    fn encode_sections(&self) -> Option<[Vec<u8>; 3]> {
        let mut l = Enc::default();
        l.u64(self.len);
        l.i64(self.last_time);
        self.stats.lifecycle().encode(&mut l);
        l.u64(self.violations.len() as u64);
        for v in &self.violations {
            super::lifecycle::encode_violation(v, &mut l);
        }
        let mut s = Enc::default();
        self.stats.encode_counters(&mut s);
        let mut p = Enc::default();
        match &self.projection_error {
            None => p.u8(0),
            Some(e) => {
                p.u8(1);
                p.str(&e.text());
            }
        }
        self.projector.encode_state(&mut p)?;
        Some([l.0, s.0, p.0])
    }
}

// ---------------------------------------------------------------------------------------------
// The file

/// A checkpoint file read and checked against its log: its sections not decoded yet.
pub(crate) struct Stored {
    pub covers: u64,
    /// Shared with the lazily built messages of a restored projection (their node table).
    body: Arc<[u8]>,
    sections: [std::ops::Range<usize>; 3],
}

fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// The crc32 of the payload of event `len - 1` (0 for `len` 0): what ties a checkpoint to the
/// events it covers.
fn tail_crc(log: &LogReader, len: u64) -> Result<u32> {
    match len.checked_sub(1) {
        None => Ok(0),
        Some(last) => Ok(crc(log.get(last)?.payload)),
    }
}

/// What reading a checkpoint found.
pub(crate) enum Found {
    Missing,
    Unusable(String),
    Valid(Stored),
}

/// Reads the checkpoint of the session in `dir` and checks it against `log`: never an error, a
/// checkpoint that cannot be used says why.
pub(crate) fn read(dir: &Path, log: &LogReader) -> Found {
    let path = dir.join(CHECKPOINT_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Missing,
        Err(e) => return Found::Unusable(format!("{}: {e}", path.display())),
    };
    match check(&bytes, log) {
        Ok(stored) => Found::Valid(stored),
        Err(reason) => Found::Unusable(format!("{}: {reason}", path.display())),
    }
}

fn check(bytes: &[u8], log: &LogReader) -> std::result::Result<Stored, Bad> {
    if bytes.len() < HEADER {
        return Err(format!("{} bytes, shorter than its header", bytes.len()));
    }
    let h = &bytes[..HEADER];
    if h[0..8] != MAGIC {
        return Err("not a checkpoint (bad magic)".into());
    }
    if crc(&h[..60]) != u32_at(h, 60) {
        return Err("the header checksum does not match (damaged)".into());
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != VERSION {
        return Err(format!(
            "checkpoint format version {version}, this build reads {VERSION}"
        ));
    }
    let mut id = [0u8; 16];
    id.copy_from_slice(&h[16..32]);
    if log.log_id() != Some(LogId(id)) {
        return Err("it was derived from another log (log id differs): stale".into());
    }
    let covers = u64_at(h, 32);
    if covers > log.len() {
        return Err(format!(
            "it covers {covers} events and the log holds {}: stale (the log was cut)",
            log.len()
        ));
    }
    let want = tail_crc(log, covers).map_err(|e| {
        format!(
            "reading the last event it covers (seq {}): {e}",
            covers.saturating_sub(1)
        )
    })?;
    if want != u32_at(h, 40) {
        return Err(format!(
            "the event at seq {} is not the one it was derived from: stale",
            covers.saturating_sub(1)
        ));
    }
    let body_len = u64_at(h, 48);
    if body_len > MAX_BODY || body_len != (bytes.len() - HEADER) as u64 {
        return Err(format!(
            "a body of {body_len} bytes in a file of {}: damaged",
            bytes.len()
        ));
    }
    let body = &bytes[HEADER..];
    if crc(body) != u32_at(h, 56) {
        return Err("the body checksum does not match (damaged)".into());
    }
    let mut at = 0usize;
    let mut sections: [std::ops::Range<usize>; 3] = [0..0, 0..0, 0..0];
    for s in &mut sections {
        if body.len() - at < 8 {
            return Err("the body ends inside a section length".into());
        }
        let n = u64_at(body, at);
        at += 8;
        if n > (body.len() - at) as u64 {
            return Err("a section runs past the body".into());
        }
        *s = at..at + n as usize;
        at += n as usize;
    }
    if at != body.len() {
        return Err("bytes after the last section".into());
    }
    Ok(Stored {
        covers,
        body: Arc::from(body),
        sections,
    })
}

impl Stored {
    fn section(&self, i: usize) -> &[u8] {
        &self.body[self.sections[i].clone()]
    }

    /// The lifecycle bookkeeping, the last event time and the first violations.
    pub(crate) fn lifecycle(
        &self,
    ) -> std::result::Result<(Lifecycle, i64, Vec<LifecycleError>), Bad> {
        let mut d = Dec::new(self.section(0));
        let len = d.u64()?;
        if len != self.covers {
            return Err(format!(
                "the lifecycle covers {len} events, the header {}",
                self.covers
            ));
        }
        let last_time = d.i64()?;
        let lifecycle = Lifecycle::decode(&mut d)?;
        let n = d.count(8)?;
        let mut violations = Vec::with_capacity(n.min(MAX_VIOLATIONS));
        for _ in 0..n {
            violations.push(super::lifecycle::decode_violation(&mut d)?);
        }
        d.end()?;
        Ok((lifecycle, last_time, violations))
    }

    /// The projection; its frozen messages are read from `log` when first used (each node
    /// names its event by seq).
    pub(crate) fn projector(
        &self,
        log: &LogReader,
    ) -> std::result::Result<(Projector, Option<Refused>), Bad> {
        let mut d = Dec::new(self.section(2));
        let error = match d.u8()? {
            0 => None,
            1 => Some(Refused::Text(d.string()?)),
            t => return Err(format!("a projection error tag of {t}")),
        };
        let base = self.sections[2].start;
        let mut frozen = |t: NodeTable| -> std::result::Result<Frozen, Bad> {
            Ok(Frozen::new(Box::new(Nodes {
                body: Arc::clone(&self.body),
                entries: base + t.entries.start..base + t.entries.end,
                ids: base + t.ids.start..base + t.ids.end,
                n: t.n,
                covers: self.covers,
                log: log.clone(),
            })))
        };
        let projector = Projector::decode_state(&mut d, &mut frozen)?;
        d.end()?;
        Ok((projector, error))
    }

    /// Everything, for a tail replay from here.
    pub(crate) fn derived(&self, log: &LogReader) -> std::result::Result<Derived, Bad> {
        let (lifecycle, last_time, violations) = self.lifecycle()?;
        let mut d = Dec::new(self.section(1));
        let stats = StatsCollector::decode_counters(&mut d, lifecycle)?;
        d.end()?;
        let (projector, projection_error) = self.projector(log)?;
        Ok(Derived {
            len: self.covers,
            last_time,
            stats,
            projector,
            projection_error,
            violations,
            skip_projection: false,
        })
    }

    /// The lifecycle and statistics only (no message is read from the log).
    pub(crate) fn derived_without_projection(&self) -> std::result::Result<Derived, Bad> {
        let (lifecycle, last_time, violations) = self.lifecycle()?;
        let mut d = Dec::new(self.section(1));
        let stats = StatsCollector::decode_counters(&mut d, lifecycle)?;
        d.end()?;
        Ok(Derived {
            len: self.covers,
            last_time,
            stats,
            projector: Projector::new(),
            projection_error: None,
            violations,
            skip_projection: true,
        })
    }
}

/// The frozen messages of a restored projection: a checkpoint's node table (shared with its
/// body) and the log their events are read from, one message at a time.
struct Nodes {
    body: Arc<[u8]>,
    /// The table: `n` entries of `NODE_ENTRY` bytes, in `body`.
    entries: std::ops::Range<usize>,
    /// The id area, in `body`.
    ids: std::ops::Range<usize>,
    n: usize,
    covers: u64,
    log: LogReader,
}

impl Nodes {
    /// Entry `i`: the seq and, for a tool result, the bytes of its `toolUseId` (`Err` when
    /// they are not in the id area).
    fn raw(&self, i: usize) -> (u64, Option<std::result::Result<&str, ()>>) {
        let at = self.entries.start + i * NODE_ENTRY;
        let Some(e) = self.body.get(at..at + NODE_ENTRY) else {
            return (u64::MAX, None);
        };
        let seq = u64_at(e, 0);
        let (off, len) = (u32_at(e, 8) as usize, u32_at(e, 12));
        if len == u32::MAX {
            return (seq, None);
        }
        let id = off
            .checked_add(len as usize)
            .filter(|&end| end <= self.ids.len())
            .and_then(|end| self.body.get(self.ids.start + off..self.ids.start + end))
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or(());
        (seq, Some(id))
    }

    fn build(&self, i: usize) -> std::result::Result<Message, String> {
        let (seq, id) = self.raw(i);
        if seq >= self.covers {
            return Err(format!(
                "the checkpoint names seq {seq}, past the {} events it covers",
                self.covers
            ));
        }
        let id = match id {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(())) => return Err("the checkpoint's toolUseId is out of bounds".into()),
        };
        let rec = self.log.get(seq).map_err(|e| e.to_string())?;
        let event = access_event(rec.payload).map_err(|e| e.to_string())?;
        let owned = decode_event(event).map_err(|e| e.to_string())?;
        crate::projection::node_message(&owned, id)
            .ok_or_else(|| format!("the event at seq {seq} projects to no message"))
    }
}

impl FrozenSource for Nodes {
    fn len(&self) -> usize {
        self.n
    }

    fn entry(&self, i: usize) -> (u64, Option<&str>) {
        let (seq, id) = self.raw(i);
        (seq, id.and_then(|id| id.ok()))
    }

    fn load(&self, i: usize) -> Message {
        self.build(i).unwrap_or_else(|e| {
            let seq = self.raw(i).0;
            Message {
                role: Role::System,
                content: vec![Block::Text {
                    text: format!(
                        "agentlog: the message of the event at seq {seq} cannot be read: {e}"
                    ),
                    extra: crate::event::Map::new(),
                }],
                source_seq: seq,
            }
        })
    }
}

/// The newest valid checkpoint's derived state, or an empty one (a missing, stale or damaged
/// checkpoint is ignored).
pub(crate) fn load_or_empty(dir: &Path, log: &LogReader, limit: u64, project: bool) -> Derived {
    if let Found::Valid(stored) = read(dir, log) {
        if stored.covers <= limit {
            let d = if project {
                stored.derived(log)
            } else {
                stored.derived_without_projection()
            };
            if let Ok(mut d) = d {
                d.attach(log);
                return d;
            }
        }
    }
    Derived {
        skip_projection: !project,
        ..Derived::new(log)
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Writes `derived` as the checkpoint of the session in `dir`: to a temporary file, synced,
/// renamed over `CHECKPOINT`, the directory synced.
pub(crate) fn write(dir: &Path, log: &LogReader, derived: &Derived) -> Result<()> {
    let Some(log_id) = log.log_id() else {
        return Ok(());
    };
    if derived.skip_projection {
        return Ok(());
    }
    let Some(sections) = derived.encode_sections() else {
        return Ok(());
    };
    let mut body = Vec::with_capacity(sections.iter().map(|s| s.len() + 8).sum());
    for s in &sections {
        body.extend_from_slice(&(s.len() as u64).to_le_bytes());
        body.extend_from_slice(s);
    }
    if body.len() as u64 > MAX_BODY {
        return Ok(());
    }
    let mut h = [0u8; HEADER];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h[10..12].copy_from_slice(&(HEADER as u16).to_le_bytes());
    h[16..32].copy_from_slice(&log_id.0);
    h[32..40].copy_from_slice(&derived.len.to_le_bytes());
    h[40..44].copy_from_slice(&tail_crc(log, derived.len)?.to_le_bytes());
    h[48..56].copy_from_slice(&(body.len() as u64).to_le_bytes());
    h[56..60].copy_from_slice(&crc(&body).to_le_bytes());
    let c = crc(&h[..60]);
    h[60..64].copy_from_slice(&c.to_le_bytes());
    let tmp = tmp_path(dir);
    let path = dir.join(CHECKPOINT_FILE);
    let written = (|| -> std::io::Result<()> {
        // Private like the segments: it holds what the events hold.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&h)?;
        f.write_all(&body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        sync_dir(dir)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("write the checkpoint", &path, e));
    }
    Ok(())
}

fn tmp_path(dir: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    dir.join(format!(
        "{CHECKPOINT_TMP_PREFIX}.{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Removes the temporary files a crashed checkpoint write left (under the writer's lock).
pub(crate) fn remove_stale_tmp(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(CHECKPOINT_TMP_PREFIX))
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Brings the checkpoint of the session in `dir` up to `to` events: from the newest valid one
/// (or from the start), replaying the events after it, then writing it.
pub(crate) fn refresh(dir: &Path, log: &LogReader, to: u64) -> Result<()> {
    let mut derived = load_or_empty(dir, log, to, true);
    // Up to date: nothing to write. For an empty log the loaded state cannot tell a checkpoint
    // of no events from none (or from a stale one, of a log since cut to nothing): one is
    // written, so a reader finds a sound one after every clean close.
    if derived.len == to && to > 0 {
        return Ok(());
    }
    derived.advance(log, to)?;
    write(dir, log, &derived)
}

impl SessionReader {
    /// Derives everything from the newest valid checkpoint (or from the start) up to `n` events.
    pub(crate) fn derived_at(&self, n: u64, project: bool) -> Result<Derived> {
        let mut d = load_or_empty(self.dir(), self.log(), n, project);
        d.advance(self.log(), n)?;
        Ok(d)
    }

    /// The error for the first stored event the projection of the first `n` events refused
    /// (`refused`, from [`SessionReader::derived_at`]): [`Error::Project`] with the typed
    /// error. A restored checkpoint keeps only the error's text; then the typed error is
    /// rebuilt by replaying the `n` events from the start (a rare path: only a log written
    /// without the rules has such an event).
    pub(crate) fn projection_refusal(&self, n: u64, refused: Refused) -> Error {
        let (seq, source) = match refused {
            Refused::Typed { seq, error } => (seq, error),
            Refused::Text(text) => {
                let mut full = Derived::new(self.log());
                match full.advance(self.log(), n) {
                    Err(e) => return e,
                    Ok(()) => match full.projection_error {
                        Some(Refused::Typed { seq, error }) => (seq, error),
                        // The replay did not refuse what the checkpoint says it did (a checkpoint
                        // that `agentlog verify` reports as differing): its text, as before.
                        _ => return Error::Invalid(text),
                    },
                }
            }
        };
        Error::Project { seq, source }
    }

    /// Checks the session's checkpoint against a full replay of the events it covers
    /// (`agentlog verify` reports a mismatch).
    pub fn verify_checkpoint(&self) -> Result<CheckpointCheck> {
        let stored = match read(self.dir(), self.log()) {
            Found::Missing => return Ok(CheckpointCheck::Missing),
            Found::Unusable(reason) => return Ok(CheckpointCheck::Unusable { reason }),
            Found::Valid(s) => s,
        };
        let covers = stored.covers;
        // Every section must decode (its messages are read from the log when used).
        if let Err(reason) = stored.derived(self.log()) {
            return Ok(CheckpointCheck::Unusable {
                reason: format!("{}: {reason}", self.dir().join(CHECKPOINT_FILE).display()),
            });
        }
        let mut full = Derived::new(self.log());
        full.advance(self.log(), covers)?;
        let Some(replayed) = full.encode_sections() else {
            return Ok(CheckpointCheck::Unusable {
                reason: "a full replay's projection does not fit a checkpoint".into(),
            });
        };
        for (i, name) in ["lifecycle state", "statistics", "projection"]
            .iter()
            .enumerate()
        {
            if stored.section(i) != replayed[i].as_slice() {
                return Ok(CheckpointCheck::Mismatch {
                    covers,
                    detail: format!(
                        "its {name} differs from a full replay of the {covers} events it covers"
                    ),
                });
            }
        }
        Ok(CheckpointCheck::Matches { covers })
    }
}
