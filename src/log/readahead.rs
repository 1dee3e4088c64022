//! Checks ahead of a sequential read of a plain segment, on the other core.
//!
//! A replay spends its time on two checks per record and on what the caller does with it: the
//! record's CRC-32, and the validation of its payload, the event's archive (bounds, UTF-8, enum
//! tags), which every caller runs before it reads an event ([`access_event`]) and which takes
//! most of a replay. When a read covers a large part of a plain segment, a thread walks the
//! same records ahead of the reader and runs both checks on them, with the functions the reader
//! and [`access_event`] use; the reader then skips the checksum of every record the thread has
//! vouched for, and marks the record's payload as checked for the calling thread (see
//! [Vouched payloads](#vouched-payloads)), so that [`access_event`] on exactly those bytes skips
//! the validation. Where the thread has not been, the reader checks the records itself: the two
//! share the work (see [below](#sharing-the-work)). Nothing else changes: the reader still
//! checks each record's header, bounds and seq, and any fault is found and reported by the
//! reader or by [`access_event`], with their usual context (the thread stops at a record it
//! cannot vouch for and leaves it to them).
//!
//! Cold segments do not get this: their records are read from blocks whose checksum is checked
//! when they are decompressed, which [`Prefetch`](super::cold::Prefetch) does ahead.
//!
//! # Sharing the work
//!
//! The read's span is cut into chunks of [`CHUNK`] bytes (a record belongs to the chunk its
//! header starts in), each with a state: free, taken by the thread, done by the thread, taken by
//! the reader, or given up by the thread (at a record it could not vouch for). Whoever comes to
//! a free chunk first takes it (a compare-and-swap). The reader skips the checks of a chunk the
//! thread has done; checks a chunk it took itself; and in a chunk the thread is still working
//! on, checks the records itself until the thread says it is done. When the reader finds the
//! thread working on the chunk the reader is entering, it also takes the [`TAKE`] chunks after
//! it: the thread, too slow to stay ahead alone, then skips those (walking their headers only)
//! and the two share the work, instead of checking the same records side by side. A thread that finds
//! itself behind the reader goes on from the reader's record. It stays at most [`AHEAD`] bytes
//! ahead of the reader (which says where it is at each chunk it enters) and parks when it is
//! that far ahead; the reader wakes it when it has come within half. Nothing waits on the
//! thread: a reader that finds it slow (or descheduled) checks more records itself.
//!
//! # Vouched payloads
//!
//! A thread-local record names the last payload the thread vouched for that the reader handed
//! out on this thread: its segment view (held weakly) and the payload's address and length.
//! [`vouched`] is true only for exactly those bytes and only while that view, and with it the
//! map the bytes are in, is alive: a map's bytes never change (records are immutable once
//! published), so they are the bytes the thread validated. Any other bytes are validated by
//! [`access_event`] as always.
//!
//! [`access_event`]: crate::event::access_event

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;

use super::segment::{check_record_with, SegmentView};

/// The least span of a plain segment a read must cover for the checks to run ahead: starting
/// and stopping a thread costs about as much as the checks of a few hundred KiB.
const MIN_SPAN: u64 = 4 << 20;

/// How far (bytes of records) the thread may be ahead of the reader: far enough that it seldom
/// parks (each park and wake costs the reader a system call), near enough that a read stopped
/// early wasted little of the other core's time (8 MiB of checks take a few milliseconds).
const AHEAD: u64 = 8 << 20;

/// The unit of work: the reader and the thread take the records of a read this many bytes at a
/// time.
const CHUNK: u64 = 128 << 10;

/// How many chunks the reader takes when it finds the thread on the chunk it enters (measured:
/// one chunk left the two side by side on half the chunks; two and three did better, three
/// best, `--bench compare -- replay` 13.3 → 11.9 ms at 64 KiB chunks).
const TAKE: u64 = 3;

/// An atomic alone on its cache line: the reader writes one, the thread the other.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line(AtomicU64);

/// A chunk's state.
const FREE: u8 = 0;
/// The thread is checking it.
const THREAD: u8 = 1;
/// The thread has checked every record of it (of the read): checksum and payload.
const DONE: u8 = 2;
/// The reader checks it.
const READER: u8 = 3;
/// The thread stopped in it, at a record it could not vouch for.
const GIVEN_UP: u8 = 4;

/// What the thread and the reader share.
#[derive(Debug)]
struct Shared {
    /// Where the read starts: chunk `k` holds the records that start in
    /// `start + k * CHUNK..start + (k + 1) * CHUNK`.
    start: u64,
    /// Each chunk's state.
    chunks: Box<[AtomicU8]>,
    /// Where the reader is: the index in the segment (high 32 bits) and offset (low 32; a
    /// segment's offsets fit in 32 bits, as its index file stores them) of the first record it
    /// read in the chunk it is in.
    reader_at: Line,
    /// The chunk the thread is at.
    thread_at: Line,
    /// The thread is parked (or about to), waiting for the reader to come closer.
    sleeping: AtomicBool,
    stop: AtomicBool,
}

impl Shared {
    fn new(index: u64, start: u64, end: u64) -> Shared {
        let n = (end.saturating_sub(start) / CHUNK).saturating_add(1);
        Shared {
            start,
            chunks: (0..n).map(|_| AtomicU8::new(FREE)).collect(),
            reader_at: Line(AtomicU64::new(pack(index, start))),
            thread_at: Line::default(),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        }
    }

    /// The chunk of the record at `offset` (at or after `start`).
    fn chunk_of(&self, offset: u64) -> u64 {
        offset.saturating_sub(self.start) / CHUNK
    }

    /// Chunk `k`'s state; `None` past the last one (the reader checks any record there itself).
    fn chunk(&self, k: u64) -> Option<&AtomicU8> {
        usize::try_from(k).ok().and_then(|k| self.chunks.get(k))
    }

    /// Sets chunk `k`'s state (the thread, on a chunk it took: done or given up).
    fn set(&self, k: u64, state: u8) {
        if let Some(c) = self.chunk(k) {
            c.store(state, Ordering::Release);
        }
    }

    /// Takes chunk `k` for `who` if it is free.
    fn take(&self, k: u64, who: u8) -> bool {
        self.chunk(k).is_some_and(|c| {
            c.compare_exchange(FREE, who, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
    }
}

fn pack(index: u64, offset: u64) -> u64 {
    (index << 32) | (offset & 0xFFFF_FFFF)
}

fn unpack(at: u64) -> (u64, u64) {
    (at >> 32, at & 0xFFFF_FFFF)
}

/// How the reader treats the records of the chunk it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The thread checked them.
    Done,
    /// The reader checks them.
    Own,
    /// The thread is checking them: the reader checks them too until the thread is done.
    Racing,
}

/// Checks run ahead of a reader of one plain segment (see the [module](self) docs). Dropping
/// it stops the thread and waits for it (at most one [`CHUNK`] of checks).
#[derive(Debug)]
pub(crate) struct VerifyAhead {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    /// The chunk the reader is in, where it ends, and how its records are treated.
    chunk: u64,
    chunk_end: u64,
    mode: Mode,
}

impl VerifyAhead {
    /// Starts checking the records of the plain (not cold) segment `view` from record `index`
    /// at `offset` (where the reader starts) up to record `to` (exclusive), the last of which
    /// starts at `end`. `None` when the span is too short to pay, the machine runs one thread
    /// at a time, or no thread can be started: the reader then checks every record itself.
    pub(crate) fn start(
        view: &Arc<SegmentView>,
        index: u64,
        offset: u64,
        to: u64,
        end: u64,
    ) -> Option<VerifyAhead> {
        if end.saturating_sub(offset) < MIN_SPAN
            || view.readable_len() > u64::from(u32::MAX)
            || to > u64::from(u32::MAX)
            || !parallel()
        {
            return None;
        }
        let shared = Arc::new(Shared::new(index, offset, end));
        let (view, mine) = (Arc::clone(view), Arc::clone(&shared));
        let handle = std::thread::Builder::new()
            .name("agentlog-verify-ahead".into())
            .stack_size(256 << 10)
            .spawn(move || run(&view, &mine, index, offset, to))
            .ok()?;
        Some(VerifyAhead {
            shared,
            handle: Some(handle),
            chunk: 0,
            chunk_end: offset,
            mode: Mode::Own,
        })
    }

    /// True when the thread has checked the record at `offset`, where the reader is now
    /// (record `index` of the segment): its checksum and its payload.
    #[inline]
    pub(crate) fn checked(&mut self, index: u64, offset: u64) -> bool {
        if offset >= self.chunk_end {
            self.enter(index, offset);
        }
        match self.mode {
            Mode::Done => true,
            Mode::Own => false,
            Mode::Racing => self.raced(),
        }
    }

    /// In a chunk the thread is checking: whether it is done now.
    #[inline]
    fn raced(&mut self) -> bool {
        let done = self
            .shared
            .chunk(self.chunk)
            .is_some_and(|c| c.load(Ordering::Acquire) == DONE);
        if done {
            self.mode = Mode::Done;
        }
        done
    }

    /// The reader enters the chunk of the record at `offset` (record `index`): says where it
    /// is, wakes the thread if it is parked and the reader has come within half of [`AHEAD`],
    /// and finds how the chunk's records are treated.
    #[cold]
    fn enter(&mut self, index: u64, offset: u64) {
        let s = &*self.shared;
        let k = s.chunk_of(offset);
        self.chunk = k;
        self.chunk_end = s.start + (k + 1) * CHUNK;
        s.reader_at.0.store(pack(index, offset), Ordering::SeqCst);
        if s.sleeping.load(Ordering::SeqCst)
            && s.thread_at.0.load(Ordering::SeqCst) <= k + AHEAD / CHUNK / 2
        {
            if let Some(h) = &self.handle {
                h.thread().unpark();
            }
        }
        let state = match s.chunk(k) {
            None => GIVEN_UP,
            Some(_) if s.take(k, READER) => READER,
            Some(c) => c.load(Ordering::Acquire),
        };
        self.mode = match state {
            DONE => Mode::Done,
            THREAD => {
                // The thread is on this chunk: not far enough ahead to do the next ones
                // alone. Take the next ones, so that the two share the work.
                for j in 1..=TAKE {
                    s.take(k + j, READER);
                }
                Mode::Racing
            }
            _ => Mode::Own,
        };
    }
}

impl Drop for VerifyAhead {
    fn drop(&mut self) {
        stop_and_join(&self.shared.stop, self.handle.take());
    }
}

/// The check a reader's caller runs on each payload: the validation of an event's archive.
/// (The engine stores opaque payloads; agentlog's are events. A payload that is not one is
/// simply not vouched for: the thread stops there, and the reader checks the rest itself.)
fn payload_ok(payload: &[u8]) -> bool {
    crate::event::archive_is_valid(payload)
}

/// The thread: goes through records `index..to` from `offset`, checking those of the chunks
/// it takes, until done, stopped, or at a record it cannot vouch for (which the reader will
/// check and report).
fn run(view: &SegmentView, s: &Shared, mut index: u64, mut offset: u64, to: u64) {
    let data = view.data_unchecked();
    let base = view.header.base_seq;
    while index < to && !s.stop.load(Ordering::Acquire) {
        let (r_index, r_offset) = unpack(s.reader_at.0.load(Ordering::Acquire));
        if r_offset > offset {
            // Behind the reader (this thread did not run for a while): go on from its record.
            (index, offset) = (r_index, r_offset);
        }
        let k = s.chunk_of(offset);
        let r_chunk = s.chunk_of(r_offset);
        s.thread_at.0.store(k, Ordering::SeqCst);
        if k >= r_chunk + AHEAD / CHUNK {
            // Far enough ahead: sleep until the reader comes closer. (The reader reads
            // `sleeping` after saying where it is, this thread `reader_at` after setting it:
            // one of them sees the other's store.)
            s.sleeping.store(true, Ordering::SeqCst);
            let (_, r_offset) = unpack(s.reader_at.0.load(Ordering::SeqCst));
            if k >= s.chunk_of(r_offset) + AHEAD / CHUNK && !s.stop.load(Ordering::SeqCst) {
                std::thread::park();
            }
            s.sleeping.store(false, Ordering::SeqCst);
            continue;
        }
        let chunk_end = s.start + (k + 1) * CHUNK;
        // The reader's chunk is the reader's; any other free one, this thread's.
        let mine = k > r_chunk && s.take(k, THREAD);
        while offset < chunk_end && index < to {
            match check_record_with(data, offset, base + index, &view.check, mine) {
                Ok(found) if !mine || payload_ok(found.payload) => {
                    offset = found.next;
                    index += 1;
                }
                _ => {
                    // The reader (or the caller's validation) checks this record itself and
                    // reports what is wrong.
                    if mine {
                        s.set(k, GIVEN_UP);
                    }
                    return;
                }
            }
        }
        if mine {
            s.set(k, DONE);
        }
    }
}

thread_local! {
    /// The payload last vouched for on this thread: its view's address, its address, its
    /// length (all 0: none). Set with [`VOUCHED_VIEW`] holding that view.
    static VOUCHED: Cell<[usize; 3]> = const { Cell::new([0; 3]) };
    /// The view of [`VOUCHED`]'s payload, held weakly: the payload's bytes are valid to read,
    /// and unchanged, while it lives.
    static VOUCHED_VIEW: RefCell<Weak<SegmentView>> = const { RefCell::new(Weak::new()) };
}

/// Records, for this thread, that `payload` (bytes of `view`'s map) is a record the thread of
/// a [`VerifyAhead`] on `view` checked, payload included.
#[inline]
pub(crate) fn vouch(view: &Arc<SegmentView>, payload: &[u8]) {
    let id = Arc::as_ptr(view) as usize;
    let _ = VOUCHED.try_with(|v| {
        if v.get()[0] != id {
            let held = VOUCHED_VIEW
                .try_with(|w| match w.try_borrow_mut() {
                    Ok(mut w) => {
                        *w = Arc::downgrade(view);
                        true
                    }
                    Err(_) => false,
                })
                .unwrap_or(false);
            if !held {
                v.set([0; 3]);
                return;
            }
        }
        v.set([id, payload.as_ptr() as usize, payload.len()]);
    });
}

/// True when `bytes` are exactly the payload last vouched for on this thread (see
/// [`vouch`]), in a map that is still alive: validated already, and unchanged since.
#[inline]
pub(crate) fn vouched(bytes: &[u8]) -> bool {
    vouched_at(bytes.as_ptr() as usize, bytes.len())
}

/// [`vouched`] for the bytes at address `at`, `len` long.
#[inline]
fn vouched_at(at: usize, len: usize) -> bool {
    VOUCHED
        .try_with(|v| {
            let [id, v_at, v_len] = v.get();
            id != 0
                && v_at == at
                && v_len == len
                && VOUCHED_VIEW
                    .try_with(|w| {
                        w.try_borrow()
                            .is_ok_and(|w| w.as_ptr() as usize == id && w.strong_count() > 0)
                    })
                    .unwrap_or(false)
        })
        .unwrap_or(false)
}

/// Stops a thread that works ahead of a reader (it checks `stop` between steps and parks
/// otherwise) and waits for it.
pub(crate) fn stop_and_join(stop: &AtomicBool, handle: Option<JoinHandle<()>>) {
    stop.store(true, Ordering::Release);
    if let Some(h) = handle {
        h.thread().unpark();
        let _ = h.join();
    }
}

/// True when this machine runs more than one thread at once (work ahead pays only then).
pub(crate) fn parallel() -> bool {
    static PARALLEL: OnceLock<bool> = OnceLock::new();
    *PARALLEL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::format::{record_crc, HEADER_SIZE};
    use crate::log::{Log, Options};

    /// A closed log of `n` events of about 1000 bytes in one segment; its segment's view and
    /// the records' offsets. With `broken`, that record's archive is made invalid (its text
    /// not UTF-8) under a checksum written anew.
    fn segment(dir: &std::path::Path, n: u64, broken: Option<u64>) -> (Arc<SegmentView>, Vec<u64>) {
        let log = Log::open(dir, Options::default()).unwrap();
        let mut buf = rkyv::util::AlignedVec::<16>::new();
        for i in 0..n {
            let line = format!(
                r#"{{"type":"user/message","seq":{i},"time":1,"data":{{"role":"user","content":[{{"type":"text","text":"{}"}}]}}}}"#,
                "x".repeat(900)
            );
            let event = crate::event::parse_event_line(&line).unwrap();
            buf.clear();
            let start = crate::event::encode_event(&event, &mut buf).unwrap();
            log.append(&buf[start..]).unwrap();
        }
        log.close().unwrap();
        let view = SegmentView::open(dir, 0).unwrap();
        let offsets: Vec<u64> = (0..n).map(|i| view.offset_of(i).unwrap()).collect();
        if let Some(k) = broken {
            let (path, seed) = (view.path.clone(), view.check.seed);
            drop(view);
            let mut bytes = std::fs::read(&path).unwrap();
            let at = offsets[k as usize] as usize;
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let x = bytes[at + 16..].iter().position(|&b| b == b'x').unwrap();
            bytes[at + 16 + x] = 0xFF;
            let crc = record_crc(seed, &bytes[at..at + 16], &bytes[at + 16..at + 16 + len]);
            bytes[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
            std::fs::write(&path, bytes).unwrap();
            return (Arc::new(SegmentView::open(dir, 0).unwrap()), offsets);
        }
        (Arc::new(view), offsets)
    }

    const START: u64 = HEADER_SIZE as u64;

    /// The 700-event segment of [`segment`] and what a read of all of it from its first record
    /// shares with its thread (nothing taken yet); the directory lives as long as the result.
    fn read_of_700(broken: Option<u64>) -> (tempfile::TempDir, Arc<SegmentView>, Vec<u64>, Shared) {
        let tmp = tempfile::tempdir().unwrap();
        let (view, offsets) = segment(tmp.path(), 700, broken);
        let s = Shared::new(0, START, offsets[699]);
        (tmp, view, offsets, s)
    }

    /// Every chunk's state.
    fn states(s: &Shared) -> Vec<u8> {
        s.chunks.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    #[test]
    fn the_thread_checks_every_chunk_ahead_of_the_reader_and_leaves_it_its_own() {
        let (_tmp, view, _, s) = read_of_700(None);
        run(&view, &s, 0, START, 700);
        let st = states(&s);
        assert!(st.len() >= 5, "{st:?}");
        assert_eq!(st[0], FREE, "the reader's chunk");
        assert!(st[1..].iter().all(|&c| c == DONE), "{st:?}");
    }

    #[test]
    fn the_thread_gives_up_at_an_invalid_archive_under_a_valid_checksum() {
        let (_tmp, view, offsets, s) = read_of_700(Some(400));
        run(&view, &s, 0, START, 700);
        let bad = s.chunk_of(offsets[400]) as usize;
        let st = states(&s);
        assert!(bad >= 2 && bad + 1 < st.len(), "{bad} of {st:?}");
        assert!(st[1..bad].iter().all(|&c| c == DONE), "{st:?}");
        assert_eq!(st[bad], GIVEN_UP);
        assert!(st[bad + 1..].iter().all(|&c| c == FREE), "{st:?}");
    }

    #[test]
    fn the_thread_skips_the_chunks_the_reader_took() {
        let (_tmp, view, _, s) = read_of_700(None);
        assert!(s.take(2, READER));
        run(&view, &s, 0, START, 700);
        let st = states(&s);
        assert_eq!(&st[..4], &[FREE, DONE, READER, DONE]);
    }

    #[test]
    fn a_thread_behind_the_reader_goes_on_from_where_the_reader_is() {
        let (_tmp, view, offsets, s) = read_of_700(None);
        let r = s.chunk_of(offsets[300]) as usize;
        s.reader_at
            .0
            .store(pack(300, offsets[300]), Ordering::Relaxed);
        run(&view, &s, 0, START, 700);
        let st = states(&s);
        assert!(st[..=r].iter().all(|&c| c == FREE), "{r}: {st:?}");
        assert!(st[r + 1..].iter().all(|&c| c == DONE), "{r}: {st:?}");
    }

    #[test]
    fn a_stopped_thread_checks_nothing() {
        let (_tmp, view, _, s) = read_of_700(None);
        s.stop.store(true, Ordering::Relaxed);
        run(&view, &s, 0, START, 700);
        assert!(states(&s).iter().all(|&c| c == FREE));
    }

    #[test]
    fn only_the_payload_vouched_for_is_vouched_and_only_while_its_view_lives() {
        let tmp = tempfile::tempdir().unwrap();
        let (view, offsets) = segment(tmp.path(), 3, None);
        let data = view.data_unchecked();
        let payload = |i: usize| {
            check_record_with(data, offsets[i], i as u64, &view.check, true)
                .unwrap()
                .payload
        };
        let (p0, p1) = (payload(0), payload(1));
        assert!(!vouched(p0));
        vouch(&view, p0);
        assert!(vouched(p0));
        assert!(!vouched(p1), "another record");
        assert!(!vouched(&p0[..p0.len() - 16]), "a part of it");
        let mut copy = rkyv::util::AlignedVec::<16>::new();
        copy.extend_from_slice(p0);
        assert!(!vouched(&copy), "the same bytes elsewhere");
        vouch(&view, p1);
        assert!(vouched(p1) && !vouched(p0), "the last one only");
        let (at, len) = (p1.as_ptr() as usize, p1.len());
        assert!(vouched_at(at, len));
        drop(view);
        assert!(!vouched_at(at, len), "its view is gone");
    }

    #[test]
    fn positions_pack_into_one_word_and_back() {
        assert_eq!(unpack(pack(7, 4096)), (7, 4096));
        assert_eq!(
            unpack(pack(u64::from(u32::MAX), u64::from(u32::MAX))),
            (u64::from(u32::MAX), u64::from(u32::MAX))
        );
    }
}
