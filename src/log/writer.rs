//! The writer: appends, segment rolling, group commit, poisoning, clean close.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::error::{Error, Result};
use super::format::{
    self, IndexHeader, IndexState, LogId, RecordHeader, SegmentHeader, HEADER_SIZE,
    INDEX_ENTRY_SIZE, RECORD_HEADER_SIZE,
};
use super::hint::{self, Hint, HintTail};
use super::io::{StorageFile, Syncer};
use super::lock::WriterLock;
use super::open::RecoveryReport;
use super::options::{Durability, Options};
use super::reader::{LogReader, Shared};
use super::segment::{index_capacity, SegmentView};
use crate::util::{lock, now_ms, unpoisoned};

/// `ENOSPC`: no space left on the device.
const ENOSPC: i32 = 28;

/// How much an index file grows at a time.
const INDEX_STEP: u64 = 64 << 10;

/// The segment the writer appends to.
pub(crate) struct Active {
    pub base: u64,
    pub seed: u32,
    pub log_id: LogId,
    pub capacity: u64,
    pub seg: Box<dyn StorageFile>,
    pub idx: Box<dyn StorageFile>,
    pub syncer: Arc<dyn Syncer>,
    pub idx_syncer: Arc<dyn Syncer>,
    pub count: u64,
    pub end: u64,
    pub synced_end: u64,
    /// Bytes after `end` up to here may hold a failed append's bytes: zeroed before the next
    /// record is written (a stale valid record there must never reappear).
    pub dirty_to: u64,
    /// The same for index entries (a byte offset in the index file).
    pub dirty_entries_to: u64,
    pub view: Arc<SegmentView>,
    pub seg_path: PathBuf,
    pub idx_path: PathBuf,
}

impl Active {
    fn index_header(&self, state: IndexState) -> IndexHeader {
        IndexHeader {
            state,
            base_seq: self.base,
            log_id: self.log_id,
            count: self.count,
            end: self.end,
            synced_end: self.synced_end as u32,
        }
    }

    /// The segment's header bytes and its last record's (header, payload, padding), as the
    /// tail `t` places it, when the record is small enough to be copied into the hint.
    fn last_record_copy(&self, t: HintTail) -> Option<hint::Copy<'_>> {
        let (from, to) = (t.last_offset as usize, t.end as usize);
        if to.checked_sub(from)? > hint::MAX_COPY_RECORD {
            return None;
        }
        let data = self.view.data_unchecked();
        Some(hint::Copy {
            header: data.get(..HEADER_SIZE)?,
            // After the close's punch and sync: nothing changes the file after this.
            identity: hint::FileIdentity::of(&self.seg_path)?,
            record: data.get(from..to)?,
        })
    }

    /// The hint's tail for this segment as the last one of a cleanly closed log: its base and
    /// where its last record is. `None` when it holds no record or does not fit the hint.
    fn hint_tail(&self) -> Option<(u64, HintTail)> {
        let last = self.count.checked_sub(1)?;
        let last_offset = u32::try_from(self.view.offset_of(last)?).ok()?;
        let payload_schema = self.view.header.payload_schema;
        Some((
            self.base,
            HintTail {
                count: u32::try_from(self.count).ok()?,
                last_offset,
                end: u32::try_from(self.end).ok()?,
                payload_schema,
                capacity: u32::try_from(self.view.header.capacity).ok()?,
            },
        ))
    }

    pub(crate) fn write_index_header(&mut self, state: IndexState) -> Result<()> {
        let h = self.index_header(state).encode();
        self.idx
            .write_at(0, &h)
            .map_err(|e| Error::io("write index header", &self.idx_path, e))
    }

    fn sync_segment(&self) -> Result<()> {
        self.syncer
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.seg_path, e))
    }

    fn sync_index(&self) -> Result<()> {
        self.idx_syncer
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.idx_path, e))
    }

    /// Writes one record (payload and padding, then the header) at `at`, without its index entry.
    fn put_record(&mut self, at: u64, i: u64, payload: &[u8]) -> std::io::Result<()> {
        let size = format::record_size(payload.len() as u64);
        let payload_at = at + RECORD_HEADER_SIZE as u64;
        self.seg.write_at(payload_at, payload)?;
        let pad = (size - RECORD_HEADER_SIZE as u64) as usize - payload.len();
        if pad > 0 {
            self.seg
                .write_at(payload_at + payload.len() as u64, &[0u8; 16][..pad])?;
        }
        // The header goes last: a crash before it leaves a zero header, the end of the records.
        fence(Ordering::Release);
        let header = RecordHeader::encode(self.seed, i as u32, payload);
        self.seg.write_at(at, &header)
    }

    /// Takes back a failed append: the segment bytes from `end` to `to` and the index entries
    /// from `count` to `entries` are zeroed now, or before the next record is written.
    fn take_back(&mut self, to: u64, entries: u64) {
        self.dirty_to = self.dirty_to.max(to);
        self.dirty_entries_to = self
            .dirty_entries_to
            .max(format::index_entry_offset(entries));
        let _ = self.clean();
    }

    /// Zeroes what a failed append left after the records (the space is given back; the next
    /// append reserves it again).
    fn clean(&mut self) -> std::io::Result<()> {
        if self.dirty_to > self.end {
            let len = self.dirty_to.min(self.seg.len()) - self.end.min(self.seg.len());
            self.seg.punch(self.end, len)?;
        }
        self.dirty_to = 0;
        let first = format::index_entry_offset(self.count);
        if self.dirty_entries_to > first {
            let len = self.dirty_entries_to.min(self.idx.len()) - first.min(self.idx.len());
            self.idx.punch(first, len)?;
        }
        self.dirty_entries_to = 0;
        Ok(())
    }

    /// Stops writing into the segment and gives back the preallocated space after its records
    /// (best effort: [`Active::finish`] tries again).
    fn retire(&mut self) {
        self.seg.release_writes();
        self.view.shrink_readable(self.end);
        let len = self.seg.len();
        if len > self.end {
            let _ = self.seg.punch(self.end, len - self.end);
        }
    }

    /// Gives back the preallocated space after the records, syncs, and writes the final index
    /// header.
    fn finish(&mut self, state: IndexState) -> Result<()> {
        // Unmap first: syncing pages the writer still maps writable means write-protecting each
        // of them, a TLB shootdown that interrupts the appending thread page after page.
        self.seg.release_writes();
        self.view.shrink_readable(self.end);
        // The file keeps its length (its tail reads as zeros): a reader in another process that
        // maps it never finds the end of the file moved under it (SIGBUS). Punched before the
        // sync, so the preallocated zero pages are not written out.
        let len = self.seg.len();
        if len > self.end {
            self.seg
                .punch(self.end, len - self.end)
                .map_err(|e| Error::io("trim segment", &self.seg_path, e))?;
        } else if len < self.end {
            // The last record's padding was cut off the file (a torn tail that kept the whole
            // payload): give it back, so the file holds every record it indexes.
            self.seg
                .extend_to(self.end)
                .map_err(|e| Error::io("extend segment", &self.seg_path, e))?;
        }
        self.sync_segment()?;
        self.synced_end = self.end;
        // The index is not trimmed: readers in other processes may have it mapped and look at
        // the entry after the last record (a page beyond the end of a file is SIGBUS).
        self.write_index_header(state)?;
        self.sync_index()
    }
}

pub(crate) struct Writer {
    pub active: Option<Active>,
    /// A full segment whose tail was given back but whose successor could not be created yet
    /// (a full disk): sealed once the next segment exists, or closed as the last one.
    pub retired: Option<Active>,
    pub next_seq: u64,
    pub log_id: LogId,
    pub closed: bool,
}

struct SyncState {
    /// Every record below this seq is on stable storage.
    synced: u64,
    /// Group-commit fdatasyncs under way (at most [`MAX_SYNCS_IN_FLIGHT`]).
    in_flight: u32,
    /// Tickets handed out so far (the last one's), one per fdatasync of the active segment and
    /// per background seal: see [`Inner::sync_once`].
    issued: u64,
    /// Tickets of those not finished yet.
    running: Vec<u64>,
    /// Callers waiting (in [`Inner::wait_syncs_through`]) for tickets to be given back: an
    /// fdatasync that gives its ticket back wakes the waiters only when there are some (the
    /// group commit's followers would wake for nothing, before their records are durable).
    ticket_waiters: usize,
    /// The largest length an fdatasync under way (or done) covers: a caller whose records are
    /// below it waits for that one instead of starting its own.
    covering: u64,
    /// Background seals finished (successfully or not); compared with `Inner::seals`.
    seals_done: u64,
    /// The targets of the callers of [`Inner::sync_through`] waiting now (one entry each).
    waiters: Vec<u64>,
    /// How many callers the last group-commit fdatasync released (its leader among them):
    /// the callers the next leader gathers ([`Inner::sync_through`]).
    expected: usize,
    /// Callers that came to wait since the last group-commit fdatasync ended.
    arrived: usize,
    /// True while a leader gathers callers before its fdatasync (it counts as in flight).
    gathering: bool,
    /// Gatherings started so far (the current one's number while `gathering`).
    gathers: u64,
    /// The number of the last gathering whose count a caller completed: that caller leads the
    /// fdatasync itself (it is running; the leader would first have to be woken), and the
    /// leader, once it wakes, waits as a follower. (No gathering starts while one is under
    /// way, so a leader whose number is at most this one was taken over.)
    taken_over: u64,
    /// A moving average of the group-commit fdatasyncs' duration, in nanoseconds (0: none yet).
    sync_ns: u64,
    /// Group-commit fdatasyncs made ([`Log::group_syncs`]).
    group_syncs: u64,
}

/// Group-commit fdatasyncs of one log that may run at once. One: the callers that arrive while
/// it runs share the next one, and the next leader first gathers the callers the last one
/// released ([`Inner::sync_through`]). Two or more in flight (measured: two, four, one per
/// appending thread) each cover fewer events, and with the ticket rule a success waits for the
/// overlapping fdatasync to end as well (README, "Issue 14 targets", ³).
const MAX_SYNCS_IN_FLIGHT: u32 = 1;

/// The longest a leader waits to gather callers, as a fraction of the recent fdatasync time
/// (the gathering pays when it adds callers whose sync would otherwise cost one more
/// fdatasync) and at most [`MAX_GATHER`].
const GATHER_FRACTION: u64 = 2;

/// The longest a leader waits to gather callers, whatever the fdatasyncs take.
const MAX_GATHER: Duration = Duration::from_millis(2);

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub options: Options,
    pub shared: Arc<Shared>,
    writer: Mutex<Writer>,
    sync: Mutex<SyncState>,
    sync_cv: Condvar,
    /// Wakes a gathering leader once the callers it waits for have come ([`Inner::sync_through`]).
    gather_cv: Condvar,
    poisoned: AtomicBool,
    poison_cause: Mutex<Option<String>>,
    /// The thread finishing the last sealed segment (sync, trim, final index header), if any.
    sealing: Mutex<Option<JoinHandle<()>>>,
    /// The thread compressing the last sealed segment ([`Options::compress_sealed`]), if any.
    compressing: Mutex<Option<JoinHandle<()>>>,
    /// Segments retired (sealed or being sealed) since this writer opened: a hook for caches
    /// kept at seals ([`Log::seals`]).
    seals: AtomicU64,
    me: Weak<Inner>,
    _lock: WriterLock,
}

/// A log opened for writing. One per log directory at a time (an exclusive lock on `LOCK`).
///
/// All methods take `&self`: share the log between threads with an `Arc`. Concurrent appends are
/// ordered by an internal lock; under [`Durability::Sync`] they share fdatasyncs (group commit).
pub struct Log {
    inner: Arc<Inner>,
    periodic: Option<Periodic>,
    /// What opening found and did ([`Log::recovery_report`]).
    recovery: RecoveryReport,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.inner.dir)
            .field("len", &self.len())
            .finish()
    }
}

impl Log {
    /// Opens (or creates) the log in `dir` for writing, recovering from an unclean stop as
    /// `options.recovery` allows. What opening found and did is the log's
    /// [`recovery_report`](Log::recovery_report).
    ///
    /// Fails with [`Error::Locked`] while another writer has the log open.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Log> {
        super::open::open(dir.as_ref(), options)
    }

    pub(crate) fn from_parts(
        dir: PathBuf,
        options: Options,
        lock: WriterLock,
        writer: Writer,
        shared: Arc<Shared>,
        synced: u64,
        recovery: RecoveryReport,
    ) -> Result<Log> {
        let durability = options.durability;
        let inner = Arc::new_cyclic(|me| Inner {
            dir,
            options,
            shared,
            writer: Mutex::new(writer),
            sync: Mutex::new(SyncState {
                in_flight: 0,
                issued: 0,
                running: Vec::new(),
                ticket_waiters: 0,
                covering: 0,
                seals_done: 0,
                synced,
                waiters: Vec::new(),
                expected: 0,
                arrived: 0,
                gathering: false,
                gathers: 0,
                taken_over: 0,
                sync_ns: 0,
                group_syncs: 0,
            }),
            sync_cv: Condvar::new(),
            gather_cv: Condvar::new(),
            poisoned: AtomicBool::new(false),
            poison_cause: Mutex::new(None),
            sealing: Mutex::new(None),
            compressing: Mutex::new(None),
            seals: AtomicU64::new(0),
            me: me.clone(),
            _lock: lock,
        });
        let periodic = match durability {
            Durability::Periodic(every) => Some(
                Periodic::start(Arc::downgrade(&inner), every)
                    .map_err(|e| Error::io("start the periodic sync thread for", &inner.dir, e))?,
            ),
            _ => None,
        };
        Ok(Log {
            inner,
            periodic,
            recovery,
        })
    }

    /// What opening the log found and did: whether it was created or closed cleanly, what
    /// recovery cut, moved or rebuilt ([`Log::open`]).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The number of records in the log (the seq the next append gets).
    pub fn len(&self) -> u64 {
        self.inner.shared.published.load(Ordering::SeqCst)
    }

    /// True when the log holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The log's id (shared by all its segments and the logs forked from it).
    pub fn log_id(&self) -> LogId {
        lock(&self.inner.writer).log_id
    }

    /// A reader that sees this writer's records as they are appended.
    pub fn reader(&self) -> LogReader {
        LogReader::attached(Arc::clone(&self.inner.shared))
    }

    /// Appends one record and returns its seq, honouring the log's [`Durability`].
    pub fn append(&self, payload: &[u8]) -> Result<u64> {
        self.append_with(payload, self.inner.options.durability)
    }

    /// Appends one record with the given durability for this call.
    pub fn append_with(&self, payload: &[u8], durability: Durability) -> Result<u64> {
        let range = self.inner.append_many(&[payload])?;
        self.inner.after_append(range.end, durability)?;
        Ok(range.start)
    }

    /// Appends several records under one lock; they get consecutive seqs, in one segment. Readers
    /// (in this process and others) see all of them or none. If any is larger than the maximum,
    /// or writing fails (a full disk), nothing is written and no seq is used. Returns the range
    /// of seqs assigned. (A batch larger than a segment's capacity, `max_event_size` and more, is
    /// written segment by segment: if it fails, the records in the segments it filled stay.)
    /// A crash in the middle of a batch can leave a prefix of it in the log.
    pub fn append_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Range<u64>> {
        let refs: Vec<&[u8]> = payloads.iter().map(AsRef::as_ref).collect();
        let range = self.inner.append_many(&refs)?;
        self.inner
            .after_append(range.end, self.inner.options.durability)?;
        Ok(range)
    }

    /// Makes every record appended so far durable (fdatasync), sharing the sync with concurrent
    /// callers.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync_through(self.len())
    }

    /// Returns once every record with a seq below `len` is durable.
    pub fn sync_through(&self, len: u64) -> Result<()> {
        self.inner.sync_through(len)
    }

    /// Number of records known to be on stable storage.
    pub fn synced_len(&self) -> u64 {
        lock(&self.inner.sync).synced
    }

    /// The number of group-commit fdatasyncs this writer has made (for `sync` appends,
    /// [`Log::sync`], [`Log::sync_through`] and the periodic sync; not the seals' or the
    /// close's): the records made durable divided by this is how many records each fdatasync
    /// covered.
    pub fn group_syncs(&self) -> u64 {
        lock(&self.inner.sync).group_syncs
    }

    /// The number of segments retired since this writer opened (each sealed in the background
    /// as the next one starts): a caller that keeps something derived from the log can notice a
    /// seal after an append.
    pub fn seals(&self) -> u64 {
        self.inner.seals.load(Ordering::Acquire)
    }

    /// True after a failed fdatasync: every later append fails with [`Error::Poisoned`].
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::SeqCst)
    }

    /// Closes the log cleanly: syncs, trims the active segment, and marks it closed so the next
    /// open reads only headers and index tails. Dropping the log does the same, ignoring errors.
    pub fn close(mut self) -> Result<()> {
        if let Some(p) = self.periodic.take() {
            p.stop();
        }
        self.inner.close()
    }

    /// Drops the writer the way a killed process would: no sync, no clean-close marker, the
    /// lock released. What was appended stays in the page cache, as after `kill -9`. For tests of
    /// recovery (the `sim` feature).
    #[cfg(feature = "sim")]
    pub fn abandon(mut self) {
        if let Some(p) = self.periodic.take() {
            p.stop();
        }
        let mut w = lock(&self.inner.writer);
        w.closed = true;
        w.active = None;
        w.retired = None;
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Some(p) = self.periodic.take() {
            p.stop();
        }
        let _ = self.inner.close();
    }
}

impl Inner {
    fn check_poison(&self) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            let cause = lock(&self.poison_cause)
                .clone()
                .unwrap_or_else(|| "fdatasync failed".into());
            return Err(Error::Poisoned { cause });
        }
        Ok(())
    }

    fn poison(&self, e: &Error) {
        let mut c = lock(&self.poison_cause);
        if c.is_none() {
            *c = Some(e.to_string());
        }
        self.poisoned.store(true, Ordering::SeqCst);
    }

    fn append_many(&self, payloads: &[&[u8]]) -> Result<Range<u64>> {
        let max = self.options.max_event_size;
        if let Some(p) = payloads.iter().find(|p| p.len() as u64 > max) {
            return Err(Error::EventTooLarge {
                size: p.len() as u64,
                max,
            });
        }
        self.check_poison()?;
        let mut w = lock(&self.writer);
        if w.closed {
            return Err(Error::Closed);
        }
        let start = w.next_seq;
        let total: u64 = payloads
            .iter()
            .map(|p| format::record_size(p.len() as u64))
            .sum();
        // A batch goes into one segment (a new one when it does not fit in the active one; a
        // batch larger than `segment_size` gets a segment of its own, up to the capacity).
        let room = self.options.segment_capacity() - HEADER_SIZE as u64;
        let active_too_small = w
            .active
            .as_ref()
            .is_some_and(|a| a.count == 0 && a.end + total > a.capacity);
        let result = if payloads.len() <= 1 || (total <= room && !active_too_small) {
            // All or nothing: the batch goes into one segment, and a failure leaves no trace.
            self.write_records(&mut w, payloads, total)
        } else {
            // A batch larger than a segment's capacity is written segment by segment. If it
            // fails, the records already in sealed segments stay (and are published below).
            let mut r = Ok(());
            for p in payloads {
                r = self.write_records(&mut w, &[p], format::record_size(p.len() as u64));
                if r.is_err() {
                    break;
                }
            }
            r
        };
        if w.next_seq != start {
            self.shared.publish(w.next_seq);
        }
        let end = w.next_seq;
        drop(w);
        result.map(|()| start..end)
    }

    fn after_append(&self, len: u64, durability: Durability) -> Result<()> {
        match durability {
            Durability::Sync => self.sync_through(len),
            Durability::Os | Durability::Periodic(_) => Ok(()),
        }
    }

    /// Writes `payloads` (taking `total` bytes) into one segment, rolling first when they do not
    /// fit in the active one. Either every record is written and indexed, or none is: a failure
    /// zeroes what was written (or leaves it marked dirty, zeroed before the next write).
    fn write_records(&self, w: &mut Writer, payloads: &[&[u8]], total: u64) -> Result<()> {
        let roll_at = self.options.segment_size;
        let full = w.active.as_ref().is_some_and(|a| {
            a.count > 0 && (a.end + total > roll_at || a.end + total > a.capacity)
        });
        if full {
            self.roll(w)?;
        }
        if w.active.is_none() {
            self.start_segment(w)?;
        }
        let Some(a) = w.active.as_mut() else {
            return Err(Error::Closed);
        };
        a.clean()
            .map_err(|e| Error::io("zero a failed append in", &a.seg_path, e))?;
        // Reserve space first: a full disk fails here, before any byte of a record is written
        // (a write through the map into blocks that do not exist would be a SIGBUS there).
        if !a.seg.is_reserved(a.end, total) {
            let len = total
                .max(self.options.preallocate)
                .min(a.capacity.saturating_sub(a.end))
                .max(total);
            // A disk too full for a whole preallocation step may still hold these records.
            a.seg
                .reserve(a.end, len)
                .or_else(|e| match e.raw_os_error() {
                    Some(ENOSPC) if len > total => a.seg.reserve(a.end, total),
                    _ => Err(e),
                })
                .map_err(|e| Error::io("allocate segment", &a.seg_path, e))?;
            a.view.set_readable(a.seg.len());
        }
        let n = payloads.len() as u64;
        let entries_from = format::index_entry_offset(a.count);
        let entries_len = n * INDEX_ENTRY_SIZE as u64;
        if !a.idx.is_reserved(entries_from, entries_len) {
            let cap = index_capacity(a.capacity);
            let len = entries_len
                .max(INDEX_STEP)
                .min(cap.saturating_sub(entries_from))
                .max(entries_len);
            a.idx
                .reserve(entries_from, len)
                .or_else(|e| match e.raw_os_error() {
                    Some(ENOSPC) if len > entries_len => a.idx.reserve(entries_from, entries_len),
                    _ => Err(e),
                })
                .map_err(|e| Error::io("allocate index", &a.idx_path, e))?;
            a.view.set_index_readable(a.idx.len());
        }
        let mut at = a.end;
        for (k, p) in payloads.iter().enumerate() {
            let size = format::record_size(p.len() as u64);
            if let Err(e) = a.put_record(at, a.count + k as u64, p) {
                a.take_back(at + size, a.count);
                return Err(Error::io("write segment", &a.seg_path, e));
            }
            at += size;
        }
        // The index entries go last: a reader in another process counts a record only once its
        // entry is there.
        fence(Ordering::Release);
        let mut o = a.end;
        for (k, p) in payloads.iter().enumerate() {
            let entry = format::index_entry_offset(a.count + k as u64);
            if let Err(e) = a.idx.write_at(entry, &(o as u32).to_le_bytes()) {
                a.take_back(at, a.count + k as u64 + 1);
                return Err(Error::io("write index", &a.idx_path, e));
            }
            o += format::record_size(p.len() as u64);
        }
        // Readers see the records once they are published (after this): a storage that
        // buffers writes hands them to the kernel now.
        if let Err(e) = a.seg.flush() {
            a.take_back(at, a.count + n);
            return Err(Error::io("write segment", &a.seg_path, e));
        }
        if let Err(e) = a.idx.flush() {
            a.take_back(at, a.count + n);
            return Err(Error::io("write index", &a.idx_path, e));
        }
        a.end = at;
        a.count += n;
        w.next_seq += n;
        Ok(())
    }

    /// Retires the active segment and starts the next one; the retired segment is then sealed
    /// (sync, final index header) in the background. The next segment exists on disk before the
    /// old one says "sealed": a sealed segment always has a successor, so a sealed last segment
    /// means a missing file. The retired segment's preallocated tail is given back first, so a
    /// nearly full disk has room for the next segment.
    fn roll(&self, w: &mut Writer) -> Result<()> {
        if let Some(mut a) = w.active.take() {
            a.retire();
            w.retired = Some(a);
        }
        self.start_segment(w)
    }

    /// Creates the segment at `w.next_seq` as the active one, then seals the retired one.
    fn start_segment(&self, w: &mut Writer) -> Result<()> {
        // One seal at a time; a failed one has poisoned the writer.
        self.wait_sealed();
        self.check_poison()?;
        let next =
            create_segment(&self.dir, &self.options, w.next_seq, w.log_id).inspect_err(|e| {
                if is_sync_error(e) {
                    self.poison(e);
                }
            })?;
        self.shared.push_segment(Arc::clone(&next.view));
        w.active = Some(next);
        let Some(mut a) = w.retired.take() else {
            return Ok(());
        };
        self.seals.fetch_add(1, Ordering::Release);
        let ticket = {
            let mut s = lock(&self.sync);
            s.issued += 1;
            let t = s.issued;
            s.running.push(t);
            t
        };
        // Finishing a segment (an fdatasync of everything in it, the final index header) takes
        // as long as the disk needs to write the segment: a thread does it, so appends go on in
        // the next segment. `sync`, the next seal and `close` wait for it.
        let me = self.me.clone();
        let path = a.seg_path.clone();
        let spawned = std::thread::Builder::new()
            .name("agentlog-seal".into())
            .spawn(move || {
                let result = a.finish(IndexState::Sealed);
                let ok = result.is_ok();
                if let Some(inner) = me.upgrade() {
                    inner.sealed(result, a.base + a.count, ticket);
                    if ok && inner.options.compress_sealed {
                        inner.compress_in_background(a.base);
                    }
                }
            });
        match spawned {
            Ok(handle) => {
                *lock(&self.sealing) = Some(handle);
                Ok(())
            }
            Err(e) => {
                // Not sealed: the segment stays marked open, and the next open checks it. Its
                // records are not durable: a failed seal poisons the writer, as a failed
                // fdatasync does.
                let e = Error::io("start a thread to seal", path, e);
                self.poison(&e);
                self.sealed(Err(Error::Closed), 0, ticket);
                Err(e)
            }
        }
    }

    /// Records the end of a background seal. Its first step is the fdatasync of the segment's
    /// data: any later failure (the trim, the final index header) leaves the data durable, and
    /// the segment marked open on disk, which the next open checks.
    ///
    /// The seal holds a ticket like a group-commit fdatasync (given back here, after a failure
    /// has poisoned the writer), and its success counts only once every fdatasync under way
    /// when it ended has returned too ([`Inner::sync_once`] says why).
    fn sealed(&self, result: Result<()>, len: u64, ticket: u64) {
        let mut s = lock(&self.sync);
        if let Err(e) = &result {
            if is_sync_error(e) {
                self.poison(e);
            }
        }
        s.running.retain(|&t| t != ticket);
        self.sync_cv.notify_all();
        if result.is_ok() {
            let issued = s.issued;
            s = self.wait_syncs_through(s, issued);
            if !self.poisoned.load(Ordering::SeqCst) {
                s.synced = s.synced.max(len);
            }
        }
        s.seals_done += 1;
        self.sync_cv.notify_all();
    }

    /// Compresses the sealed segment `base` in a thread of its own (after the one before it),
    /// so that neither appends nor `sync` wait for it; `close` does.
    fn compress_in_background(&self, base: u64) {
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let previous = lock(&self.compressing).take();
        if let Some(h) = previous {
            let _ = h.join();
        }
        let spawned = std::thread::Builder::new()
            .name("agentlog-compress".into())
            .spawn(move || {
                // A failure leaves the segment plain and whole (the cold file is written
                // aside and renamed over it only once synced); the next seal goes on.
                let _ = super::cold::compress_segment(&me.dir, base, me.options.storage.as_ref());
            });
        if let Ok(h) = spawned {
            *lock(&self.compressing) = Some(h);
        }
    }

    /// Waits for the background compression, if one runs.
    fn wait_compressed(&self) {
        let handle = lock(&self.compressing).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Waits for the background seal, if one runs.
    fn wait_sealed(&self) {
        let handle = lock(&self.sealing).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Group commit: a caller whose records an fdatasync under way covers waits for it; else
    /// it leads the next one, unless [`MAX_SYNCS_IN_FLIGHT`] run already (then it waits for one
    /// to end and looks again).
    ///
    /// A leader first gathers: the callers the last fdatasync released (its own leader
    /// among them) are appending their next records now, a few microseconds behind. Starting
    /// at once would cover only the callers that arrived while the last one ran (about half of
    /// N concurrent appenders), and the others would need an fdatasync of their own. So the
    /// leader waits until as many callers have arrived since the last one ended as it released,
    /// or a fraction of an fdatasync's time has passed ([`GATHER_FRACTION`], at most
    /// [`MAX_GATHER`]), whichever comes first. The caller that completes the count leads the
    /// fdatasync in the leader's place (it is running; waking the leader would add a wake-up to
    /// every fdatasync), and the leader, when it wakes, waits as a follower. A lone appender
    /// never waits: it is the one caller its last fdatasync released.
    fn sync_through(&self, target: u64) -> Result<()> {
        let mut s = lock(&self.sync);
        if s.synced >= target {
            return Ok(());
        }
        s.waiters.push(target);
        s.arrived += 1;
        if s.gathering && s.arrived >= s.expected {
            // The last caller the leader waits for: it starts the fdatasync itself (below),
            // one wake-up sooner than the leader could; the leader becomes a follower.
            s.gathering = false;
            s.taken_over = s.gathers;
            self.gather_cv.notify_one();
        }
        let (mut s, result, wake) = self.wait_synced(s, target);
        if let Some(i) = s.waiters.iter().position(|&t| t == target) {
            s.waiters.swap_remove(i);
        }
        drop(s);
        if wake {
            // The callers this caller's fdatasync released, woken once the lock is free: each
            // takes it at once instead of queueing behind the others for it.
            self.sync_cv.notify_all();
        }
        result
    }

    /// [`Inner::sync_through`] once its caller is counted among the waiters. True with the
    /// result when the caller led the fdatasync that made its records durable: it must wake the
    /// other waiters once it has let go of the lock.
    fn wait_synced<'a>(
        &'a self,
        mut s: std::sync::MutexGuard<'a, SyncState>,
        target: u64,
    ) -> (std::sync::MutexGuard<'a, SyncState>, Result<()>, bool) {
        loop {
            if s.synced >= target {
                return (s, Ok(()), false);
            }
            if let Err(e) = self.check_poison() {
                return (s, Err(e), false);
            }
            if s.covering >= target || s.gathering || s.in_flight >= MAX_SYNCS_IN_FLIGHT {
                s = unpoisoned(self.sync_cv.wait(s));
                continue;
            }
            let (g, lead) = self.gather(s);
            s = g;
            if !lead {
                // The caller that completed the count leads this fdatasync.
                continue;
            }
            s.in_flight += 1;
            drop(s);
            let started = std::time::Instant::now();
            let result = self.sync_once();
            let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            s = lock(&self.sync);
            s.in_flight -= 1;
            s.group_syncs += 1;
            s.sync_ns = if s.sync_ns == 0 {
                took
            } else {
                (s.sync_ns.saturating_mul(7) / 8).saturating_add(took / 8)
            };
            match result {
                Ok(len) => {
                    s.synced = s.synced.max(len);
                    let synced = s.synced;
                    s.expected = s.waiters.iter().filter(|&&t| t <= synced).count();
                    s.arrived = 0;
                    if synced >= target {
                        return (s, Ok(()), true);
                    }
                    self.sync_cv.notify_all();
                }
                Err(e) => {
                    self.poison(&e);
                    self.sync_cv.notify_all();
                    return (s, Err(e), false);
                }
            }
        }
    }

    /// A leader's wait for the callers the last fdatasync released ([`Inner::sync_through`]).
    /// False when the last of them took the lead over (the caller then waits as a follower).
    fn gather<'a>(
        &'a self,
        mut s: std::sync::MutexGuard<'a, SyncState>,
    ) -> (std::sync::MutexGuard<'a, SyncState>, bool) {
        if s.arrived >= s.expected || s.sync_ns == 0 {
            return (s, true);
        }
        let limit = Duration::from_nanos(s.sync_ns / GATHER_FRACTION).min(MAX_GATHER);
        let deadline = std::time::Instant::now() + limit;
        s.gathering = true;
        s.gathers += 1;
        let mine = s.gathers;
        while s.arrived < s.expected && s.taken_over < mine && !self.poisoned.load(Ordering::SeqCst)
        {
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            s = unpoisoned(self.gather_cv.wait_timeout(s, deadline - now)).0;
        }
        if s.taken_over >= mine {
            return (s, false);
        }
        s.gathering = false;
        (s, true)
    }

    /// Waits (on the sync state's lock) until every fdatasync with a ticket up to `ticket` has
    /// returned.
    fn wait_syncs_through<'a>(
        &self,
        mut s: std::sync::MutexGuard<'a, SyncState>,
        ticket: u64,
    ) -> std::sync::MutexGuard<'a, SyncState> {
        while s.running.iter().any(|&t| t <= ticket) {
            s.ticket_waiters += 1;
            s = unpoisoned(self.sync_cv.wait(s));
            s.ticket_waiters -= 1;
        }
        s
    }

    /// One fdatasync of the active segment, outside the append lock. Returns the length it
    /// made durable: the records of earlier segments are made durable by their seals, which it
    /// waits for.
    ///
    /// With several fdatasyncs of one file under way (a group-commit one and the
    /// segment's seal), a success alone does not prove the records durable: when write-back
    /// fails, Linux reports the error once per open file, to the first fdatasync that checks,
    /// which may be another one under way, and this one returns 0. So every fdatasync holds a
    /// ticket while it runs, and a success counts only once every ticket handed out before it
    /// returned has been given back, and the log is not poisoned (a failure poisons it before
    /// its ticket is given back).
    fn sync_once(&self) -> Result<u64> {
        self.check_poison()?;
        let ticket: u64;
        let (syncer, len, end, base, path, seals) = {
            let w = lock(&self.writer);
            // Seals started so far (each under this lock): the records before the active
            // segment are durable once these have finished.
            let seals = self.seals.load(Ordering::Acquire);
            // Waiters for records below `len` can wait for this sync rather than start one.
            {
                let mut s = lock(&self.sync);
                s.covering = s.covering.max(w.next_seq);
                s.issued += 1;
                ticket = s.issued;
                s.running.push(ticket);
            }
            // With no active segment (its creation failed), the retired one holds the last
            // records: it is synced instead.
            match w.active.as_ref().or(w.retired.as_ref()) {
                Some(a) => (
                    Some(Arc::clone(&a.syncer)),
                    w.next_seq,
                    a.end,
                    a.base,
                    a.seg_path.clone(),
                    seals,
                ),
                None => (None, w.next_seq, 0, 0, PathBuf::new(), seals),
            }
        };
        // Given back however this returns (the fdatasync, or its absence).
        let result = match &syncer {
            Some(syncer) => syncer
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &path, e)),
            None => Ok(()),
        };
        {
            let mut s = lock(&self.sync);
            if let Err(e) = &result {
                self.poison(e);
            }
            s.running.retain(|&t| t != ticket);
            let last = s.issued;
            if s.ticket_waiters > 0 {
                self.sync_cv.notify_all();
            }
            drop(self.wait_syncs_through(s, last));
        }
        result?;
        self.check_poison()?;
        if syncer.is_some() {
            let mut w = lock(&self.writer);
            if let Some(a) = w.active.as_mut().filter(|a| a.base == base) {
                if end > a.synced_end {
                    a.synced_end = end;
                    a.write_index_header(IndexState::Open)?;
                }
            } else if let Some(a) = w.retired.as_mut().filter(|a| a.base == base) {
                a.synced_end = a.synced_end.max(end);
            }
        }
        // The records of the segments retired before `len` was taken are durable once their
        // seals (each an fdatasync of its segment) have finished.
        let mut s = lock(&self.sync);
        while s.seals_done < seals {
            self.check_poison()?;
            s = unpoisoned(self.sync_cv.wait(s));
        }
        drop(s);
        self.check_poison()?;
        Ok(len)
    }

    fn close(&self) -> Result<()> {
        // Also after `abandon`: the seal thread holds the log (and so its lock) until it ends.
        self.wait_sealed();
        // A compression must not outlive the writer's lock: the next writer removes the
        // temporary file it writes.
        self.wait_compressed();
        let mut w = lock(&self.writer);
        if w.closed {
            return Ok(());
        }
        w.closed = true;
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.wake();
        if self.poisoned.load(Ordering::SeqCst) {
            // Leave the segment marked open: the next open scans it.
            return Ok(());
        }
        let len = w.next_seq;
        let log_id = w.log_id;
        let last = if let Some(a) = w.active.as_mut() {
            a.finish(IndexState::Closed)?;
            Some(a)
        } else if let Some(a) = w.retired.as_mut() {
            // Its successor was never created: it is the last segment.
            a.finish(IndexState::Closed)?;
            Some(a)
        } else {
            None
        };
        let last: Option<&Active> = last.map(|a| &*a);
        if let Some(tail) = last.and_then(|a| a.hint_tail()) {
            // Where the last record is, for readers (docs/format.md, `LASTSEG`): a cache, not
            // synced (a reader checks it against the segment before using it), written over
            // the hint naming this segment, in place: a close allocates nothing (a full disk).
            let named = Hint {
                log_id,
                last_base: tail.0,
                tail: None,
            };
            if hint::read_hint(&self.dir) == Some(named) {
                // With a copy of the segment's header and of a small last record: a reader
                // then reads the hint alone (docs/format.md, `LASTSEG`).
                let copy = last.and_then(|a| a.last_record_copy(tail.1));
                let _ = hint::rewrite_hint_in_place(
                    &self.dir,
                    Hint {
                        tail: Some(tail.1),
                        ..named
                    },
                    copy,
                    false,
                );
            }
        }
        let mut s = lock(&self.sync);
        s.synced = s.synced.max(len);
        Ok(())
    }
}

/// True for a failed fdatasync: after one, the page cache can no longer be trusted.
fn is_sync_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Io {
            op: "fdatasync",
            ..
        }
    )
}

/// Creates the segment starting at `base` (index first, then the segment under a temporary name,
/// renamed into place once its header is durable).
pub(crate) fn create_segment(
    dir: &Path,
    options: &Options,
    base: u64,
    log_id: LogId,
) -> Result<Active> {
    let storage = &options.storage;
    let capacity = options.segment_capacity();
    let seg_path = dir.join(format::segment_file_name(base));
    let idx_path = dir.join(format::index_file_name(base));
    let tmp_path = dir.join(format!("{}.tmp", format::segment_file_name(base)));
    // The hint names the segment before it exists, durably: it never names a segment that has
    // a successor it does not know of (docs/format.md, `LASTSEG`). A cache: when it cannot be
    // written there is no hint, and readers list the directory.
    let _ = hint::write_hint(
        storage.as_ref(),
        dir,
        Hint {
            log_id,
            last_base: base,
            tail: None,
        },
        true,
    );
    let mut idx = storage
        .create(&idx_path, index_capacity(capacity))
        .map_err(|e| Error::io("create index", &idx_path, e))?;
    idx.extend_to(INDEX_STEP.min(index_capacity(capacity)))
        .map_err(|e| Error::io("allocate index", &idx_path, e))?;
    let mut seg = storage
        .create(&tmp_path, capacity)
        .map_err(|e| Error::io("create segment", &tmp_path, e))?;
    let header = SegmentHeader {
        base_seq: base,
        log_id,
        capacity,
        payload_schema: options.payload_schema,
        created_ms: now_ms(),
    };
    seg.extend_to(options.preallocate.clamp(HEADER_SIZE as u64, capacity))
        .and_then(|()| seg.write_at(0, &header.encode()))
        .map_err(|e| Error::io("write segment header", &tmp_path, e))?;
    let idx_header = IndexHeader {
        state: IndexState::Open,
        base_seq: base,
        log_id,
        count: 0,
        end: HEADER_SIZE as u64,
        synced_end: HEADER_SIZE as u32,
    };
    idx.write_at(0, &idx_header.encode())
        .map_err(|e| Error::io("write index header", &idx_path, e))?;
    let syncer = seg.syncer();
    let idx_syncer = idx.syncer();
    idx_syncer
        .sync_data()
        .map_err(|e| Error::io("fdatasync", &idx_path, e))?;
    syncer
        .sync_data()
        .map_err(|e| Error::io("fdatasync", &tmp_path, e))?;
    storage
        .rename(&tmp_path, &seg_path)
        .map_err(|e| Error::io("rename segment", &tmp_path, e))?;
    storage
        .sync_dir(dir)
        .map_err(|e| Error::io("sync directory", dir, e))?;
    let view = SegmentView::open(dir, base)?;
    view.set_readable(seg.len());
    Ok(Active {
        base,
        seed: format::segment_seed(&log_id, base),
        log_id,
        capacity,
        seg,
        idx,
        syncer,
        idx_syncer,
        count: 0,
        end: HEADER_SIZE as u64,
        synced_end: HEADER_SIZE as u64,
        dirty_to: 0,
        dirty_entries_to: 0,
        view: Arc::new(view),
        seg_path,
        idx_path,
    })
}

/// The background thread of [`Durability::Periodic`].
struct Periodic {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Periodic {
    fn start(inner: Weak<Inner>, every: Duration) -> std::io::Result<Periodic> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("agentlog-sync".into())
            .spawn(move || loop {
                {
                    let (m, cv) = &*stop2;
                    let g = lock(m);
                    let (g, _) = unpoisoned(cv.wait_timeout_while(g, every, |stopped| !*stopped));
                    if *g {
                        return;
                    }
                }
                let Some(inner) = inner.upgrade() else { return };
                let len = inner.shared.published.load(Ordering::SeqCst);
                let _ = inner.sync_through(len);
            })?;
        Ok(Periodic {
            stop,
            handle: Some(handle),
        })
    }

    fn stop(mut self) {
        {
            let (m, cv) = &*self.stop;
            *lock(m) = true;
            cv.notify_all();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
