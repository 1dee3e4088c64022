//! [`SessionReader`]: reading a session zero-copy, from this process or any other, while a writer
//! may be appending.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::event::archived::ArchivedEvent;
use crate::event::{access_event, decode_event, Event, JsonlWriter};
use crate::log::LogReader;
use crate::projection::Messages;

use super::facts::Facts;
use super::lifecycle::{Lifecycle, LifecycleError};
use super::meta::SessionMeta;
use super::PAYLOAD_SCHEMA;

/// The size of one event's record ([`SessionReader::record_size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSize {
    /// Bytes of the payload (the event's rkyv archive).
    pub payload: u64,
    /// Bytes the record takes in its segment: a 16-byte header, the payload, padding to 16.
    pub on_disk: u64,
}

/// Whether [`SessionReader::export`] writes the session's header line before its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderLine {
    /// The events only.
    Omit,
    /// The header line (docs/events.md §4) first, then the events.
    Include,
}

/// A reader of one session: events by seq and in order (zero-copy archived views), the
/// metadata, and everything derived from the log (lifecycle state, projection).
#[derive(Debug, Clone)]
pub struct SessionReader {
    dir: PathBuf,
    meta: SessionMeta,
    log: LogReader,
}

impl SessionReader {
    pub(crate) fn attached(dir: PathBuf, meta: SessionMeta, log: LogReader) -> Self {
        SessionReader { dir, meta, log }
    }

    /// Opens the session in `dir` for reading (no lock: works while another process writes).
    pub fn open(dir: impl AsRef<Path>) -> Result<SessionReader> {
        let dir = dir.as_ref().to_path_buf();
        let meta = SessionMeta::load(&dir)?;
        let log = LogReader::open(&dir)?;
        if !log.has_segments() {
            // A session's log is created before its session.json: it has lost its segments.
            return Err(Error::Log(crate::log::Error::Corrupt(Box::new(
                crate::log::Corruption {
                    path: dir.join(format!("{:020}.seg", 0)),
                    offset: 0,
                    seq: Some(0),
                    kind: crate::log::CorruptionKind::MissingSegment(
                        "the session has no segment file, and a session's log always has one"
                            .into(),
                    ),
                },
            ))));
        }
        if let Some(schema) = log.payload_schema().filter(|&s| s != PAYLOAD_SCHEMA) {
            return Err(Error::BadFile {
                path: dir,
                reason: format!(
                    "the log holds payloads of schema {schema}, not agentlog events \
                     (schema {PAYLOAD_SCHEMA})"
                ),
            });
        }
        Ok(SessionReader { dir, meta, log })
    }

    /// The session's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session's metadata (as read when the reader was opened).
    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// The underlying log reader.
    pub fn log(&self) -> &LogReader {
        &self.log
    }

    /// Events this reader sees.
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// True when the reader sees no event.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// Picks up events appended since; returns the new length.
    pub fn refresh(&mut self) -> Result<u64> {
        Ok(self.log.refresh()?)
    }

    /// Waits until there are more events than this reader sees, or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> Result<u64> {
        Ok(self.log.wait(timeout)?)
    }

    /// The event `seq`, checked, as a zero-copy archived view.
    pub fn get(&self, seq: u64) -> Result<&ArchivedEvent> {
        let rec = self.log.get(seq)?;
        access_event(rec.payload).map_err(|source| Error::Archive {
            seq: Some(seq),
            source,
        })
    }

    /// The size of the record of event `seq`: its payload (the event's archive) and what it
    /// takes in its segment (header and padding included).
    pub fn record_size(&self, seq: u64) -> Result<RecordSize> {
        let payload = self.log.get(seq)?.payload.len() as u64;
        Ok(RecordSize {
            payload,
            on_disk: crate::log::record_size_on_disk(payload),
        })
    }

    /// The event `seq` as an owned [`Event`].
    pub fn get_owned(&self, seq: u64) -> Result<Event> {
        decode_event(self.get(seq)?).map_err(|source| Error::Archive {
            seq: Some(seq),
            source,
        })
    }

    /// Every event in seq order, as zero-copy archived views; stops after the first error.
    pub fn events(&self) -> impl Iterator<Item = Result<&ArchivedEvent>> + '_ {
        self.range(0..u64::MAX)
    }

    /// The events with seqs in `range`, in order.
    pub fn range(
        &self,
        range: std::ops::Range<u64>,
    ) -> impl Iterator<Item = Result<&ArchivedEvent>> + '_ {
        self.log.range(range).map(|rec| {
            let rec = rec?;
            access_event(rec.payload).map_err(|source| Error::Archive {
                seq: Some(rec.seq),
                source,
            })
        })
    }

    /// The time of the last event, read from the log.
    pub fn last_event_time(&self) -> Result<Option<i64>> {
        match self.len().checked_sub(1) {
            Some(last) => Ok(Some(self.get(last)?.time())),
            None => Ok(None),
        }
    }

    /// Bytes the session's files take on disk (segments, indexes, metadata): the blocks
    /// allocated, as `du` counts them (the deallocated tail of a sealed segment takes none).
    pub fn bytes_on_disk(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::read_dir(&self.dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.blocks() * 512)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Replays the first `n` events through the lifecycle rules: the state, and the rules the
    /// stored events break (a valid session breaks none).
    pub fn lifecycle_at(&self, n: u64) -> Result<(Lifecycle, Vec<LifecycleError>)> {
        let mut lifecycle = Lifecycle::new();
        let mut violations = Vec::new();
        for event in self.range(0..n) {
            let event = event?;
            let facts = Facts::of_archived(event);
            if let Err(v) = lifecycle.check(&facts) {
                violations.push(v);
            }
            lifecycle.apply(&facts);
        }
        Ok((lifecycle, violations))
    }

    /// The lifecycle state after every event this reader sees: from the newest valid
    /// checkpoint, replaying only the events after it.
    pub fn lifecycle(&self) -> Result<Lifecycle> {
        let d = self.derived_at(self.len(), false)?;
        Ok(d.stats.lifecycle().clone())
    }

    /// The model-visible history when the log held `n` events: from the newest valid
    /// checkpoint covering at most `n` events, replaying only the events after it.
    pub fn messages_at(&self, n: u64) -> Result<Messages> {
        let n = n.min(self.len());
        let d = self.derived_at(n, true)?;
        match d.projection_error {
            Some(refused) => Err(self.projection_refusal(n, refused)),
            None => Ok(d.projector.messages()),
        }
    }

    /// The model-visible history after every event this reader sees.
    pub fn messages(&self) -> Result<Messages> {
        self.messages_at(self.len())
    }

    /// The former name of [`SessionReader::messages_at`].
    #[deprecated(note = "renamed: use `SessionReader::messages_at`")]
    pub fn derive_at(&self, n: u64) -> Result<Messages> {
        self.messages_at(n)
    }

    /// The former name of [`SessionReader::messages`].
    #[deprecated(note = "renamed: use `SessionReader::messages`")]
    pub fn derive_messages(&self) -> Result<Messages> {
        self.messages()
    }

    /// Writes the session as canonical JSONL (docs/events.md §4), with the header line first when
    /// `header` is [`HeaderLine::Include`]; calls `progress` with the number of events written
    /// now and then. Returns the number of events written.
    pub fn export(
        &self,
        out: impl Write,
        header: HeaderLine,
        mut progress: impl FnMut(u64),
    ) -> Result<u64> {
        let io = |e| Error::io("write", "the output", e);
        let mut w = JsonlWriter::new(out);
        if header == HeaderLine::Include {
            w.write_header(&self.meta.to_header()).map_err(io)?;
        }
        let mut n = 0u64;
        for event in self.events() {
            w.write_archived(event?).map_err(io)?;
            n += 1;
            if n.is_multiple_of(4096) {
                progress(n);
            }
        }
        w.flush().map_err(io)?;
        progress(n);
        Ok(n)
    }
}
