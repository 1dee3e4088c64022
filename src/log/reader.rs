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
use super::recovery;
use super::segment::{self, check_record, Fault, SegmentView};
use crate::util::lock;

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
        Arc::clone(&self.segments.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn push_segment(&self, view: Arc<SegmentView>) {
        let mut g = self.segments.write().unwrap_or_else(|e| e.into_inner());
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
/// one maps the last segment (to count its records) and reads the first segment's header (the
/// one that defines the log), whatever the number of segments. Clones share the segments
/// mapped so far; [`mapped_segments`](LogReader::mapped_segments) says how many are.
#[derive(Debug)]
pub struct LogReader {
    source: Source,
    segments: Arc<Vec<Arc<Slot>>>,
    /// The header of the first segment: it defines the log (its id and payload schema).
    first: Option<SegmentHeader>,
    len: u64,
}

impl Clone for LogReader {
    fn clone(&self) -> Self {
        LogReader {
            source: match &self.source {
                Source::Attached(s) => Source::Attached(Arc::clone(s)),
                Source::Detached(d) => Source::Detached(Arc::clone(d)),
            },
            segments: Arc::clone(&self.segments),
            first: self.first,
            len: self.len,
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
            len,
        }
    }

    /// Opens the log in `dir` for reading, without taking the writer's lock: works while a writer
    /// in another process appends. Damage is not repaired (that is the writer's job); a reader sees
    /// the valid records and gets an error naming the segment and offset when it reaches damage.
    ///
    /// Opening maps only the last segment (and reads the first one's header); every other
    /// segment is mapped when a read first needs it, so opening costs the same for a log of one
    /// segment or of thousands. The segments are counted from the directory listing (each
    /// segment but the last holds the seqs up to the next one's base); a segment that turns out
    /// missing or damaged when it is mapped fails that read with an error naming it.
    pub fn open(dir: impl AsRef<Path>) -> Result<LogReader> {
        let dir: Arc<Path> = Arc::from(dir.as_ref());
        let listing = recovery::list(&dir)?;
        if let Some((base, idx)) = listing.missing.first() {
            return Err(Error::corrupt(
                dir.join(format::segment_file_name(*base)),
                0,
                Some(*base),
                CorruptionKind::MissingSegment(format!(
                    "its index {} is still there",
                    idx.display()
                )),
            ));
        }
        let bases = listing.bases;
        let Some((&last_base, earlier)) = bases.split_last() else {
            return Ok(LogReader {
                source: Source::Detached(dir),
                segments: Arc::new(Vec::new()),
                first: None,
                len: 0,
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
        let count = last_segment_count(&last)?;
        let mut segments: Vec<Arc<Slot>> = earlier.iter().map(|&b| Slot::lazy(&dir, b)).collect();
        segments.push(Slot::mapped(Arc::clone(&last)));
        let mut reader = LogReader {
            source: Source::Detached(Arc::clone(&dir)),
            segments: Arc::new(segments),
            first: Some(first),
            len: last_base + count,
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

    /// The number of segments this reader sees.
    pub(crate) fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// How many of the segments this reader sees are mapped. A reader opened from a directory
    /// maps the last segment when it opens and every other one the first time it reads from it
    /// (clones share what is mapped); a writer's reader shares the writer's maps, all of them.
    pub fn mapped_segments(&self) -> usize {
        self.segments
            .iter()
            .filter(|s| s.view.get().is_some())
            .count()
    }

    /// The base seqs of the segments this reader sees.
    pub(crate) fn segment_bases(&self) -> Vec<u64> {
        self.segments.iter().map(|s| s.base).collect()
    }

    /// The view of segment `k`, mapping it on first use.
    pub(crate) fn segment_view(&self, k: usize) -> Result<&Arc<SegmentView>> {
        match self.segments.get(k) {
            Some(slot) => slot.view(),
            None => Err(Error::SeqOutOfRange {
                seq: self.len,
                len: self.len,
            }),
        }
    }

    /// Paths and sizes (bytes readable) of the segment files. Segments not mapped yet are not
    /// mapped for this: their size is the file's (0 when it cannot be read).
    pub fn segment_files(&self) -> Vec<(PathBuf, u64)> {
        self.segments
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
                self.refresh_detached(&dir)?;
            }
        }
        Ok(self.len)
    }

    fn refresh_detached(&mut self, dir: &Arc<Path>) -> Result<()> {
        loop {
            let Some(k) = self.segments.len().checked_sub(1) else {
                let fresh = LogReader::open(dir)?;
                self.segments = fresh.segments;
                self.first = fresh.first;
                self.len = fresh.len;
                return Ok(());
            };
            let last = Arc::clone(self.segment_view(k)?);
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

    fn segment_for(&self, seq: u64) -> Option<usize> {
        let k = self.segments.partition_point(|s| s.base <= seq);
        k.checked_sub(1)
    }

    /// The record `seq`, checked (checksum and seq), borrowed from the map.
    pub fn get(&self, seq: u64) -> Result<Record<'_>> {
        if seq >= self.len {
            return Err(Error::SeqOutOfRange { seq, len: self.len });
        }
        let k = self
            .segment_for(seq)
            .ok_or(Error::SeqOutOfRange { seq, len: self.len })?;
        let view = self.segment_view(k)?;
        self.check_ours(view, seq)?;
        let i = seq - view.header.base_seq;
        match view.record(i) {
            Ok(found) => Ok(Record {
                seq,
                payload: found.payload,
            }),
            Err((offset, fault)) => {
                if !view.has_fallback() && !view.is_cold() {
                    // The index may be damaged: find the records by scanning, once.
                    let s = segment::scan(
                        view.data(),
                        HEADER_SIZE as u64,
                        view.header.base_seq,
                        &view.check,
                    );
                    if (s.offsets.len() as u64) > i {
                        view.use_fallback(s.offsets);
                        if let Ok(found) = view.record(i) {
                            return Ok(Record {
                                seq,
                                payload: found.payload,
                            });
                        }
                    }
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
            seg: usize::MAX,
            view: None,
            offset: 0,
            ready: 0,
            seq: start,
            end,
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
                    g = shared
                        .cv
                        .wait_timeout(g, deadline - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
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
            if !view.index_tail_ok(h.count, h.end) {
                // Damaged records (or a damaged index, which reading recovers from by
                // scanning): the count stands, reading says what is wrong.
                scan_into_fallback(view, h.count);
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

/// Finds the records of a segment whose index names `count` of them by scanning; the offsets
/// found (and where the scan stopped, which reading then reports) replace the index.
fn scan_into_fallback(view: &SegmentView, count: u64) {
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
    }
    view.use_fallback(offsets);
}

/// An iterator over records, checking each one; stops after the first error.
#[derive(Debug)]
pub struct Iter<'a> {
    reader: &'a LogReader,
    seg: usize,
    /// The view of segment `seg` (mapped when the iterator entered it).
    view: Option<&'a Arc<SegmentView>>,
    offset: u64,
    /// Bytes of `view` before this offset are readable (a cold segment's decompressed blocks).
    ready: u64,
    seq: u64,
    end: u64,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Result<Record<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.seq >= self.end {
            return None;
        }
        let reader: &'a LogReader = self.reader;
        let segments = &reader.segments;
        let entering = match segments.get(self.seg.wrapping_add(1)) {
            Some(next) => self.view.is_none() || next.base <= self.seq,
            None => self.view.is_none(),
        };
        if entering {
            let Some(k) = reader.segment_for(self.seq) else {
                self.seq = self.end;
                return Some(Err(Error::SeqOutOfRange {
                    seq: self.seq,
                    len: reader.len,
                }));
            };
            let view = match reader.segment_view(k) {
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
            self.seg = k;
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
        }
        let view = self.view?;
        if self.offset >= self.ready {
            // A cold segment: the next block (once per block; a plain segment is ready whole).
            match view.ready_at(self.offset) {
                Ok(to) => self.ready = to,
                Err(b) => {
                    self.seq = self.end;
                    return Some(Err(b.into_error(&view.path)));
                }
            }
        }
        match check_record(view.data_unchecked(), self.offset, self.seq, &view.check) {
            Ok(found) => {
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
                Some(Err(Error::corrupt(
                    &view.path,
                    self.offset,
                    Some(seq),
                    fault.into_kind(),
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
                self.seg = usize::MAX;
                self.view = None;
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
