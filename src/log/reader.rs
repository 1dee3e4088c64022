//! Readers: zero-copy access to records by seq, iteration, and waiting for new records.
//!
//! A reader sees a snapshot: the records that were published when it was opened or last
//! refreshed. Readers attached to a writer in the same process ([`Log::reader`](super::Log::reader))
//! learn of new records from an atomic counter the writer publishes with release ordering. Readers
//! in other processes ([`LogReader::open`]) learn of them from the index, whose entry for a record
//! is written only after the record is complete, and check each new record's checksum before
//! counting it. Either way a reader never sees a partial record.

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use super::error::{CorruptionKind, Error, Result};
use super::format::{self, IndexState, LogId, SegmentHeader, HEADER_SIZE};
use super::hint;
use super::recovery;
use super::segment::{self, check_record_with, Fault, SegmentView};
use super::tail::{self, TailRecord};
use crate::util::{lock, unpoisoned};

/// One segment of a reader's list: its base seq, and its view once it is mapped.
///
/// A reader opened from a directory maps a segment the first time it reads from it (opening
/// maps only the last segment, which it must count); the writer's readers share the writer's
/// views, mapped from the start.
#[derive(Debug)]
pub(crate) struct Slot {
    base: u64,
    /// Where to map the segment from; `None` for a slot made from a mapped view.
    dir: Option<Arc<Path>>,
    view: OnceLock<Arc<SegmentView>>,
}

impl Slot {
    fn mapped(view: Arc<SegmentView>) -> Arc<Slot> {
        let slot = Slot {
            base: view.header.base_seq,
            dir: None,
            view: OnceLock::new(),
        };
        let _ = slot.view.set(view);
        Arc::new(slot)
    }

    fn lazy(dir: &Arc<Path>, base: u64) -> Arc<Slot> {
        Arc::new(Slot {
            base,
            dir: Some(Arc::clone(dir)),
            view: OnceLock::new(),
        })
    }

    /// The view, mapping the segment on first use.
    fn view(&self) -> Result<&Arc<SegmentView>> {
        if let Some(v) = self.view.get() {
            return Ok(v);
        }
        let dir = self.dir.as_deref().ok_or_else(|| {
            Error::io(
                "map segment",
                format::segment_file_name(self.base),
                std::io::Error::other("a writer's segment without a view"),
            )
        })?;
        let view = SegmentView::open(dir, self.base)?;
        // Mapped for a read by seq (a scan says so when it enters the segment).
        view.advise(true);
        // Another clone may have mapped it meanwhile: either view serves.
        let _ = self.view.set(Arc::new(view));
        self.view.get().ok_or_else(|| {
            Error::io(
                "map segment",
                dir.join(format::segment_file_name(self.base)),
                std::io::Error::other("the view was not kept"),
            )
        })
    }

    fn path(&self) -> PathBuf {
        match (self.view.get(), &self.dir) {
            (Some(v), _) => v.path.clone(),
            (None, Some(dir)) => dir.join(format::segment_file_name(self.base)),
            (None, None) => PathBuf::from(format::segment_file_name(self.base)),
        }
    }
}

/// What a writer shares with the readers of its process.
#[derive(Debug)]
pub(crate) struct Shared {
    segments: RwLock<Arc<Vec<Arc<Slot>>>>,
    pub published: AtomicU64,
    pub closed: AtomicBool,
    waiters: AtomicUsize,
    notify: Mutex<()>,
    cv: Condvar,
}

impl Shared {
    pub(crate) fn new(segments: Vec<Arc<SegmentView>>, published: u64) -> Shared {
        Shared {
            segments: RwLock::new(Arc::new(segments.into_iter().map(Slot::mapped).collect())),
            published: AtomicU64::new(published),
            closed: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            notify: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    pub(crate) fn snapshot(&self) -> Arc<Vec<Arc<Slot>>> {
        Arc::clone(&*unpoisoned(self.segments.read()))
    }

    pub(crate) fn push_segment(&self, view: Arc<SegmentView>) {
        let mut g = unpoisoned(self.segments.write());
        let mut list = Vec::clone(&g);
        list.push(Slot::mapped(view));
        *g = Arc::new(list);
    }

    /// Makes records up to `len` visible and wakes waiting readers.
    pub(crate) fn publish(&self, len: u64) {
        self.published.store(len, Ordering::SeqCst);
        self.wake();
    }

    pub(crate) fn wake(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.notify);
            self.cv.notify_all();
        }
    }
}

/// One record: its seq and its payload, borrowed from the memory map (no copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's seq.
    pub seq: u64,
    /// The payload bytes, 16-byte aligned in memory.
    pub payload: &'a [u8],
}

#[derive(Debug)]
enum Source {
    Attached(Arc<Shared>),
    Detached(Arc<Path>),
}

/// A reader of a log: `get`, iteration, `len`, and waiting for new records.
///
/// Cheap to clone; each clone refreshes on its own. Usable while a writer appends, from the
/// writer's process ([`Log::reader`](super::Log::reader)) or from any other ([`LogReader::open`]).
///
/// A reader opened from a directory maps a segment only when it first reads from it: opening
/// one reads the last record with `pread` and maps nothing (`src/log/tail.rs`), or, when that
/// path cannot vouch for the record, maps the last segment (to count its records), found from
/// the `LASTSEG` hint or the directory listing, whatever the number of segments. Clones share
/// the segments mapped so far; [`mapped_segments`](LogReader::mapped_segments) says how many are.
#[derive(Debug)]
pub struct LogReader {
    source: Source,
    /// Every segment, or, for a reader opened from the `LASTSEG` hint (`partial`), the last ones
    /// only: the others are listed when a read first needs one ([`LogReader::all_slots`]).
    segments: Arc<Vec<Arc<Slot>>>,
    /// True while `segments` may lack the first segments.
    partial: bool,
    /// A partial reader's whole list, once listed (the known segments at its end).
    listed: OnceLock<Arc<Vec<Arc<Slot>>>>,
    /// The header of the first segment: it defines the log (its id and payload schema). A
    /// reader opened from the hint takes the last segment's, which the hint's log id vouches
    /// for, until it lists the others.
    first: Option<SegmentHeader>,
    len: u64,
    /// The log's last record when the reader was opened, read with `pread` (a reader opened
    /// that way maps no segment until a read needs another record): `get` of its seq answers
    /// from this copy.
    tail: Option<Arc<TailRecord>>,
}

impl Clone for LogReader {
    fn clone(&self) -> Self {
        LogReader {
            source: match &self.source {
                Source::Attached(s) => Source::Attached(Arc::clone(s)),
                Source::Detached(d) => Source::Detached(Arc::clone(d)),
            },
            segments: Arc::clone(&self.segments),
            partial: self.partial,
            listed: self.listed.clone(),
            first: self.first,
            len: self.len,
            tail: self.tail.clone(),
        }
    }
}

/// The header of the first mapped segment of a writer's list.
fn first_mapped(segments: &[Arc<Slot>]) -> Option<SegmentHeader> {
    segments.first()?.view.get().map(|v| v.header)
}

impl LogReader {
    pub(crate) fn attached(shared: Arc<Shared>) -> LogReader {
        // The length first: the writer adds a segment to the list before it publishes records
        // in it, so the list taken after the length holds every record the length counts.
        let len = shared.published.load(Ordering::SeqCst);
        let segments = shared.snapshot();
        LogReader {
            source: Source::Attached(shared),
            first: first_mapped(&segments),
            segments,
            partial: false,
            listed: OnceLock::new(),
            len,
            tail: None,
        }
    }

    /// Opens the log in `dir` for reading, without taking the writer's lock: works while a writer
    /// in another process appends. Damage is not repaired (that is the writer's job); a reader sees
    /// the valid records and gets an error naming the segment and offset when it reaches damage.
    ///
    /// Opening reads the last record with `pread` (from the tail a clean close leaves in the
    /// `LASTSEG` hint, or from the last segment's index) and keeps it, mapping nothing; when it
    /// cannot vouch for that record so (a compressed or sealed last segment, a damaged record, a
    /// stale hint: docs/format.md, `LASTSEG`), it maps the last segment. Every other segment is
    /// mapped when a read first needs it, so opening costs the same for a log of one segment or
    /// of thousands. The last segment is the one the `LASTSEG` hint names, once checked
    /// (docs/format.md, `LASTSEG`): the directory is then listed only when a read first needs an earlier segment. Without a
    /// sound hint, opening lists the directory and reads the first segment's header. Each
    /// segment but the last holds the seqs up to the next one's base; a segment that turns out
    /// missing or damaged when it is mapped (or listed) fails that read with an error naming it.
    pub fn open(dir: impl AsRef<Path>) -> Result<LogReader> {
        let dir = dir.as_ref();
        if let Some(t) = tail::read_tail(dir) {
            let dir: Arc<Path> = Arc::from(dir);
            let base = t.header.base_seq;
            return Ok(LogReader {
                segments: Arc::new(vec![Slot::lazy(&dir, base)]),
                source: Source::Detached(dir),
                partial: base > 0,
                listed: OnceLock::new(),
                first: Some(t.header),
                len: base + t.count,
                tail: t.last.map(Arc::new),
            });
        }
        let dir: Arc<Path> = Arc::from(dir);
        if let Some(reader) = LogReader::open_from_hint(&dir) {
            return Ok(reader);
        }
        LogReader::open_listed(dir)
    }

    /// Opens the log from its `LASTSEG` hint, without listing the directory: `None` when there
    /// is no hint, or it is not whole, or it does not check (its segment missing, of another
    /// log or base seq, unreadable): the caller lists the directory then. The hint's segment is
    /// counted, and when the segment its end names exists (a writer that kept no hint rolled
    /// since) the reader walks forward to the last one, as a refresh does.
    fn open_from_hint(dir: &Arc<Path>) -> Option<LogReader> {
        let hint = hint::read_hint(dir)?;
        let view = SegmentView::open(dir, hint.last_base).ok()?;
        if view.header.log_id != hint.log_id || view.header.base_seq != hint.last_base {
            return None;
        }
        view.advise(true);
        let view = Arc::new(view);
        let count = last_segment_count(&view).ok()?;
        let mut reader = LogReader {
            source: Source::Detached(Arc::clone(dir)),
            first: Some(view.header),
            segments: Arc::new(vec![Slot::mapped(view)]),
            partial: hint.last_base > 0,
            listed: OnceLock::new(),
            len: hint.last_base + count,
            tail: None,
        };
        // The segment after it must not exist (or the reader goes on into it); a sealed one
        // without a successor is damage, which the listing names.
        reader.refresh_detached(dir).ok()?;
        let last = reader.segments.last()?.view.get()?;
        if last
            .index_header()
            .is_some_and(|h| h.state == IndexState::Sealed)
            && !dir.join(format::segment_file_name(reader.len)).exists()
        {
            return None;
        }
        Some(reader)
    }

    /// Opens the log from the directory listing.
    fn open_listed(dir: Arc<Path>) -> Result<LogReader> {
        let listing = recovery::list(&dir)?;
        if let Some((base, idx)) = listing.missing.first() {
            return Err(missing_segment(&dir, *base, idx));
        }
        let bases = listing.bases;
        let Some((&last_base, earlier)) = bases.split_last() else {
            return Ok(LogReader {
                source: Source::Detached(dir),
                segments: Arc::new(Vec::new()),
                partial: false,
                listed: OnceLock::new(),
                first: None,
                len: 0,
                tail: None,
            });
        };
        // The first segment's header first: a bad header is named before what it implies.
        let mut last_view = None;
        let first = match earlier.first() {
            Some(&base) => segment::read_segment_header(&dir, base)?,
            None => {
                let view = Arc::new(SegmentView::open(&dir, last_base)?);
                let header = view.header;
                last_view = Some(view);
                header
            }
        };
        if bases[0] != 0 {
            // A gap: the segments holding seqs 0..base are missing. (Each later segment starts
            // where the one before it is counted to end: a gap between two segments shows as
            // the earlier one ending early, which reading it reports.)
            return Err(Error::corrupt(
                dir.join(format::segment_file_name(bases[0])),
                16,
                Some(0),
                CorruptionKind::MissingSeqs {
                    from: 0,
                    to: bases[0],
                },
            ));
        }
        let last = match last_view {
            Some(view) => view,
            None => Arc::new(SegmentView::open(&dir, last_base)?),
        };
        // Opening reads a few pages of it (its header, its last record and index entries).
        last.advise(true);
        let count = last_segment_count(&last)?;
        let mut segments: Vec<Arc<Slot>> = earlier.iter().map(|&b| Slot::lazy(&dir, b)).collect();
        segments.push(Slot::mapped(Arc::clone(&last)));
        let mut reader = LogReader {
            source: Source::Detached(Arc::clone(&dir)),
            segments: Arc::new(segments),
            partial: false,
            listed: OnceLock::new(),
            first: Some(first),
            len: last_base + count,
            tail: None,
        };
        // A sealed last segment: its successor was created before it was sealed, after the
        // directory was listed above; it must be there now.
        if last
            .index_header()
            .is_some_and(|h| h.state == IndexState::Sealed)
        {
            let next = format::segment_file_name(reader.len);
            if !dir.join(&next).exists() {
                return Err(Error::corrupt(
                    dir.join(next),
                    0,
                    Some(reader.len),
                    CorruptionKind::MissingSegment(format!(
                        "{} is sealed, and a segment is sealed only once the next one exists",
                        last.index_path().display()
                    )),
                ));
            }
            reader.refresh_detached(&dir)?;
        }
        Ok(reader)
    }

    /// The number of records this reader sees.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the reader sees no records.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The log's id, when it has a segment.
    pub fn log_id(&self) -> Option<LogId> {
        self.first.map(|h| h.log_id)
    }

    /// The payload schema written in the segment headers, when the log has a segment.
    pub fn payload_schema(&self) -> Option<u32> {
        self.first.map(|h| h.payload_schema)
    }

    /// True when the reader sees a segment (a log always has one once created).
    pub(crate) fn has_segments(&self) -> bool {
        !self.segments.is_empty()
    }

    /// The segments known without listing: all of them, or a partial reader's whole list once
    /// listed, or its last ones.
    fn known_slots(&self) -> &[Arc<Slot>] {
        match self.listed.get() {
            Some(all) => all,
            None => &self.segments,
        }
    }

    /// Every segment: a reader opened from the `LASTSEG` hint lists the directory the first
    /// time it needs a segment before the ones it knows (once; clones made before share
    /// nothing of it, clones made after inherit it). The listing is checked as
    /// [`LogReader::open`] checks it without a hint (a missing segment, a gap before the first
    /// one), and the first segment's header replaces the last one's as what defines the log.
    fn all_slots(&self) -> Result<&[Arc<Slot>]> {
        if !self.partial {
            return Ok(&self.segments);
        }
        if let Some(all) = self.listed.get() {
            return Ok(all);
        }
        let Source::Detached(dir) = &self.source else {
            return Ok(&self.segments);
        };
        let known = match self.segments.first() {
            Some(s) => s.base,
            None => return Ok(&self.segments),
        };
        let listing = recovery::list(dir)?;
        if let Some((base, idx)) = listing.missing.iter().find(|(b, _)| *b < known) {
            return Err(missing_segment(dir, *base, idx));
        }
        let first = listing.bases.first().copied().unwrap_or(known);
        if first != 0 {
            return Err(Error::corrupt(
                dir.join(format::segment_file_name(first)),
                16,
                Some(0),
                CorruptionKind::MissingSeqs { from: 0, to: first },
            ));
        }
        let header = segment::read_segment_header(dir, first)?;
        if let Some(ours) = &self.first {
            if ours.log_id != header.log_id {
                // The segments the hint led to are not of the log the first segment defines.
                return Err(Error::corrupt(
                    dir.join(format::segment_file_name(known)),
                    24,
                    Some(known),
                    CorruptionKind::ForeignSegment {
                        expected: header.log_id.to_string(),
                        found: ours.log_id.to_string(),
                    },
                ));
            }
        }
        let mut all: Vec<Arc<Slot>> = listing
            .bases
            .iter()
            .take_while(|&&b| b < known)
            .map(|&b| Slot::lazy(dir, b))
            .collect();
        all.extend(self.segments.iter().cloned());
        let _ = self.listed.set(Arc::new(all));
        Ok(self.listed.get().map_or(&self.segments[..], |v| &v[..]))
    }

    /// The segments a read of `seq` needs: the known ones when `seq` is in them, else all.
    fn slots_for(&self, seq: u64) -> Result<&[Arc<Slot>]> {
        match self.segments.first() {
            Some(s) if s.base <= seq => Ok(&self.segments),
            _ => self.all_slots(),
        }
    }

    /// How many of the segments this reader sees are mapped. A reader opened from a directory
    /// maps the last segment when it opens and every other one the first time it reads from it
    /// (clones share what is mapped); a writer's reader shares the writer's maps, all of them.
    pub fn mapped_segments(&self) -> usize {
        self.known_slots()
            .iter()
            .filter(|s| s.view.get().is_some())
            .count()
    }

    /// The base seqs of the segments this reader sees (listing the directory when the reader
    /// knows only the last ones).
    pub(crate) fn segment_bases(&self) -> Result<Vec<u64>> {
        Ok(self.all_slots()?.iter().map(|s| s.base).collect())
    }

    /// The view of segment `k` of [`segment_bases`](Self::segment_bases), mapping it on first
    /// use.
    pub(crate) fn segment_view(&self, k: usize) -> Result<&Arc<SegmentView>> {
        match self.all_slots()?.get(k) {
            Some(slot) => slot.view(),
            None => Err(Error::SeqOutOfRange {
                seq: self.len,
                len: self.len,
            }),
        }
    }

    /// Paths and sizes (bytes readable) of the segment files. Segments not mapped yet are not
    /// mapped for this: their size is the file's (0 when it cannot be read). A reader opened
    /// from the `LASTSEG` hint lists the directory for this; when listing fails, the segments
    /// it knows are returned.
    pub fn segment_files(&self) -> Vec<(PathBuf, u64)> {
        let slots = self.all_slots().unwrap_or(&self.segments);
        slots
            .iter()
            .map(|s| match s.view.get() {
                Some(v) => (v.path.clone(), v.data().len() as u64),
                None => {
                    let path = s.path();
                    let len = std::fs::metadata(&path).map_or(0, |m| m.len());
                    (path, len)
                }
            })
            .collect()
    }

    /// Picks up records appended since the reader was opened or last refreshed; returns the new
    /// length.
    pub fn refresh(&mut self) -> Result<u64> {
        match &self.source {
            Source::Attached(shared) => {
                let len = shared.published.load(Ordering::SeqCst);
                if len != self.len {
                    self.segments = shared.snapshot();
                    if self.first.is_none() {
                        self.first = first_mapped(&self.segments);
                    }
                    self.len = len;
                }
            }
            Source::Detached(dir) => {
                let dir = Arc::clone(dir);
                if self.partial {
                    // Listed meanwhile: go on with the whole list.
                    if let Some(all) = self.listed.take() {
                        self.segments = all;
                        self.partial = false;
                    }
                }
                self.refresh_detached(&dir)?;
            }
        }
        Ok(self.len)
    }

    fn refresh_detached(&mut self, dir: &Arc<Path>) -> Result<()> {
        loop {
            let Some(k) = self.segments.len().checked_sub(1) else {
                let fresh = LogReader::open(dir)?;
                *self = fresh;
                return Ok(());
            };
            let last = Arc::clone(self.segments[k].view()?);
            let last = if last.has_fallback() {
                // Found by scanning (no usable index when it was opened): scan again, from a
                // fresh view, or the reader would never see the records appended since.
                let view = Arc::new(SegmentView::open(dir, last.header.base_seq)?);
                let count = last_segment_count(&view)?;
                let mut list = Vec::clone(&self.segments);
                list.pop();
                list.push(Slot::mapped(Arc::clone(&view)));
                self.segments = Arc::new(list);
                self.len = self.len.max(view.header.base_seq + count);
                view
            } else {
                last
            };
            last.refresh_len();
            let base = last.header.base_seq;
            let mut i = self.len - base;
            loop {
                match last.record(i) {
                    Ok(_) => i += 1,
                    // No entry yet: the end of what the writer has published.
                    Err(_) if last.offset_of(i).is_none() => break,
                    Err(_) => {
                        // The entry is there, so the record was complete before it was written;
                        // the file may have grown after its length was read: read it again.
                        last.refresh_len();
                        match last.record(i) {
                            Ok(_) => i += 1,
                            Err((offset, fault)) => {
                                self.len = base + i;
                                return Err(Error::corrupt(
                                    &last.path,
                                    offset,
                                    Some(base + i),
                                    fault.into_kind(),
                                ));
                            }
                        }
                    }
                }
            }
            self.len = base + i;
            // The segment has ended when the next one exists: the writer starts segment
            // `base + i` only once this one holds exactly `i` records. (Its index says sealed only
            // when the background seal has finished, which may be later.)
            let next = base + i;
            if i == 0 || !dir.join(format::segment_file_name(next)).exists() {
                return Ok(());
            }
            let view = Arc::new(SegmentView::open(dir, next)?);
            let mut list = Vec::clone(&self.segments);
            list.push(Slot::mapped(view));
            self.segments = Arc::new(list);
        }
    }

    /// A segment of another log (its records validate against their own log id) is damage, not
    /// data: the first segment defines the log, as when a writer opens it.
    fn check_ours(&self, view: &SegmentView, seq: u64) -> Result<()> {
        match &self.first {
            Some(first) if first.log_id != view.header.log_id => Err(Error::corrupt(
                &view.path,
                24,
                Some(seq),
                CorruptionKind::ForeignSegment {
                    expected: first.log_id.to_string(),
                    found: view.header.log_id.to_string(),
                },
            )),
            _ => Ok(()),
        }
    }

    /// The record `seq`, checked (checksum and seq), borrowed from the map.
    pub fn get(&self, seq: u64) -> Result<Record<'_>> {
        if seq >= self.len {
            return Err(Error::SeqOutOfRange { seq, len: self.len });
        }
        if let Some(t) = self.tail.as_deref().filter(|t| t.seq == seq) {
            return Ok(Record {
                seq,
                payload: t.payload(),
            });
        }
        let slots = self.slots_for(seq)?;
        let k = segment_for(slots, seq).ok_or(Error::SeqOutOfRange { seq, len: self.len })?;
        let view = slots[k].view()?;
        self.check_ours(view, seq)?;
        let i = seq - view.header.base_seq;
        match view.record_rescanning(i) {
            Ok(found) => Ok(Record {
                seq,
                payload: found.payload,
            }),
            Err((offset, fault)) => {
                // A closed segment that ends before `seq` while a later one exists: the
                // segments between are missing (not a record at offset 0 of this one).
                let closed = view
                    .index_header()
                    .filter(|h| h.state != IndexState::Open && i >= h.count);
                if let (Some(h), Some(next)) = (closed, slots.get(k + 1)) {
                    let from = view.header.base_seq + h.count;
                    return Err(Error::corrupt(
                        &view.path,
                        h.end,
                        Some(from),
                        CorruptionKind::MissingSeqs {
                            from,
                            to: next.base,
                        },
                    ));
                }
                Err(Error::corrupt(
                    &view.path,
                    offset,
                    Some(seq),
                    fault.into_kind(),
                ))
            }
        }
    }

    /// Iterates over every record this reader sees, in seq order.
    pub fn iter(&self) -> Iter<'_> {
        self.range(..)
    }

    /// Iterates over the records in `range` (clipped to what the reader sees), in seq order.
    pub fn range(&self, range: impl RangeBounds<u64>) -> Iter<'_> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => u64::MAX,
        }
        .min(self.len);
        Iter {
            reader: self,
            slots: None,
            seg_end: 0,
            view: None,
            offset: 0,
            ready: 0,
            seq: start,
            end,
            prefetch: None,
            verify: None,
        }
    }

    /// Waits until the log holds more records than this reader sees, or `timeout` passes; then
    /// refreshes. Returns the new length (unchanged after a timeout).
    pub fn wait(&mut self, timeout: Duration) -> Result<u64> {
        // A timeout too long to add (Duration::MAX: "forever") waits as long as an Instant can.
        let now = Instant::now();
        let deadline = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        let seen = self.len;
        match &self.source {
            Source::Attached(shared) => {
                let shared = Arc::clone(shared);
                shared.waiters.fetch_add(1, Ordering::SeqCst);
                let mut g = lock(&shared.notify);
                loop {
                    if shared.published.load(Ordering::SeqCst) > seen
                        || shared.closed.load(Ordering::SeqCst)
                    {
                        break;
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    g = unpoisoned(shared.cv.wait_timeout(g, deadline - now)).0;
                }
                drop(g);
                shared.waiters.fetch_sub(1, Ordering::SeqCst);
                self.refresh()
            }
            Source::Detached(_) => {
                let mut pause = Duration::from_millis(1);
                loop {
                    if self.refresh()? > seen {
                        return Ok(self.len);
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(self.len);
                    }
                    std::thread::sleep(pause.min(deadline - now));
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
            }
        }
    }
}

/// The index in `slots` of the segment holding `seq`.
fn segment_for(slots: &[Arc<Slot>], seq: u64) -> Option<usize> {
    slots.partition_point(|s| s.base <= seq).checked_sub(1)
}

/// Counts the records of the last segment of a log being read from outside the writer.
///
/// Records the index vouches for are counted even when they are damaged: reading them then
/// fails with an error naming the file, the offset and the seq, instead of the log looking
/// shorter. The index vouches for its records when the segment was closed cleanly (its header
/// names the count), or, while a writer may be appending, for each record it has an entry for
/// (a writer writes the entry after the record). Without a usable index the records are found
/// by scanning; a damaged record there (a non-zero header that does not check) counts too.
fn last_segment_count(view: &SegmentView) -> Result<u64> {
    if let Some(h) = view.index_header() {
        if h.state != IndexState::Open {
            if !view.index_tail_ok(h.count, h.end) || records_past(view, h.count, h.end) {
                // Damaged records (or a damaged index, which reading recovers from by
                // scanning): the count stands, reading says what is wrong. Records past the
                // end it names (an index older than its segment, restored from a backup)
                // count too.
                return Ok(scan_into_fallback(view, h.count));
            }
            return Ok(h.count);
        }
        if let Some(n) = view.count_by_entries() {
            if n > 0 && view.record(n - 1).is_err() {
                scan_into_fallback(view, n);
            }
            return Ok(n);
        }
    }
    // No usable index: find the records by scanning.
    let s = segment::scan(
        view.data(),
        HEADER_SIZE as u64,
        view.header.base_seq,
        &view.check,
    );
    let mut n = s.offsets.len() as u64;
    let mut offsets = s.offsets;
    if let Some((at, fault)) = s.stop {
        // A record header that is there but does not check is damage, not the end: a writer
        // writes a record's header last, so an append in progress shows a zero header.
        if !matches!(fault, Fault::Zero) {
            if let Ok(at) = u32::try_from(at) {
                offsets.push(at);
                n += 1;
            }
        }
    }
    view.use_fallback(offsets);
    Ok(n)
}

/// Whether records follow `end`, where a closed index says the segment's `count` records end:
/// the index is older than the segment (restored from a backup). A valid record there, or
/// bytes that do not check with a valid record after them (damage in the middle of the
/// records). Bytes that do not check with no valid record after them are stray bytes after the
/// records, which `verify` reports as nothing lost and the next writer open zeroes: the records
/// the index vouches for are read as they are.
fn records_past(view: &SegmentView, count: u64, end: u64) -> bool {
    if view.cold().is_some() || end >= view.data().len() as u64 {
        return false;
    }
    let seq = view.header.base_seq + count;
    match segment::check_record(view.data(), end, seq, &view.check) {
        Ok(_) => true,
        Err(Fault::Zero) => false,
        Err(_) => {
            let ranges = view.data_ranges(end);
            segment::valid_record_after(view.data(), end, seq, &view.check, &ranges).is_some()
        }
    }
}

/// Finds the records of a segment whose index names `count` of them by scanning; the offsets
/// found (and where the scan stopped, which reading then reports) replace the index. Returns
/// the count that stands: the index's, or more when the scan found more (a damaged record
/// where it stopped past the index's count counts too, as without an index).
fn scan_into_fallback(view: &SegmentView, count: u64) -> u64 {
    let s = segment::scan(
        view.data(),
        HEADER_SIZE as u64,
        view.header.base_seq,
        &view.check,
    );
    let mut offsets = s.offsets;
    if (offsets.len() as u64) < count {
        let at = u32::try_from(s.end).unwrap_or(u32::MAX);
        offsets.push(at);
    } else if let Some((at, fault)) = s.stop {
        if !matches!(fault, Fault::Zero) {
            if let Ok(at) = u32::try_from(at) {
                offsets.push(at);
            }
        }
    }
    let n = (offsets.len() as u64).max(count);
    view.use_fallback(offsets);
    n
}

/// An iterator over records, checking each one; stops after the first error.
#[derive(Debug)]
pub struct Iter<'a> {
    reader: &'a LogReader,
    /// The segments it reads: chosen on its first record (the known ones, when it starts in
    /// them; else all, listed).
    slots: Option<&'a [Arc<Slot>]>,
    /// The base seq of the segment after the one it reads (`u64::MAX` after the last one).
    seg_end: u64,
    /// The view of the segment it reads (mapped when the iterator entered it).
    view: Option<&'a Arc<SegmentView>>,
    offset: u64,
    /// Bytes of `view` before this offset are readable (a cold segment's decompressed blocks).
    ready: u64,
    seq: u64,
    end: u64,
    /// In a cold segment: the thread decompressing the next blocks ahead of this iterator.
    prefetch: Option<super::cold::Prefetch>,
    /// In a plain segment read over a long span: the thread checking checksums ahead.
    verify: Option<super::readahead::VerifyAhead>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Result<Record<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.seq >= self.end {
            return None;
        }
        let reader: &'a LogReader = self.reader;
        let segments = match self.slots {
            Some(slots) => slots,
            None => match reader.slots_for(self.seq) {
                Ok(slots) => {
                    self.slots = Some(slots);
                    slots
                }
                Err(e) => {
                    self.seq = self.end;
                    return Some(Err(e));
                }
            },
        };
        if self.view.is_none() || self.seq >= self.seg_end {
            // (Stops the previous segment's prefetch or checks ahead, if any.)
            self.prefetch = None;
            self.verify = None;
            let Some(k) = segment_for(segments, self.seq) else {
                self.seq = self.end;
                return Some(Err(Error::SeqOutOfRange {
                    seq: self.seq,
                    len: reader.len,
                }));
            };
            let view = match segments[k].view() {
                Ok(v) => v,
                Err(e) => {
                    self.seq = self.end;
                    return Some(Err(e));
                }
            };
            if let Err(e) = reader.check_ours(view, self.seq) {
                self.seq = self.end;
                return Some(Err(e));
            }
            let i = self.seq - view.header.base_seq;
            // A scan: read ahead again (a reader maps segments for reads by seq).
            view.advise(false);
            self.seg_end = segments.get(k + 1).map_or(u64::MAX, |next| next.base);
            self.view = Some(view);
            self.ready = 0;
            self.offset = if i == 0 {
                HEADER_SIZE as u64
            } else {
                match view.offset_of(i) {
                    Some(o) => o,
                    None => {
                        return Some(self.fail_with_get());
                    }
                }
            };
            if let Some(c) = view.cold() {
                // A sequential read of more than a block or two: decompress ahead.
                let to = (self.end - view.header.base_seq).min(c.head.count);
                if let (Some(first), Some(last)) = (
                    c.block_at(self.offset),
                    to.checked_sub(1).and_then(|i| c.block_of_seq_index(i)),
                ) {
                    self.prefetch = super::cold::Prefetch::start(view, first, last);
                }
            } else {
                // A long sequential read: checksums and payloads checked ahead, on the other core.
                let to = self
                    .seg_end
                    .min(self.end)
                    .saturating_sub(view.header.base_seq);
                let end = to
                    .checked_sub(1)
                    .and_then(|last| view.offset_of(last))
                    .unwrap_or_else(|| view.readable_len());
                self.verify = super::readahead::VerifyAhead::start(view, i, self.offset, to, end);
            }
        }
        let view = self.view?;
        if self.offset >= self.ready {
            // A cold segment: the next block (once per block; a plain segment is ready whole).
            if let (Some(p), Some(c)) = (&self.prefetch, view.cold()) {
                if let Some(k) = c.block_at(self.offset) {
                    p.reading(c, k);
                }
            }
            match view.ready_at(self.offset) {
                Ok(to) => self.ready = to,
                Err(b) => {
                    self.seq = self.end;
                    return Some(Err(b.into_error(&view.path)));
                }
            }
        }
        // A cold segment's records are read from a decompressed block whose checksum was
        // checked: their own checksums are not computed again (`verify` still does).
        let (checksum, vouched) = match &mut self.verify {
            Some(v) => {
                let checked = v.checked(self.seq - view.header.base_seq, self.offset);
                (!checked, checked)
            }
            None => (view.cold().is_none(), false),
        };
        match check_record_with(
            view.data_unchecked(),
            self.offset,
            self.seq,
            &view.check,
            checksum,
        ) {
            Ok(found) => {
                if vouched {
                    // Its payload was validated too: `access_event` on it skips that.
                    super::readahead::vouch(view, found.payload);
                }
                let rec = Record {
                    seq: self.seq,
                    payload: found.payload,
                };
                self.offset = found.next;
                self.seq += 1;
                Some(Ok(rec))
            }
            Err(fault) => {
                let seq = self.seq;
                self.seq = self.end;
                // At the end of a closed segment that a later one does not follow on from:
                // the segments between are missing.
                let closed_end = matches!(fault, Fault::Zero)
                    && self.seg_end != u64::MAX
                    && view.index_header().is_some_and(|h| {
                        h.state != IndexState::Open && h.count == seq - view.header.base_seq
                    });
                let kind = if closed_end {
                    CorruptionKind::MissingSeqs {
                        from: seq,
                        to: self.seg_end,
                    }
                } else {
                    fault.into_kind()
                };
                Some(Err(Error::corrupt(
                    &view.path,
                    self.offset,
                    Some(seq),
                    kind,
                )))
            }
        }
    }
}

impl<'a> Iter<'a> {
    /// Falls back to a checked `get` (which can rebuild a damaged index) and continues from there.
    fn fail_with_get(&mut self) -> Result<Record<'a>> {
        let seq = self.seq;
        match self.reader.get(seq) {
            Ok(rec) => {
                self.seq += 1;
                self.view = None;
                self.verify = None;
                self.ready = 0;
                Ok(rec)
            }
            Err(e) => {
                self.seq = self.end;
                Err(e)
            }
        }
    }
}

/// The error for segment `base`, which index file `idx` names but which is gone.
fn missing_segment(dir: &Path, base: u64, idx: &Path) -> Error {
    Error::corrupt(
        dir.join(format::segment_file_name(base)),
        0,
        Some(base),
        CorruptionKind::MissingSegment(format!("its index {} is still there", idx.display())),
    )
}
